//! Writing the image: data in tree order, then the metadata area, directory blocks and the
//! superblock.

use super::dedupe::Dedupe;
use super::gaps::Gaps;
use super::timing::Timer;
use super::tree::{Node, Tree};
use super::xattrs::{self, Shared};
use super::zfile::{self, ZFile, ZParams, ZTail};
use super::zindex;
use super::{dir, par, Options, Report, BLOCK_SIZE};
use crate::compress::{Compressor, LZ4_MAX_DISTANCE};
use crate::format::compr_cfgs::ALG_LZ4;
use crate::format::dirent::from_file_type;
use crate::format::inode::{encode_dev, layout};
use crate::format::lcluster::CompactLayout;
use crate::format::map_header::*;
use crate::format::round_up;
use crate::format::superblock::{self, compat, incompat, Superblock, SUPER_OFFSET};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use usfs_fs::FileType;

/// How an inode's data is stored.
enum Data {
    /// No data (devices, fifos, sockets, empty files).
    None,
    /// Uncompressed: `blocks` full blocks at `blkaddr`, then `tail` inline (FLAT_INLINE) or,
    /// when `tail` is empty, nothing more (FLAT_PLAIN).
    Flat {
        blkaddr: u32,
        tail: Vec<u8>,
        inline: bool,
    },
    /// Compressed: the bytes after the inode's xattrs (map header, indexes, inline
    /// pcluster), the layout, and the data blocks.
    Z {
        blob: Vec<u8>,
        layout: u8,
        blocks: u32,
        /// Bytes of the inline pcluster at the end of `blob` (0: none). Only it must not
        /// cross a block (the kernel's rule), so the inode may start in the block before.
        inline: u64,
    },
    /// Directory or long symlink: content written after the metadata area.
    Late {
        content: Vec<u8>,
        inline: bool,
        blkaddr: u32,
    },
}

struct Ino {
    node: usize,
    /// i_size.
    size: u64,
    ibody: Vec<u8>,
    icount: u16,
    extended: bool,
    data: Data,
    pos: u64,
}

/// One compression job: (node, byte range, last segment of its file, the file has one
/// segment).
type Job = (usize, std::ops::Range<u64>, bool, bool);

/// A batch ends after this many input bytes or jobs.
const BATCH_BYTES: u64 = 1 << 20;
const BATCH_JOBS: usize = 256;

/// Consecutive jobs grouped into batches: (job indexes, input bytes).
fn batch_jobs(jobs: &[Job]) -> Vec<(std::ops::Range<usize>, u64)> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (k, j) in jobs.iter().enumerate() {
        bytes += j.1.end - j.1.start;
        if bytes >= BATCH_BYTES || k + 1 - start >= BATCH_JOBS || k + 1 == jobs.len() {
            out.push((start..k + 1, bytes));
            start = k + 1;
            bytes = 0;
        }
    }
    out
}

/// Reads bytes `r` of a file (its own handle), into fresh capacity that is not zeroed first.
fn read_range(mut f: &File, r: &std::ops::Range<u64>) -> io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let len = r.end - r.start;
    let mut buf = Vec::with_capacity(len as usize);
    f.seek(SeekFrom::Start(r.start))?;
    f.take(len).read_to_end(&mut buf)?;
    if buf.len() as u64 != len {
        return Err(io::Error::other("changed size while reading"));
    }
    Ok(buf)
}

fn isize_of(extended: bool) -> u64 {
    if extended {
        64
    } else {
        32
    }
}

/// The image file, written by position.
struct Out {
    f: File,
    bs: u64,
    /// Next free block.
    cursor: u64,
    /// Bytes before this were handed to writeback already.
    started: u64,
}

/// Writeback of file data is started every this many bytes, so that the final fsync has
/// little left to wait for.
const WRITEBACK_CHUNK: u64 = 32 << 20;

impl Out {
    fn put_blocks(&mut self, bytes: &[u8]) -> io::Result<u32> {
        let at = self.cursor;
        self.f.write_all_at(bytes, at * self.bs)?;
        self.cursor += (bytes.len() as u64).div_ceil(self.bs);
        let end = self.cursor * self.bs;
        if end - self.started >= WRITEBACK_CHUNK {
            start_writeback(&self.f, self.started, end - self.started);
            self.started = end;
        }
        u32::try_from(at).map_err(|_| io::Error::other("image larger than 2^32 blocks"))
    }
}

/// Asks the kernel to start writing a range of the image to disk now, without waiting.
/// Only an optimisation: errors show up at the final fsync.
fn start_writeback(f: &File, off: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: sync_file_range on an open descriptor with in-range offsets only starts
    // writeback of the page cache; it touches no memory of ours.
    unsafe {
        libc::sync_file_range(
            f.as_raw_fd(),
            off as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

pub fn write_image(
    f: File,
    mut tree: Tree,
    opts: &Options,
    timer: &mut Timer,
) -> io::Result<Report> {
    let bs = u64::from(BLOCK_SIZE);
    let build_time = opts.timestamp.unwrap_or_else(now_secs);
    let build_nsec = if opts.timestamp.is_some() {
        0
    } else {
        now_nsec()
    };
    let mut out = Out {
        f,
        bs,
        cursor: 1,
        started: 0,
    };
    let mut report = Report {
        warnings: std::mem::take(&mut tree.warnings),
        ..Report::default()
    };

    // Shared xattrs right after the superblock block.
    let shared = xattrs::shared(&tree, opts.xattr_tolerance);
    let xattr_blkaddr = if shared.area.is_empty() {
        0
    } else {
        out.put_blocks(&pad_to(&shared.area, bs))?
    };

    let mut inos: Vec<Ino> = tree
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| make_ino(i, n, &shared, build_time, build_nsec))
        .collect();

    let zero_padding = opts.compression.is_some() && !opts.legacy_compress;
    let big = opts.pcluster_bytes > BLOCK_SIZE;
    let mut packed: Vec<u8> = Vec::new();
    let mut used_fragments = false;
    let mut used_tailpacking = false;
    let mut dedupe = opts.dedupe.then(Dedupe::default);

    // File data: large files split into segments; compressed in parallel and written in
    // order as results arrive (workers stay a bounded window ahead of the writer).
    let files: Vec<usize> = (0..tree.nodes.len())
        .filter(|&i| tree.nodes[i].file_type == FileType::Regular && tree.nodes[i].size > 0)
        .collect();
    let params: Vec<Option<ZParams>> = (0..tree.nodes.len())
        .map(|i| {
            opts.compression
                .map(|_| zparams(opts, zero_padding, &inos[i], tree.nodes[i].size))
        })
        .collect();
    let jobs: Vec<Job> = files
        .iter()
        .flat_map(|&i| {
            let size = tree.nodes[i].size;
            let segs = zfile::segments(size);
            let single = segs.len() == 1;
            segs.into_iter().map(move |r| {
                let last = r.end == size;
                (i, r, last, single)
            })
        })
        .collect();
    timer.phase("xattrs, jobs");
    let mut parts: Vec<ZFile> = Vec::new();
    let mut raw: Vec<u8> = Vec::new();
    let window = 4 * zfile::SEGMENT;
    let work = |c: &mut Option<Compressor>,
                job: &Job|
     -> io::Result<(Option<Vec<u8>>, Option<ZFile>)> {
        let (i, r, last, single) = job;
        let n = &tree.nodes[*i];
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", n.path.display()));
        let f = File::open(&n.path).map_err(named)?;
        if f.metadata().map_err(named)?.len() != n.size {
            return Err(io::Error::other(format!(
                "{}: changed size while reading",
                n.path.display()
            )));
        }
        let buf = read_range(&f, r).map_err(named)?;
        match (c, &params[*i]) {
            (Some(c), Some(p)) => {
                let z = zfile::compress_part(c, &buf, r.start, n.size, *last, p);
                Ok((single.then_some(buf), Some(z)))
            }
            _ => Ok((Some(buf), None)),
        }
    };
    let mut take = |k: usize,
                    res: io::Result<(Option<Vec<u8>>, Option<ZFile>)>|
     -> io::Result<()> {
        let (i, _, last, _) = jobs[k];
        let (content, z) = res?;
        if let Some(z) = z {
            parts.push(z);
        }
        if let Some(content) = content {
            if raw.is_empty() {
                raw = content;
            } else {
                raw.extend_from_slice(&content);
            }
        }
        if !last {
            return Ok(());
        }
        let size = tree.nodes[i].size;
        let z = params[i]
            .as_ref()
            .and_then(|p| zfile::finish(std::mem::take(&mut parts), size, p));
        parts.clear();
        let content = std::mem::take(&mut raw);
        // Compressed only when it takes fewer bytes than the plain file would.
        let z = z.filter(|z| z_cost(z, &inos[i], size, bs, opts) < flat_cost(&inos[i], size, bs));
        match z {
            Some(z) => {
                report.compressed_files += 1;
                let ino = &mut inos[i];
                let addrs = place_pclusters(&mut out, &z, dedupe.as_mut())?;
                let blocks = (z.data.len() as u64 / bs) as u32;
                let mut frag_off = None;
                if let ZTail::Fragment(t) = &z.tail {
                    frag_off = Some(packed.len() as u64);
                    packed.extend_from_slice(t);
                    used_fragments = true;
                }
                if matches!(z.tail, ZTail::Inline(..)) {
                    used_tailpacking = true;
                }
                let lay = if opts.legacy_compress {
                    layout::COMPRESSED_FULL
                } else {
                    layout::COMPRESSED_COMPACT
                };
                let (blob, lay) = z_blob(&z, size, bs, &addrs, big, lay, ino, frag_off);
                let inline = match &z.tail {
                    ZTail::Inline(t) => t.len() as u64,
                    _ => 0,
                };
                ino.data = Data::Z {
                    blob,
                    layout: lay,
                    blocks,
                    inline,
                };
            }
            None => {
                report.plain_files += 1;
                // A segmented file's bytes were not kept: read them again.
                let content = if content.len() as u64 == size {
                    content
                } else {
                    std::fs::read(&tree.nodes[i].path)?
                };
                if content.len() as u64 != size {
                    return Err(io::Error::other(format!(
                        "{}: changed size while reading",
                        tree.nodes[i].path.display()
                    )));
                }
                let ino = &mut inos[i];
                ino.data = flat_data(&mut out, &content, ino)?;
            }
        }
        Ok(())
    };
    // Small files go to the workers in batches of consecutive jobs, so the shared queue
    // is touched once per batch, not once per file.
    let batches = batch_jobs(&jobs);
    par::stream(
        &batches,
        opts.workers,
        window,
        |b| b.1,
        || opts.compression.map(Compressor::new),
        |c, b| b.0.clone().map(|k| work(c, &jobs[k])).collect::<Vec<_>>(),
        |bi, results| -> io::Result<()> {
            for (k, res) in batches[bi].0.clone().zip(results) {
                take(k, res)?;
            }
            Ok(())
        },
    )?;

    timer.phase("data");
    // The packed inode (fragments): compressed like a file (no tail packing of its own),
    // stored plain when that does not save a block.
    let mut packed_ino = None;
    if used_fragments {
        let mut ino = Ino {
            node: usize::MAX,
            size: packed.len() as u64,
            ibody: Vec::new(),
            icount: 0,
            extended: true,
            data: Data::None,
            pos: 0,
        };
        let z = opts.compression.and_then(|alg| {
            let mut p = zparams(opts, zero_padding, &ino, packed.len() as u64);
            p.fragments = false;
            p.inline_room = 0;
            // In segments, in parallel: the packed inode can be large.
            let size = packed.len() as u64;
            let segs = zfile::segments(size);
            let parts = par::map(
                &segs,
                opts.workers,
                || Compressor::new(alg),
                |c, r| {
                    let src = &packed[r.start as usize..r.end as usize];
                    zfile::compress_part(c, src, r.start, size, r.end == size, &p)
                },
            );
            zfile::finish(parts, size, &p)
        });
        ino.data = match z {
            Some(z) => {
                let size = packed.len() as u64;
                let addrs = place_pclusters(&mut out, &z, dedupe.as_mut())?;
                let lay = if opts.legacy_compress {
                    layout::COMPRESSED_FULL
                } else {
                    layout::COMPRESSED_COMPACT
                };
                let (blob, layout) = z_blob(&z, size, bs, &addrs, big, lay, &ino, None);
                Data::Z {
                    blob,
                    layout,
                    blocks: (z.data.len() as u64 / bs) as u32,
                    inline: 0,
                }
            }
            None => flat_data(&mut out, &packed, &ino)?,
        };
        packed_ino = Some(inos.len());
        inos.push(ino);
    }

    timer.phase("packed inode");
    // Directories and symlinks: sizes known now; contents after the nids.
    for (i, n) in tree.nodes.iter().enumerate() {
        match n.file_type {
            FileType::Directory => {
                let mut names: Vec<&[u8]> = n.children.iter().map(|(nm, _)| &nm[..]).collect();
                names.push(b".");
                names.push(b"..");
                names.sort();
                let size = dir::dir_size(&names, bs as usize);
                let tail = size % bs;
                let inline = tail > 0 && fits_inline(&inos[i], tail, bs);
                inos[i].data = Data::Late {
                    content: vec![0u8; size as usize],
                    inline,
                    blkaddr: 0,
                };
            }
            FileType::Symlink => {
                let target = std::fs::read_link(&n.path)?;
                let t = std::os::unix::ffi::OsStrExt::as_bytes(target.as_os_str()).to_vec();
                let tail = t.len() as u64 % bs;
                let inline = tail > 0 && fits_inline(&inos[i], tail, bs);
                inos[i].data = Data::Late {
                    content: t,
                    inline,
                    blkaddr: 0,
                };
            }
            _ => {}
        }
    }

    timer.phase("directory sizes, symlinks");
    // Metadata: meta_blkaddr is 0 and nids are absolute; the root (and whatever else fits)
    // goes into block 0 after the superblock, so its 16-bit nid is small; the rest follows
    // the data.
    let sb_end = SUPER_OFFSET + 128 + if big { 16 } else { 0 };
    let mut b0 = round_up(sb_end, 32);
    let root_too_big = b0 + meta_size(&inos[0], bs).0 > bs;
    if let Data::Late { inline, .. } = &mut inos[0].data {
        if root_too_big {
            *inline = false;
        }
    }
    if b0 + meta_size(&inos[0], bs).0 > bs {
        return Err(io::Error::other(
            "the root directory's xattrs do not fit in block 0",
        ));
    }
    let meta_start = out.cursor * bs;
    let mut pos = meta_start;
    // Gaps left by padding to a block start, filled first-fit by later inodes.
    let mut gaps = Gaps::new();
    // Inodes with inline data first: they leave gaps before block boundaries, which the
    // others (free to cross a block) then fill.
    let mut order: Vec<usize> = (0..inos.len()).collect();
    order[1..].sort_by_key(|&k| meta_size(&inos[k], bs).1 == 0);
    for k in order {
        let ino = &mut inos[k];
        let (total, keep) = meta_size(ino, bs);
        // Does the last `keep` bytes' span stay in one block if the inode starts at `at`?
        let fits = |at: u64| keep == 0 || (at + total - keep) % bs + keep <= bs;
        if b0 + total <= bs {
            ino.pos = b0;
            b0 = round_up(b0 + total, 32);
            continue;
        }
        if let Some(at) = gaps.take_first(total, fits) {
            ino.pos = at;
            continue;
        }
        if !fits(pos) {
            // Start the kept part at the next block (the inode before it may end the
            // block the kept part would have crossed).
            let next = round_up(round_up(pos + total - keep, bs) - (total - keep), 32);
            if !fits(next) {
                return Err(io::Error::other(format!(
                    "internal: an inline tail of {keep} bytes cannot be placed"
                )));
            }
            if next - pos >= 32 {
                gaps.push(pos, next);
            }
            pos = next;
        }
        ino.pos = pos;
        pos = round_up(pos + total, 32);
    }
    let meta_end = round_up(pos, bs);
    out.cursor = meta_end / bs;
    let meta_blkaddr = 0u64;
    let nid = |ino: &Ino| ino.pos / 32;
    let node_nid: Vec<u64> = {
        let mut v = vec![0u64; tree.nodes.len()];
        for ino in &inos {
            if ino.node != usize::MAX {
                v[ino.node] = nid(ino);
            }
        }
        v
    };
    if node_nid[0] > u64::from(u16::MAX) {
        return Err(io::Error::other(
            "root inode beyond the first 2 MiB of metadata",
        ));
    }

    timer.phase("inode placement");
    // Directory contents and late blocks.
    for i in 0..tree.nodes.len() {
        let n = &tree.nodes[i];
        if n.file_type == FileType::Directory {
            let mut ents: Vec<dir::Ent> = n
                .children
                .iter()
                .map(|(nm, c)| dir::Ent {
                    name: nm,
                    nid: node_nid[*c],
                    file_type: from_file_type(tree.nodes[*c].file_type),
                })
                .collect();
            ents.push(dir::Ent {
                name: b".",
                nid: node_nid[i],
                file_type: from_file_type(FileType::Directory),
            });
            ents.push(dir::Ent {
                name: b"..",
                nid: node_nid[n.parent],
                file_type: from_file_type(FileType::Directory),
            });
            ents.sort_by(|a, b| a.name.cmp(b.name));
            let bytes = dir::encode(&ents, bs as usize);
            if let Data::Late { content, .. } = &mut inos[i].data {
                debug_assert_eq!(content.len(), bytes.len());
                *content = bytes;
            }
        }
        if let Data::Late {
            content,
            inline,
            blkaddr,
        } = &mut inos[i].data
        {
            let full = if *inline {
                content.len() as u64 / bs * bs
            } else {
                content.len() as u64
            } as usize;
            if full > 0 {
                *blkaddr = out.put_blocks(&pad_to(&content[..full], bs))?;
            }
        }
    }

    timer.phase("directory blocks");
    // Metadata bytes.
    let mut meta = vec![0u8; (meta_end - meta_start) as usize];
    let mut block0 = vec![0u8; bs as usize];
    for (k, ino) in inos.iter().enumerate() {
        let n = (ino.node != usize::MAX).then(|| &tree.nodes[ino.node]);
        let bytes = inode_bytes(ino, n, k as u32 + 1, build_time, build_nsec, bs);
        let (buf, at) = if ino.pos < bs {
            (&mut block0, ino.pos as usize)
        } else {
            (&mut meta, (ino.pos - meta_start) as usize)
        };
        buf[at..at + bytes.len()].copy_from_slice(&bytes);
    }
    timer.phase("metadata bytes");
    out.f.write_all_at(&meta, meta_start)?;

    timer.phase("metadata write");
    // Superblock.
    let total_blocks = out.cursor;
    let mut sb = Superblock::new(vec![0u8; 128]).expect("128");
    sb.set_magic(superblock::EROFS_MAGIC);
    sb.set_feature_compat(compat::SB_CHKSUM);
    sb.set_blkszbits(12);
    sb.set_root_nid(node_nid[0] as u16);
    sb.set_inos(inos.len() as u64);
    sb.set_build_time(build_time as u64);
    sb.set_build_time_nsec(build_nsec);
    sb.set_blocks(u32::try_from(total_blocks).map_err(|_| io::Error::other("image too large"))?);
    sb.set_meta_blkaddr(meta_blkaddr as u32);
    sb.set_xattr_blkaddr(xattr_blkaddr);
    sb.set_uuid(&opts.uuid.unwrap_or_else(random_uuid));
    let mut label = [0u8; 16];
    let l = opts.label.len().min(16);
    label[..l].copy_from_slice(&opts.label[..l]);
    sb.set_volume_name(&label);
    let mut feat = 0;
    if report.compressed_files > 0 || used_fragments {
        if zero_padding {
            feat |= incompat::ZERO_PADDING;
        }
        if big {
            feat |= incompat::COMPR_CFGS | incompat::BIG_PCLUSTER;
            sb.set_u1(ALG_LZ4);
            let o = (SUPER_OFFSET + 128) as usize;
            block0[o..o + 2].copy_from_slice(&14u16.to_le_bytes());
            block0[o + 2..o + 4].copy_from_slice(&LZ4_MAX_DISTANCE.to_le_bytes());
            block0[o + 4..o + 6]
                .copy_from_slice(&((opts.pcluster_bytes / BLOCK_SIZE) as u16).to_le_bytes());
        } else {
            sb.set_u1(LZ4_MAX_DISTANCE);
        }
    }
    if used_tailpacking {
        feat |= incompat::ZTAILPACKING;
    }
    if used_fragments {
        feat |= incompat::FRAGMENTS;
        sb.set_packed_nid(nid(&inos[packed_ino.expect("packed inode")]));
    }
    sb.set_feature_incompat(feat);
    block0[SUPER_OFFSET as usize..SUPER_OFFSET as usize + 128].copy_from_slice(sb.bytes());
    superblock::seal(&mut block0);
    out.f.write_all_at(&block0, 0)?;
    out.f.set_len(total_blocks * bs)?;
    timer.phase("superblock");
    out.f.sync_all()?;
    timer.phase("sync");
    if let Some(dd) = &dedupe {
        report.shared_pclusters = dd.shared_pclusters;
        report.shared_blocks = dd.shared_blocks;
    }
    report.inodes = inos.len() as u64;
    report.blocks = total_blocks;
    Ok(report)
}

fn make_ino(i: usize, n: &Node, shared: &Shared, build_time: i64, build_nsec: u32) -> Ino {
    let (ibody, icount) = shared.ibody(&n.xattrs);
    let extended = n.size > u64::from(u32::MAX)
        || n.uid > 0xffff
        || n.gid > 0xffff
        || n.nlink > 0xffff
        || n.mtime != build_time
        || n.mtime_nsec != build_nsec;
    Ino {
        node: i,
        size: n.size,
        ibody,
        icount,
        extended,
        data: Data::None,
        pos: 0,
    }
}

/// Can `len` bytes go inline after this inode and its xattrs (all in one block)?
fn fits_inline(ino: &Ino, len: u64, bs: u64) -> bool {
    isize_of(ino.extended) + ino.ibody.len() as u64 + len <= bs
}

fn zparams(opts: &Options, zero_padding: bool, ino: &Ino, size: u64) -> ZParams {
    let bs = u64::from(BLOCK_SIZE);
    let inline_room = if opts.ztailpacking {
        let head = round_up(isize_of(ino.extended) + ino.ibody.len() as u64, 8);
        // Shared pclusters are out of file order, which compact indexes cannot express:
        // leave room for full indexes.
        let idx = index_area(head, size, bs, !opts.legacy_compress && !opts.dedupe);
        // Only the inline pcluster must stay in one block: the inode is placed so that it
        // starts a block, (head + idx) % 32 bytes in (inodes are 32-byte aligned).
        bs.saturating_sub((head + idx) % 32) as usize
    } else {
        0
    };
    ZParams {
        bs: bs as usize,
        pcluster: opts.pcluster_bytes as usize,
        zero_padding,
        inline_room,
        fragments: opts.fragments,
    }
}

/// Bytes of map header + indexes for a file of `size` bytes whose map header is at
/// (32-byte aligned inode start +) `head`.
fn index_area(head: u64, size: u64, bs: u64, compact: bool) -> u64 {
    let total = size.div_ceil(bs);
    if compact {
        let cl = CompactLayout::new(head + 8, total, true);
        cl.end() - head
    } else {
        16 + total * 8
    }
}

/// Bytes a compressed file takes (blocks, map header and indexes, inline pcluster);
/// fragments are not counted (a file with a fragment tail counts as zero here, so it stays
/// compressed).
fn z_cost(z: &ZFile, ino: &Ino, size: u64, bs: u64, opts: &Options) -> u64 {
    if z.whole_fragment || matches!(z.tail, ZTail::Fragment(_)) {
        return 0;
    }
    let base = isize_of(ino.extended) + ino.ibody.len() as u64;
    let head = round_up(base, 8);
    let compact = !opts.legacy_compress && !opts.dedupe;
    let inline = match &z.tail {
        ZTail::Inline(t) => t.len() as u64,
        _ => 0,
    };
    z.data.len() as u64 + (head - base) + index_area(head, size, bs, compact) + inline
}

/// Bytes a plain file takes: its full blocks, and the tail inline when it fits, a block
/// otherwise.
fn flat_cost(ino: &Ino, size: u64, bs: u64) -> u64 {
    let tail = size % bs;
    if tail == 0 || fits_inline(ino, tail, bs) {
        size
    } else {
        round_up(size, bs)
    }
}

/// Writes a compressed file's pclusters; returns each extent's first block (0 for extents
/// without blocks). With `dedupe`, a pcluster equal to one already written is shared.
fn place_pclusters(out: &mut Out, z: &ZFile, dedupe: Option<&mut Dedupe>) -> io::Result<Vec<u32>> {
    let Some(dd) = dedupe else {
        let base = if z.data.is_empty() {
            0
        } else {
            out.put_blocks(&z.data)?
        };
        return Ok(z.extents.iter().map(|e| base + e.rel_blk).collect());
    };
    let bs = out.bs as usize;
    let mut addrs = Vec::with_capacity(z.extents.len());
    for e in &z.extents {
        if e.blocks == 0 {
            addrs.push(0);
            continue;
        }
        let start = e.rel_blk as usize * bs;
        let bytes = &z.data[start..start + e.blocks as usize * bs];
        let addr = match dd.find(&out.f, out.bs, bytes)? {
            Some(a) => a,
            None => {
                let a = out.put_blocks(bytes)?;
                dd.insert(bytes, a);
                a
            }
        };
        addrs.push(addr);
    }
    Ok(addrs)
}

/// The map header, indexes and inline pcluster of a compressed file.
#[allow(clippy::too_many_arguments)]
fn z_blob(
    z: &ZFile,
    size: u64,
    bs: u64,
    addrs: &[u32],
    big: bool,
    mut lay: u8,
    ino: &Ino,
    frag_off: Option<u64>,
) -> (Vec<u8>, u8) {
    let head = round_up(isize_of(ino.extended) + ino.ibody.len() as u64, 8);
    let mut h = MapHeader::new(vec![0u8; 8]).expect("8");
    if z.whole_fragment {
        let off = frag_off.expect("fragment offset") | (1u64 << 63);
        return (off.to_le_bytes().to_vec(), lay);
    }
    let mut advise = 0u16;
    if big {
        advise |= ADVISE_BIG_PCLUSTER_1 | ADVISE_BIG_PCLUSTER_2;
    }
    let inline = match &z.tail {
        ZTail::Inline(b) => Some(b.clone()),
        _ => None,
    };
    if let Some(b) = &inline {
        advise |= ADVISE_INLINE_PCLUSTER;
        h.set_h_idata_size(b.len() as u16);
    }
    if let Some(off) = frag_off {
        advise |= ADVISE_FRAGMENT_PCLUSTER;
        h.set_h_fragmentoff(off as u32);
    }
    let l = zindex::lclusters(&z.extents, size, bs, addrs, big);
    let mut idx = None;
    if lay == layout::COMPRESSED_COMPACT {
        let cl = CompactLayout::new(head + 8, l.len() as u64, true);
        idx = zindex::encode_compact_indexes(&l, &cl, big);
        if idx.is_some() {
            advise |= ADVISE_COMPACTED_2B;
        } else {
            lay = layout::COMPRESSED_FULL;
        }
    }
    let idx = match idx {
        Some(v) => v,
        None => {
            let mut v = vec![0u8; 8];
            v.extend_from_slice(&zindex::encode_full(&l));
            v
        }
    };
    h.set_h_advise(advise);
    h.set_h_algorithmtype(0);
    h.set_h_clusterbits(0);
    let mut blob = h.into_inner();
    blob.extend_from_slice(&idx);
    if let Some(b) = inline {
        blob.extend_from_slice(&b);
    }
    (blob, lay)
}

/// Writes an uncompressed file's full blocks; the tail goes inline when it fits.
fn flat_data(out: &mut Out, content: &[u8], ino: &Ino) -> io::Result<Data> {
    let bs = out.bs;
    if content.is_empty() {
        return Ok(Data::None);
    }
    let tail = content.len() as u64 % bs;
    let inline = tail > 0 && fits_inline(ino, tail, bs);
    let full = if inline {
        content.len() as u64 - tail
    } else {
        content.len() as u64
    } as usize;
    let blkaddr = if full > 0 {
        out.put_blocks(&pad_to(&content[..full], bs))?
    } else {
        0
    };
    Ok(Data::Flat {
        blkaddr,
        tail: if inline {
            content[full..].to_vec()
        } else {
            Vec::new()
        },
        inline,
    })
}

/// (bytes the inode takes in the metadata area, how many of its last bytes must not cross
/// a block: the inline tail or inline pcluster, the kernel's only rule).
fn meta_size(ino: &Ino, bs: u64) -> (u64, u64) {
    let base = isize_of(ino.extended) + ino.ibody.len() as u64;
    match &ino.data {
        Data::None => (base, 0),
        Data::Flat { tail, inline, .. } => (
            base + tail.len() as u64,
            if *inline { tail.len() as u64 } else { 0 },
        ),
        Data::Z { blob, inline, .. } => (round_up(base, 8) + blob.len() as u64, *inline),
        Data::Late {
            content, inline, ..
        } => {
            let tail = content.len() as u64 % bs;
            (base + tail, if *inline { tail } else { 0 })
        }
    }
}

fn inode_bytes(
    ino: &Ino,
    n: Option<&Node>,
    seq: u32,
    build_time: i64,
    build_nsec: u32,
    bs: u64,
) -> Vec<u8> {
    let (ft, perm, uid, gid, nlink, mtime, nsec, rdev) = match n {
        Some(n) => (
            n.file_type,
            n.perm,
            n.uid,
            n.gid,
            n.nlink,
            n.mtime,
            n.mtime_nsec,
            n.rdev,
        ),
        None => (FileType::Regular, 0o600, 0, 0, 1, build_time, build_nsec, 0),
    };
    let (lay, size, i_u, tail): (u8, u64, u32, Vec<u8>) = match &ino.data {
        Data::None => {
            let i_u = match ft {
                FileType::CharDevice | FileType::BlockDevice => encode_dev(rdev),
                _ => 0,
            };
            (layout::FLAT_PLAIN, 0, i_u, Vec::new())
        }
        Data::Flat {
            blkaddr,
            tail,
            inline,
        } => {
            let lay = if *inline {
                layout::FLAT_INLINE
            } else {
                layout::FLAT_PLAIN
            };
            (lay, ino.size, *blkaddr, tail.clone())
        }
        Data::Z {
            blob,
            layout,
            blocks,
            ..
        } => {
            let mut t = vec![
                0u8;
                (round_up(isize_of(ino.extended) + ino.ibody.len() as u64, 8)
                    - isize_of(ino.extended)
                    - ino.ibody.len() as u64) as usize
            ];
            t.extend_from_slice(blob);
            (*layout, ino.size, *blocks, t)
        }
        Data::Late {
            content,
            inline,
            blkaddr,
        } => {
            let tail = if *inline {
                content[content.len() / bs as usize * bs as usize..].to_vec()
            } else {
                Vec::new()
            };
            let lay = if *inline {
                layout::FLAT_INLINE
            } else {
                layout::FLAT_PLAIN
            };
            (lay, content.len() as u64, *blkaddr, tail)
        }
    };
    let mut v = Vec::new();
    let mode = (ft.mode_bits() | perm) as u16;
    let format = (u16::from(lay) << 1) | u16::from(ino.extended);
    let real_size = size;
    if ino.extended {
        let mut d = crate::format::inode::ExtendedInode::new(vec![0u8; 64]).expect("64");
        d.set_i_format(format);
        d.set_i_xattr_icount(ino.icount);
        d.set_i_mode(mode);
        d.set_i_size(real_size);
        d.set_i_u(i_u);
        d.set_i_ino(seq);
        d.set_i_uid(uid);
        d.set_i_gid(gid);
        d.set_i_mtime(mtime as u64);
        d.set_i_mtime_nsec(nsec);
        d.set_i_nlink(nlink);
        v.extend_from_slice(d.bytes());
    } else {
        let mut d = crate::format::inode::CompactInode::new(vec![0u8; 32]).expect("32");
        d.set_i_format(format);
        d.set_i_xattr_icount(ino.icount);
        d.set_i_mode(mode);
        d.set_i_nlink(nlink as u16);
        d.set_i_size(real_size as u32);
        d.set_i_u(i_u);
        d.set_i_ino(seq);
        d.set_i_uid(uid as u16);
        d.set_i_gid(gid as u16);
        v.extend_from_slice(d.bytes());
    }
    v.extend_from_slice(&ino.ibody);
    v.extend_from_slice(&tail);
    v
}

fn pad_to(b: &[u8], bs: u64) -> Vec<u8> {
    let mut v = b.to_vec();
    v.resize(round_up(b.len() as u64, bs) as usize, 0);
    v
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

fn random_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    if let Ok(f) = File::open("/dev/urandom") {
        let _ = f.read_exact_at(&mut u, 0);
    }
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}
