//! Replaying ext4 fast commits ([`crate::journal::fast_commit`]) with the read-write
//! volume's own mutators, as the kernel's `ext4_fc_replay` and e2fsck's fast-commit
//! replay do:
//! - INODE overwrites the on-disk inode but its `i_block` (kept; an extent root is made
//!   when it has none; inline data is copied), `i_blocks` follows the kept map, the inode
//!   bitmap follows the link count; an inode left without links loses its blocks.
//! - ADD_RANGE maps the blocks into the extent tree (whatever mapped that range before is
//!   unmapped and freed), DEL_RANGE unmaps and frees; the bitmaps follow.
//! - CREAT and LINK replace any entry of that name, UNLINK removes the entry if it names
//!   the inode, and stamp the directory with the replay's time as the kernel does; link
//!   counts come from the INODE records, as in e2fsck.
//!
//! The blocks ADD_RANGE records name are taken from the allocator before anything is
//! replayed (the kernel excludes them from allocation the same way), so a tree block
//! allocated during the replay never lands on one; those no record ended up mapping are
//! given back at the end. The volume has no journal: its commit writes home, onto the
//! device the caller gives (an overlay, written back before the log is marked empty).

use super::blockmap::BlockMap;
use super::inode::InodeRec;
use super::volume::Volume;
use crate::format::extent::EXTENT_MAGIC;
use crate::format::inode::{flags, Inode};
use crate::journal::fast_commit::Record;
use std::collections::BTreeMap;
use usfs_dev::Device;
use usfs_fs::{Error, FileType, Result, Structure};

/// Offset of `i_block` in the on-disk inode, and of `i_generation` (its end).
const I_BLOCK: std::ops::Range<usize> = 0x28..0x64;

/// Applies `records` to the file system on `dev` (the log already replayed onto it, the
/// superblock no longer asking for recovery) and commits.
pub(crate) fn replay(dev: Box<dyn Device>, records: &[Record]) -> Result<()> {
    let mut v = Volume::assemble(dev, false)?;
    let mut r = Replay {
        pre: reserve_ranges(&mut v, records),
        v: &mut v,
    };
    for rec in records {
        r.apply(rec)?;
    }
    let Replay { pre, .. } = r;
    for (start, end) in pre {
        v.blocks.free(start, end - start).map_err(|e| {
            Error::corrupt(Structure::Journal, format!("fast commit: {e}")).with_block(start)
        })?;
        v.touch_block_group(start);
    }
    v.commit()
}

/// Takes from the allocator every free block an ADD_RANGE record names; returns them as
/// disjoint ranges (start -> end).
fn reserve_ranges(v: &mut Volume, records: &[Record]) -> BTreeMap<u64, u64> {
    let mut want = BTreeMap::new();
    for r in records {
        if let Record::AddRange { pblk, len, .. } = *r {
            if in_fs(v, pblk, len) {
                add_range(&mut want, pblk, pblk + len as u64);
            }
        }
    }
    let mut taken = BTreeMap::new();
    for (&s, &e) in &want {
        let mut b = s;
        while b < e {
            if v.blocks.is_used(b) {
                b += 1;
                continue;
            }
            let mut end = b + 1;
            while end < e && !v.blocks.is_used(end) {
                end += 1;
            }
            if v.blocks.reserve(b, end - b).is_ok() {
                taken.insert(b, end);
                let mut g = b;
                while g < end {
                    v.touch_block_group(g);
                    g += v.fs.core.geo.blocks_per_group as u64;
                }
                v.touch_block_group(end - 1);
            }
            b = end;
        }
    }
    taken
}

/// Does `pblk..pblk+len` lie inside the file system's data blocks?
fn in_fs(v: &Volume, pblk: u64, len: u32) -> bool {
    let geo = v.geometry();
    len > 0 && pblk >= geo.first_data_block && pblk.saturating_add(len as u64) <= geo.blocks_count
}

/// Adds `s..e` to a set of disjoint ranges, merging.
fn add_range(set: &mut BTreeMap<u64, u64>, mut s: u64, mut e: u64) {
    let over: Vec<(u64, u64)> = set
        .range(..=e)
        .filter(|&(_, &end)| end >= s)
        .map(|(&a, &b)| (a, b))
        .collect();
    for (a, b) in over {
        set.remove(&a);
        s = s.min(a);
        e = e.max(b);
    }
    set.insert(s, e);
}

/// Removes `s..e` from a set of disjoint ranges.
fn sub_range(set: &mut BTreeMap<u64, u64>, s: u64, e: u64) {
    let over: Vec<(u64, u64)> = set
        .range(..e)
        .filter(|&(_, &end)| end > s)
        .map(|(&a, &b)| (a, b))
        .collect();
    for (a, b) in over {
        set.remove(&a);
        if a < s {
            set.insert(a, s);
        }
        if b > e {
            set.insert(e, b);
        }
    }
}

/// The replay in progress.
struct Replay<'a> {
    v: &'a mut Volume,
    /// Blocks reserved for ADD_RANGE records and not mapped by one yet.
    pre: BTreeMap<u64, u64>,
}

impl Replay<'_> {
    /// One record. Records naming inodes or directories that cannot be loaded are
    /// skipped, as the kernel skips them (its iget fails).
    fn apply(&mut self, r: &Record) -> Result<()> {
        match r {
            &Record::AddRange {
                ino,
                lblk,
                pblk,
                len,
                unwritten,
            } => self.add_range(ino, lblk as u64, pblk, len, unwritten),
            &Record::DelRange { ino, lblk, len } => {
                let Ok(mut rec) = self.v.inode_any(ino) else {
                    return Ok(());
                };
                self.v
                    .map_punch(&mut rec, lblk as u64, lblk as u64 + len as u64)?;
                self.v.put_inode(&mut rec)
            }
            Record::Link {
                parent,
                ino,
                name,
                create,
            } => self.link(*parent, *ino, name, *create),
            Record::Unlink { parent, ino, name } => self.unlink(*parent, *ino, name),
            Record::Inode { ino, raw } => self.inode(*ino, raw),
        }
    }

    /// ADD_RANGE: `pblk..+len` mapped at `lblk` of `ino` (extent-mapped files only).
    fn add_range(
        &mut self,
        ino: u32,
        lblk: u64,
        pblk: u64,
        len: u32,
        unwritten: bool,
    ) -> Result<()> {
        let Ok(mut rec) = self.v.inode_any(ino) else {
            return Ok(());
        };
        if !rec.raw.has_flag(flags::EXTENTS) || !in_fs(self.v, pblk, len) {
            return Ok(());
        }
        let end = lblk + len as u64;
        if end > crate::walk::MAX_LBLK {
            return Ok(());
        }
        let run = self.v.map_run(&rec, lblk)?;
        let same = run.pblk.map(|p| p + (lblk - run.lblk)) == Some(pblk)
            && run.lblk + run.len >= end
            && run.unwritten == unwritten;
        if !same {
            self.v.map_punch(&mut rec, lblk, end)?;
            self.v.map_add(&mut rec, lblk, pblk, len, unwritten)?;
            rec.add_blocks(len as i64, self.v.geometry().block_size);
        }
        // Blocks this range names stay in use, whoever freed them before.
        sub_range(&mut self.pre, pblk, pblk + len as u64);
        keep_in_use(self.v, pblk, pblk + len as u64);
        self.v.put_inode(&mut rec)
    }

    /// CREAT / LINK: entry `name` of `parent` -> `ino`, replacing one of that name.
    fn link(&mut self, parent: u32, ino: u32, name: &[u8], create: bool) -> Result<()> {
        let Ok(mut rec) = self.v.inode_any(ino) else {
            return Ok(());
        };
        let Ok(mut dir) = self.v.load_dir(parent) else {
            return Ok(());
        };
        let ft = rec.file_type()?;
        if create {
            self.mark_inode(&rec, true);
            if ft == FileType::Directory && self.v.map_run(&rec, 0)?.pblk.is_none() {
                rec.raw.set_size(0);
                self.v.dir_init(&mut rec, parent)?;
                self.v.put_inode(&mut rec)?;
            }
        }
        if self.v.find(&dir, name)?.is_some() {
            self.v.dir_remove(&mut dir, name)?;
        }
        self.v.dir_add(&mut dir, name, ino, ft)?;
        // The kernel's replay stamps the directory with the time of the replay.
        self.v.touch(&mut dir, true);
        self.v.put_inode(&mut dir)
    }

    /// UNLINK: entry `name` of `parent` removed when it names `ino`.
    fn unlink(&mut self, parent: u32, ino: u32, name: &[u8]) -> Result<()> {
        let Ok(mut dir) = self.v.load_dir(parent) else {
            return Ok(());
        };
        if self.v.find(&dir, name)? == Some(ino) {
            self.v.dir_remove(&mut dir, name)?;
            self.v.touch(&mut dir, true);
            self.v.put_inode(&mut dir)?;
        }
        Ok(())
    }

    /// Marks `rec`'s inode used (`used`) or free in the inode bitmap.
    fn mark_inode(&mut self, rec: &InodeRec, used: bool) {
        let is_dir = rec.file_type().ok() == Some(FileType::Directory);
        let changed = if used {
            self.v.inodes.reserve(rec.ino, is_dir).is_ok()
        } else {
            self.v.inodes.free(rec.ino, is_dir).is_ok()
        };
        if changed {
            if used {
                self.v.mark_inode_slot_used(rec.ino);
            }
            let g = (rec.ino - 1) / self.v.geometry().inodes_per_group;
            self.v.txn.groups.insert(g);
        }
    }

    /// INODE: the kernel's copy of inode `ino` over the on-disk one, keeping `i_block`.
    fn inode(&mut self, ino: u32, raw: &[u8]) -> Result<()> {
        let Ok(ino) = self.v.fs.check_ino(ino as u64) else {
            return Ok(());
        };
        let isz = self.v.geometry().inode_size as usize;
        let bs = self.v.geometry().block_size;
        let old = self.v.fs.read_inode_raw(ino)?;
        let n = raw.len().min(isz).min(old.bytes().len());
        let mut bytes = old.bytes().to_vec();
        bytes[..I_BLOCK.start].copy_from_slice(&raw[..I_BLOCK.start]);
        bytes[I_BLOCK.end..n].copy_from_slice(&raw[I_BLOCK.end..n]);
        let mut rec = InodeRec {
            ino,
            raw: Inode::from_raw(&bytes),
        };
        let unit = bs as u64 / 512;
        let old_acl = (old.file_acl() != 0) as u64 * unit;
        let mut blocks = old.blocks_512(false, bs).saturating_sub(old_acl);
        if rec.raw.has_flag(flags::EXTENTS) {
            if u16::from_le_bytes([bytes[I_BLOCK.start], bytes[I_BLOCK.start + 1]]) != EXTENT_MAGIC
            {
                let mut ib = [0u8; 60];
                BlockMap::init_extent_root(&mut ib);
                rec.raw.set_i_block(&ib);
                blocks = 0;
            }
        } else if rec.raw.has_flag(flags::INLINE_DATA) {
            let ib: [u8; 60] = raw[I_BLOCK].try_into().expect("60 bytes");
            rec.raw.set_i_block(&ib);
        }
        blocks += (rec.raw.file_acl() != 0) as u64 * unit;
        rec.raw.set_blocks_512(blocks);
        if rec.raw.i_links_count() == 0 {
            return self.drop_inode(rec);
        }
        self.mark_inode(&rec, true);
        self.v.put_inode(&mut rec)
    }

    /// An inode the replay leaves without links: its blocks freed, its bitmap bit
    /// cleared (the kernel evicts it).
    fn drop_inode(&mut self, mut rec: InodeRec) -> Result<()> {
        if rec.file_type().is_ok() && !rec.raw.has_flag(flags::INLINE_DATA) {
            let symlink_inline = rec.file_type().ok() == Some(FileType::Symlink)
                && !rec.raw.has_flag(flags::EXTENTS)
                && rec.raw.size() < 60;
            if !symlink_inline {
                self.v.map_punch(&mut rec, 0, crate::walk::MAX_LBLK)?;
            }
        }
        self.mark_inode(&rec, false);
        self.v.put_inode(&mut rec)
    }
}

/// Blocks `s..e` stay in use: taken out of the blocks the running transaction frees.
fn keep_in_use(v: &mut Volume, s: u64, e: u64) {
    let mut kept = Vec::new();
    for &(a, l) in &v.txn.freed {
        let b = a + l;
        if b <= s || a >= e {
            kept.push((a, l));
            continue;
        }
        if a < s {
            kept.push((a, s - a));
        }
        if b > e {
            kept.push((e, b - e));
        }
    }
    v.txn.freed = kept;
}
