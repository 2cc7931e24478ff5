//! Delayed allocation at run time, as ext4's: data written into a hole is kept in memory
//! and no block is chosen until it is flushed (at every commit: fsync, sync, a full
//! transaction, close; or when the buffered data passes [`FLUSH_BYTES`]; files nobody
//! holds open once [`WRITEBACK_BYTES`] of theirs wait, without a commit). By then the
//! allocator knows how large the file is, so a file written in many small pieces gets one
//! extent, small files share a locality group and growing ones an inode preallocation
//! (`alloc::blocks`, the allocator of mkfs).
//!
//! Buffered blocks are counted against the free space when they are written (a write
//! that could not be placed later fails with ENOSPC at once), readers see them
//! ([`Volume::pending_read`]), and a file's size covers them as soon as the write
//! returns. Crash semantics stay ordered: a flush writes the data before the commit that
//! maps it.

use super::inode::InodeRec;
use super::volume::Volume;
use crate::alloc::blocks::{Purpose, Request, MAX_EXTENT_LEN};
use std::collections::BTreeMap;
use usfs_dev::{AlignedBuf, Device};
use usfs_fs::Result;

/// Buffered data after which the running operation's end flushes it.
pub const FLUSH_BYTES: u64 = 64 << 20;

/// Buffered data of files no front end holds open after which they are flushed (no
/// commit), as the kernel's write-back starts on dirty pages: their blocks are known in
/// full, and their buffers go back to the pool instead of fresh memory being faulted in
/// for the next files (a copy of many small files).
pub(crate) const WRITEBACK_BYTES: u64 = 2 << 20;

/// Runs at least this large are written past the host's page cache at a flush.
const DIRECT_MIN: usize = 1 << 20;

/// One file's buffered blocks: logical block -> its bytes (a whole block, zero-filled
/// where nothing was written).
pub(crate) type Pending = BTreeMap<u64, Box<[u8]>>;

/// Block buffers kept for reuse after a flush, at most this many bytes: a file written
/// again and again reuses memory that is already mapped (a fresh buffer costs a page
/// fault and zeroing per page, a fifth of a large write's time).
const POOL_BYTES: usize = FLUSH_BYTES as usize;

/// A large run is gathered and written past the host's page cache in pieces of at most
/// this many bytes, through one page-aligned buffer kept for the next flush.
const GATHER_BYTES: usize = 8 << 20;

/// Every file's buffered blocks, with their count kept as they come and go (asked on
/// every write).
#[derive(Default)]
pub(crate) struct Buffered {
    /// Inode -> its buffered blocks.
    files: BTreeMap<u32, Pending>,
    /// Blocks in all of `files`.
    blocks: u64,
    /// Flushed block buffers, for reuse.
    pool: Vec<Box<[u8]>>,
    /// The page-aligned buffer large runs are gathered into (made at the first).
    gather: Option<AlignedBuf>,
}

impl Buffered {
    /// File `ino`'s blocks.
    fn get(&self, ino: u32) -> Option<&Pending> {
        self.files.get(&ino)
    }

    /// Takes file `ino`'s blocks out.
    pub(crate) fn take(&mut self, ino: u32) -> Option<Pending> {
        let p = self.files.remove(&ino)?;
        self.blocks -= p.len() as u64;
        Some(p)
    }

    /// Puts file `ino`'s blocks back (a rollback).
    pub(crate) fn restore(&mut self, ino: u32, p: Pending) {
        self.blocks += p.len() as u64;
        if let Some(old) = self.files.insert(ino, p) {
            self.blocks -= old.len() as u64;
        }
    }

    /// Keeps the buffers of flushed blocks for reuse, up to [`POOL_BYTES`].
    fn recycle(&mut self, file: Pending) {
        for (_, b) in file {
            if (self.pool.len() + 1) * b.len() > POOL_BYTES {
                break;
            }
            self.pool.push(b);
        }
    }

    /// Writes `bytes` at byte `off` of the block at `lblk` of file `ino`; a block not
    /// buffered yet is made (`bs` bytes, zero-filled where `bytes` does not cover it).
    fn write(&mut self, ino: u32, lblk: u64, bs: usize, off: usize, bytes: &[u8]) {
        let file = self.files.entry(ino).or_default();
        if let Some(b) = file.get_mut(&lblk) {
            b[off..off + bytes.len()].copy_from_slice(bytes);
            return;
        }
        let b = match self.pool.pop() {
            Some(mut b) if b.len() == bs => {
                if off != 0 || bytes.len() != bs {
                    b.fill(0);
                }
                b[off..off + bytes.len()].copy_from_slice(bytes);
                b
            }
            _ => {
                let mut b = vec![0u8; bs].into_boxed_slice();
                b[off..off + bytes.len()].copy_from_slice(bytes);
                b
            }
        };
        file.insert(lblk, b);
        self.blocks += 1;
    }

    /// Files with buffered blocks.
    fn inodes(&self) -> Vec<u32> {
        self.files.keys().copied().collect()
    }
}

/// When the next write-back of closed files is tried: buffered blocks at which it is due.
/// Files held open are not written back, so after a try the mark moves up by
/// [`WRITEBACK_BYTES`] over what stayed (no scan of every file on every change).
#[derive(Default)]
pub(crate) struct WritebackMark(u64);

impl Volume {
    /// Blocks buffered in all files.
    pub(crate) fn pending_blocks(&self) -> u64 {
        self.pending.blocks
    }

    /// Blocks buffered in file `ino`.
    pub fn pending_of(&self, ino: u32) -> u64 {
        self.pending.get(ino).map_or(0, |p| p.len() as u64)
    }

    /// Free blocks (preallocation windows included: they are given back when needed)
    /// after every buffered block and a margin for the extent blocks their flush may need
    /// are set aside, counted exactly only when `want` is more than the free blocks
    /// outside the windows give (summing the windows walks all of them; this is asked on
    /// every write and allocation). Every allocation is held to it
    /// ([`Volume::alloc_request`]), so a flush always finds the blocks its buffered data
    /// was promised.
    pub(crate) fn unreserved_free(&self, want: u64) -> u64 {
        let pending = self.pending_blocks();
        // An extent block holds 340 extents (4 KiB) and a file's first four live in its
        // inode: this covers the tree growth of fragmented placements.
        let margin = if pending == 0 { 0 } else { pending / 256 + 4 };
        let outside = self.blocks.free_blocks().saturating_sub(pending + margin);
        if outside >= want {
            return outside;
        }
        let free = self.blocks.free_blocks() + self.blocks.preallocated();
        free.saturating_sub(pending + margin)
    }

    /// Writes `piece` (file bytes from `pos`, inside a hole of the block map) into file
    /// `ino`'s buffered blocks.
    pub(crate) fn buffer_hole(&mut self, ino: u32, pos: u64, piece: &[u8]) -> Result<()> {
        let bs = self.fs.core.geo.block_size as u64;
        let (first, last) = (pos / bs, (pos + piece.len() as u64 - 1) / bs);
        let have = self.pending.get(ino);
        let new = (first..=last)
            .filter(|b| !have.is_some_and(|p| p.contains_key(b)))
            .count() as u64;
        if new > 0 && self.unreserved_free(new) < new {
            return Err(crate::write::no_space(
                "blocks",
                format!(
                    "no space left: {new} blocks to buffer, {} free",
                    self.unreserved_free(new)
                ),
            ));
        }
        let mut at = pos;
        let mut done = 0usize;
        while done < piece.len() {
            let lblk = at / bs;
            let off = (at % bs) as usize;
            let n = (bs as usize - off).min(piece.len() - done);
            self.pending
                .write(ino, lblk, bs as usize, off, &piece[done..done + n]);
            done += n;
            at += n as u64;
        }
        Ok(())
    }

    /// Copies file `ino`'s buffered bytes over `buf`, which holds the file's bytes from
    /// `offset` as the block map gives them (zeros in holes).
    pub fn pending_read(&self, ino: u32, offset: u64, buf: &mut [u8]) {
        let Some(file) = self.pending.get(ino) else {
            return;
        };
        if buf.is_empty() {
            return;
        }
        let bs = self.fs.core.geo.block_size as u64;
        let end = offset + buf.len() as u64;
        for (&lblk, data) in file.range(offset / bs..end.div_ceil(bs)) {
            let (a, b) = ((lblk * bs).max(offset), ((lblk + 1) * bs).min(end));
            let src = &data[(a - lblk * bs) as usize..(b - lblk * bs) as usize];
            buf[(a - offset) as usize..(b - offset) as usize].copy_from_slice(src);
        }
    }

    /// The first run of buffered blocks of `ino` at or after byte `offset`, in bytes.
    pub fn pending_data(&self, ino: u32, offset: u64) -> Option<std::ops::Range<u64>> {
        let file = self.pending.get(ino)?;
        let bs = self.fs.core.geo.block_size as u64;
        let mut it = file.range(offset / bs..).map(|(&l, _)| l);
        let first = it.next()?;
        let mut last = first;
        for l in it {
            if l != last + 1 {
                break;
            }
            last = l;
        }
        Some((first * bs).max(offset)..(last + 1) * bs)
    }

    /// Takes file `ino`'s buffered blocks out (the inode is being freed); the undo log
    /// keeps them for a rollback.
    pub(crate) fn drop_pending(&mut self, ino: u32) {
        if let Some(p) = self.pending.take(ino) {
            self.undo_pending(ino, p);
        }
    }

    /// Flushes the buffered blocks of files no front end holds open once
    /// [`WRITEBACK_BYTES`] of them are waiting (at the end of a change; no commit).
    pub(crate) fn writeback_closed(&mut self) -> Result<()> {
        let bs = self.fs.core.geo.block_size as u64;
        let step = WRITEBACK_BYTES / bs;
        if self.pending.blocks < self.writeback.0.max(step) {
            return Ok(());
        }
        for ino in self.pending.inodes() {
            if !self.is_open(ino) {
                self.flush_pending(ino)?;
            }
        }
        self.writeback.0 = self.pending.blocks + step;
        Ok(())
    }

    /// Allocates and writes every file's buffered blocks (before a commit).
    pub(crate) fn flush_all_pending(&mut self) -> Result<()> {
        for ino in self.pending.inodes() {
            self.flush_pending(ino)?;
        }
        Ok(())
    }

    /// Allocates blocks for file `ino`'s buffered data, knowing the file's size, writes
    /// the data and maps it. A flush that fails (an I/O error, a corrupt block map) changes
    /// nothing: the data stays buffered and what the flush allocated and mapped is undone
    /// (by its own undo log, or by the running operation's).
    pub(crate) fn flush_pending(&mut self, ino: u32) -> Result<()> {
        let Some(file) = self.pending.take(ino) else {
            return Ok(());
        };
        let own_op = self.undo.is_none();
        if own_op {
            self.begin_op();
        }
        match self.place_pending(ino, &file) {
            Ok(()) => {
                if own_op {
                    self.end_op();
                }
                self.pending.recycle(file);
                Ok(())
            }
            Err(e) => {
                self.pending.restore(ino, file);
                if own_op {
                    self.rollback()?;
                }
                Err(e)
            }
        }
    }

    /// Gives file `ino`'s buffered blocks `file` their places (the work of
    /// [`Volume::flush_pending`]).
    fn place_pending(&mut self, ino: u32, file: &Pending) -> Result<()> {
        let mut rec = self.inode(ino)?;
        let bs = self.fs.core.geo.block_size as u64;
        let size_blocks = rec.raw.size().div_ceil(bs);
        // Blocks past the end (left by a write that failed and was rolled back) go.
        let mut runs: Vec<(u64, Vec<&[u8]>)> = Vec::new();
        for (&lblk, data) in file.iter().filter(|(l, _)| **l < size_blocks) {
            let data = &data[..];
            match runs.last_mut() {
                Some((start, v))
                    if *start + v.len() as u64 == lblk && v.len() < MAX_EXTENT_LEN as usize =>
                {
                    v.push(data)
                }
                _ => runs.push((lblk, vec![data])),
            }
        }
        for (lblk, blocks) in runs {
            self.place_run(&mut rec, lblk, &blocks, size_blocks)?;
        }
        self.txn.data_written = true;
        self.put_inode(&mut rec)
    }

    /// Writes the blocks `run` from byte `at` of the image past the host's page cache,
    /// [`GATHER_BYTES`] at a time through the volume's gather buffer.
    fn write_gathered(&mut self, run: &[&[u8]], at: u64) -> Result<()> {
        let per = (GATHER_BYTES / run[0].len().max(1)).max(1);
        let mut buf = self
            .pending
            .gather
            .take()
            .unwrap_or_else(|| AlignedBuf::with_capacity(GATHER_BYTES));
        let mut pos = at;
        let mut r = Ok(());
        for piece in run.chunks(per) {
            buf.clear();
            for b in piece {
                buf.extend_from_slice(b);
            }
            r = self.overlay.write_direct(buf.as_slice(), pos);
            if r.is_err() {
                break;
            }
            pos += buf.len() as u64;
        }
        self.pending.gather = Some(buf);
        Ok(r?)
    }

    /// Allocates and writes one run of buffered blocks starting at logical `lblk`.
    fn place_run(
        &mut self,
        rec: &mut InodeRec,
        lblk: u64,
        blocks: &[&[u8]],
        size_blocks: u64,
    ) -> Result<()> {
        let bs = self.fs.core.geo.block_size as usize;
        let mut done = 0usize;
        while done < blocks.len() {
            let l = lblk + done as u64;
            let req = Request {
                goal: self.goal_for(rec, l)?,
                len: (blocks.len() - done) as u32,
                purpose: Purpose::Data {
                    owner: rec.ino,
                    final_blocks: Some(size_blocks),
                },
            };
            let (p, got) = self.alloc_request(&req)?;
            let got = got as usize;
            let (run, at) = (&blocks[done..done + got], p * bs as u64);
            if got * bs >= DIRECT_MIN {
                // A large run goes page-aligned past the host's page cache (one copy
                // less on the host; it is not read back soon, and fsync has less to
                // write back), gathered piece by piece into one reused buffer.
                self.write_gathered(run, at)?;
            } else {
                // A small one through the cache: a direct write waits for the disk each
                // time, which thousands of small files pay dearly (one flush at the
                // commit is cheaper).
                self.overlay.write_vectored(run, at)?;
            }
            self.map_add(rec, l, p, got as u32, false)?;
            rec.add_blocks(got as i64, bs as u32);
            done += got;
        }
        Ok(())
    }
}
