//! [`Ext4Rw`]: the read-write volume behind a lock, as a [`FileSystem`] and
//! [`FileSystemWrite`] for the front ends (editing commands, FUSE, the image owner).
//!
//! Readers share the lock, each change takes it alone (one writer, as fuse2fs, but
//! readers never wait on the disk of another reader). A change is visible when its call
//! returns; the running transaction is committed when it grows past
//! [`COMMIT_BLOCKS`], on [`FileSystemWrite::sync`]/[`FileSystemWrite::fsync`], and when
//! the volume is closed.

use super::inode::InodeRec;
use super::volume::Volume;
use crate::Ext4;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use usfs_dev::{Device, IoSnapshot};
use usfs_fs::{
    DirEntry, Error, Fallocate, FileSystem, FileSystemWrite, Ino, Metadata, NewNode, RenameFlags,
    Result, SetAttr, StatFs,
};

/// Directory entries read under the lock at a time by [`Ext4Rw`]'s readdir.
const READDIR_CHUNK: usize = 256;

/// Changed blocks after which the running transaction is committed.
pub const COMMIT_BLOCKS: usize = 2048;

/// Receives directory entries with the position after each; returns false to stop.
type DirSink<'a> = &'a mut dyn FnMut(DirEntry, u64) -> bool;

/// A shared read-write ext4 volume.
pub struct Ext4Rw {
    vol: RwLock<Volume>,
}

impl Ext4Rw {
    /// Opens the image on `dev` (opened writable).
    pub fn open(dev: Box<dyn Device>) -> Result<Ext4Rw> {
        Ok(Ext4Rw {
            vol: RwLock::new(Volume::open(dev)?),
        })
    }

    fn r(&self) -> RwLockReadGuard<'_, Volume> {
        self.vol.read().unwrap_or_else(|e| e.into_inner())
    }

    fn w(&self) -> RwLockWriteGuard<'_, Volume> {
        self.vol.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands `f` the entries `list` gives from `pos` on. The callback runs without the
    /// lock (a front end's callback may call back in, and a read lock taken twice
    /// deadlocks once a writer waits between): entries are taken READDIR_CHUNK at a time
    /// under the lock, then handed over.
    fn list_in_chunks(
        &self,
        mut pos: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
        list: &mut dyn FnMut(&Ext4, u64, DirSink) -> Result<()>,
    ) -> Result<()> {
        loop {
            let mut chunk = Vec::with_capacity(READDIR_CHUNK);
            list(&self.r().fs, pos, &mut |e, next| {
                chunk.push((e, next));
                chunk.len() < READDIR_CHUNK
            })?;
            let full = chunk.len() == READDIR_CHUNK;
            for (e, next) in chunk {
                pos = next;
                if !f(e, next) {
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Runs `f` on the volume alone, then commits if the transaction is large.
    fn change<T>(&self, f: impl FnOnce(&mut Volume) -> Result<T>) -> Result<T> {
        let mut v = self.w();
        if v.closed {
            return Err(Error::ReadOnly);
        }
        v.begin_op();
        let out = match f(&mut v) {
            Ok(o) => o,
            Err(e) => {
                v.rollback()?;
                return Err(e);
            }
        };
        v.end_op();
        let buffered = v.pending_blocks() * v.geometry().block_size as u64;
        if v.txn.dirty.len() >= v.commit_threshold() || buffered >= super::FLUSH_BYTES {
            v.commit()?;
        } else {
            v.writeback_closed()?;
        }
        Ok(out)
    }

    /// Commits and closes the volume (marks the file system clean); every later change
    /// fails with EROFS.
    pub fn shutdown(&self) -> Result<()> {
        self.w().close()
    }

    /// Metadata of inode `ino` under an already held lock.
    fn meta(v: &Volume, ino: u32) -> Result<Metadata> {
        v.fs.getattr(ino as Ino)
    }
}

fn ino32(ino: Ino) -> Result<u32> {
    u32::try_from(ino).map_err(|_| Error::NotFound)
}

impl FileSystem for Ext4Rw {
    fn format_name(&self) -> &'static str {
        self.r().fs.format_name()
    }
    fn root(&self) -> Ino {
        self.r().fs.root()
    }
    fn lookup(&self, dir: Ino, name: &[u8]) -> Result<Ino> {
        self.r().fs.lookup(dir, name)
    }
    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        let v = self.r();
        let mut m = match v.fs.getattr(ino) {
            Err(Error::Corrupt(_)) if v.is_open(ino32(ino)?) => {
                v.fs.metadata(&v.open_orphan(ino32(ino)?)?)
            }
            r => r,
        }?;
        // Buffered blocks count as the file's, as ext4 counts its delayed ones.
        m.blocks += v.pending_of(ino32(ino)?) * (v.geometry().block_size as u64 / 512);
        Ok(m)
    }
    fn readdir(
        &self,
        dir: Ino,
        cookie: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        self.list_in_chunks(cookie, f, &mut |fs, pos, take| fs.readdir(dir, pos, take))
    }
    fn readdir_with_dots(
        &self,
        dir: Ino,
        pos: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        self.list_in_chunks(pos, f, &mut |fs, pos, take| {
            fs.readdir_with_dots(dir, pos, take)
        })
    }
    fn read_at(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let v = self.r();
        let n = match v.fs.read_at(ino, offset, buf) {
            Err(Error::Corrupt(_)) if v.is_open(ino32(ino)?) => {
                v.fs.read_file(&v.open_orphan(ino32(ino)?)?, offset, buf)
            }
            r => r,
        }?;
        v.pending_read(ino32(ino)?, offset, &mut buf[..n]);
        Ok(n)
    }
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.r().fs.readlink(ino)
    }
    fn list_xattrs(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.r().fs.list_xattrs(ino)
    }
    fn get_xattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.r().fs.get_xattr(ino, name)
    }
    fn next_data(&self, ino: Ino, offset: u64) -> Result<Option<std::ops::Range<u64>>> {
        let v = self.r();
        let i = ino32(ino)?;
        let size = v.fs.getattr(ino)?.size;
        // Stored and buffered runs, joined where they meet.
        let mut at = offset;
        let mut found: Option<std::ops::Range<u64>> = None;
        loop {
            let a = v.fs.next_data(ino, at)?;
            let b = v.pending_data(i, at);
            let next = match (a, b) {
                (Some(a), Some(b)) => Some(if a.start <= b.start { a } else { b }),
                (a, b) => a.or(b),
            };
            match (next, found.as_mut()) {
                (None, _) => break,
                (Some(n), None) => found = Some(n),
                (Some(n), Some(f)) if n.start <= f.end => f.end = f.end.max(n.end),
                _ => break,
            }
            let f = found.as_ref().expect("set above");
            if f.end >= size {
                break;
            }
            at = f.end;
        }
        Ok(found
            .map(|r| r.start..r.end.min(size))
            .filter(|r| r.start < r.end))
    }
    fn statfs(&self) -> Result<StatFs> {
        let v = self.r();
        let mut s = v.fs.statfs()?;
        let held = v.pending_blocks();
        s.blocks_free = s.blocks_free.saturating_sub(held);
        s.blocks_avail = s.blocks_avail.saturating_sub(held);
        Ok(s)
    }
    fn io_stats(&self) -> IoSnapshot {
        self.r().fs.io_stats()
    }
    fn describe(&self) -> Vec<(String, String)> {
        self.r().fs.describe()
    }
}

impl FileSystemWrite for Ext4Rw {
    fn create(&self, dir: Ino, name: &[u8], node: NewNode) -> Result<Metadata> {
        self.change(|v| {
            let ino = v.create(ino32(dir)?, name, node)?;
            Self::meta(v, ino)
        })
    }
    fn mkdir(&self, dir: Ino, name: &[u8], node: NewNode) -> Result<Metadata> {
        self.change(|v| {
            let ino = v.mkdir(ino32(dir)?, name, node)?;
            Self::meta(v, ino)
        })
    }
    fn symlink(
        &self,
        dir: Ino,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        self.change(|v| {
            let ino = v.symlink(ino32(dir)?, name, target, uid, gid)?;
            Self::meta(v, ino)
        })
    }
    fn link(&self, ino: Ino, dir: Ino, name: &[u8]) -> Result<Metadata> {
        self.change(|v| {
            v.link(ino32(ino)?, ino32(dir)?, name)?;
            Self::meta(v, ino32(ino)?)
        })
    }
    fn unlink(&self, dir: Ino, name: &[u8]) -> Result<()> {
        self.change(|v| v.unlink(ino32(dir)?, name))
    }
    fn rmdir(&self, dir: Ino, name: &[u8]) -> Result<()> {
        self.change(|v| v.rmdir(ino32(dir)?, name))
    }
    fn rename(
        &self,
        dir: Ino,
        name: &[u8],
        new_dir: Ino,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        self.change(|v| v.rename(ino32(dir)?, name, ino32(new_dir)?, new_name, flags))
    }
    fn write_at(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.change(|v| {
            let mut rec = v.inode(ino32(ino)?)?;
            regular(&rec)?;
            v.write_data(&mut rec, offset, data)?;
            v.put_inode(&mut rec)?;
            Ok(data.len())
        })
    }
    fn setattr(&self, ino: Ino, attr: SetAttr) -> Result<Metadata> {
        self.change(|v| {
            let mut rec = v.inode(ino32(ino)?)?;
            v.set_attr(&mut rec, &attr)?;
            v.put_inode(&mut rec)?;
            Self::meta(v, rec.ino)
        })
    }
    fn fallocate(&self, ino: Ino, mode: Fallocate, offset: u64, len: u64) -> Result<()> {
        self.change(|v| {
            let mut rec = v.inode(ino32(ino)?)?;
            v.fallocate(&mut rec, mode, offset, len)?;
            v.put_inode(&mut rec)
        })
    }
    fn set_xattr(&self, ino: Ino, name: &[u8], value: &[u8]) -> Result<()> {
        self.change(|v| {
            let mut rec = v.inode(ino32(ino)?)?;
            v.set_xattr(&mut rec, name, Some(value))?;
            v.put_inode(&mut rec)
        })
    }
    fn remove_xattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.change(|v| {
            let mut rec = v.inode(ino32(ino)?)?;
            v.set_xattr(&mut rec, name, None)?;
            v.put_inode(&mut rec)
        })
    }
    fn fsync(&self, _ino: Ino, _datasync: bool) -> Result<()> {
        self.w().commit()
    }
    fn sync(&self) -> Result<()> {
        self.w().commit()
    }
    fn open_file(&self, ino: Ino) -> Result<()> {
        self.w().open_inode(ino32(ino)?);
        Ok(())
    }
    fn release_file(&self, ino: Ino) -> Result<()> {
        self.change(|v| v.close_inode(ino32(ino)?))
    }
}

impl Volume {
    /// An open inode whose last link is gone (the reader refuses unlinked inodes).
    fn open_orphan(&self, ino: u32) -> Result<crate::read::inode::LoadedInode> {
        let rec = self.inode_any(ino)?;
        Ok(crate::read::inode::LoadedInode { ino, raw: rec.raw })
    }
}

/// Only regular files take data writes.
fn regular(rec: &InodeRec) -> Result<()> {
    match rec.file_type()? {
        usfs_fs::FileType::Regular => Ok(()),
        usfs_fs::FileType::Directory => Err(Error::IsDir),
        _ => Err(Error::Invalid),
    }
}

impl Volume {
    /// Commits and marks the file system cleanly closed.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let open: Vec<u32> = self.open_count.keys().copied().collect();
        for ino in open {
            self.open_count.insert(ino, 1);
            self.close_inode(ino)?;
        }
        self.commit()?;
        self.checkpoint()?;
        self.mark_clean()?;
        self.closed = true;
        Ok(())
    }
}

/// The reader of a volume, for code that only reads.
impl AsRef<Ext4> for Volume {
    fn as_ref(&self) -> &Ext4 {
        &self.fs
    }
}
