//! Writing an image: the phases in order, each in its own file, with what one phase hands
//! the next. The settings every phase reads are one small struct, [`Cfg`]; the device and
//! its block cursor are [`Out`]; the inodes being built are a `Vec<Ino>`.

use super::inode::{self, Ino};
use super::out::Out;
use super::superblock::{self, Facts};
use super::timing::Timer;
use super::tree::Tree;
use super::{
    blob, chunked, data, dir, packed, place, xattrs, Options, Report, BLOB_BLOCK_SIZE, BLOCK_SIZE,
};
use crate::compress::{ALG_LZ4, DEFLATE_WINDOW_BITS};
use crate::format::compr_cfgs;
use crate::format::round_up;
use crate::format::superblock::SUPER_OFFSET;
use usfs_dev::Device;
use usfs_fs::Result;

/// The options and the settings that follow from them, read by every phase.
pub(super) struct Cfg<'a> {
    pub(super) opts: &'a Options,
    /// Block size in bytes.
    pub(super) bs: u64,
    /// Bytes at the start of the image that hold the superblock, the compression
    /// configurations and the device table (whole blocks; inodes fill the rest).
    pub(super) head: u64,
    /// Where the device table starts, in 128-byte slots (with `--tar=i`).
    pub(super) devt_slotoff: u64,
    /// The build time: inodes with this mtime (and no large ids) can be compact.
    pub(super) build_time: i64,
    /// Nanoseconds of the build time.
    pub(super) build_nsec: u32,
    /// Compressed data is padded at the front (LZ4_0PADDING: not `-E legacy-compress`).
    pub(super) zero_padding: bool,
    /// Big pclusters (`-C` above the block size).
    pub(super) big: bool,
    /// Byte-identical pclusters are written once and shared: `-E dedupe`, and with
    /// `-E fragments` too, as mkfs.erofs 1.9.3 does (its "dedupe_ext").
    pub(super) dedupe: bool,
    /// `available_compr_algs`: bits of the algorithms in use (0: no compression).
    pub(super) algs: u16,
    /// The compression configuration records after the superblock (empty without
    /// `COMPR_CFGS`: plain LZ4 with 4 KiB pclusters needs none).
    pub(super) compr_cfgs: Vec<u8>,
}

impl Cfg<'_> {
    fn new(opts: &Options) -> Cfg<'_> {
        let build_time = opts.timestamp.unwrap_or_else(now_secs);
        let build_nsec = if opts.timestamp.is_some() {
            0
        } else {
            now_nsec()
        };
        let max_pcluster = opts.max_pcluster_bytes();
        let big = max_pcluster > BLOCK_SIZE;
        let all = opts.algorithms();
        let algs = all.iter().fold(0u16, |m, a| m | 1u16 << a.id());
        // (The dictionary of each algorithm that has one, for the largest pcluster.)
        let dict = |id: u8| {
            all.iter()
                .find(|a| a.id() == id)
                .map_or(0, |a| a.dict_size(max_pcluster))
        };
        let compr_cfgs = if big || algs & !(1u16 << ALG_LZ4) != 0 {
            compr_cfgs::build_records(
                algs,
                (max_pcluster / BLOCK_SIZE) as u16,
                dict(crate::compress::ALG_LZMA),
                DEFLATE_WINDOW_BITS,
                dict(crate::compress::ALG_ZSTD),
            )
        } else {
            Vec::new()
        };
        let bs = u64::from(match opts.blob_blocks {
            Some(_) => BLOB_BLOCK_SIZE,
            None => opts.block_size,
        });
        let devt_slotoff = round_up(SUPER_OFFSET + 128 + compr_cfgs.len() as u64, 128) / 128;
        let devices = u64::from(opts.blob_blocks.is_some());
        let head_end = match devices {
            0 => SUPER_OFFSET + 128 + compr_cfgs.len() as u64,
            n => (devt_slotoff + n) * 128,
        };
        Cfg {
            opts,
            bs,
            head: round_up(head_end, bs).max(bs),
            devt_slotoff,
            build_time,
            build_nsec,
            zero_padding: opts.compression.is_some() && !opts.legacy_compress,
            big,
            dedupe: opts.dedupe || (opts.fragments && opts.compression.is_some()),
            algs,
            compr_cfgs,
        }
    }
}

/// Writes the image of `tree` to `dev` and flushes it.
pub(super) fn write_image(
    dev: &dyn Device,
    mut tree: Tree<'_>,
    opts: &Options,
    timer: &mut Timer,
) -> Result<Report> {
    let cfg = Cfg::new(opts);
    let mut out = Out::new(dev, cfg.bs, cfg.head / cfg.bs, cfg.dedupe);
    let mut report = Report {
        warnings: std::mem::take(&mut tree.warnings),
        ..Report::default()
    };
    let shared = xattrs::shared(&tree, opts.xattr_tolerance);
    let xattr_blkaddr = xattrs::write_area(&mut out, &shared)?;
    let mut inos: Vec<Ino> = tree
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| inode::make_ino(i, n, &shared, &cfg))
        .collect();
    let written = if cfg.opts.blob_blocks.is_some() {
        timer.phase("xattrs");
        blob::map(&tree, &mut inos)?
    } else if let Some(bits) = cfg.opts.chunk_bits {
        timer.phase("xattrs");
        chunked::write(&cfg, &tree, &mut out, &mut inos, bits)?
    } else {
        let plan = data::plan(&cfg, &tree, &inos)?;
        timer.phase("xattrs, jobs");
        data::write(&cfg, &tree, &mut out, &mut inos, &plan)?
    };
    report.compressed_files = written.compressed_files;
    report.plain_files = written.plain_files;
    timer.phase("data");
    let mut packed_ino = None;
    if written.used_fragments {
        packed_ino = Some(inos.len());
        inos.push(packed::write(&cfg, &mut out, &written.packed)?);
    }
    timer.phase("packed inode");
    dir::size_late(&cfg, &tree, &mut inos)?;
    timer.phase("directory sizes, symlinks");
    let placed = place::place(&cfg, &tree, &mut out, &mut inos)?;
    timer.phase("inode placement");
    dir::write_late(&cfg, &tree, &mut out, &mut inos, &placed.node_nid)?;
    timer.phase("directory blocks");
    let (meta, block0) = inode::serialize(&cfg, &tree, &inos, placed.meta_start, placed.meta_end);
    timer.phase("metadata bytes");
    dev.write_at(&meta, placed.meta_start)?;
    timer.phase("metadata write");
    let facts = Facts {
        root_nid: placed.node_nid[0],
        inodes: inos.len() as u64,
        xattr_blkaddr,
        compressed: report.compressed_files > 0 || written.used_fragments,
        tailpacking: written.used_tailpacking,
        packed_nid: packed_ino.map(|k| inos[k].nid()),
    };
    superblock::write(&cfg, &out, block0, &facts)?;
    timer.phase("superblock");
    dev.flush()?;
    timer.phase("sync");
    if let Some(dd) = &out.dedupe {
        report.shared_pclusters = dd.shared_pclusters;
        report.shared_blocks = dd.shared_blocks;
    }
    report.inodes = inos.len() as u64;
    report.blocks = out.cursor;
    report.block_size = cfg.bs as u32;
    Ok(report)
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn now_nsec() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}
