//! `usfs mount`: any usfs file system served through the kernel's FUSE (the fuser crate).
//!
//! The seed's two FUSE configurations are the two [`CacheMode`]s: `Cache` lets the kernel
//! keep file data in its page cache and attributes and names for a long TTL (the image is
//! read-only, so nothing goes stale); `DirectIo` opens every file with FOPEN_DIRECT_IO, so
//! each read is a request to this server.
//!
//! Everything goes through [`usfs_fs::FileSystem`] and the vfs helpers (`read_file`,
//! `list_dir`), the same code the preload library uses.

mod write;

use fuser::{
    Errno, FileAttr, FileHandle, FileType as FuseType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, OpenFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use usfs_fs::{FileSystem, FileSystemWrite, FileType, Ino, Metadata, RenameFlags, Timestamp};
use usfs_vfs::attrs::{self, Caller};
use usfs_vfs::errno_of;

/// How file data is cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheMode {
    /// Kernel page cache (FOPEN_KEEP_CACHE) and long attribute/entry TTLs.
    Cache,
    /// FOPEN_DIRECT_IO: every read goes to the server.
    DirectIo,
}

/// Mount options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Data caching.
    pub cache: CacheMode,
    /// Server threads.
    pub threads: usize,
    /// Shown as the source in /proc/mounts.
    pub fsname: String,
    /// Let other users in (allow_other).
    pub allow_other: bool,
}

/// TTL of attributes and names: the image is read-only, so they never change under us.
const TTL: Duration = Duration::from_secs(3600);

/// The FUSE file system over a usfs back end.
pub struct Server {
    fs: Arc<dyn FileSystem>,
    /// The same back end's write interface on a read-write mount.
    w: Option<Arc<dyn FileSystemWrite>>,
    cache: CacheMode,
}

/// What a mount serves: a read-only file system, or a writable one.
#[derive(Clone)]
pub enum Backend {
    /// Read-only.
    ReadOnly(Arc<dyn FileSystem>),
    /// Read-write.
    ReadWrite(Arc<dyn FileSystemWrite>),
}

impl Server {
    /// A server for `b`.
    pub fn new(b: Backend, cache: CacheMode) -> Server {
        match b {
            Backend::ReadOnly(fs) => Server { fs, w: None, cache },
            Backend::ReadWrite(w) => Server {
                fs: w.clone(),
                w: Some(w),
                cache,
            },
        }
    }

    /// The write interface, or EROFS on a read-only mount.
    fn w(&self) -> Result<&dyn FileSystemWrite, Errno> {
        self.w.as_deref().ok_or(Errno::from_i32(libc::EROFS))
    }

    /// Replies to a request that made or found an inode.
    fn entry(&self, r: usfs_fs::Result<Metadata>, reply: ReplyEntry) {
        match r {
            Ok(m) => reply.entry(&TTL, &self.attr(&m), Generation(m.generation as u64)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    /// Replies with nothing but success or the error.
    fn empty(r: usfs_fs::Result<()>, reply: ReplyEmpty) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn open_flags(&self) -> FopenFlags {
        match self.cache {
            CacheMode::Cache => FopenFlags::FOPEN_KEEP_CACHE,
            CacheMode::DirectIo => FopenFlags::FOPEN_DIRECT_IO,
        }
    }

    fn caller(req: &Request) -> Caller {
        Caller {
            uid: req.uid(),
            gid: req.gid(),
        }
    }

    /// FUSE names the root 1; the back end's root and inode 1 swap numbers (a bijection,
    /// so every other inode keeps its own number in `st_ino`).
    fn fuse_ino(&self, ino: Ino) -> u64 {
        let root = self.fs.root();
        if ino == root {
            1
        } else if ino == 1 {
            root
        } else {
            ino
        }
    }

    fn ino_of(&self, ino: INodeNo) -> Ino {
        let root = self.fs.root();
        match ino.0 {
            1 => root,
            i if i == root => 1,
            i => i,
        }
    }

    fn attr(&self, m: &Metadata) -> FileAttr {
        FileAttr {
            ino: INodeNo(self.fuse_ino(m.ino)),
            size: m.size,
            blocks: m.blocks,
            atime: system_time(m.atime),
            mtime: system_time(m.mtime),
            ctime: system_time(m.ctime),
            crtime: m.crtime.map_or(UNIX_EPOCH, system_time),
            kind: fuse_type(m.file_type),
            perm: m.perm as u16,
            nlink: m.nlink.min(u32::MAX as u64) as u32,
            uid: m.uid,
            gid: m.gid,
            rdev: encode_dev32(m.rdev),
            blksize: m.blksize,
            flags: 0,
        }
    }
}

fn errno(e: &usfs_fs::Error) -> Errno {
    Errno::from_i32(errno_of(e))
}

/// Seconds and nanoseconds since the epoch as a SystemTime (before 1970 too).
fn system_time(t: Timestamp) -> SystemTime {
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::new(t.sec as u64, t.nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + Duration::from_nanos(t.nsec as u64)
    }
}

/// A Linux device number from the 32-bit one FUSE carries (new_decode_dev).
fn decode_dev32(d: u32) -> u64 {
    let (major, minor) = (
        ((d >> 8) & 0xfff) as u64,
        ((d & 0xff) | ((d >> 12) & 0xfff00)) as u64,
    );
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

/// The 32-bit device number FUSE carries (new_encode_dev).
fn encode_dev32(dev: u64) -> u32 {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0xff);
    ((minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)) as u32
}

fn fuse_type(t: FileType) -> FuseType {
    match t {
        FileType::Regular => FuseType::RegularFile,
        FileType::Directory => FuseType::Directory,
        FileType::Symlink => FuseType::Symlink,
        FileType::CharDevice => FuseType::CharDevice,
        FileType::BlockDevice => FuseType::BlockDevice,
        FileType::Fifo => FuseType::NamedPipe,
        FileType::Socket => FuseType::Socket,
    }
}

fn fuse_type_of_dtype(d: u8) -> FuseType {
    match d {
        libc::DT_DIR => FuseType::Directory,
        libc::DT_LNK => FuseType::Symlink,
        libc::DT_CHR => FuseType::CharDevice,
        libc::DT_BLK => FuseType::BlockDevice,
        libc::DT_FIFO => FuseType::NamedPipe,
        libc::DT_SOCK => FuseType::Socket,
        _ => FuseType::RegularFile,
    }
}

/// Answers a request whose reply is an xattr value or name list: the size when the caller
/// asks with size 0, ERANGE when its buffer is too small.
fn reply_xattr(reply: ReplyXattr, data: &[u8], size: u32) {
    if size == 0 {
        reply.size(data.len() as u32);
    } else if data.len() > size as usize {
        reply.error(Errno::from_i32(libc::ERANGE));
    } else {
        reply.data(data);
    }
}

impl Filesystem for Server {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Large reads in one request where the kernel allows them.
        let _ = config.set_max_readahead(1 << 20);
        // Every directory listing as READDIRPLUS: an entry's attributes cost the server
        // an inode read, a separate LOOKUP costs a round trip (the kernel's adaptive mode
        // falls back to READDIR after a directory's first batch, and `rm -r`, which
        // lists first and stats after, then pays a LOOKUP per name).
        let _ = config.add_capabilities(InitFlags::FUSE_DO_READDIRPLUS);
        if self.w.is_some() {
            // The kernel enforces POSIX ACLs and sends the umask apart from the mode: a
            // new inode in a directory with a default ACL takes that ACL, not the umask
            // (attrs::umask_for).
            let _ = config.add_capabilities(InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK);
            // The server takes away setuid/setgid and file capabilities on write, chown
            // and truncate (attrs::before_write, attrs::setattr); in return the kernel
            // stops asking for security.capability before every write(2) (SB_NOSEC: once
            // per inode), a request per write that halved small-write throughput.
            let _ = config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2);
            // With `-o cache` the kernel gathers small writes in its page cache and sends
            // them in large requests at writeback, fsync and close (safe: this mount is
            // the image's only writer; fsync still reaches usfs after the data).
            if self.cache == CacheMode::Cache {
                let _ = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE);
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let dir = self.ino_of(parent);
        match self
            .fs
            .lookup(dir, name.as_bytes())
            .and_then(|ino| self.fs.getattr(ino))
        {
            Ok(m) => reply.entry(&TTL, &self.attr(&m), Generation(m.generation as u64)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.getattr(self.ino_of(ino)) {
            Ok(m) => {
                let mut attr = self.attr(&m);
                // The kernel takes st_ino from the attributes, not the node id: the root
                // shows its own number (2 on ext4), as on a kernel mount.
                attr.ino = INodeNo(m.ino);
                reply.attr(&TTL, &attr)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs.readlink(self.ino_of(ino)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let Some(w) = self.w.as_deref() else {
            if flags.0 & libc::O_ACCMODE != libc::O_RDONLY {
                return reply.error(Errno::from_i32(libc::EROFS));
            }
            return reply.opened(FileHandle(0), self.open_flags());
        };
        match w.open_file(self.ino_of(ino)) {
            Ok(()) => reply.opened(FileHandle(1), self.open_flags()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        match (&self.w, fh.0) {
            (Some(w), 1) => Self::empty(w.release_file(self.ino_of(ino)), reply),
            _ => reply.ok(),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lo: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Nothing to do at close (data and metadata reach the volume with each request):
        // ENOSYS tells the kernel so, and it stops sending FLUSH, a round trip per close.
        reply.error(Errno::from_i32(libc::ENOSYS));
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.w() {
            Ok(w) => Self::empty(w.fsync(self.ino_of(ino), datasync), reply),
            Err(_) => reply.ok(),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.w() {
            Ok(w) => Self::empty(w.fsync(self.ino_of(ino), datasync), reply),
            Err(_) => reply.ok(),
        }
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let w = match self.w() {
            Ok(w) => w,
            Err(e) => return reply.error(e),
        };
        let ino = self.ino_of(ino);
        // O_APPEND writes arrive with the kernel's idea of the end; the size here is the truth.
        let offset = if flags.0 & libc::O_APPEND != 0 && self.cache == CacheMode::DirectIo {
            match w.getattr(ino) {
                Ok(m) => m.size,
                Err(e) => return reply.error(errno(&e)),
            }
        } else {
            offset
        };
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        match attrs::before_write(w, ino, Self::caller(req), kill)
            .and_then(|()| w.write_at(ino, offset, data))
        {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let w = match self.w() {
            Ok(w) => w,
            Err(e) => return reply.error(e),
        };
        let attr = usfs_fs::SetAttr {
            perm: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: write::timestamp(atime),
            mtime: write::timestamp(mtime),
        };
        let r = attrs::setattr(w, self.ino_of(ino), Self::caller(req), attr);
        match r {
            Ok(m) => {
                let mut attr = self.attr(&m);
                attr.ino = INodeNo(m.ino);
                reply.attr(&TTL, &attr)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = self
            .w()
            .map_err(|_| usfs_fs::Error::ReadOnly)
            .and_then(|w| {
                let dir = self.ino_of(parent);
                let pm = w.getattr(dir)?;
                let ft = write::type_of_mode(mode)?;
                let rdev = decode_dev32(rdev);
                w.create(
                    dir,
                    name.as_bytes(),
                    attrs::new_node(
                        ft,
                        mode,
                        attrs::umask_for(w, dir, umask),
                        rdev,
                        Self::caller(req),
                        &pm,
                    ),
                )
            });
        self.entry(r, reply)
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let r = self
            .w()
            .map_err(|_| usfs_fs::Error::ReadOnly)
            .and_then(|w| {
                let dir = self.ino_of(parent);
                let pm = w.getattr(dir)?;
                let node = attrs::new_node(
                    FileType::Directory,
                    mode,
                    attrs::umask_for(w, dir, umask),
                    0,
                    Self::caller(req),
                    &pm,
                );
                w.mkdir(dir, name.as_bytes(), node)
            });
        self.entry(r, reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.w() {
            Ok(w) => Self::empty(w.unlink(self.ino_of(parent), name.as_bytes()), reply),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.w() {
            Ok(w) => Self::empty(w.rmdir(self.ino_of(parent), name.as_bytes()), reply),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        let r = self
            .w()
            .map_err(|_| usfs_fs::Error::ReadOnly)
            .and_then(|w| {
                let c = Self::caller(req);
                let dir = self.ino_of(parent);
                let pm = w.getattr(dir)?;
                let gid = if pm.perm & 0o2000 != 0 { pm.gid } else { c.gid };
                w.symlink(
                    dir,
                    link_name.as_bytes(),
                    target.as_os_str().as_bytes(),
                    c.uid,
                    gid,
                )
            });
        self.entry(r, reply)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        let w = match self.w() {
            Ok(w) => w,
            Err(e) => return reply.error(e),
        };
        if flags.bits() & !(libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE) != 0 {
            return reply.error(Errno::from_i32(libc::EINVAL));
        }
        let fl = RenameFlags {
            noreplace: flags.bits() & libc::RENAME_NOREPLACE != 0,
            exchange: flags.bits() & libc::RENAME_EXCHANGE != 0,
        };
        let r = w.rename(
            self.ino_of(parent),
            name.as_bytes(),
            self.ino_of(newparent),
            newname.as_bytes(),
            fl,
        );
        Self::empty(r, reply)
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = self
            .w()
            .map_err(|_| usfs_fs::Error::ReadOnly)
            .and_then(|w| w.link(self.ino_of(ino), self.ino_of(newparent), newname.as_bytes()));
        self.entry(r, reply)
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let r = self
            .w()
            .map_err(|_| usfs_fs::Error::ReadOnly)
            .and_then(|w| {
                let dir = self.ino_of(parent);
                let pm = w.getattr(dir)?;
                let ft = write::type_of_mode(mode | libc::S_IFREG)?;
                let m = w.create(
                    dir,
                    name.as_bytes(),
                    attrs::new_node(
                        ft,
                        mode,
                        attrs::umask_for(w, dir, umask),
                        0,
                        Self::caller(req),
                        &pm,
                    ),
                )?;
                w.open_file(m.ino)?;
                Ok(m)
            });
        match r {
            Ok(m) => reply.created(
                &TTL,
                &self.attr(&m),
                Generation(m.generation as u64),
                FileHandle(1),
                self.open_flags(),
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let r = self
            .w()
            .map_err(|_| usfs_fs::Error::ReadOnly)
            .and_then(|w| {
                w.fallocate(
                    self.ino_of(ino),
                    write::fallocate_mode(mode)?,
                    offset,
                    length,
                )
            });
        Self::empty(r, reply)
    }

    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let r = self
            .w()
            .map_err(|_| usfs_fs::Error::ReadOnly)
            .and_then(|w| {
                let ino = self.ino_of(ino);
                let exists = match w.get_xattr(ino, name.as_bytes()) {
                    Ok(_) => true,
                    Err(usfs_fs::Error::NoData) => false,
                    Err(e) => return Err(e),
                };
                if flags & libc::XATTR_CREATE != 0 && exists {
                    return Err(usfs_fs::Error::Exists);
                }
                if flags & libc::XATTR_REPLACE != 0 && !exists {
                    return Err(usfs_fs::Error::NoData);
                }
                w.set_xattr(ino, name.as_bytes(), value)
            });
        Self::empty(r, reply)
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.w() {
            Ok(w) => Self::empty(w.remove_xattr(self.ino_of(ino), name.as_bytes()), reply),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let ino = self.ino_of(ino);
        // A single contiguous stored run is handed to the kernel straight from the image
        // mapping; anything else is gathered into a buffer.
        match self.fs.mapped_data(ino, offset, size as usize) {
            Ok(Some(src)) if src.len() == size as usize => return reply.data(src),
            Err(e) => return reply.error(errno(&e)),
            _ => {}
        }
        let mut buf = vec![0u8; size as usize];
        match usfs_vfs::read_file(&*self.fs, ino, offset, &mut buf) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let f = match self.cache {
            CacheMode::Cache => FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR,
            CacheMode::DirectIo => FopenFlags::empty(),
        };
        reply.opened(FileHandle(0), f);
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let dir = self.ino_of(ino);
        let parent = self.fs.lookup(dir, b"..").unwrap_or(dir);
        let r = usfs_vfs::list_dir(
            &*self.fs,
            dir,
            parent,
            offset,
            &mut |name, ino, dtype, next| {
                !reply.add(
                    INodeNo(self.fuse_ino(ino)),
                    next,
                    fuse_type_of_dtype(dtype),
                    OsStr::from_bytes(name),
                )
            },
        );
        match r {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(Errno::from_i32(e)),
        }
    }

    /// READDIR and LOOKUP in one (the kernel asks for it when a program stats what it
    /// lists: ls -l, find, du, rm -r): each entry comes with its attributes, so the
    /// kernel needs no LOOKUP round trip per name. "." and ".." carry their directories'.
    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let dir = self.ino_of(ino);
        let parent = self.fs.lookup(dir, b"..").unwrap_or(dir);
        let mut failed = None;
        let mut added = false;
        let r = usfs_vfs::list_dir(&*self.fs, dir, parent, offset, &mut |name, ino, _, next| {
            let m = match self.fs.getattr(ino) {
                Ok(m) => m,
                Err(e) => {
                    failed = Some(errno(&e));
                    return false;
                }
            };
            added = true;
            let g = Generation(m.generation as u64);
            let node = INodeNo(self.fuse_ino(ino));
            !reply.add(node, next, OsStr::from_bytes(name), &TTL, &self.attr(&m), g)
        });
        match (r, failed) {
            (Err(e), _) => reply.error(Errno::from_i32(e)),
            // An entry whose inode cannot be read ends this batch; alone, it is the error.
            (Ok(_), Some(e)) if !added => reply.error(e),
            _ => reply.ok(),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.fs.statfs() {
            Ok(s) => reply.statfs(
                s.blocks,
                s.blocks_free,
                s.blocks_avail,
                s.files,
                s.files_free,
                s.block_size,
                s.name_max,
                s.block_size,
            ),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.fs.get_xattr(self.ino_of(ino), name.as_bytes()) {
            Ok(v) => reply_xattr(reply, &v, size),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.fs.list_xattrs(self.ino_of(ino)) {
            Ok(names) => {
                let mut out = Vec::new();
                for n in names {
                    out.extend_from_slice(&n);
                    out.push(0);
                }
                reply_xattr(reply, &out, size)
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // Permission bits are checked by the kernel (default_permissions); only writes
        // are refused here.
        match self.fs.getattr(self.ino_of(ino)) {
            Ok(_) if mask.bits() & libc::W_OK != 0 && self.w.is_none() => {
                reply.error(Errno::from_i32(libc::EROFS))
            }
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn lseek(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let ino = self.ino_of(ino);
        let size = match self.fs.getattr(ino) {
            Ok(m) => m.size,
            Err(e) => return reply.error(errno(&e)),
        };
        if offset < 0 || offset as u64 >= size {
            return reply.error(Errno::from_i32(libc::ENXIO));
        }
        match (whence, self.fs.next_data(ino, offset as u64)) {
            (_, Err(e)) => reply.error(errno(&e)),
            (libc::SEEK_DATA, Ok(Some(r))) => reply.offset(r.start.max(offset as u64) as i64),
            (libc::SEEK_DATA, Ok(None)) => reply.error(Errno::from_i32(libc::ENXIO)),
            (libc::SEEK_HOLE, Ok(Some(r))) if r.start <= offset as u64 => {
                reply.offset(r.end.min(size) as i64)
            }
            (libc::SEEK_HOLE, Ok(_)) => reply.offset(offset),
            _ => reply.error(Errno::from_i32(libc::EINVAL)),
        }
    }
}

/// Mounts `fs` at `mountpoint` and serves requests until it is unmounted. `ready` is
/// called once the mount is in place (before serving), e.g. to let a waiting parent
/// process go.
pub fn serve(
    fs: Backend,
    mountpoint: &std::path::Path,
    opts: &Options,
    ready: impl FnOnce(),
) -> std::io::Result<()> {
    let mut config = fuser::Config::default();
    let rw = matches!(fs, Backend::ReadWrite(_));
    config.mount_options = vec![
        if rw {
            fuser::MountOption::RW
        } else {
            fuser::MountOption::RO
        },
        fuser::MountOption::FSName(opts.fsname.clone()),
        fuser::MountOption::Subtype("usfs".into()),
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::NoAtime,
    ];
    if opts.allow_other {
        config.acl = fuser::SessionACL::All;
    }
    config.n_threads = Some(opts.threads.max(1));
    config.clone_fd = opts.threads > 1;
    let session = fuser::Session::new(Server::new(fs, opts.cache), mountpoint, &config)?;
    ready();
    session.run()
}
