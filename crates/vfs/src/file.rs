//! Open-file descriptions: what `open` creates and `dup` shares (offset, status flags,
//! directory position).

use crate::data::ReadState;
use crate::node::Node;
use crate::resolve::{Errno, VPath};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use usfs_fs::{FileSystem, FileType, Ino};

/// Receives directory entries: `(name, ino, d_type, next_position)`; returns false to stop
/// before consuming the entry.
pub type DirSink<'a> = dyn FnMut(&[u8], Ino, u8, u64) -> bool + 'a;

/// What kind of object is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// Regular file (or anything read like one).
    File,
    /// Directory: the offset is a directory position.
    Dir,
    /// Symbolic link opened with O_PATH|O_NOFOLLOW: only stat-like calls work.
    Other,
}

/// Directory positions: the back end's
/// [`readdir_with_dots`](usfs_fs::FileSystem::readdir_with_dots) positions (0 = start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirCursor(pub u64);

/// An open file description.
pub struct OpenFile {
    /// The shared per-file object.
    pub node: Arc<Node>,
    /// Where the file was opened (for `*at` calls on directories, `fchdir`, `realpath`).
    pub vpath: VPath,
    /// Kind of object.
    pub kind: FileKind,
    /// `open` flags: access mode and status flags (F_SETFL changes the latter).
    flags: AtomicI32,
    /// File offset, or directory position; the lock also makes read+advance atomic.
    offset: Mutex<u64>,
    /// What this description's reads remember for the next ones (recent runs, where
    /// the last read ended): its state in the file's [`DataPath`](crate::data::DataPath).
    reads: ReadState,
    /// The offset is the kernel's: the description is shared with other processes (by
    /// fork, or handed over by exec), its descriptors are dups of one kernel file that
    /// keeps the offset for all of them, and the `*_fd` methods use it ([`Self::read_fd`]).
    in_kernel: AtomicBool,
}

impl OpenFile {
    /// A description of `node` opened at `vpath` with `flags`.
    pub fn new(node: Arc<Node>, vpath: VPath, flags: i32) -> OpenFile {
        let kind = match node.meta.file_type {
            FileType::Directory => FileKind::Dir,
            FileType::Regular => FileKind::File,
            _ => FileKind::Other,
        };
        OpenFile {
            node,
            vpath,
            kind,
            flags: AtomicI32::new(flags),
            offset: Mutex::new(0),
            reads: ReadState::default(),
            in_kernel: AtomicBool::new(false),
        }
    }

    /// The inode.
    pub fn ino(&self) -> Ino {
        self.node.ino
    }

    /// The open flags.
    pub fn flags(&self) -> i32 {
        self.flags.load(Ordering::Relaxed)
    }

    /// F_SETFL: only O_APPEND, O_NONBLOCK, O_ASYNC, O_DIRECT and O_NOATIME change.
    pub fn set_status_flags(&self, new: i32) {
        let changeable =
            libc::O_APPEND | libc::O_NONBLOCK | libc::O_ASYNC | libc::O_DIRECT | libc::O_NOATIME;
        let old = self.flags();
        self.flags
            .store((old & !changeable) | (new & changeable), Ordering::Relaxed);
    }

    fn lock_offset(&self) -> std::sync::MutexGuard<'_, u64> {
        self.offset.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current offset (or directory position).
    pub fn offset(&self) -> u64 {
        *self.lock_offset()
    }

    /// read(2): reads at the offset and advances it.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, Errno> {
        let mut off = self.lock_offset();
        let n = self.pread(buf, *off)?;
        *off += n as u64;
        Ok(n)
    }

    /// pread(2): reads at `offset`, leaving the file offset alone. The POSIX checks are
    /// here; the bytes come from the file's [`DataPath`](crate::data::DataPath).
    pub fn pread(&self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        match self.kind {
            FileKind::Dir => return Err(libc::EISDIR),
            FileKind::Other => return Err(libc::EINVAL),
            FileKind::File => {}
        }
        if self.flags() & libc::O_PATH != 0 || self.flags() & libc::O_ACCMODE == libc::O_WRONLY {
            return Err(libc::EBADF);
        }
        match &self.node.writer {
            // Other processes change the file: no cached size or runs, the owner reads.
            Some(w) => w.read_at(self.node.ino, offset, buf).map_err(|e| e.errno()),
            None => self.node.data.pread(&self.reads, buf, offset),
        }
    }

    /// The owner that takes this description's writes: EBADF unless it was opened for
    /// writing (which only a read-write mount allows).
    fn writer(&self) -> Result<&crate::channel::Remote, Errno> {
        let f = self.flags();
        if f & libc::O_PATH != 0 || f & libc::O_ACCMODE == libc::O_RDONLY {
            return Err(libc::EBADF);
        }
        match (&self.node.writer, self.kind) {
            (Some(w), FileKind::File) => Ok(w),
            (Some(_), _) => Err(libc::EISDIR),
            (None, _) => Err(libc::EBADF),
        }
    }

    /// pwrite(2) by `by` (uid, gid): at `offset`, or at the end with O_APPEND (as Linux
    /// does); the file offset is left alone.
    pub fn pwrite(&self, buf: &[u8], offset: u64, by: (u32, u32)) -> Result<usize, Errno> {
        let w = self.writer()?;
        if buf.is_empty() {
            return Ok(0);
        }
        let r = if self.flags() & libc::O_APPEND != 0 {
            w.append(self.node.ino, buf, by).map(|(_, n)| n)
        } else {
            offset
                .checked_add(buf.len() as u64)
                .filter(|&end| end <= i64::MAX as u64)
                .ok_or(libc::EFBIG)?;
            w.write_by(self.node.ino, offset, buf, by)
        };
        r.map_err(|e| e.errno())
    }

    /// write(2) by `by`: at the offset (at the end with O_APPEND, atomically against
    /// other appends), which moves past the bytes written.
    pub fn write(&self, buf: &[u8], by: (u32, u32)) -> Result<usize, Errno> {
        let mut off = self.lock_offset();
        let (at, n) = self.write_at_offset(*off, buf, by)?;
        *off = at + n as u64;
        Ok(n)
    }

    /// A write at `off` (or appended): where it landed and how much was written.
    fn write_at_offset(&self, off: u64, buf: &[u8], by: (u32, u32)) -> Result<(u64, usize), Errno> {
        let w = self.writer()?;
        if self.flags() & libc::O_APPEND != 0 {
            if buf.is_empty() {
                return Ok((self.node.attrs()?.size, 0));
            }
            return w.append(self.node.ino, buf, by).map_err(|e| e.errno());
        }
        if buf.is_empty() {
            return Ok((off, 0));
        }
        off.checked_add(buf.len() as u64)
            .filter(|&end| end <= i64::MAX as u64)
            .ok_or(libc::EFBIG)?;
        let n = w
            .write_by(self.node.ino, off, buf, by)
            .map_err(|e| e.errno())?;
        Ok((off, n))
    }
}

impl OpenFile {
    /// Is the offset kept by the kernel ([`Self::keep_offset_in_kernel`])?
    pub fn offset_in_kernel(&self) -> bool {
        self.in_kernel.load(Ordering::Acquire)
    }

    /// From now on the offset is the kernel's offset of this description's descriptors
    /// (the caller made them dups of one kernel file and set its offset to ours). Only
    /// regular files: directory positions stay ours.
    pub fn keep_offset_in_kernel(&self) {
        if self.kind == FileKind::File {
            self.in_kernel.store(true, Ordering::Release);
        }
    }

    /// [`Self::offset`] of the description behind descriptor `fd`.
    pub fn offset_fd(&self, fd: i32) -> Result<u64, Errno> {
        if !self.offset_in_kernel() {
            return Ok(self.offset());
        }
        crate::sysio::lseek(fd, 0, libc::SEEK_CUR)
    }

    /// [`Self::read`] through descriptor `fd`: at the kernel's offset when it keeps it.
    pub fn read_fd(&self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        if !self.offset_in_kernel() {
            return self.read(buf);
        }
        // Our lock makes read+advance atomic between this process's threads.
        let _g = self.lock_offset();
        let off = crate::sysio::lseek(fd, 0, libc::SEEK_CUR)?;
        let n = self.pread(buf, off)?;
        if n > 0 {
            crate::sysio::lseek(fd, (off + n as u64) as i64, libc::SEEK_SET)?;
        }
        Ok(n)
    }

    /// [`Self::write`] through descriptor `fd`: at the kernel's offset when it keeps it.
    pub fn write_fd(&self, fd: i32, buf: &[u8], by: (u32, u32)) -> Result<usize, Errno> {
        if !self.offset_in_kernel() {
            return self.write(buf, by);
        }
        let _g = self.lock_offset();
        let off = crate::sysio::lseek(fd, 0, libc::SEEK_CUR)?;
        let (at, n) = self.write_at_offset(off, buf, by)?;
        crate::sysio::lseek(fd, (at + n as u64) as i64, libc::SEEK_SET)?;
        Ok(n)
    }

    /// [`Self::seek`] through descriptor `fd`: moves the kernel's offset when it keeps it.
    pub fn seek_fd(&self, fd: i32, off: i64, whence: i32) -> Result<u64, Errno> {
        if !self.offset_in_kernel() {
            return self.seek(off, whence);
        }
        let mut cur = self.lock_offset();
        *cur = crate::sysio::lseek(fd, 0, libc::SEEK_CUR)?;
        let new = self.seek_locked(&mut cur, off, whence)?;
        crate::sysio::lseek(fd, new as i64, libc::SEEK_SET)
    }

    /// lseek(2) with SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE. On a directory
    /// only SEEK_SET to a position from `tell`/`d_off` (or 0) and SEEK_CUR by 0 work.
    pub fn seek(&self, off: i64, whence: i32) -> Result<u64, Errno> {
        let mut cur = self.lock_offset();
        self.seek_locked(&mut cur, off, whence)
    }

    /// [`Self::seek`] with the offset locked (`cur`).
    fn seek_locked(&self, cur: &mut u64, off: i64, whence: i32) -> Result<u64, Errno> {
        let size = match self.kind {
            FileKind::File => self.node.attrs()?.size,
            _ => self.node.meta.size,
        };
        let new: i128 = match (self.kind, whence) {
            (FileKind::Dir, libc::SEEK_SET) => off as i128,
            (FileKind::Dir, libc::SEEK_CUR) if off == 0 => *cur as i128,
            (FileKind::Dir, _) => return Err(libc::EINVAL),
            (_, libc::SEEK_SET) => off as i128,
            (_, libc::SEEK_CUR) => *cur as i128 + off as i128,
            (_, libc::SEEK_END) => size as i128 + off as i128,
            (_, libc::SEEK_DATA) | (_, libc::SEEK_HOLE) => {
                if off < 0 || off as u64 >= size {
                    return Err(libc::ENXIO);
                }
                let data = self
                    .node
                    .fs
                    .next_data(self.node.ino, off as u64)
                    .map_err(|e| e.errno())?;
                let r = match (whence, data) {
                    (libc::SEEK_DATA, Some(r)) => r.start.max(off as u64),
                    (libc::SEEK_DATA, None) => return Err(libc::ENXIO),
                    (_, Some(r)) if r.start <= off as u64 => r.end.min(size),
                    _ => off as u64,
                };
                r as i128
            }
            _ => return Err(libc::EINVAL),
        };
        if new < 0 || new > i64::MAX as i128 {
            return Err(libc::EINVAL);
        }
        *cur = new as u64;
        Ok(new as u64)
    }

    /// Lists the directory from its position: `f(name, ino, d_type, next_position)` for
    /// each entry including `.` and `..`; an entry is consumed (the position moves past it)
    /// only when `f` returns true, so a caller whose buffer is full stops without losing
    /// the entry.
    pub fn read_dir(&self, f: &mut DirSink<'_>) -> Result<(), Errno> {
        if self.kind != FileKind::Dir {
            return Err(libc::ENOTDIR);
        }
        let mut pos = self.lock_offset();
        let parent = match self.vpath.stack.len() {
            n if n >= 2 => self.vpath.stack[n - 2].0,
            _ => self.node.ino,
        };
        *pos = list_dir(&*self.node.fs, self.node.ino, parent, *pos, f)?;
        Ok(())
    }
}

/// Lists directory `dir` from position `pos` (see [`DirCursor`]) in the back end's
/// readdir(3) order, `.` and `..` included (`..` naming `parent`): `f(name, ino, d_type,
/// next_position)` per entry, until it returns false (that entry is not consumed).
/// Returns the position after the last consumed entry.
pub fn list_dir(
    fs: &dyn FileSystem,
    dir: Ino,
    parent: Ino,
    mut pos: u64,
    f: &mut DirSink<'_>,
) -> Result<u64, Errno> {
    fs.readdir_with_dots(dir, pos, &mut |e, next| {
        let ino = if e.name == b".." { parent } else { e.ino };
        let dtype = match e.file_type {
            Some(t) => t.dirent_type(),
            None => match fs.getattr(e.ino) {
                Ok(m) => m.file_type.dirent_type(),
                Err(_) => libc::DT_UNKNOWN,
            },
        };
        if !f(&e.name, ino, dtype, next) {
            return false;
        }
        pos = next;
        true
    })
    .map_err(|e| e.errno())?;
    Ok(pos)
}
