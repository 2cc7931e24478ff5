//! The write half of the FUSE server (`usfs mount -o rw`): each request becomes one call
//! of [`usfs_fs::FileSystemWrite`]; the kernel checks permissions (default_permissions),
//! [`usfs_vfs::attrs`] applies the attribute rules (owners of new inodes, umask, what
//! chown, truncate and write take away), the back end keeps the format right. Here: the
//! handlers of the modifying requests and the conversions of FUSE's arguments.

use crate::abi::{self, fattr, Args};
use crate::{decode_dev32, CacheMode, Server, TTL};
use usfs_fs::{Error, Fallocate, FileSystemWrite, FileType, RenameFlags, Timestamp};
use usfs_vfs::attrs::{self, Caller};

/// The file type in a mode's S_IFMT bits.
fn type_of_mode(mode: u32) -> Result<FileType, Error> {
    FileType::from_mode(mode).ok_or(Error::Invalid)
}

/// fallocate(2)'s mode bits.
fn fallocate_mode(mode: i32) -> Result<Fallocate, Error> {
    let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
    match mode & !libc::FALLOC_FL_KEEP_SIZE {
        0 => Ok(Fallocate::Allocate { keep_size: keep }),
        libc::FALLOC_FL_PUNCH_HOLE if keep => Ok(Fallocate::PunchHole),
        libc::FALLOC_FL_ZERO_RANGE => Ok(Fallocate::ZeroRange { keep_size: keep }),
        _ => Err(Error::Io(std::io::Error::from_raw_os_error(
            libc::EOPNOTSUPP,
        ))),
    }
}

impl Server {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn write(
        &self,
        node: u64,
        offset: u64,
        data: &[u8],
        write_flags: u32,
        open_flags: u32,
        c: Caller,
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let w = self.w()?;
        let ino = self.ino_of(node);
        // O_APPEND writes arrive with the kernel's idea of the end; the size here is the truth.
        let offset = if open_flags as i32 & libc::O_APPEND != 0 && self.cache == CacheMode::DirectIo
        {
            w.getattr(ino).map_err(|e| e.errno())?.size
        } else {
            offset
        };
        let kill = write_flags & abi::WRITE_KILL_SUIDGID != 0;
        let n = attrs::before_write(w, ino, c, kill)
            .and_then(|()| w.write_at(ino, offset, data))
            .map_err(|e| e.errno())?;
        abi::put_u32_pad(out, n as u32);
        Ok(())
    }

    /// SETATTR: `a` is `struct fuse_setattr_in`.
    pub(crate) fn setattr(
        &self,
        node: u64,
        a: Args,
        c: Caller,
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let w = self.w()?;
        let valid = a.u32(0);
        let has = |bit| valid & bit != 0;
        let time = |now_bit, set_bit, sec_at, nsec_at| {
            if has(now_bit) {
                Some(Timestamp::now())
            } else if has(set_bit) {
                Some(Timestamp {
                    sec: a.u64(sec_at) as i64,
                    nsec: a.u32(nsec_at),
                })
            } else {
                None
            }
        };
        let attr = usfs_fs::SetAttr {
            perm: has(fattr::MODE).then(|| a.u32(68) & 0o7777),
            uid: has(fattr::UID).then(|| a.u32(76)),
            gid: has(fattr::GID).then(|| a.u32(80)),
            size: has(fattr::SIZE).then(|| a.u64(16)),
            atime: time(fattr::ATIME_NOW, fattr::ATIME, 32, 56),
            mtime: time(fattr::MTIME_NOW, fattr::MTIME, 40, 60),
        };
        let m = attrs::setattr(w, self.ino_of(node), c, attr).map_err(|e| e.errno())?;
        let mut at = self.attr(&m);
        at.ino = m.ino;
        abi::put_attr(out, TTL, &at);
        Ok(())
    }

    /// CREATE, MKNOD and MKDIR: a new inode named `name` in `parent`, owned and moded
    /// as [`attrs::new_node`] says; a created regular file is also opened.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn make(
        &self,
        parent: u64,
        name: &[u8],
        kind: Make,
        mode: u32,
        umask: u32,
        c: Caller,
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let w = self.w()?;
        let dir = self.ino_of(parent);
        let made = || {
            let (ft, rdev) = match kind {
                Make::File => (type_of_mode(mode | libc::S_IFREG)?, 0),
                Make::Node { rdev } => (type_of_mode(mode)?, decode_dev32(rdev)),
                Make::Dir => (FileType::Directory, 0),
            };
            let node = new_node(w, dir, ft, mode, umask, rdev, c)?;
            match kind {
                Make::Dir => w.mkdir(dir, name, node),
                Make::Node { .. } => w.create(dir, name, node),
                Make::File => w
                    .create(dir, name, node)
                    .and_then(|m| w.open_file(m.ino).map(|()| m)),
            }
        };
        let m = made().map_err(|e: Error| e.errno())?;
        self.entry(&m, out);
        if matches!(kind, Make::File) {
            abi::put_open(out, 1, self.open_flags());
        }
        Ok(())
    }

    pub(crate) fn symlink(
        &self,
        parent: u64,
        name: &[u8],
        target: &[u8],
        c: Caller,
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let w = self.w()?;
        let dir = self.ino_of(parent);
        let m = w
            .getattr(dir)
            .and_then(|pm| {
                let gid = if pm.perm & 0o2000 != 0 { pm.gid } else { c.gid };
                w.symlink(dir, name, target, c.uid, gid)
            })
            .map_err(|e| e.errno())?;
        self.entry(&m, out);
        Ok(())
    }

    pub(crate) fn link(
        &self,
        ino: u64,
        newparent: u64,
        newname: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let w = self.w()?;
        let m = w
            .link(self.ino_of(ino), self.ino_of(newparent), newname)
            .map_err(|e| e.errno())?;
        self.entry(&m, out);
        Ok(())
    }

    pub(crate) fn unlink(&self, parent: u64, name: &[u8]) -> Result<(), i32> {
        self.w()?
            .unlink(self.ino_of(parent), name)
            .map_err(|e| e.errno())
    }

    pub(crate) fn rmdir(&self, parent: u64, name: &[u8]) -> Result<(), i32> {
        self.w()?
            .rmdir(self.ino_of(parent), name)
            .map_err(|e| e.errno())
    }

    pub(crate) fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: u32,
    ) -> Result<(), i32> {
        let w = self.w()?;
        let known = libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE;
        if flags & !known != 0 {
            return Err(libc::EINVAL);
        }
        let fl = RenameFlags {
            noreplace: flags & libc::RENAME_NOREPLACE != 0,
            exchange: flags & libc::RENAME_EXCHANGE != 0,
        };
        w.rename(
            self.ino_of(parent),
            name,
            self.ino_of(newparent),
            newname,
            fl,
        )
        .map_err(|e| e.errno())
    }

    pub(crate) fn fsync(&self, node: u64, datasync: bool) -> Result<(), i32> {
        match self.w() {
            Ok(w) => w.fsync(self.ino_of(node), datasync).map_err(|e| e.errno()),
            Err(_) => Ok(()),
        }
    }

    pub(crate) fn fallocate(
        &self,
        node: u64,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> Result<(), i32> {
        let w = self.w()?;
        fallocate_mode(mode)
            .and_then(|m| w.fallocate(self.ino_of(node), m, offset, length))
            .map_err(|e| e.errno())
    }

    pub(crate) fn setxattr(
        &self,
        node: u64,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> Result<(), i32> {
        let w = self.w()?;
        let ino = self.ino_of(node);
        let exists = match w.get_xattr(ino, name) {
            Ok(_) => true,
            Err(Error::NoData) => false,
            Err(e) => return Err(e.errno()),
        };
        if flags & libc::XATTR_CREATE != 0 && exists {
            return Err(libc::EEXIST);
        }
        if flags & libc::XATTR_REPLACE != 0 && !exists {
            return Err(libc::ENODATA);
        }
        w.set_xattr(ino, name, value).map_err(|e| e.errno())
    }

    pub(crate) fn removexattr(&self, node: u64, name: &[u8]) -> Result<(), i32> {
        self.w()?
            .remove_xattr(self.ino_of(node), name)
            .map_err(|e| e.errno())
    }
}

/// A new inode's attributes: the parent's (setgid directories) and the caller's.
fn new_node(
    w: &dyn FileSystemWrite,
    dir: u64,
    ft: FileType,
    mode: u32,
    umask: u32,
    rdev: u64,
    c: Caller,
) -> Result<usfs_fs::NewNode, Error> {
    let pm = w.getattr(dir)?;
    Ok(attrs::new_node(
        ft,
        mode,
        attrs::umask_for(w, dir, umask),
        rdev,
        c,
        &pm,
    ))
}

/// What [`Server::make`] makes.
#[derive(Clone, Copy)]
pub(crate) enum Make {
    /// CREATE: a regular file, opened.
    File,
    /// MKNOD: any type but a directory; `rdev` as FUSE carries it.
    Node {
        /// The device number (new_encode_dev form).
        rdev: u32,
    },
    /// MKDIR.
    Dir,
}
