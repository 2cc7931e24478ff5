//! Each operation is all or nothing inside the running transaction: an operation that
//! fails half way (ENOSPC while a directory grows, a corrupt block met late) is undone
//! before the next begins, so no failed call leaves an unattached inode or a block marked
//! used that nothing owns. The undo log records what the operation changed in memory:
//! metadata blocks put into the overlay (their previous copies), blocks and inodes
//! allocated or freed, group descriptors and the superblock. File data written to newly
//! allocated blocks needs no undo (the blocks are free again).

use super::volume::Volume;
use crate::format::group_desc::GroupDesc;
use crate::format::superblock::Superblock;
use std::collections::HashMap;
use std::sync::Arc;
use usfs_fs::{Error, Result, Structure};

/// A metadata block's state before the operation: its overlay copy (when it was
/// already changed in this transaction) and whether it was dirty.
type PrevBlock = (Option<Arc<[u8]>>, bool);

/// What the running operation changed.
#[derive(Default)]
pub(crate) struct Undo {
    /// Metadata blocks put: block -> (previous overlay copy, was it dirty before).
    blocks: usfs_dev::BlockMap<PrevBlock>,
    /// Blocks allocated.
    allocs: Vec<(u64, u64)>,
    /// Inodes allocated (number, directory?).
    new_inodes: Vec<(u32, bool)>,
    /// Inodes freed (number, directory?).
    freed_inodes: Vec<(u32, bool)>,
    /// Length of the transaction's freed list at the start.
    freed_len: usize,
    /// Blocks added to the revoke set.
    revoked: Vec<u64>,
    /// Group descriptors as they were before their first change.
    descs: HashMap<u32, GroupDesc<[u8; 64]>>,
    /// The superblock at the start, and its dirty mark.
    sb: Option<(Superblock<Vec<u8>>, bool)>,
    /// Buffered data of inodes freed by the operation (delayed allocation).
    pending: Vec<(u32, super::delalloc::Pending)>,
}

impl Volume {
    /// Starts recording an operation.
    pub(crate) fn begin_op(&mut self) {
        self.undo = Some(Undo {
            freed_len: self.txn.freed.len(),
            sb: Some((self.fs.core.sb.clone(), self.sb_dirty)),
            ..Default::default()
        });
    }

    /// The operation succeeded: forget its undo log.
    pub(crate) fn end_op(&mut self) {
        self.undo = None;
    }

    /// Records the previous state of metadata block `blk` before its first change: its
    /// overlay copy (changed earlier in this transaction) and whether it was dirty.
    pub(crate) fn undo_block(&mut self, blk: u64) {
        let was_dirty = self.txn.dirty.contains(&blk);
        if let Some(u) = self.undo.as_mut() {
            if let std::collections::hash_map::Entry::Vacant(e) = u.blocks.entry(blk) {
                e.insert((self.overlay.get(blk), was_dirty));
            }
        }
    }

    /// Records an allocation of `len` blocks at `start`.
    pub(crate) fn undo_alloc(&mut self, start: u64, len: u64) {
        if let Some(u) = self.undo.as_mut() {
            u.allocs.push((start, len));
        }
    }

    /// Records a block added to the revoke set.
    pub(crate) fn undo_revoke(&mut self, blk: u64) {
        if let Some(u) = self.undo.as_mut() {
            u.revoked.push(blk);
        }
    }

    /// Records an inode allocated (`new`) or freed.
    pub(crate) fn undo_inode(&mut self, ino: u32, is_dir: bool, new: bool) {
        if let Some(u) = self.undo.as_mut() {
            if new {
                u.new_inodes.push((ino, is_dir));
            } else {
                u.freed_inodes.push((ino, is_dir));
            }
        }
    }

    /// Keeps the buffered data of inode `ino`, freed by the operation.
    pub(crate) fn undo_pending(&mut self, ino: u32, p: super::delalloc::Pending) {
        if let Some(u) = self.undo.as_mut() {
            u.pending.push((ino, p));
        }
    }

    /// Records group `g`'s descriptor before its first change.
    pub(crate) fn undo_desc(&mut self, g: u32) {
        if let Some(u) = self.undo.as_mut() {
            u.descs
                .entry(g)
                .or_insert_with(|| self.fs.core.groups[g as usize].clone());
        }
    }

    /// Undoes everything the failed operation changed in memory.
    pub(crate) fn rollback(&mut self) -> Result<()> {
        // (Descriptors may go back to where they were.)
        self.fixed_meta = None;
        let Some(u) = self.undo.take() else {
            return Ok(());
        };
        let bad = |e: String| {
            Error::corrupt(
                Structure::Bitmap,
                format!("undoing a failed operation: {e}"),
            )
        };
        for (blk, (prev, was_dirty)) in u.blocks {
            match prev {
                Some(d) => self.overlay.put(blk, d),
                None => {
                    self.overlay.remove(blk);
                }
            }
            if was_dirty {
                self.txn.dirty.insert(blk);
            } else {
                self.txn.dirty.remove(&blk);
            }
        }
        for (s, l) in u.allocs.into_iter().rev() {
            self.blocks.free(s, l).map_err(bad)?;
        }
        for (ino, dir) in u.new_inodes {
            self.inodes.free(ino, dir).map_err(bad)?;
        }
        for (ino, dir) in u.freed_inodes {
            self.inodes.reserve(ino, dir).map_err(bad)?;
        }
        self.txn.freed.truncate(u.freed_len);
        for b in u.revoked {
            self.txn.revoked.remove(&b);
        }
        for (g, d) in u.descs {
            self.fs.core.groups[g as usize] = d;
        }
        for (ino, p) in u.pending {
            self.pending.restore(ino, p);
        }
        if let Some((sb, dirty)) = u.sb {
            self.fs.core.sb = sb;
            self.sb_dirty = dirty;
        }
        Ok(())
    }
}
