//! The superblock, written last into block 0 (beside the inodes placed there): counts,
//! addresses, the feature bits of what the image uses, the compression configurations
//! after it (with big pclusters or an algorithm other than LZ4), and its checksum.

use super::image::Cfg;
use super::out::Out;
use crate::compress::LZ4_MAX_DISTANCE;
use crate::format::superblock::{
    self, compat, incompat, DeviceSlot, Superblock, DEVICE_SLOT_SIZE, SUPER_OFFSET,
};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use usfs_fs::Result;

/// What the superblock records of the phases before it.
pub(super) struct Facts {
    pub(super) root_nid: u64,
    pub(super) inodes: u64,
    /// First block of the shared xattr area (0: none).
    pub(super) xattr_blkaddr: u32,
    /// Some data is compressed (files or the packed inode).
    pub(super) compressed: bool,
    /// Some file has an inline pcluster.
    pub(super) tailpacking: bool,
    /// The packed inode's nid, when there is one.
    pub(super) packed_nid: Option<u64>,
}

/// Fills in the superblock (the image ends at the cursor) and writes block 0.
pub(super) fn write(cfg: &Cfg<'_>, out: &Out<'_>, mut block0: Vec<u8>, f: &Facts) -> Result<()> {
    let opts = cfg.opts;
    let mut sb = Superblock::new(vec![0u8; 128]).expect("128");
    sb.set_magic(superblock::EROFS_MAGIC);
    sb.set_feature_compat(compat::SB_CHKSUM);
    sb.set_blkszbits(cfg.bs.trailing_zeros() as u8);
    sb.set_root_nid(f.root_nid as u16);
    sb.set_inos(f.inodes);
    sb.set_build_time(cfg.build_time as u64);
    sb.set_build_time_nsec(cfg.build_nsec);
    sb.set_blocks(
        u32::try_from(out.cursor)
            .map_err(|_| io::Error::new(io::ErrorKind::FileTooLarge, "image too large"))?,
    );
    sb.set_meta_blkaddr(0);
    sb.set_xattr_blkaddr(f.xattr_blkaddr);
    sb.set_uuid(&opts.uuid.unwrap_or_else(random_uuid));
    let mut label = [0u8; 16];
    let l = opts.label.len().min(16);
    label[..l].copy_from_slice(&opts.label[..l]);
    sb.set_volume_name(&label);
    let mut feat = 0;
    if f.compressed {
        if cfg.zero_padding {
            feat |= incompat::ZERO_PADDING;
        }
        if !cfg.compr_cfgs.is_empty() {
            feat |= incompat::COMPR_CFGS;
            if cfg.big {
                feat |= incompat::BIG_PCLUSTER;
            }
            sb.set_u1(cfg.algs);
            let o = (SUPER_OFFSET + 128) as usize;
            block0[o..o + cfg.compr_cfgs.len()].copy_from_slice(&cfg.compr_cfgs);
        } else {
            sb.set_u1(LZ4_MAX_DISTANCE);
        }
    }
    if f.tailpacking {
        feat |= incompat::ZTAILPACKING;
    }
    if let Some(nid) = f.packed_nid {
        feat |= incompat::FRAGMENTS;
        sb.set_packed_nid(nid);
    }
    if opts.chunk_bits.is_some() {
        feat |= incompat::CHUNKED_FILE;
    }
    if let Some(blocks) = opts.blob_blocks {
        // One extra device, the tar, after the superblock; its unified address is the
        // image's end (where it starts when it follows the image in one file).
        feat |= incompat::DEVICE_TABLE;
        sb.set_extra_devices(1);
        sb.set_devt_slotoff(cfg.devt_slotoff as u16);
        let mut slot = DeviceSlot::new(vec![0u8; DEVICE_SLOT_SIZE as usize]).expect("128");
        slot.set_blocks_lo(blocks as u32);
        slot.set_blocks_hi((blocks >> 32) as u16);
        slot.set_uniaddr_lo(out.cursor as u32);
        slot.set_uniaddr_hi((out.cursor >> 32) as u16);
        let o = (cfg.devt_slotoff * DEVICE_SLOT_SIZE) as usize;
        block0[o..o + DEVICE_SLOT_SIZE as usize].copy_from_slice(slot.bytes());
    }
    sb.set_feature_incompat(feat);
    block0[SUPER_OFFSET as usize..SUPER_OFFSET as usize + 128].copy_from_slice(sb.bytes());
    superblock::seal(&mut block0, cfg.bs);
    out.dev.write_at(&block0, 0)?;
    Ok(())
}

/// A random (version 4) UUID, from /dev/urandom.
fn random_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    if let Ok(f) = File::open("/dev/urandom") {
        let _ = f.read_exact_at(&mut u, 0);
    }
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}
