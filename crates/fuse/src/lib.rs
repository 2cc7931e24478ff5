//! `usfs mount`: any usfs file system served through the kernel's FUSE.
//!
//! The seed's two FUSE configurations are the two [`CacheMode`]s: `Cache` lets the kernel
//! keep file data in its page cache and attributes and names for a long TTL (this server is
//! the only way to the image, so nothing goes stale); `DirectIo` opens every file with
//! FOPEN_DIRECT_IO, so each read and write is a request to this server.
//!
//! The fuser crate mounts and performs the INIT handshake ([`init`]); the requests after it
//! are ours: [`abi`] is the wire format, [`dispatch`] turns a request into one call of the
//! handlers in [`read`] and [`write`], and [`transport`] moves requests and replies, over
//! /dev/fuse or, where the kernel offers it, over io_uring with one queue per CPU (the
//! request is served on the CPU of the caller: no cross-CPU wake-up per round trip).
//!
//! Everything goes through [`usfs_fs::FileSystem`] and the vfs helpers (`read_file`,
//! `list_dir`), the same code the preload library uses.

mod abi;
mod dispatch;
mod init;
mod read;
mod transport;
mod write;

use std::sync::Arc;
use usfs_fs::{FileSystem, FileSystemWrite, FileType, Ino, Metadata};
use usfs_vfs::attrs::Caller;

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
    /// Use FUSE over io_uring when the kernel offers it (fuse's `enable_uring` module
    /// parameter); false keeps every request on /dev/fuse.
    pub uring: bool,
}

/// TTL of attributes and names, seconds: every change goes through this server, which
/// tells the kernel, so they never change under it.
const TTL: u64 = 3600;

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
    fn w(&self) -> Result<&dyn FileSystemWrite, i32> {
        self.w.as_deref().ok_or(libc::EROFS)
    }

    /// FOPEN_* flags of an opened file.
    fn open_flags(&self) -> u32 {
        match self.cache {
            CacheMode::Cache => abi::FOPEN_KEEP_CACHE,
            CacheMode::DirectIo => abi::FOPEN_DIRECT_IO,
        }
    }

    fn caller(h: &abi::InHeader) -> Caller {
        Caller {
            uid: h.uid,
            gid: h.gid,
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

    fn ino_of(&self, nodeid: u64) -> Ino {
        let root = self.fs.root();
        match nodeid {
            1 => root,
            i if i == root => 1,
            i => i,
        }
    }

    /// The attributes FUSE carries. `st_ino` is the node id, except for the root, which
    /// shows its own number (2 on ext4) in GETATTR replies as on a kernel mount.
    fn attr(&self, m: &Metadata) -> abi::Attr {
        abi::Attr {
            ino: self.fuse_ino(m.ino),
            size: m.size,
            blocks: m.blocks,
            atime: (m.atime.sec, m.atime.nsec),
            mtime: (m.mtime.sec, m.mtime.nsec),
            ctime: (m.ctime.sec, m.ctime.nsec),
            mode: mode_type(m.file_type) | (m.perm & 0o7777),
            nlink: m.nlink.min(u32::MAX as u64) as u32,
            uid: m.uid,
            gid: m.gid,
            rdev: encode_dev32(m.rdev),
            blksize: m.blksize,
        }
    }

    /// An entry reply for an inode made or found.
    fn entry(&self, m: &Metadata, out: &mut Vec<u8>) {
        abi::put_entry(
            out,
            self.fuse_ino(m.ino),
            m.generation as u64,
            TTL,
            &self.attr(m),
        );
    }
}

/// The S_IFMT bits of a file type.
fn mode_type(t: FileType) -> u32 {
    match t {
        FileType::Regular => libc::S_IFREG,
        FileType::Directory => libc::S_IFDIR,
        FileType::Symlink => libc::S_IFLNK,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Fifo => libc::S_IFIFO,
        FileType::Socket => libc::S_IFSOCK,
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

/// Mounts `fs` at `mountpoint` and serves requests until it is unmounted. `ready` is
/// called once the mount is in place (before serving), e.g. to let a waiting parent
/// process go.
pub fn serve(
    fs: Backend,
    mountpoint: &std::path::Path,
    opts: &Options,
    ready: impl FnOnce(),
) -> std::io::Result<()> {
    let rw = matches!(fs, Backend::ReadWrite(_));
    let server = Arc::new(Server::new(fs, opts.cache));
    let (session, negotiated) = init::mount(mountpoint, opts, rw)?;
    ready();
    transport::run(&session, server, opts, negotiated)
}
