//! Committing the running transaction: the freed blocks go back to the allocator, the
//! bitmaps, descriptors and superblock are written from the allocators into the
//! transaction, file data is flushed (ordered mode: data reaches the image before the
//! metadata that makes it visible), then every changed block is made durable.
//!
//! Without a journal the home writes are ordered (data, flush, metadata, flush): after a
//! crash the image holds the old or the new version of each block and e2fsck -fy repairs
//! the mix, as after a crash of the kernel's ext2. With a journal the blocks are logged
//! (`crate::journal::writer`), then written home without a flush of their own; the log is
//! marked empty by a checkpoint when full (checkpoint.rs of this module): a commit costs
//! two flushes.

use super::volume::Volume;
use crate::alloc::seed::uninit_tracking;
use crate::format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT, BG_INODE_ZEROED};
use crate::rw::meta::Meta;
use usfs_dev::Device;
use usfs_fs::{Error, Result, Structure};

impl Volume {
    /// Commits the running transaction and makes it durable. A no-op when nothing changed.
    pub fn commit(&mut self) -> Result<()> {
        self.flush_all_pending()?;
        self.writeback = Default::default();
        if self.txn.dirty.is_empty()
            && self.txn.freed.is_empty()
            && self.txn.groups.is_empty()
            && !self.sb_dirty
        {
            if self.txn.data_written {
                self.overlay.flush()?;
                self.txn.data_written = false;
            }
            return Ok(());
        }
        self.blocks.release_all();
        for (start, len) in std::mem::take(&mut self.txn.freed) {
            self.blocks.free(start, len).map_err(|e| {
                Error::corrupt(Structure::Bitmap, format!("freeing blocks: {e}")).with_block(start)
            })?;
            let mut b = start;
            while b < start + len {
                self.touch_block_group(b);
                let g = self.fs.core.geo.block_group(b);
                b = self.fs.core.geo.group_first_block(g) + self.fs.core.geo.group_blocks(g) as u64;
            }
        }
        self.write_groups()?;
        self.write_superblock()?;
        self.sb_dirty = false;
        self.txn.data_written = false;
        match self.journal.as_ref().map(|j| j.flushes_before_commit()) {
            Some(covered) => {
                // Ordered data: file data before the commit block that makes the metadata
                // pointing at it count. The journal's flush before its commit block covers
                // data written so far; with async_commit the data is flushed first.
                if !covered {
                    self.overlay.flush()?;
                }
                self.log_to_journal()?;
                self.write_behind()?;
            }
            None => {
                self.overlay.flush()?;
                self.write_home()?;
            }
        }
        Ok(())
    }

    /// Logs every changed block and the revoked ones to the journal (durable when it
    /// returns), after a checkpoint when the log has no room for them; nothing without a
    /// journal.
    fn log_to_journal(&mut self) -> Result<()> {
        let Some(j) = self.journal.as_ref() else {
            return Ok(());
        };
        let needed = j.blocks_needed(self.txn.dirty.len(), self.txn.revoked.len());
        if needed > j.free_blocks() as u64 {
            self.checkpoint()?;
        }
        let Some(j) = self.journal.as_mut() else {
            return Ok(());
        };
        let held: Vec<(u64, std::sync::Arc<[u8]>)> = self
            .txn
            .dirty
            .iter()
            .filter_map(|&b| self.overlay.get(b).map(|d| (b, d)))
            .collect();
        let blocks: Vec<(u64, &[u8])> = held.iter().map(|(b, d)| (*b, &d[..])).collect();
        let revoked: Vec<u64> = self
            .txn
            .revoked
            .iter()
            .copied()
            .filter(|b| !self.txn.dirty.contains(b))
            .collect();
        j.commit(self.overlay.base(), &blocks, &revoked)?;
        Ok(())
    }

    /// Without a journal: writes every changed block home, flushes, and drops it from the
    /// overlay.
    fn write_home(&mut self) -> Result<()> {
        self.send_home(true)?;
        self.txn.revoked.clear();
        Ok(())
    }

    /// Writes the transaction's changed blocks home (flushed with `flush`) and drops them
    /// from the overlay, with the descriptors it touched. A write that fails leaves them
    /// in the transaction, changed still: the next commit logs and writes them again.
    pub(crate) fn send_home(&mut self, flush: bool) -> Result<()> {
        let bs_log = self.fs.core.geo.block_size_log;
        let dirty = std::mem::take(&mut self.txn.dirty);
        let base = self.overlay.base();
        let held: Vec<(u64, std::sync::Arc<[u8]>)> = dirty
            .iter()
            .filter_map(|&b| self.overlay.get(b).map(|d| (b, d)))
            .collect();
        let written = usfs_dev::write_runs(base, held.iter().map(|(b, d)| (b << bs_log, &d[..])))
            .and_then(|()| if flush { base.flush() } else { Ok(()) });
        if let Err(e) = written {
            self.txn.dirty = dirty;
            return Err(e.into());
        }
        for b in dirty {
            self.overlay.remove(b);
            if self.journal.is_some() {
                self.logged.insert(b);
            }
        }
        self.txn.groups.clear();
        Ok(())
    }

    /// Bitmaps and descriptors of every group the transaction touched, into the
    /// transaction (with their checksums); the descriptor-table blocks they live in too.
    fn write_groups(&mut self) -> Result<()> {
        let geo = self.fs.core.geo.clone();
        let bs = geo.block_size as usize;
        let ds = geo.desc_size as usize;
        let bpg_bytes = (geo.blocks_per_group / 8) as usize;
        let ipg_bytes = (geo.inodes_per_group / 8) as usize;
        let seed = self.fs.core.csum_seed;
        let uuid = *self.fs.core.sb.s_uuid();
        let csum = uninit_tracking(&geo);
        let groups: Vec<u32> = self.txn.groups.iter().copied().collect();
        let mut gdt_blocks = std::collections::BTreeSet::new();
        for g in groups {
            let mut d = self.fs.core.groups[g as usize].clone();
            let mut flags = d.bg_flags();
            // A group left uninitialised by the seeding is built from its head now.
            self.blocks.load(g);
            let bm = self.blocks.bitmap_bytes(g, bs).ok_or_else(|| {
                Error::corrupt(
                    Structure::Bitmap,
                    format!("group {g}: block bitmap not loaded"),
                )
            })?;
            if let Some(seed) = seed {
                d.set_block_bitmap_checksum(seed, &bm[..bpg_bytes], ds);
            }
            self.write_meta(d.block_bitmap(), bm)?;
            flags &= !BG_BLOCK_UNINIT;
            if let Some(ibm) = self.inodes.bitmap_bytes(g, bs) {
                if let Some(seed) = seed {
                    d.set_inode_bitmap_checksum(seed, &ibm[..ipg_bytes], ds);
                }
                self.write_meta(d.inode_bitmap(), ibm)?;
                flags &= !BG_INODE_UNINIT;
                if csum {
                    let unused = geo.inodes_per_group - self.inodes.high_water(g);
                    // Never raised: the kernel only lowers it (freed slots stay "used").
                    d.set_itable_unused(unused.min(d.itable_unused()));
                }
            }
            d.set_free_blocks_count(self.blocks.group_free(g));
            d.set_free_inodes_count(self.inodes.group_free(g));
            d.set_used_dirs_count(self.inodes.group_dirs(g));
            // (Without descriptor checksums the field is left as it is, as e2fsprogs
            // leaves it.)
            if csum {
                d.set_bg_flags(flags | (d.bg_flags() & BG_INODE_ZEROED));
                d.update_checksum(g, ds, seed, &uuid);
            }
            self.fs.core.groups[g as usize] = d;
            gdt_blocks.insert(geo.desc_location(g).0);
        }
        self.write_descriptor_blocks(gdt_blocks)
    }

    /// The descriptor-table blocks `blocks`, filled from the descriptors in memory, into
    /// the transaction.
    pub(crate) fn write_descriptor_blocks(
        &mut self,
        blocks: std::collections::BTreeSet<u64>,
    ) -> Result<()> {
        for blk in blocks {
            let mut block = self.read_meta(blk)?;
            self.fs.core.fill_descriptor_block(blk, &mut block);
            self.write_meta(blk, block)?;
        }
        Ok(())
    }

    /// The superblock's free counts and write time, into the transaction.
    pub(crate) fn write_superblock(&mut self) -> Result<()> {
        let now = (self.clock)();
        let free = self.blocks.free_blocks();
        self.fs.core.sb.set_free_blocks_count(free);
        self.fs
            .core
            .sb
            .set_s_free_inodes_count(self.inodes.free_inodes() as u32);
        self.fs.core.sb.set_s_wtime(now.sec as u32);
        self.fs.core.sb.update_checksum();
        let bs = self.fs.core.geo.block_size as u64;
        // Not read_meta: on block sizes over 1 KiB the superblock lives in block 0, which
        // no block pointer may name.
        let mut block = vec![0u8; bs as usize];
        self.overlay.read_at(&mut block, self.sb_block * bs)?;
        let off = (crate::format::superblock::SUPERBLOCK_OFFSET - self.sb_block * bs) as usize;
        block[off..off + 1024].copy_from_slice(self.fs.core.sb.bytes());
        self.write_meta(self.sb_block, block)
    }
}
