//! File data in the read-write volume: writes at any offset (holes, past the end,
//! into unwritten extents), truncation (shrink frees blocks and zeroes the tail of the
//! last block; grow leaves a hole), fallocate, and attribute changes.
//!
//! Inline files (inline_data) are changed in their inode or first made block-mapped:
//! see [`super::inline`].
//!
//! Data is written straight to the device (ordered mode: the commit flushes it before the
//! metadata that points at it); blocks are allocated per write as one extent near the
//! file's previous block, so a file written front to back is contiguous.

use super::inode::InodeRec;
use super::volume::Volume;
use crate::format::inode::flags;
use crate::rw::meta::Meta;
use usfs_dev::Device;
use usfs_fs::{Error, Fallocate, FileType, Result, SetAttr};

/// Overwrites at least this large start their write-back to the image at once.
const WRITEBACK_MIN: usize = 256 << 10;

/// Largest logical block + 1 a file may use (32-bit logical block numbers).
pub(crate) const MAX_LBLK: u64 = 1 << 32;

impl Volume {
    /// Writes `data` at byte `offset` of file `rec` (its record is updated, not put).
    pub fn write_data(&mut self, rec: &mut InodeRec, offset: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let bs = self.fs.core.geo.block_size as u64;
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(Error::Invalid)?;
        if end.div_ceil(bs) > MAX_LBLK {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::EFBIG)));
        }
        if Self::is_inline(rec) {
            if self.inline_write(rec, offset, data)? {
                if end > rec.raw.size() {
                    rec.raw.set_size(end);
                }
                self.touch(rec, true);
                return Ok(());
            }
            self.uninline_file(rec)?;
        }
        let size = rec.raw.size();
        let regular = rec.file_type()? == FileType::Regular;
        // Only the gap between the old end and the write: bytes the write covers are
        // written once, so no crash shows them zeroed.
        self.zero_for_growth(rec, offset)?;
        let mut pos = offset;
        while pos < end {
            let lblk = pos / bs;
            let run = self.map_run(rec, lblk)?;
            let run_end = ((run.lblk + run.len) * bs).min(end);
            let piece = &data[(pos - offset) as usize..(run_end - offset) as usize];
            match run.pblk {
                Some(p) if !run.unwritten => {
                    let at = (p + (lblk - run.lblk)) * bs + pos % bs;
                    self.overlay.write_at(piece, at)?;
                    if piece.len() >= WRITEBACK_MIN {
                        // The disk starts on it now, while the writer makes the next
                        // piece, rather than all at the fsync.
                        self.overlay.start_writeback(at, piece.len() as u64);
                    }
                }
                Some(p) => {
                    // Unwritten: the rest of each touched block must read as zeros.
                    let first = lblk;
                    let last = (run_end - 1) / bs;
                    self.write_fresh(p + (first - run.lblk), first, pos, piece)?;
                    self.map_written(rec, first, last - first + 1)?;
                }
                // Delayed allocation for file data; a symlink's target gets its block now.
                None if regular => self.buffer_hole(rec.ino, pos, piece)?,
                None => {
                    let first = lblk;
                    let last = (run_end - 1) / bs;
                    self.fill_hole(rec, first, last - first + 1, pos, piece)?;
                }
            }
            pos = run_end;
        }
        self.txn.data_written = true;
        if end > size {
            rec.raw.set_size(end);
        }
        self.touch(rec, true);
        Ok(())
    }

    /// Allocates blocks for logical blocks `first..first+n` (a hole) and writes `piece`
    /// (which starts at byte `pos`) into them, zero-filling the rest of each block.
    fn fill_hole(
        &mut self,
        rec: &mut InodeRec,
        first: u64,
        n: u64,
        pos: u64,
        piece: &[u8],
    ) -> Result<()> {
        let bs = self.fs.core.geo.block_size as u64;
        let mut lblk = first;
        let mut done = 0usize;
        while lblk < first + n {
            let goal = self.goal_for(rec, lblk)?;
            let want = (first + n - lblk).min(crate::alloc::blocks::MAX_EXTENT_LEN as u64) as u32;
            let (p, got) = self.alloc_blocks(rec.ino, goal, want)?;
            let span_end = ((lblk + got as u64) * bs).min(pos + piece.len() as u64);
            let start = (lblk * bs).max(pos);
            let len = (span_end - start) as usize;
            self.write_fresh(p, lblk, start, &piece[done..done + len])?;
            if let Err(e) = self.map_add(rec, lblk, p, got, false) {
                self.free_blocks(rec.ino, p, got as u64, crate::rw::Freed::Data)?;
                return Err(e);
            }
            rec.add_blocks(got as i64, self.fs.core.geo.block_size);
            done += len;
            lblk += got as u64;
        }
        Ok(())
    }

    /// Writes `bytes` (file position `pos`) into fresh blocks starting at physical block
    /// `p` = logical block `lblk`, with zeros before and after them inside those blocks.
    fn write_fresh(&mut self, p: u64, lblk: u64, pos: u64, bytes: &[u8]) -> Result<()> {
        let bs = self.fs.core.geo.block_size as u64;
        let head = (pos - lblk * bs) as usize;
        let total = (head + bytes.len()).div_ceil(bs as usize) * bs as usize;
        if head == 0 && total == bytes.len() {
            self.overlay.write_at(bytes, p * bs)?;
            return Ok(());
        }
        let mut buf = vec![0u8; total];
        buf[head..head + bytes.len()].copy_from_slice(bytes);
        self.overlay.write_at(&buf, p * bs)?;
        Ok(())
    }

    /// Where to put logical block `lblk`: after the physical block of `lblk - 1`, else
    /// the start of the inode's group.
    pub(crate) fn goal_for(&self, rec: &InodeRec, lblk: u64) -> Result<u64> {
        if lblk > 0 {
            let r = self.map_run(rec, lblk - 1)?;
            if let Some(p) = r.pblk {
                return Ok(p + (lblk - 1 - r.lblk) + 1);
            }
        }
        let g = (rec.ino - 1) / self.fs.core.geo.inodes_per_group;
        Ok(self.fs.core.geo.group_first_block(g))
    }

    /// Sets the file's size: shrinking frees the blocks past the new end (the rest of
    /// the last block is left as it is: bytes past the end are never read, and growing
    /// zeroes them first, so a crash before the shrink commits cannot show zeros inside
    /// the old size); growing leaves a hole.
    pub fn set_size(&mut self, rec: &mut InodeRec, size: u64) -> Result<()> {
        if rec.file_type()? != FileType::Regular {
            return Err(if rec.file_type()? == FileType::Directory {
                Error::IsDir
            } else {
                Error::Invalid
            });
        }
        let bs = self.fs.core.geo.block_size as u64;
        if size.div_ceil(bs) > MAX_LBLK {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::EFBIG)));
        }
        if Self::is_inline(rec) {
            self.inline_set_size(rec, size)?;
            self.touch(rec, true);
            return Ok(());
        }
        self.flush_into(rec)?;
        let old = rec.raw.size();
        if size < old {
            self.map_punch(rec, size.div_ceil(bs), u64::MAX)?;
        } else {
            self.zero_for_growth(rec, size)?;
        }
        rec.raw.set_size(size);
        self.touch(rec, true);
        Ok(())
    }

    /// Gives a new regular file or directory its empty block map (an extent root on
    /// extent file systems, zeroed indirect pointers otherwise).
    pub(crate) fn init_map(&mut self, rec: &mut InodeRec) {
        use crate::format::features::incompat;
        if self.fs.core.geo.features.has_incompat(incompat::EXTENTS) {
            let mut f = rec.raw.i_flags();
            f |= flags::EXTENTS;
            rec.raw.set_i_flags(f);
            let mut ib = [0u8; 60];
            super::blockmap::BlockMap::init_extent_root(&mut ib);
            rec.raw.set_i_block(&ib);
        }
    }

    /// fallocate(2) on a regular file.
    pub fn fallocate(
        &mut self,
        rec: &mut InodeRec,
        mode: Fallocate,
        offset: u64,
        len: u64,
    ) -> Result<()> {
        if rec.file_type()? != FileType::Regular {
            return Err(Error::Invalid);
        }
        if len == 0 {
            return Err(Error::Invalid);
        }
        if Self::is_inline(rec) {
            self.uninline_file(rec)?;
        }
        if !rec.raw.has_flag(flags::EXTENTS) {
            return Err(Error::Io(std::io::Error::from_raw_os_error(
                libc::EOPNOTSUPP,
            )));
        }
        let bs = self.fs.core.geo.block_size as u64;
        let end = offset.checked_add(len).ok_or(Error::Invalid)?;
        if end.div_ceil(bs) > MAX_LBLK {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::EFBIG)));
        }
        self.flush_into(rec)?;
        let size = rec.raw.size();
        match mode {
            Fallocate::Allocate { keep_size } => {
                self.reserve_range(rec, offset / bs, end.div_ceil(bs))?;
                if !keep_size && end > size {
                    self.zero_for_growth(rec, end)?;
                    rec.raw.set_size(end);
                }
            }
            Fallocate::PunchHole => {
                self.zero_partial(rec, offset, end.min(size))?;
                let (a, b) = (offset.div_ceil(bs), end / bs);
                if a < b {
                    self.map_punch(rec, a, b)?;
                }
            }
            Fallocate::ZeroRange { keep_size } => {
                self.zero_partial(rec, offset, end)?;
                let (a, b) = (offset.div_ceil(bs), end / bs);
                if a < b {
                    self.map_punch(rec, a, b)?;
                    self.reserve_range(rec, a, b)?;
                }
                if !keep_size && end > size {
                    self.zero_for_growth(rec, end)?;
                    rec.raw.set_size(end);
                }
            }
        }
        self.touch(rec, true);
        Ok(())
    }

    /// Unwritten extents for every hole in logical blocks `a..b`.
    fn reserve_range(&mut self, rec: &mut InodeRec, a: u64, b: u64) -> Result<()> {
        let mut lblk = a;
        while lblk < b {
            let run = self.map_run(rec, lblk)?;
            let run_end = (run.lblk + run.len).min(b);
            if run.pblk.is_none() {
                let mut l = lblk;
                while l < run_end {
                    let goal = self.goal_for(rec, l)?;
                    let want = (run_end - l).min(32767) as u32;
                    let (p, got) = self.alloc_blocks(rec.ino, goal, want)?;
                    self.map_add(rec, l, p, got, true)?;
                    rec.add_blocks(got as i64, self.fs.core.geo.block_size);
                    l += got as u64;
                }
            }
            lblk = run_end;
        }
        Ok(())
    }

    /// Gives the buffered data of `rec`'s file its blocks before a change that works on
    /// the block map (truncate, fallocate), updating `rec` in place.
    fn flush_into(&mut self, rec: &mut InodeRec) -> Result<()> {
        if self.pending_of(rec.ino) == 0 {
            return Ok(());
        }
        self.put_inode(rec)?;
        self.flush_pending(rec.ino)?;
        *rec = self.inode(rec.ino)?;
        Ok(())
    }

    /// Before the size grows to `new_size`: zeroes the bytes past the old end inside the
    /// old last block (a shrink left them as they were).
    fn zero_for_growth(&mut self, rec: &mut InodeRec, new_size: u64) -> Result<()> {
        let bs = self.fs.core.geo.block_size as u64;
        let old = rec.raw.size();
        if new_size <= old || old.is_multiple_of(bs) {
            return Ok(());
        }
        self.zero_partial(rec, old, new_size.min(old.next_multiple_of(bs)))
    }

    /// Writes zeros over the bytes of `from..to` that lie in partly covered blocks.
    fn zero_partial(&mut self, rec: &mut InodeRec, from: u64, to: u64) -> Result<()> {
        let bs = self.fs.core.geo.block_size as u64;
        if from >= to {
            return Ok(());
        }
        let mut pieces = vec![];
        let (up, down) = (from.div_ceil(bs) * bs, to / bs * bs);
        if !from.is_multiple_of(bs) {
            pieces.push((from, to.min(up)));
        }
        if !to.is_multiple_of(bs) && down >= up {
            pieces.push((down, to));
        }
        for (a, b) in pieces {
            let r = self.map_run(rec, a / bs)?;
            if let (Some(p), false) = (r.pblk, r.unwritten) {
                let at = (p + (a / bs - r.lblk)) * bs + a % bs;
                self.overlay.write_at(&vec![0u8; (b - a) as usize], at)?;
                self.txn.data_written = true;
            }
        }
        Ok(())
    }

    /// chmod/chown/utimens/truncate in one: the changes in `attr`, ctime now.
    pub fn set_attr(&mut self, rec: &mut InodeRec, attr: &SetAttr) -> Result<()> {
        let isz = self.fs.core.geo.inode_size as usize;
        if let Some(size) = attr.size {
            self.set_size(rec, size)?;
        }
        if let Some(p) = attr.perm {
            let mode = rec.raw.i_mode() as u32;
            rec.raw.set_i_mode(((mode & !0o7777) | (p & 0o7777)) as u16);
            self.chmod_acl(rec, (p & 0o777) as u16)?;
        }
        if let Some(u) = attr.uid {
            rec.raw.set_uid(u);
        }
        if let Some(g) = attr.gid {
            rec.raw.set_gid(g);
        }
        self.touch(rec, false);
        let now = (self.clock)();
        let a = attr.atime.unwrap_or_else(|| rec.raw.atime(isz));
        let m = attr.mtime.unwrap_or_else(|| rec.raw.mtime(isz));
        let cr = rec.raw.crtime(isz).unwrap_or(now);
        rec.raw.set_times(a, m, now, cr, isz);
        Ok(())
    }
}
