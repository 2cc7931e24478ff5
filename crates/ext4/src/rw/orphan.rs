//! Files unlinked while open: their last link goes but their blocks stay until the last
//! opener closes them. Meanwhile they sit on the superblock's orphan list
//! (`s_last_orphan`, each inode's `i_dtime` naming the next), so a crash before the close
//! leaves them for the next open (here, the kernel's mount or e2fsck) to free, as the
//! kernel's ext4_orphan_add/del/cleanup do.

use super::inode::InodeRec;
use super::quota::Uncharge;
use super::volume::Volume;
use crate::format::features::ro_compat;
use usfs_fs::{Error, Result, Structure};

impl Volume {
    /// A front end opened inode `ino`.
    pub fn open_inode(&mut self, ino: u32) {
        *self.open_count.entry(ino).or_insert(0) += 1;
    }

    /// A front end closed inode `ino`: with its last opener gone, an orphan is freed.
    pub fn close_inode(&mut self, ino: u32) -> Result<()> {
        let Some(n) = self.open_count.get_mut(&ino) else {
            return Ok(());
        };
        *n -= 1;
        if *n > 0 {
            return Ok(());
        }
        self.open_count.remove(&ino);
        let mut rec = self.inode_any(ino)?;
        if rec.raw.i_links_count() == 0 && rec.raw.i_mode() != 0 {
            self.remove_orphan(&mut rec)?;
            self.release(&mut rec)?;
        }
        Ok(())
    }

    /// Is inode `ino` open?
    pub(crate) fn is_open(&self, ino: u32) -> bool {
        self.open_count.contains_key(&ino)
    }

    /// Puts an unlinked, still open inode on the orphan list.
    pub(crate) fn add_orphan(&mut self, rec: &mut InodeRec) -> Result<()> {
        rec.raw.set_i_dtime(self.fs.core.sb.s_last_orphan());
        self.fs.core.sb.set_s_last_orphan(rec.ino);
        self.sb_dirty = true;
        self.put_inode(rec)
    }

    /// Takes `rec` off the orphan list.
    fn remove_orphan(&mut self, rec: &mut InodeRec) -> Result<()> {
        let next = rec.raw.i_dtime();
        let mut cur = self.fs.core.sb.s_last_orphan();
        if cur == rec.ino {
            self.fs.core.sb.set_s_last_orphan(next);
            self.sb_dirty = true;
            return Ok(());
        }
        for _ in 0..self.fs.core.geo.inodes_count {
            if cur == 0 {
                return Ok(());
            }
            let mut prev = self.inode_any(cur)?;
            let after = prev.raw.i_dtime();
            if after == rec.ino {
                prev.raw.set_i_dtime(next);
                return self.put_inode(&mut prev);
            }
            cur = after;
        }
        Err(Error::corrupt(Structure::Orphan, "the orphan list loops"))
    }

    /// Frees what a crash left on the orphan list (unlinked inodes; blocks past the size
    /// of truncated ones), as the kernel does at mount, taking their usage off the quota
    /// files; returns what it released.
    pub(crate) fn cleanup_orphans(&mut self) -> Result<Vec<ReleasedOrphan>> {
        let mut released = Vec::new();
        let mut freed = Vec::new();
        let geo = &self.fs.core.geo;
        let (huge, bs) = (
            geo.features.has_ro_compat(ro_compat::HUGE_FILE),
            geo.block_size,
        );
        let mut cur = self.fs.core.sb.s_last_orphan();
        let mut seen = 0u32;
        while cur != 0 {
            seen += 1;
            if seen > self.fs.core.geo.inodes_count || cur > self.fs.core.geo.inodes_count {
                return Err(Error::corrupt(
                    Structure::Orphan,
                    "the orphan list is damaged (run e2fsck)",
                )
                .with_ino(cur));
            }
            let mut rec = self.inode_any(cur)?;
            let next = rec.raw.i_dtime();
            released.push(ReleasedOrphan {
                ino: cur,
                uid: rec.raw.uid(),
                gid: rec.raw.gid(),
                mode: rec.raw.i_mode(),
                size: rec.raw.size(),
                truncated: rec.raw.i_links_count() != 0,
            });
            rec.raw.set_i_dtime(0);
            let ids = rec.raw.quota_ids();
            let blocks_before = rec.raw.blocks_512(huge, bs);
            let gone = rec.raw.i_links_count() == 0;
            if gone {
                self.release(&mut rec)?;
            } else {
                let size = rec.raw.size();
                if self.has_block_map(&rec) {
                    let bs = self.fs.core.geo.block_size as u64;
                    self.map_punch(&mut rec, size.div_ceil(bs), u64::MAX)?;
                }
                self.put_inode(&mut rec)?;
            }
            let blocks_after = if gone {
                0
            } else {
                rec.raw.blocks_512(huge, bs)
            };
            freed.push(Uncharge {
                ids,
                space: blocks_before.saturating_sub(blocks_after) * 512,
                inodes: gone as u64,
            });
            cur = next;
        }
        self.uncharge_quota(&freed)?;
        if self.fs.core.sb.s_last_orphan() != 0 {
            self.fs.core.sb.set_s_last_orphan(0);
            self.sb_dirty = true;
        }
        Ok(released)
    }
}

/// An inode released from the orphan list (e2fsck's "Clearing orphaned inode N (uid=,
/// gid=, mode=, size=)", or "Truncating" for one still linked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleasedOrphan {
    /// The inode.
    pub ino: u32,
    /// Its owner.
    pub uid: u32,
    /// Its group.
    pub gid: u32,
    /// i_mode.
    pub mode: u16,
    /// i_size as it was.
    pub size: u64,
    /// Still linked: truncated to its size rather than freed.
    pub truncated: bool,
}
