//! The backup superblock, for an image whose primary one is unusable (e2fsck's
//! "Superblock invalid, trying backup blocks..."). e2fsck's get_backup_sb looks for group
//! 1's copy at each block size from 1 KiB to 64 KiB (block 8193 of 1 KiB blocks, else
//! block 8 x the block size), taking the first with the ext4 magic that names its own
//! block size; `-b` names one. Read from a backup, the file system is the backup
//! superblock and the descriptor copy that follows it, with what ext2fs_open2 does to
//! them: with descriptor checksums, every group's uninit flags and unused-inode count are
//! cleared (the backup's may be stale) and its checksum set. The primary superblock and
//! descriptors are made from those ([`primary_from_backup`]): a check reads the image
//! through them in memory, a repair writes them first (descriptors, then the
//! superblock), as e2fsck writes the primary from the backup it used.

use crate::format::features::{incompat, ro_compat};
use crate::format::geometry::Geometry;
use crate::format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use crate::format::superblock::{Superblock, EXT4_MAGIC, SUPERBLOCK_OFFSET};
use crate::read::OpenIssue;
use crate::volume_core::{checksum_seed, features_of};
use crate::Ext4;
use std::sync::Arc;
use usfs_dev::{Device, Overlay};
use usfs_fs::{Error, Result, Structure};

/// Largest block size e2fsck looks for a backup at (64 KiB).
const MAX_BLOCK_SIZE: u32 = 65536;

/// A backup superblock: its block and the block size it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backup {
    /// The block holding it (in blocks of `block_size`).
    pub block: u64,
    /// The file system's block size.
    pub block_size: u32,
}

/// Why the primary superblock of `dev` is unusable (e2fsck's reasons to fall back: bad
/// magic, a checksum that does not match, or fields no valid file system has), or None
/// when it opens. Other failures (an unsupported feature, I/O) are not the superblock's.
pub fn primary_unusable(dev: Box<dyn Device>) -> Option<String> {
    match Ext4::open_for_check(dev) {
        Ok((_, issues)) => issues.iter().find_map(|i| match i {
            OpenIssue::SuperblockChecksum { .. } => {
                Some("Superblock checksum does not match superblock".to_string())
            }
            _ => None,
        }),
        Err(Error::Corrupt(c)) if c.structure == Structure::Superblock => Some(c.detail),
        Err(_) => None,
    }
}

/// e2fsck's get_backup_sb: group 1's superblock at the first block size whose copy
/// carries the magic and names that block size.
pub fn find(dev: &dyn Device) -> Option<Backup> {
    let mut bs = 1024;
    while bs <= MAX_BLOCK_SIZE {
        let block = bs as u64 * 8 + u64::from(bs == 1024);
        if let Some(b) = at(dev, block, bs) {
            return Some(b);
        }
        bs *= 2;
    }
    None
}

/// The backup superblock at `block` (`-b`): with the block size it names, if it carries
/// the magic and, read at that block size, sits at `block` (`block_size` 0: any).
pub fn at(dev: &dyn Device, block: u64, block_size: u32) -> Option<Backup> {
    let sizes: Vec<u32> = match block_size {
        0 => (10..=16).map(|l| 1u32 << l).collect(),
        n => vec![n],
    };
    sizes.into_iter().find_map(|bs| {
        let sb = read_sb(dev, block * bs as u64).ok()?;
        let names = 1024u64.checked_shl(sb.s_log_block_size())?;
        (sb.s_magic() == EXT4_MAGIC && names == bs as u64).then_some(Backup {
            block,
            block_size: bs,
        })
    })
}

/// Reads 1024 bytes of superblock at byte `offset`.
fn read_sb(dev: &dyn Device, offset: u64) -> Result<Superblock<Vec<u8>>> {
    let mut raw = vec![0u8; 1024];
    dev.read_at(&mut raw, offset)?;
    Ok(Superblock::new(raw).expect("1024 bytes"))
}

/// The primary superblock and descriptor blocks made from backup `b`, as (byte offset,
/// bytes) to write in this order: the descriptor blocks, then the superblock. An error
/// when the backup itself describes no usable file system.
pub fn primary_from_backup(dev: &dyn Device, b: &Backup) -> Result<Vec<(u64, Vec<u8>)>> {
    let bs = b.block_size as u64;
    let mut sb = read_sb(dev, b.block * bs)?;
    let geo = Geometry::new(&sb, dev.len())?;
    let bad = |what: String| Error::corrupt(Structure::Superblock, what);
    if geo.block_size as u64 != bs {
        return Err(bad(format!("backup superblock at {}: block size", b.block)));
    }
    let f = features_of(&sb);
    let csum = f.has_ro_compat(ro_compat::GDT_CSUM) || f.has_ro_compat(ro_compat::METADATA_CSUM);
    let (seed, uuid) = (checksum_seed(&sb), *sb.s_uuid());
    let (per, ds) = (geo.descs_per_block(), geo.desc_size as usize);
    let mut out = Vec::new();
    for nr in 0..geo.gdt_blocks() {
        let mut raw = vec![0u8; bs as usize];
        dev.read_at(&mut raw, backup_desc_block(&geo, b.block, nr) * bs)?;
        for (i, d) in raw.chunks_exact_mut(ds).enumerate() {
            let g = nr * per + i as u32;
            if g >= geo.group_count || !csum {
                continue;
            }
            let mut gd = GroupDesc::from_raw(d);
            gd.set_bg_flags(gd.bg_flags() & !(BG_BLOCK_UNINIT | BG_INODE_UNINIT));
            gd.set_itable_unused(0);
            gd.update_checksum(g, ds, seed, &uuid);
            d.copy_from_slice(&gd.bytes()[..ds]);
        }
        let (home, _) = geo.desc_location(nr * per);
        out.push((home * bs, raw));
    }
    sb.set_s_block_group_nr(0);
    sb.update_checksum();
    out.push((SUPERBLOCK_OFFSET, sb.bytes().to_vec()));
    Ok(out)
}

/// The block of descriptor block `nr`'s copy that goes with the backup superblock at
/// `sb_block` (ext2fs_descriptor_block_loc2 with a backup): the blocks after it, and for
/// meta_bg's the copy in the meta group's second group.
fn backup_desc_block(geo: &Geometry, sb_block: u64, nr: u32) -> u64 {
    let meta_bg = geo.features.has_incompat(incompat::META_BG);
    if !meta_bg || nr < geo.first_meta_bg {
        return sb_block + 1 + nr as u64;
    }
    let second = nr * geo.descs_per_block() + 1;
    if second >= geo.group_count {
        return geo.desc_location(nr * geo.descs_per_block()).0;
    }
    geo.group_first_block(second) + u64::from(geo.group_has_super(second))
}

/// `dev` read through the primary made from backup `b` (a check's view: nothing is
/// written).
pub fn overlay(dev: Box<dyn Device>, b: &Backup) -> Result<Overlay> {
    let patches = primary_from_backup(&*dev, b)?;
    let bs = b.block_size;
    let o = Overlay::new(dev, bs);
    for (offset, bytes) in patches {
        let blk = offset / bs as u64;
        let mut block = vec![0u8; bs as usize];
        o.base().read_at(&mut block, blk * bs as u64)?;
        let at = (offset % bs as u64) as usize;
        block[at..at + bytes.len()].copy_from_slice(&bytes);
        o.put(blk, Arc::from(block));
    }
    Ok(o)
}

/// Writes the primary made from backup `b` onto `dev`: descriptors first, flushed, then
/// the superblock, flushed (a crash between leaves the primary superblock unusable, and
/// the next run starts over from the backup).
pub fn restore_primary(dev: &dyn Device, b: &Backup) -> Result<()> {
    let patches = primary_from_backup(dev, b)?;
    let (sb, descs) = patches.split_last().expect("the superblock is last");
    for (offset, bytes) in descs {
        dev.write_at(bytes, *offset)?;
    }
    dev.flush()?;
    dev.write_at(&sb.1, sb.0)?;
    dev.flush()?;
    Ok(())
}
