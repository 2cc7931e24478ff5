//! Open-file descriptions: what `open` creates and `dup` shares (offset, status flags,
//! directory position).

use crate::node::Node;
use crate::resolve::{Errno, VPath};
use crate::runs::{Run, RunCell};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
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
    /// The runs of the file ([`Node::run_at`]) the last reads used: sequential reads,
    /// and random ones over a file of a few extents, find theirs here without touching
    /// the map shared with other descriptions (and threads). Read without a locked
    /// instruction ([`RunCell`]): a read is then a few loads and the copy.
    runs: [RunCell; RECENT],
    /// The cell the next new run replaces (round-robin; a hint, plain loads and stores).
    next_run: AtomicUsize,
    /// Where the last read through this description ended (sequential reads are those
    /// that start there).
    last_end: AtomicU64,
    /// The offset is the kernel's: the description is shared with other processes (by
    /// fork, or handed over by exec), its descriptors are dups of one kernel file that
    /// keeps the offset for all of them, and the `*_fd` methods use it ([`Self::read_fd`]).
    in_kernel: AtomicBool,
}

/// Runs an open-file description keeps to itself.
const RECENT: usize = 4;

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
            runs: Default::default(),
            next_run: AtomicUsize::new(0),
            last_end: AtomicU64::new(0),
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

    /// pread(2): reads at `offset`, leaving the file offset alone (see [`read_file`]).
    pub fn pread(&self, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        match self.kind {
            FileKind::Dir => return Err(libc::EISDIR),
            FileKind::Other => return Err(libc::EINVAL),
            FileKind::File => {}
        }
        if self.flags() & libc::O_PATH != 0 {
            return Err(libc::EBADF);
        }
        let size = self.node.meta.size;
        // A hint only (threads sharing the descriptor may race on it): a plain load and
        // store, not a locked read-modify-write, which would stall every read.
        let sequential = self.last_end.load(Ordering::Relaxed) == offset;
        self.last_end
            .store(offset + buf.len() as u64, Ordering::Relaxed);
        let mut done = 0;
        while done < buf.len() && offset + (done as u64) < size {
            let pos = offset + done as u64;
            let run = self.run_at(pos)?;
            let mut n = 0;
            if run.mapped() {
                n = copy_mapped(&self.node, &run, pos, &mut buf[done..]);
            } else if !run.hole {
                if let Some(sf) = self.node.shared() {
                    // Produced (decompressed) bytes, shared with other processes (None:
                    // not there and not to be stored: read as if there were no cache).
                    match self.copy_shared(sf, pos, &mut buf[done..], sequential)? {
                        Some(0) => break,
                        Some(k) => n = k,
                        None => {}
                    }
                }
            }
            if n == 0 {
                // Not stored contiguously in a mapping here (hole, inline, compressed):
                // large reads go to the back end directly, small ones through the chunk
                // cache.
                if buf.len() - done >= crate::chunks::CHUNK {
                    return Ok(
                        done + read_file(&*self.node.fs, self.node.ino, pos, &mut buf[done..])?
                    );
                }
                n = self.copy_chunk(pos, &mut buf[done..], sequential)?;
                if n == usize::MAX {
                    return Ok(
                        done + read_file(&*self.node.fs, self.node.ino, pos, &mut buf[done..])?
                    );
                }
                if n == 0 {
                    break;
                }
            }
            done += n;
        }
        Ok(done)
    }

    /// Copies file bytes at `pos` into `dst` from the cached chunk that holds them (read
    /// from the back end on a miss when `load`); 0 at the end of the file, `usize::MAX`
    /// when the chunk is not cached and not to be loaded.
    fn copy_chunk(&self, pos: u64, dst: &mut [u8], load: bool) -> Result<usize, Errno> {
        let chunk = crate::chunks::CHUNK as u64;
        let idx = pos / chunk;
        let cached = self.node.chunks.cached(idx);
        if cached.is_none() && !load {
            return Ok(usize::MAX);
        }
        let data = match cached {
            Some(d) => d,
            None => self.node.chunks.get(idx, || {
                let start = idx * chunk;
                let len = (self.node.meta.size.saturating_sub(start)).min(chunk) as usize;
                let mut v = vec![0u8; len];
                let n = read_file(&*self.node.fs, self.node.ino, start, &mut v)?;
                v.truncate(n);
                Ok::<_, Errno>(v)
            })?,
        };
        let skip = (pos - idx * chunk) as usize;
        let n = data.len().saturating_sub(skip).min(dst.len());
        dst[..n].copy_from_slice(&data[skip..skip + n]);
        Ok(n)
    }

    /// The run holding `pos` (`pos < size`): one a recent read used, or the node's.
    ///
    /// Never waits: a cell being replaced by another thread (or left mid-change by a
    /// fork in the child) is a miss, and the node answers then.
    #[inline]
    fn run_at(&self, pos: u64) -> Result<Run, Errno> {
        for cell in &self.runs {
            if let Some(r) = cell.get() {
                if r.contains(pos) {
                    return Ok(r);
                }
            }
        }
        let r = self.node.run_at(pos)?;
        let i = self.next_run.load(Ordering::Relaxed) % RECENT;
        self.runs[i].set(r);
        self.next_run.store(i + 1, Ordering::Relaxed);
        Ok(r)
    }

    /// Copies file bytes at `pos` into `dst` from the shared cache, producing (and
    /// storing) what holds `pos` first if nobody has: its whole 2 MiB chunk for a
    /// sequential or large read, its 64 KiB piece for a small random one. `Some(0)` at
    /// the end of the file, `None` when that is not filled and this process no longer
    /// fills (producing it for each small read would cost far more than it saves).
    #[inline]
    fn copy_shared(
        &self,
        sf: &crate::shared::SharedFile,
        pos: u64,
        dst: &mut [u8],
        sequential: bool,
    ) -> Result<Option<usize>, Errno> {
        let n = sf.read(pos, dst);
        if n > 0 {
            return Ok(Some(n));
        }
        if sf.broken() {
            return Ok(None);
        }
        let whole = sequential || dst.len() as u64 >= crate::shared::PIECE;
        let range = sf.fill_range(pos, whole);
        let mut data = vec![0u8; (range.end - range.start) as usize];
        let got = read_file(&*self.node.fs, self.node.ino, range.start, &mut data)?;
        if got == data.len() {
            sf.fill_at(range.start, &data);
        }
        let skip = (pos - range.start) as usize;
        let n = got.saturating_sub(skip).min(dst.len());
        dst[..n].copy_from_slice(&data[skip..skip + n]);
        Ok(Some(n))
    }
}

/// Copies file bytes at `pos` (in `run`, which is mapped) into `dst` straight from the
/// image mapping (by pread from the image instead only when `USFS_BULK_MIN` asks: see
/// [`crate::bulk`]).
fn copy_mapped(node: &Node, run: &Run, pos: u64, dst: &mut [u8]) -> usize {
    let skip = (pos - run.start) as usize;
    let n = ((run.len as usize) - skip).min(dst.len());
    // SAFETY: `addr..addr + len` is (part of) a slice `mapped_data` returned from
    // `node.fs`, which the caller keeps alive through its Arc<Node>. A back end's
    // mapping lives as long as the back end and is never moved or unmapped before it
    // is dropped (usfs_dev::MmapDevice owns it); mounts are read-only, so the bytes
    // are those mapped_data would return again. `skip + n <= len`.
    let src = unsafe { std::slice::from_raw_parts((run.addr + skip) as *const u8, n) };
    if let Some(b) = node.bulk.as_ref().filter(|b| n >= b.min) {
        if let Some(k) = b.read(src, &mut dst[..n]) {
            return k;
        }
    }
    crate::copy::copy(&mut dst[..n], src);
    n
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
        let size = self.node.meta.size;
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

/// Reads file data of `ino` at `offset` into `buf`; returns the bytes read (short only at
/// the end of the file). Uncompressed data stored contiguously in a memory-mapped image is
/// copied straight out of the mapping (no system call); the rest goes through the back
/// end's `read_at`. The preload library and the FUSE server both read this way.
pub fn read_file(
    fs: &dyn FileSystem,
    ino: Ino,
    offset: u64,
    buf: &mut [u8],
) -> Result<usize, Errno> {
    let mut done = 0;
    while done < buf.len() {
        let pos = offset + done as u64;
        match fs
            .mapped_data(ino, pos, buf.len() - done)
            .map_err(|e| e.errno())?
        {
            Some(src) if !src.is_empty() => {
                crate::copy::copy(&mut buf[done..done + src.len()], src);
                done += src.len();
            }
            _ => {
                let n = fs
                    .read_at(ino, pos, &mut buf[done..])
                    .map_err(|e| e.errno())?;
                if n == 0 {
                    break;
                }
                done += n;
            }
        }
    }
    Ok(done)
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
