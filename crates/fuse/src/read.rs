//! The handlers that only look: names, attributes, data, directory listings, xattrs,
//! statfs, lseek. Each appends its reply body to `out` or returns the errno.

use crate::abi;
use crate::dispatch::Outcome;
use crate::{CacheMode, Server, TTL};

impl Server {
    /// A name that is not there is answered as node 0 with the usual TTL: the kernel
    /// keeps the negative entry, so a program that looks before it creates (git, tar,
    /// make) costs one LOOKUP, not one per look. Safe because every change to this
    /// directory comes through this mount, which updates the kernel's entry.
    pub(crate) fn lookup(&self, parent: u64, name: &[u8], out: &mut Vec<u8>) -> Result<(), i32> {
        let dir = self.ino_of(parent);
        let m = match self
            .fs
            .lookup(dir, name)
            .and_then(|ino| self.fs.getattr(ino))
        {
            Ok(m) => m,
            Err(usfs_fs::Error::NotFound) => {
                abi::put_entry(out, 0, 0, TTL, &abi::Attr::default());
                return Ok(());
            }
            Err(e) => return Err(e.errno()),
        };
        self.entry(&m, out);
        Ok(())
    }

    pub(crate) fn getattr(&self, node: u64, out: &mut Vec<u8>) -> Result<(), i32> {
        let m = self.fs.getattr(self.ino_of(node)).map_err(|e| e.errno())?;
        let mut a = self.attr(&m);
        // The kernel takes st_ino from the attributes, not the node id: the root shows
        // its own number (2 on ext4), as on a kernel mount.
        a.ino = m.ino;
        abi::put_attr(out, TTL, &a);
        Ok(())
    }

    pub(crate) fn readlink(&self, node: u64, out: &mut Vec<u8>) -> Result<(), i32> {
        let t = self.fs.readlink(self.ino_of(node)).map_err(|e| e.errno())?;
        out.extend_from_slice(&t);
        Ok(())
    }

    pub(crate) fn open(&self, node: u64, flags: u32, out: &mut Vec<u8>) -> Result<(), i32> {
        let fh = match self.w.as_deref() {
            None if flags as i32 & libc::O_ACCMODE != libc::O_RDONLY => return Err(libc::EROFS),
            None => 0,
            Some(w) => {
                w.open_file(self.ino_of(node)).map_err(|e| e.errno())?;
                1
            }
        };
        abi::put_open(out, fh, self.open_flags());
        Ok(())
    }

    pub(crate) fn release(&self, node: u64, fh: u64) -> Result<(), i32> {
        match (&self.w, fh) {
            (Some(w), 1) => w.release_file(self.ino_of(node)).map_err(|e| e.errno()),
            _ => Ok(()),
        }
    }

    /// A directory handle carries nothing here (listings are by offset), so with the
    /// page cache the answer is ENOSYS: the kernel then stops sending OPENDIR and
    /// RELEASEDIR for the rest of the mount (two round trips per directory `rm -r` or
    /// find opens) and opens directories as FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR, the
    /// flags this server would give. With `-o direct_io` listings are not cached.
    pub(crate) fn opendir(&self, out: &mut Vec<u8>) -> Result<(), i32> {
        match self.cache {
            CacheMode::Cache => Err(libc::ENOSYS),
            CacheMode::DirectIo => {
                abi::put_open(out, 0, 0);
                Ok(())
            }
        }
    }

    pub(crate) fn read<'s>(
        &'s self,
        node: u64,
        offset: u64,
        size: u32,
        out: &mut Vec<u8>,
    ) -> Outcome<'s> {
        let ino = self.ino_of(node);
        let size = size as usize;
        // A single contiguous stored run is handed over straight from the image mapping;
        // anything else is gathered into the reply buffer.
        match self.fs.mapped_data(ino, offset, size) {
            Ok(Some(src)) if src.len() == size => return Outcome::Mapped(src),
            Err(e) => return Outcome::Error(e.errno()),
            _ => {}
        }
        out.resize(size, 0);
        match usfs_vfs::read_file(&*self.fs, ino, offset, out) {
            Ok(n) => {
                out.truncate(n);
                Outcome::Reply
            }
            Err(e) => Outcome::Error(e),
        }
    }

    /// The entries of directory `node` from `offset` on, in the kernel's order, "." and
    /// ".." first: `add(name, ino, dtype, next offset)` returns false to stop.
    fn list(&self, node: u64, offset: u64, add: &mut usfs_vfs::DirSink<'_>) -> Result<(), i32> {
        let dir = self.ino_of(node);
        let parent = self.fs.lookup(dir, b"..").unwrap_or(dir);
        usfs_vfs::list_dir(&*self.fs, dir, parent, offset, add)?;
        Ok(())
    }

    pub(crate) fn readdir(
        &self,
        node: u64,
        offset: u64,
        size: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let max = size as usize;
        self.list(node, offset, &mut |name, ino, dtype, next| {
            abi::put_dirent(out, max, self.fuse_ino(ino), next, dtype as u32, name)
        })
    }

    /// READDIR and LOOKUP in one (the kernel asks for it when a program stats what it
    /// lists: ls -l, find, du, rm -r): each entry comes with its attributes, so the
    /// kernel needs no LOOKUP round trip per name. "." and ".." carry their directories'.
    pub(crate) fn readdirplus(
        &self,
        node: u64,
        offset: u64,
        size: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let max = size as usize;
        let mut failed = None;
        self.list(node, offset, &mut |name, ino, dtype, next| {
            if out.len() + abi::direntplus_len(name) > max {
                return false;
            }
            match self.fs.getattr(ino) {
                Ok(m) => self.entry(&m, out),
                Err(e) => {
                    failed = Some(e.errno());
                    return false;
                }
            }
            abi::put_dirent(
                out,
                usize::MAX,
                self.fuse_ino(ino),
                next,
                dtype as u32,
                name,
            )
        })?;
        match failed {
            // An entry whose inode cannot be read ends this batch; alone, it is the error.
            Some(e) if out.is_empty() => Err(e),
            _ => Ok(()),
        }
    }

    pub(crate) fn statfs(&self, out: &mut Vec<u8>) -> Result<(), i32> {
        let s = self.fs.statfs().map_err(|e| e.errno())?;
        for v in [
            s.blocks,
            s.blocks_free,
            s.blocks_avail,
            s.files,
            s.files_free,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        // bsize, namelen, frsize, padding, spare[6]
        for v in [s.block_size, s.name_max, s.block_size, 0, 0, 0, 0, 0, 0, 0] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }

    pub(crate) fn getxattr(
        &self,
        node: u64,
        name: &[u8],
        size: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let v = self
            .fs
            .get_xattr(self.ino_of(node), name)
            .map_err(|e| e.errno())?;
        xattr_reply(&v, size, out)
    }

    pub(crate) fn listxattr(&self, node: u64, size: u32, out: &mut Vec<u8>) -> Result<(), i32> {
        let names = self
            .fs
            .list_xattrs(self.ino_of(node))
            .map_err(|e| e.errno())?;
        let mut list = Vec::new();
        for n in names {
            list.extend_from_slice(&n);
            list.push(0);
        }
        xattr_reply(&list, size, out)
    }

    pub(crate) fn access(&self, node: u64, mask: u32) -> Result<(), i32> {
        // Permission bits are checked by the kernel (default_permissions); only writes
        // are refused here.
        self.fs.getattr(self.ino_of(node)).map_err(|e| e.errno())?;
        if mask as i32 & libc::W_OK != 0 && self.w.is_none() {
            return Err(libc::EROFS);
        }
        Ok(())
    }

    pub(crate) fn lseek(
        &self,
        node: u64,
        offset: i64,
        whence: i32,
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let ino = self.ino_of(node);
        let size = self.fs.getattr(ino).map_err(|e| e.errno())?.size;
        if offset < 0 || offset as u64 >= size {
            return Err(libc::ENXIO);
        }
        let at = offset as u64;
        let r = match (whence, self.fs.next_data(ino, at).map_err(|e| e.errno())?) {
            (libc::SEEK_DATA, Some(r)) => r.start.max(at),
            (libc::SEEK_DATA, None) => return Err(libc::ENXIO),
            (libc::SEEK_HOLE, Some(r)) if r.start <= at => r.end.min(size),
            (libc::SEEK_HOLE, _) => at,
            _ => return Err(libc::EINVAL),
        };
        out.extend_from_slice(&r.to_le_bytes());
        Ok(())
    }
}

/// The reply to a request for an xattr value or name list: the size when the caller asks
/// with size 0, ERANGE when its buffer is too small.
fn xattr_reply(data: &[u8], size: u32, out: &mut Vec<u8>) -> Result<(), i32> {
    if size == 0 {
        abi::put_u32_pad(out, data.len() as u32);
    } else if data.len() > size as usize {
        return Err(libc::ERANGE);
    } else {
        out.extend_from_slice(data);
    }
    Ok(())
}
