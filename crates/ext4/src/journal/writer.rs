//! The commit side: writing transactions into a journal that the kernel and e2fsck
//! replay. One [`JournalWriter::commit`] is one jbd2 transaction: revoke block(s), then
//! descriptor block(s) each followed by the copies its tags describe (escaped when a copy
//! starts with the jbd2 magic), a flush (not with async_commit), the commit block, a
//! flush. Transactions accumulate in the log until [`JournalWriter::checkpointed`] marks
//! it empty. A transaction larger than the log, or than the free part of it, is an error,
//! never split (a split transaction would not be atomic).
//!
//! The caller's order (ext4's, FACTS.md "jbd2 minimal writer"):
//! 1. set INCOMPAT_RECOVER in the ext4 superblock, write it, flush (before the first
//!    commit: a kernel mounting an image without it ignores the log);
//! 2. `commit(...)` the metadata blocks (file data they expose must be on disk first);
//! 3. write the same blocks home (the volume does so at once, unflushed);
//! 4. when the log is full or at the end: flush, then `checkpointed(...)` (journal
//!    superblock: s_start 0, s_sequence = next tid; flushed);
//! 5. clear INCOMPAT_RECOVER, write the ext4 superblock, flush (or keep it set while the
//!    volume stays open and repeat 2-4).
//!
//! Crashing anywhere leaves an image that replays to the state before or after each
//! committed transaction. Blocks freed by a transaction must not be reused before it
//! commits.

use super::{commit, descriptor, feature, revoke, JournalInfo, JournalMap, JournalSuperblock};
use super::{Log, JBD2_MAGIC};
use crate::format::checksum::crc32_be;
use std::borrow::Cow;
use usfs_dev::Device;
use usfs_fs::{Error, Result, Structure};

/// Writes transactions into an internal jbd2 journal that was clean when opened.
pub struct JournalWriter {
    map: JournalMap,
    info: JournalInfo,
    next_tid: u32,
    /// Journal block where the next transaction starts.
    head: u32,
    /// Blocks of the log in use (committed, not checkpointed).
    used: u32,
}

impl JournalWriter {
    /// Opens the journal mapped by `map` for writing. It must be clean (`s_start` 0:
    /// replay it first); journals with fast_commit are refused. The first transaction
    /// gets id `s_sequence`.
    pub fn open(dev: &dyn Device, map: JournalMap, fs_block_size: u32) -> Result<JournalWriter> {
        let info = super::load_info(dev, &map, fs_block_size)?;
        if info.start != 0 {
            return Err(Error::corrupt(
                Structure::Journal,
                "journal: the log holds transactions (s_start != 0): replay it before writing",
            ));
        }
        if info.has_incompat(feature::FAST_COMMIT) {
            return Err(Error::incompatible(
                "fast_commit: writing a journal with a fast-commit area",
            ));
        }
        Ok(JournalWriter {
            next_tid: info.sequence,
            head: info.first,
            used: 0,
            map,
            info,
        })
    }

    /// The journal superblock as loaded (features, sizes).
    pub fn info(&self) -> &JournalInfo {
        &self.info
    }

    /// The id the next committed transaction gets.
    pub fn next_tid(&self) -> u32 {
        self.next_tid
    }

    /// Usable log blocks (one is always left free, as jbd2 does).
    fn log_blocks(&self) -> u32 {
        self.info.last - self.info.first - 1
    }

    /// Log blocks a transaction of `data` blocks and `revoked` records takes.
    pub fn blocks_needed(&self, data: usize, revoked: usize) -> u64 {
        let t = descriptor::tags_per_block(&self.info) as u64;
        let r = revoke::per_block(&self.info) as u64;
        let data = data as u64;
        data + data.div_ceil(t) + (revoked as u64).div_ceil(r) + 1
    }

    /// The most blocks one transaction without revokes can hold, in an empty log.
    pub fn capacity(&self) -> usize {
        let l = self.log_blocks() as u64;
        let t = descriptor::tags_per_block(&self.info) as u64;
        let mut n = (l.saturating_sub(1) * t / (t + 1)) as usize;
        while n > 0 && self.blocks_needed(n, 0) > l {
            n -= 1;
        }
        while self.blocks_needed(n + 1, 0) <= l {
            n += 1;
        }
        n
    }

    /// Log blocks free for the next transaction before a checkpoint is needed.
    pub fn free_blocks(&self) -> u32 {
        self.log_blocks() - self.used
    }

    fn log<'a>(&'a self, dev: &'a dyn Device) -> Log<'a> {
        Log {
            dev,
            map: &self.map,
            bs: self.info.block_size as usize,
            total_len: self.info.total_len,
        }
    }

    /// Commits one transaction: `blocks` (file-system block, its new contents, one block
    /// each) and `revoked` (blocks earlier transactions logged that must not be replayed
    /// any more). Durable when it returns. Returns the transaction id.
    ///
    /// Errors: a block of the wrong size ([`Error::Invalid`]); a block number above 2^32
    /// without journal_64bit ([`Error::Incompatible`]); a transaction larger than the
    /// log ([`Error::Io`] of kind `FileTooLarge`: never split, see [`Self::capacity`]);
    /// one larger than the free part of the log ([`Error::Io`] of kind `StorageFull`:
    /// write the committed blocks home and call [`Self::checkpointed`] first).
    pub fn commit(
        &mut self,
        dev: &dyn Device,
        blocks: &[(u64, &[u8])],
        revoked: &[u64],
    ) -> Result<u32> {
        let bs = self.info.block_size as usize;
        let bit64 = self.info.has_incompat(feature::BIT64);
        for &(b, d) in blocks {
            if d.len() != bs {
                return Err(Error::Invalid);
            }
            if !bit64 && b > u32::MAX as u64 {
                return Err(Error::incompatible(format!(
                    "block {b} in a journal without journal_64bit"
                )));
            }
        }
        if !bit64 && revoked.iter().any(|&b| b > u32::MAX as u64) {
            return Err(Error::incompatible(
                "revoke of a 64-bit block in a 32-bit journal",
            ));
        }
        let needed = self.blocks_needed(blocks.len(), revoked.len());
        if needed > self.log_blocks() as u64 {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                format!(
                    "journal: a transaction of {} blocks does not fit in the log (capacity {})",
                    blocks.len(),
                    self.capacity()
                ),
            )));
        }
        if needed > self.free_blocks() as u64 {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "journal full: checkpoint before committing more",
            )));
        }
        let tid = self.next_tid;
        self.prepare_superblock(dev, tid, !revoked.is_empty())?;
        let mut pos = self.head;
        for chunk in revoked.chunks(revoke::per_block(&self.info).max(1)) {
            let rb = revoke::build(&self.info, tid, chunk);
            self.log(dev).write(pos, &rb)?;
            pos = self.info.next_block(pos);
        }
        let crc32_sum = self.write_descriptors(dev, tid, blocks, &mut pos)?;
        if !self.info.has_incompat(feature::ASYNC_COMMIT) {
            dev.flush()?;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let cb = commit::build(
            &self.info,
            tid,
            crc32_sum,
            now.as_secs(),
            now.subsec_nanos(),
        );
        self.log(dev).write(pos, &cb)?;
        dev.flush()?;
        self.head = self.info.next_block(pos);
        self.used += needed as u32;
        self.next_tid = tid.wrapping_add(1);
        Ok(tid)
    }

    /// Writes descriptors and copies from `*pos`; returns the csum v1 sum of them (0
    /// when the journal has no csum v1). A block is copied only to escape it.
    fn write_descriptors(
        &self,
        dev: &dyn Device,
        tid: u32,
        blocks: &[(u64, &[u8])],
        pos: &mut u32,
    ) -> Result<u32> {
        let v1 = self.info.compat & feature::COMPAT_CHECKSUM != 0;
        let mut crc = !0u32;
        let magic = JBD2_MAGIC.to_be_bytes();
        for chunk in blocks.chunks(descriptor::tags_per_block(&self.info)) {
            let copies: Vec<(u64, Cow<[u8]>, bool)> = chunk
                .iter()
                .map(|&(b, d)| {
                    if d[..4] != magic {
                        return (b, Cow::Borrowed(d), false);
                    }
                    let mut c = d.to_vec();
                    c[..4].fill(0);
                    (b, Cow::Owned(c), true)
                })
                .collect();
            let entries: Vec<(u64, &[u8], bool)> =
                copies.iter().map(|(b, c, e)| (*b, &c[..], *e)).collect();
            let db = descriptor::build(&self.info, tid, &entries);
            let log = self.log(dev);
            let mut writes = Vec::with_capacity(copies.len() + 1);
            for bytes in std::iter::once(&db[..]).chain(copies.iter().map(|(_, c, _)| &c[..])) {
                if v1 {
                    crc = crc32_be(crc, bytes);
                }
                writes.push((log.offset(*pos)?, bytes));
                *pos = self.info.next_block(*pos);
            }
            usfs_dev::write_runs(dev, writes)?;
        }
        Ok(if v1 { crc } else { 0 })
    }

    /// Points the journal superblock at the log when it was empty (s_start, s_sequence)
    /// and turns on the revoke feature when `revokes` needs it; writes it. No flush of
    /// its own: the flush before the commit block (or, with async_commit, the one after
    /// it) makes it durable with the transaction, and a crash before then finds either
    /// an empty log or a transaction without its commit block, which replay skips.
    fn prepare_superblock(&mut self, dev: &dyn Device, tid: u32, revokes: bool) -> Result<()> {
        let empty = self.used == 0;
        let need_revoke = revokes && !self.info.has_incompat(feature::REVOKE);
        if !empty && !need_revoke {
            return Ok(());
        }
        let mut raw = vec![0u8; self.info.block_size as usize];
        self.log(dev).read(0, &mut raw)?;
        let mut jsb = JournalSuperblock::new(&mut raw[..]).expect("a block");
        if empty {
            jsb.set_s_start(self.head);
            jsb.set_s_sequence(tid);
        }
        if need_revoke {
            jsb.set_s_feature_incompat(jsb.s_feature_incompat() | feature::REVOKE);
            self.info.incompat |= feature::REVOKE;
        }
        jsb.update_checksum();
        self.log(dev).write(0, &raw)?;
        Ok(())
    }

    /// Does [`Self::commit`] flush the device before it writes the commit block? Then
    /// everything written before the call (ordered file data) is durable before the
    /// transaction is; with async_commit it is not (the commit block's checksum covers the
    /// log blocks only), and the caller flushes its data first.
    pub fn flushes_before_commit(&self) -> bool {
        !self.info.has_incompat(feature::ASYNC_COMMIT)
    }

    /// Log blocks in use by committed transactions not yet checkpointed.
    pub fn used_blocks(&self) -> u32 {
        self.used
    }

    /// Marks the log empty after the caller wrote every committed block home and
    /// flushed: `s_start` 0, `s_sequence` = the next tid; flushed.
    pub fn checkpointed(&mut self, dev: &dyn Device) -> Result<()> {
        let mut raw = vec![0u8; self.info.block_size as usize];
        self.log(dev).read(0, &mut raw)?;
        let mut jsb = JournalSuperblock::new(&mut raw[..]).expect("a block");
        jsb.set_s_start(0);
        jsb.set_s_sequence(self.next_tid);
        jsb.update_checksum();
        self.log(dev).write(0, &raw)?;
        dev.flush()?;
        self.used = 0;
        self.head = self.info.first;
        Ok(())
    }

    /// Test hook: starts the next (empty-log) transaction at journal block `at`, to
    /// exercise wrap-around without filling the log first.
    #[doc(hidden)]
    pub fn set_head_for_test(&mut self, at: u32) {
        if self.used == 0 && at >= self.info.first && at < self.info.last {
            self.head = at;
        }
    }
}
