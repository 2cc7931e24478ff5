//! Reading an EROFS image: opening (superblock, compression configs), inodes, flat and
//! chunk-based data, compressed data (lcluster maps and LZ4 decompression with a small
//! cache), directories, xattrs, and the [`FileSystem`](usfs_fs::FileSystem) impl.

mod describe;
mod dir;
mod flat;
mod fs_impl;
mod inode;
mod mcache;
#[cfg(test)]
mod tests;
mod xattr;
mod zcache;
mod zdata;
mod zmap;

use crate::format::compr_cfgs::{
    DeflateCfgs, Lz4Cfgs, LzmaCfgs, ZstdCfgs, ALG_DEFLATE, ALG_LZ4, ALG_LZMA, ALG_ZSTD,
};
use crate::format::superblock::{
    checksum_len, compat, incompat, DeviceSlot, Superblock, DEVICE_SLOT_SIZE, EROFS_MAGIC,
    SUPER_OFFSET,
};
use std::borrow::Cow;
use usfs_dev::Device;
use usfs_fs::{Error, Result, Structure};

pub(crate) use dir::{parse_block, RawEntry};
pub(crate) use flat::FlatRun;
pub(crate) use inode::Inode;
pub(crate) use zmap::{Extent, Stored};

/// A read-only EROFS file system on a device.
pub struct Erofs {
    dev: Box<dyn Device>,
    sb: Superblock<Vec<u8>>,
    /// log2 of the block size.
    blkbits: u32,
    /// Image size in bytes (the device).
    image_len: u64,
    /// Largest pcluster in blocks (1 without big pclusters).
    max_pclusterblks: u32,
    /// What the decoders need from the compression configurations.
    pub(crate) dcfg: crate::compress::DecodeCfg,
    /// Decompressed extents kept for partial readers, and queued decompression.
    zcache: zcache::ZCache,
    /// Recently read metadata blocks (inodes, map headers, indexes).
    mcache: mcache::MetaCache,
    /// The extra devices of the device table, device id 1 first.
    pub(crate) devices: Vec<ExtraDevice>,
}

/// An extra device (a blob: the tar of a `--tar=i` image).
pub(crate) struct ExtraDevice {
    /// Its size in blocks, as the device table says.
    pub(crate) blocks: u64,
    /// Its first block in the unified address space (where it starts when it follows
    /// the image in one file).
    pub(crate) uniaddr: u64,
    /// The device itself, when it was given ([`Erofs::open_with_devices`]); without
    /// it, its blocks are read from the image file at `uniaddr` (the kernel's flatdev).
    pub(crate) dev: Option<Box<dyn Device>>,
}

impl Erofs {
    /// Opens the file system on `dev`: reads and checks the superblock (magic, checksum,
    /// block size, features) and the compression configurations.
    pub fn open(dev: Box<dyn Device>) -> Result<Erofs> {
        Erofs::open_with_devices(dev, Vec::new())
    }

    /// [`Erofs::open`] with the image's extra devices (its device table's, in order; as
    /// `mount -o device=` and `fsck.erofs --device` name them). An extra device not
    /// given is read from the image file after the image (the kernel's "flatdev").
    pub fn open_with_devices(dev: Box<dyn Device>, extra: Vec<Box<dyn Device>>) -> Result<Erofs> {
        let mut raw = vec![0u8; 128];
        read_exact(&*dev, &mut raw, SUPER_OFFSET, "superblock")?;
        let sb = Superblock::new(raw).expect("128 bytes");
        if sb.magic() != EROFS_MAGIC {
            return Err(Error::corrupt(
                Structure::ErofsSuperblock,
                format!(
                    "bad superblock magic {:#010x} (expected 0xe0f5e1e2)",
                    sb.magic()
                ),
            ));
        }
        let blkbits = u32::from(sb.blkszbits());
        if !(9..=16).contains(&blkbits) {
            return Err(Error::corrupt(
                Structure::ErofsSuperblock,
                format!("superblock: block size 2^{blkbits} out of range"),
            ));
        }
        let bs = 1u64 << blkbits;
        if sb.feature_compat() & compat::SB_CHKSUM != 0 {
            let mut area = vec![0u8; checksum_len(bs) as usize];
            read_exact(&*dev, &mut area, SUPER_OFFSET, "superblock block")?;
            let want = Superblock::<Vec<u8>>::compute_checksum(&area);
            if want != sb.checksum() {
                return Err(Error::corrupt(
                    Structure::ErofsSuperblock,
                    format!(
                        "superblock checksum {:#010x} does not match contents ({want:#010x})",
                        sb.checksum()
                    ),
                ));
            }
        }
        // (DEVICE_TABLE's bit is also COMPR_HEAD2's: a device table when there are
        // extra devices.)
        let known = match sb.extra_devices() {
            0 => incompat::SUPPORTED,
            _ => incompat::SUPPORTED | incompat::DEVICE_TABLE,
        };
        let unknown = sb.feature_incompat() & !known;
        if unknown != 0 {
            return Err(Error::incompatible(format!(
                "EROFS incompat features {unknown:#x} ({})",
                incompat_names(unknown)
            )));
        }
        let devices = read_device_table(&*dev, &sb, extra)?;
        if u32::from(sb.dirblkbits()) != 0 {
            return Err(Error::incompatible(
                "directory blocks larger than the block size",
            ));
        }
        let image_len = dev.len();
        let mut fs = Erofs {
            dev,
            sb,
            blkbits,
            image_len,
            max_pclusterblks: 1,
            dcfg: crate::compress::DecodeCfg::default(),
            zcache: zcache::ZCache::new(),
            mcache: mcache::MetaCache::default(),
            devices,
        };
        fs.load_compr_cfgs()?;
        Ok(fs)
    }

    fn load_compr_cfgs(&mut self) -> Result<()> {
        if self.sb.feature_incompat() & incompat::COMPR_CFGS == 0 {
            return Ok(());
        }
        let algs = self.sb.u1();
        let known = ALG_LZ4 | ALG_LZMA | ALG_DEFLATE | ALG_ZSTD;
        if algs & !known != 0 {
            return Err(Error::incompatible(format!(
                "compression algorithms {} (usfs knows lz4, lzma, deflate, zstd)",
                crate::format::compr_cfgs::alg_names(algs & !known)
            )));
        }
        if algs & ALG_LZ4 == 0 {
            // Only LZ4's record limits the pcluster size; otherwise the format's 1 MiB.
            self.max_pclusterblks = (1 << 20) >> self.blkbits;
        }
        let mut pos = SUPER_OFFSET + self.sb.sb_size();
        for bit in 0..4u16 {
            if algs & (1 << bit) == 0 {
                continue;
            }
            let len = u16::from_le_bytes(self.meta(pos, 2)?[..].try_into().unwrap());
            let body = self.meta(pos + 2, u64::from(len))?;
            let bad = |what: &str| {
                Error::corrupt(
                    Structure::ErofsSuperblock,
                    format!(
                        "{} configuration record of {len} bytes: {what}",
                        crate::format::compr_cfgs::alg_name(bit as u8)
                    ),
                )
                .with_offset(pos)
            };
            match 1 << bit {
                ALG_LZ4 => {
                    let cfg = Lz4Cfgs::new(&body[..]).ok_or_else(|| bad("expected 14"))?;
                    self.max_pclusterblks = u32::from(cfg.max_pclusterblks()).max(1);
                }
                ALG_LZMA => {
                    let cfg = LzmaCfgs::new(&body[..]).ok_or_else(|| bad("expected 14"))?;
                    if cfg.format() != 0 || cfg.dict_size() > crate::compress::LZMA_MAX_DICT_SIZE {
                        return Err(bad(&format!(
                            "format {}, dictionary {} bytes (0 and at most 8 MiB)",
                            cfg.format(),
                            cfg.dict_size()
                        )));
                    }
                    self.dcfg.lzma_dict = cfg.dict_size();
                }
                ALG_DEFLATE => {
                    let cfg = DeflateCfgs::new(&body[..]).ok_or_else(|| bad("expected 6"))?;
                    if cfg.windowbits() > 15 {
                        return Err(bad(&format!(
                            "window bits {} (at most 15)",
                            cfg.windowbits()
                        )));
                    }
                }
                _ => {
                    let cfg = ZstdCfgs::new(&body[..]).ok_or_else(|| bad("expected 6"))?;
                    let log = u32::from(cfg.windowlog()) + 10;
                    if cfg.format() != 0
                        || (1u64 << log.min(40)) > u64::from(crate::compress::ZSTD_MAX_DICT_SIZE)
                    {
                        return Err(bad(&format!(
                            "format {}, window log {log} (0 and at most 20)",
                            cfg.format()
                        )));
                    }
                    self.dcfg.zstd_window_log = log;
                }
            }
            pos += 2 + u64::from(len);
        }
        Ok(())
    }

    /// Block size in bytes.
    pub(crate) fn bs(&self) -> u64 {
        1 << self.blkbits
    }

    /// `len` bytes of the image at `off`, borrowed from the mapping when there is one.
    /// Counted in the device's I/O statistics either way. Bytes past the image are corrupt.
    pub(crate) fn meta(&self, off: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let end = off
            .checked_add(len)
            .filter(|&e| e <= self.image_len)
            .ok_or_else(|| {
                Error::corrupt(
                    Structure::Image,
                    format!(
                    "access of {len} bytes at byte {off} passes the end of the image ({} bytes)",
                    self.image_len
                ),
                )
                .with_offset(off)
            })?;
        if let Some(img) = self.dev.as_slice() {
            self.dev.stats().record_read(len as usize);
            return Ok(Cow::Borrowed(&img[off as usize..end as usize]));
        }
        let mut v = vec![0u8; len as usize];
        read_exact(&*self.dev, &mut v, off, "image")?;
        Ok(Cow::Owned(v))
    }

    /// Like [`meta`](Self::meta) for small metadata (inodes, map headers, indexes): a range
    /// inside one block comes from the metadata block cache, the whole block read from the
    /// image the first time.
    pub(crate) fn meta_cached(&self, off: u64, len: u64) -> Result<Cow<'_, [u8]>> {
        let bs = self.bs();
        let blk = off >> self.blkbits;
        let start = blk << self.blkbits;
        // Anything that is not a non-empty range inside one whole block of the image (an
        // overflowing range included) goes the uncached way, which reports it.
        let last = off.checked_add(len).and_then(|e| e.checked_sub(1));
        let one_block = last.is_some_and(|l| l >> self.blkbits == blk);
        if len == 0 || !one_block || start.saturating_add(bs) > self.image_len {
            return self.meta(off, len);
        }
        let block = match self.mcache.get(blk) {
            Some(b) => b,
            None => {
                let b: std::sync::Arc<[u8]> = std::sync::Arc::from(&self.meta(start, bs)?[..]);
                self.mcache.insert(blk, b.clone());
                b
            }
        };
        let at = (off - start) as usize;
        Ok(Cow::Owned(block[at..at + len as usize].to_vec()))
    }

    /// Reads image bytes at `off` into `buf`.
    pub(crate) fn read_image(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        let src = self.meta(off, buf.len() as u64)?;
        buf.copy_from_slice(&src);
        Ok(())
    }

    /// Byte position of inode `nid`.
    pub(crate) fn nid_pos(&self, nid: u64) -> Result<u64> {
        nid.checked_mul(32)
            .and_then(|o| o.checked_add(u64::from(self.sb.meta_blkaddr()) << self.blkbits))
            .ok_or_else(|| {
                Error::corrupt(Structure::ErofsInode, format!("nid {nid} out of range"))
                    .with_ino(nid)
            })
    }

    /// The superblock.
    pub(crate) fn superblock(&self) -> &Superblock<Vec<u8>> {
        &self.sb
    }

    /// Image size in bytes.
    pub(crate) fn image_len(&self) -> u64 {
        self.image_len
    }

    /// Does the superblock have an incompat feature bit?
    pub(crate) fn has_incompat(&self, bit: u32) -> bool {
        self.sb.feature_incompat() & bit != 0
    }
}

/// The extra devices the device table of `sb` lists, with the ones given (`extra`, in
/// order) attached.
fn read_device_table(
    dev: &dyn Device,
    sb: &Superblock<Vec<u8>>,
    extra: Vec<Box<dyn Device>>,
) -> Result<Vec<ExtraDevice>> {
    let n = usize::from(sb.extra_devices());
    if extra.len() > n {
        return Err(Error::incompatible(format!(
            "{} extra devices given, but the image has {n}",
            extra.len()
        )));
    }
    let mut given = extra.into_iter();
    let mut out = Vec::with_capacity(n);
    for k in 0..n as u64 {
        let at = (u64::from(sb.devt_slotoff()) + k) * DEVICE_SLOT_SIZE;
        let mut raw = vec![0u8; DEVICE_SLOT_SIZE as usize];
        read_exact(dev, &mut raw, at, "device table")?;
        let slot = DeviceSlot::new(raw).expect("128 bytes");
        out.push(ExtraDevice {
            blocks: slot.blocks(),
            uniaddr: slot.uniaddr(),
            dev: given.next(),
        });
    }
    Ok(out)
}

fn read_exact(dev: &dyn Device, buf: &mut [u8], off: u64, what: &str) -> Result<()> {
    dev.read_at(buf, off).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::corrupt(
                Structure::Image,
                format!("{what}: image truncated at byte {off}"),
            )
            .with_offset(off)
        } else {
            Error::Io(e)
        }
    })
}

/// Names of incompat feature bits.
pub(crate) fn incompat_names(bits: u32) -> String {
    let names = [
        (incompat::ZERO_PADDING, "lz4_0padding"),
        (incompat::COMPR_CFGS, "compr_cfgs/big_pcluster"),
        (incompat::CHUNKED_FILE, "chunked_file"),
        (incompat::DEVICE_TABLE, "device_table/compr_head2"),
        (incompat::ZTAILPACKING, "ztailpacking"),
        (incompat::FRAGMENTS, "fragments/dedupe"),
        (incompat::XATTR_PREFIXES, "xattr_prefixes"),
    ];
    let mut out: Vec<String> = names
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, n)| n.to_string())
        .collect();
    let known: u32 = names.iter().map(|(b, _)| b).sum();
    if bits & !known != 0 {
        out.push(format!("unknown {:#x}", bits & !known));
    }
    out.join(", ")
}
