//! A new journal in inode 8 of a file system without one (e2fsck's "Recreate journal",
//! after a repair deleted an invalid one; tune2fs -j): an empty, clean jbd2 journal,
//! written as a file's data through delayed allocation a MiB at a time, then named by
//! the superblock. Until the superblock is written at the close, the image has no
//! journal (a crash before leaves inode 8 holding data the next check clears).
//!
//! And a journal kept in a visible file of the root (made by tune2fs on a mounted ext3)
//! moved into inode 8, as e2fsck moves it ([`Volume::hide_journal`]).

use super::{InodeRec, Volume};
use crate::format::features::compat;
use crate::format::inode::{JOURNAL_INO, ROOT_INO};
use crate::journal::JournalSuperblock;
use usfs_fs::{Error, FileType, Result};

/// Bytes written (and flushed to their blocks) at a time.
const CHUNK: u64 = 1 << 20;

impl Volume {
    /// Makes an empty journal of `blocks` blocks in inode 8 and turns has_journal on
    /// (written at the next commit). The file system must have no journal and inode 8
    /// must be free of data.
    pub fn make_journal(&mut self, blocks: u32) -> Result<()> {
        if self.fs.core.sb.s_feature_compat() & compat::HAS_JOURNAL != 0 || blocks < 1024 {
            return Err(Error::Invalid);
        }
        let bs = self.fs.core.geo.block_size;
        let uuid = *self.fs.core.sb.s_uuid();
        let mut rec = self.take_inode(JOURNAL_INO, FileType::Regular, 0o600);
        self.init_map(&mut rec);
        let total = blocks as u64 * bs as u64;
        let mut chunk = vec![0u8; CHUNK.min(total) as usize];
        chunk[..bs as usize]
            .copy_from_slice(JournalSuperblock::new_empty(bs, blocks, &uuid).bytes());
        let mut at = 0;
        while at < total {
            let n = CHUNK.min(total - at) as usize;
            rec = self.write_journal_chunk(rec, at, &chunk[..n])?;
            if at == 0 {
                chunk[..bs as usize].fill(0);
            }
            at += n as u64;
        }
        let sb = &mut self.fs.core.sb;
        sb.set_s_jnl_blocks(&rec.raw.journal_backup());
        sb.set_s_jnl_backup_type(1);
        sb.set_s_journal_inum(JOURNAL_INO);
        sb.set_s_feature_compat(sb.s_feature_compat() | compat::HAS_JOURNAL);
        self.sb_dirty = true;
        Ok(())
    }

    /// Writes `data` at `at` of the journal file `rec`, puts it and flushes the data to
    /// its blocks; returns the record as the flush left it (mapped).
    fn write_journal_chunk(&mut self, mut rec: InodeRec, at: u64, data: &[u8]) -> Result<InodeRec> {
        self.write_data(&mut rec, at, data)?;
        rec.raw.set_size(at + data.len() as u64);
        self.put_inode(&mut rec)?;
        self.flush_pending(JOURNAL_INO)?;
        self.inode(JOURNAL_INO)
    }

    /// Moves the journal from the visible file `/name` (the inode the superblock names,
    /// with one link) into the reserved inode 8, as e2fsck_move_ext3_journal does: the
    /// entry is removed, inode 8 gets the journal's record, the superblock names inode
    /// 8, and the old inode is freed (links 0, dtime now; its map is left as it was, the
    /// journal's blocks now inode 8's).
    pub fn hide_journal(&mut self, name: &[u8]) -> Result<()> {
        let ino = self.fs.core.sb.s_journal_inum();
        let mut root = self.load_dir(ROOT_INO)?;
        if ino == JOURNAL_INO || self.find(&root, name)? != Some(ino) {
            return Err(Error::Invalid);
        }
        let mut old = self.inode_any(ino)?;
        if old.raw.i_links_count() != 1 {
            return Err(Error::Invalid);
        }
        self.dir_remove(&mut root, name)?;
        self.put_inode(&mut root)?;
        let mut hidden = InodeRec {
            ino: JOURNAL_INO,
            raw: old.raw.clone(),
        };
        self.put_inode(&mut hidden)?;
        self.edit_superblock(|sb| sb.set_s_journal_inum(JOURNAL_INO));
        self.free_inode(&mut old)
    }
}
