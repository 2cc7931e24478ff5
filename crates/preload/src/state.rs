//! The process-wide state of the library: the mount table, the descriptor and path
//! tables, the virtual working directory, our DIR and FILE objects, and what system()
//! and popen() remember ([`shell`]).
//!
//! This is the one piece of global state in usfs, and the design needs it: an
//! LD_PRELOAD library has no other place to keep a process's descriptors. It is created
//! once (from the environment) and never replaced; everything mutable in it sits behind
//! its own lock or atomic, and fork holds those locks across the fork ([`crate::h_exec`]).

pub(crate) mod shell;

use libc::{c_char, c_int};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use usfs_fs::{FileType, Metadata};
use usfs_vfs::resolve::{resolve_as, Start};
use usfs_vfs::{FdTable, MountTable, OpenFile, PathTable, Resolved, VPath};

/// Everything the hooks share.
pub(crate) struct State {
    /// Prefix -> image.
    pub table: MountTable,
    /// Virtual descriptors.
    pub fds: FdTable,
    /// One object per open file.
    pub paths: PathTable,
    /// The working directory when it is inside a mount (the kernel's stays where it was).
    pub vcwd: RwLock<Option<VPath>>,
    /// The kernel's working directory, kept up to date by the chdir hooks.
    pub host_cwd: RwLock<Vec<u8>>,
    /// Our DIR streams (address -> descriptor).
    pub dirs: Mutex<HashMap<usize, c_int>>,
    /// How many entries `dirs` has (read without the lock on every readdir).
    pub n_dirs: AtomicUsize,
    /// Our stdio streams made with fopencookie (FILE address -> descriptor).
    pub streams: Mutex<HashMap<usize, c_int>>,
    /// How many entries `streams` has.
    pub n_streams: AtomicUsize,
    /// `USFS_MOUNTS=...` and `LD_PRELOAD=...` as this process got them, put back into the
    /// environment of programs it executes if they dropped them.
    pub env_keep: Vec<CString>,
    /// The caller's credentials for permission checks; None for root (nothing to check
    /// but execute bits, which nothing here needs).
    pub creds: Option<usfs_vfs::Creds>,
    /// Running system() calls and open popen streams (for h_shell; fork holds the popen
    /// lock).
    pub shell: shell::Shell,
    /// For descriptors 1 and 2 while they are files of a read-write mount: the original
    /// `stdout`/`stderr` and the stream of ours standing in for it (h_stdio).
    pub std_streams: Mutex<[Option<(usize, usize)>; 3]>,
    /// The process's umask as the umask hook last set it (`u32::MAX`: not known yet).
    pub umask: std::sync::atomic::AtomicU32,
    /// Shared writable mappings of files in read-write mounts (h_mmap).
    pub shared_maps: Mutex<Vec<crate::h_mmap::SharedMap>>,
}

static STATE: OnceLock<Option<State>> = OnceLock::new();

/// The state, made on first use; `None` when the process has no mounts.
pub(crate) fn state() -> Option<&'static State> {
    STATE.get_or_init(init).as_ref()
}

fn init() -> Option<State> {
    let spec = std::env::var(MountTable::ENV).ok()?;
    let owners = std::env::var(MountTable::OWNERS_ENV).unwrap_or_default();
    let table = MountTable::parse_with_owners(&spec, &owners).ok()?;
    if table.is_empty() {
        return None;
    }
    let mut env_keep = Vec::new();
    for k in [MountTable::ENV, MountTable::OWNERS_ENV, "LD_PRELOAD"] {
        if let Some(v) = std::env::var_os(k) {
            let mut s = k.as_bytes().to_vec();
            s.push(b'=');
            s.extend_from_slice(v.as_encoded_bytes());
            env_keep.extend(CString::new(s).ok());
        }
    }
    Some(State {
        table,
        fds: FdTable::default(),
        paths: PathTable::default(),
        vcwd: RwLock::new(None),
        host_cwd: RwLock::new(kernel_cwd()),
        dirs: Mutex::new(HashMap::new()),
        n_dirs: AtomicUsize::new(0),
        streams: Mutex::new(HashMap::new()),
        n_streams: AtomicUsize::new(0),
        env_keep,
        creds: creds(),
        shell: Default::default(),
        std_streams: Mutex::new([None; 3]),
        umask: std::sync::atomic::AtomicU32::new(u32::MAX),
        shared_maps: Mutex::new(Vec::new()),
    })
}

/// The effective user and groups (raw system calls), or None for root.
fn creds() -> Option<usfs_vfs::Creds> {
    // SAFETY: no arguments that can be invalid.
    let uid = unsafe { libc::syscall(libc::SYS_geteuid) } as u32;
    if uid == 0 {
        return None;
    }
    // SAFETY: as above.
    let gid = unsafe { libc::syscall(libc::SYS_getegid) } as u32;
    let mut groups = vec![0u32; 256];
    // SAFETY: getgroups writes at most groups.len() entries.
    let n = unsafe { libc::syscall(libc::SYS_getgroups, groups.len(), groups.as_mut_ptr()) };
    groups.truncate(n.max(0) as usize);
    groups.push(gid);
    Some(usfs_vfs::Creds { uid, groups })
}

/// The kernel's working directory (raw system call: no hook involved).
pub(crate) fn kernel_cwd() -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: getcwd writes at most buf.len() bytes into buf.
    let n = unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) };
    if n <= 0 {
        return b"/".to_vec();
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    buf.truncate(len);
    buf
}

/// Locks, ignoring poisoning (a panicking hook leaves the data consistent: every update is
/// a single insert or remove).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Is `path` the empty string (not null)?
pub(crate) fn is_empty(path: *const c_char) -> bool {
    // SAFETY: a non-null path argument is NUL-terminated; we read its first byte.
    !path.is_null() && unsafe { *path } == 0
}

/// The path an `*at` call with AT_EMPTY_PATH and "" names: `dirfd` itself, which for
/// AT_FDCWD is the working directory, "." (virtual or not); other descriptors keep "" (the
/// caller acts on the descriptor).
pub(crate) fn empty_path_target(dirfd: c_int, path: *const c_char, flags: c_int) -> *const c_char {
    if flags & libc::AT_EMPTY_PATH != 0 && is_empty(path) && dirfd == libc::AT_FDCWD {
        c".".as_ptr()
    } else {
        path
    }
}

/// The O_TMPFILE flag without the O_DIRECTORY bit that `libc::O_TMPFILE` includes.
pub(crate) const TMPFILE_BIT: c_int = libc::O_TMPFILE & !libc::O_DIRECTORY;

/// Where a path argument leads.
pub(crate) enum Target {
    /// Not ours: call libc with the arguments unchanged.
    Pass,
    /// A host path that must be given to libc absolute (it was relative to a virtual
    /// directory and left the mount through `..`).
    HostAbs(CString),
    /// Inside a mount.
    Virt(VPath),
}

impl State {
    /// Classifies `path` relative to `dirfd` (AT_FDCWD, a virtual directory descriptor, or
    /// a real one). Errors are errnos of paths that reached a mount.
    pub(crate) fn classify(
        &self,
        dirfd: c_int,
        path: *const c_char,
        follow: bool,
    ) -> Result<Target, i32> {
        if path.is_null() {
            return Ok(Target::Pass);
        }
        // SAFETY: a non-null path argument of a libc call is a NUL-terminated string.
        let p = unsafe { CStr::from_ptr(path) }.to_bytes();
        if p.is_empty() {
            return Ok(Target::Pass);
        }
        if p[0] == b'/' {
            if let Some(fd) = fd_alias(p) {
                // /dev/stdin, /dev/fd/N, /proc/self/fd/N of a virtual descriptor: the
                // kernel would reopen the file it names; so do we.
                if let Some(f) = self.fds.get(fd) {
                    return Ok(Target::Virt(f.vpath.clone()));
                }
            }
            if !self.table.may_touch(p) {
                return Ok(Target::Pass);
            }
            return self.finish(
                resolve_as(
                    &self.table,
                    Start::Host(b"/"),
                    p,
                    follow,
                    self.creds.as_ref(),
                ),
                false,
            );
        }
        if dirfd == libc::AT_FDCWD {
            let vcwd = self.vcwd.read().unwrap_or_else(|e| e.into_inner());
            if let Some(vp) = vcwd.as_ref() {
                return self.finish(
                    resolve_as(
                        &self.table,
                        Start::Virtual(vp),
                        p,
                        follow,
                        self.creds.as_ref(),
                    ),
                    true,
                );
            }
            drop(vcwd);
            let cwd = self
                .host_cwd
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            return self.relative_to_host(&cwd, p, follow);
        }
        if let Some(f) = self.fds.get(dirfd) {
            if f.kind != usfs_vfs::FileKind::Dir {
                return Err(libc::ENOTDIR);
            }
            return self.finish(
                resolve_as(
                    &self.table,
                    Start::Virtual(&f.vpath),
                    p,
                    follow,
                    self.creds.as_ref(),
                ),
                true,
            );
        }
        // A real directory descriptor: only its path can tell whether `p` leads into a
        // mount below it.
        match fd_path(dirfd) {
            Some(dir) => self.relative_to_host(&dir, p, follow),
            None => Ok(Target::Pass),
        }
    }

    fn relative_to_host(&self, dir: &[u8], p: &[u8], follow: bool) -> Result<Target, i32> {
        let mut full = dir.to_vec();
        full.push(b'/');
        full.extend_from_slice(p);
        if !self.table.may_touch(&full) {
            return Ok(Target::Pass);
        }
        self.finish(
            resolve_as(
                &self.table,
                Start::Host(dir),
                p,
                follow,
                self.creds.as_ref(),
            ),
            false,
        )
    }

    fn finish(&self, r: Result<Resolved, i32>, rewrite_host: bool) -> Result<Target, i32> {
        match r? {
            Resolved::Virtual(vp) => Ok(Target::Virt(vp)),
            Resolved::Host(_) if !rewrite_host => Ok(Target::Pass),
            Resolved::Host(h) | Resolved::HostViaMount(h) => {
                Ok(Target::HostAbs(CString::new(h).map_err(|_| libc::EINVAL)?))
            }
        }
    }

    /// What readlink(2) gives for `path` when it is a magic link to a virtual descriptor
    /// (/dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N): the host path of the open file, as
    /// the kernel gives the path of the file a descriptor has open.
    pub(crate) fn fd_link(&self, path: &[u8]) -> Option<Vec<u8>> {
        let f = self.fds.get(fd_link_number(path)?)?;
        Some(f.vpath.host_path(&self.table))
    }

    /// Attributes of a place in a mount.
    pub(crate) fn meta(&self, vp: &VPath) -> Result<Metadata, i32> {
        let fs = self.table.get(vp.mount).fs().map_err(|(e, _)| e)?;
        fs.getattr(vp.ino()).map_err(|e| e.errno())
    }

    /// Opens a file this process just created (no permission check: the creator may
    /// open its new file with any access, as the kernel lets it).
    pub(crate) fn open_new(&self, vp: VPath, meta: Metadata, flags: c_int) -> Result<c_int, i32> {
        let mount = self.table.get(vp.mount);
        let fs = Arc::clone(mount.fs().map_err(|(e, _)| e)?);
        let writer = mount.remote().cloned();
        let node = self
            .paths
            .get_or_insert(vp.mount, vp.ino(), &fs, meta, None, writer);
        self.install(node, vp, flags)
    }

    /// A new descriptor for an open of `node` at `vp`.
    fn install(&self, node: Arc<usfs_vfs::Node>, vp: VPath, flags: c_int) -> Result<c_int, i32> {
        // Creation flags act once: a description handed over by exec is reopened with
        // the stored flags, which must not truncate or create again.
        let once = libc::O_CLOEXEC | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC;
        let file = Arc::new(OpenFile::new(node, vp, flags & !once));
        let fd = placeholder(flags & libc::O_CLOEXEC != 0)?;
        self.fds.insert(fd, file);
        Ok(fd)
    }

    /// Opens a place in a mount as a new virtual descriptor: the open-file description,
    /// a placeholder kernel descriptor holding the number, and the table entry.
    pub(crate) fn open_virtual(&self, vp: VPath, flags: c_int) -> Result<c_int, i32> {
        let fs = Arc::clone(self.table.get(vp.mount).fs().map_err(|(e, _)| e)?);
        let meta = fs.getattr(vp.ino()).map_err(|e| e.errno())?;
        let acc = flags & libc::O_ACCMODE;
        let is_dir = meta.file_type == FileType::Directory;
        if flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0 {
            return Err(libc::EEXIST);
        }
        if flags & libc::O_DIRECTORY != 0 && !is_dir {
            return Err(libc::ENOTDIR);
        }
        let mount = self.table.get(vp.mount);
        let writable = mount.writable();
        if flags & TMPFILE_BIT != 0 {
            // An unnamed file in a directory of a read-only mount: refused once the
            // directory is found (O_TMPFILE carries O_DIRECTORY, checked above); not
            // made in read-write ones yet.
            return Err(if writable {
                libc::EOPNOTSUPP
            } else {
                libc::EROFS
            });
        }
        if flags & libc::O_CREAT != 0 && is_dir {
            return Err(libc::EISDIR);
        }
        if flags & libc::O_PATH == 0 {
            if meta.file_type == FileType::Symlink {
                return Err(libc::ELOOP);
            }
            if is_dir && (acc != libc::O_RDONLY || flags & libc::O_TRUNC != 0) {
                return Err(libc::EISDIR);
            }
            let writes = acc != libc::O_RDONLY || flags & libc::O_TRUNC != 0;
            if writes && !writable {
                return Err(libc::EROFS);
            }
            let mut want = 0;
            if acc != libc::O_WRONLY {
                want |= usfs_vfs::creds::MAY_READ;
            }
            if writes {
                want |= usfs_vfs::creds::MAY_WRITE;
            }
            if self.creds.as_ref().is_some_and(|c| !c.may(&meta, want)) {
                return Err(libc::EACCES);
            }
            if flags & libc::O_TRUNC != 0 && meta.file_type == FileType::Regular && meta.size > 0 {
                let w = mount.remote().ok_or(libc::EIO)?;
                usfs_vfs::change::truncate(&**w, vp.ino(), self.actor(), 0)?;
            }
        }
        let bulk = mount.bulk();
        let writer = mount.remote().cloned();
        let node = self
            .paths
            .get_or_insert(vp.mount, vp.ino(), &fs, meta, bulk, writer);
        self.install(node, vp, flags)
    }

    /// The program closes or replaces descriptors `first..=last`: the bulk readers of the
    /// mounts forget theirs if it is among them.
    pub(crate) fn forget_internal_fds(&self, first: u32, last: u32) {
        for i in 0..self.table.len() {
            if let Some(b) = self.table.get(i).bulk() {
                b.forget_in(first, last);
            }
            if let Some(r) = self.table.get(i).remote() {
                r.forget_in(first, last);
            }
        }
    }

    /// The caller of a change: effective IDs now (raw system calls) and the credentials
    /// permission checks use.
    pub(crate) fn actor(&self) -> usfs_vfs::change::Actor<'_> {
        // SAFETY: no arguments that can be invalid.
        let (uid, gid) = unsafe {
            (
                libc::syscall(libc::SYS_geteuid) as u32,
                libc::syscall(libc::SYS_getegid) as u32,
            )
        };
        usfs_vfs::change::Actor {
            caller: usfs_vfs::attrs::Caller { uid, gid },
            creds: self.creds.as_ref(),
        }
    }

    /// The owner of mount `i` when it is read-write (opening it on first use).
    pub(crate) fn writer(&self, i: usize) -> Option<&Arc<usfs_vfs::channel::Remote>> {
        let m = self.table.get(i);
        if !m.writable() {
            return None;
        }
        m.fs().ok()?;
        m.remote()
    }

    /// The descriptor number of one of our stdio streams (fopencookie FILEs), looked up
    /// only when there are any.
    pub(crate) fn stream_fd(&self, fp: usize) -> Option<c_int> {
        if self.n_streams.load(Ordering::Relaxed) == 0 {
            return None;
        }
        lock(&self.streams).get(&fp).copied()
    }

    /// Registers a DIR stream of ours.
    pub(crate) fn add_dir(&self, dir: usize, fd: c_int) {
        lock(&self.dirs).insert(dir, fd);
        self.n_dirs.fetch_add(1, Ordering::Relaxed);
    }

    /// The descriptor of one of our DIR streams.
    pub(crate) fn dir_fd(&self, dir: usize) -> Option<c_int> {
        if self.n_dirs.load(Ordering::Relaxed) == 0 {
            return None;
        }
        lock(&self.dirs).get(&dir).copied()
    }

    /// Forgets one of our DIR streams.
    pub(crate) fn remove_dir(&self, dir: usize) -> Option<c_int> {
        let r = lock(&self.dirs).remove(&dir);
        if r.is_some() {
            self.n_dirs.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }
}

/// A kernel descriptor that holds a virtual descriptor's number: an O_PATH descriptor of
/// /dev/null, so any call that somehow reaches the kernel with it fails (EBADF) instead of
/// reading something else. Raw system call: no hook involved.
pub(crate) fn placeholder(cloexec: bool) -> Result<c_int, i32> {
    let flags = libc::O_PATH | if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: openat with a static NUL-terminated path.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/dev/null".as_ptr(),
            flags,
        )
    };
    if fd < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EMFILE))
    } else {
        Ok(fd as c_int)
    }
}

/// Closes a kernel descriptor (raw system call).
pub(crate) fn sys_close(fd: c_int) -> c_int {
    // SAFETY: closing a descriptor number has no memory-safety preconditions.
    unsafe { libc::syscall(libc::SYS_close, fd) as c_int }
}

/// The descriptor a path like /dev/stdin, /dev/fd/N or /proc/self/fd/N names.
fn fd_alias(p: &[u8]) -> Option<c_int> {
    match p {
        b"/dev/stdin" => Some(0),
        _ => fd_link_number(p),
    }
}

/// The descriptor number of a magic link to a descriptor of this process: /dev/fd/N,
/// /proc/self/fd/N, /proc/thread-self/fd/N or /proc/PID/fd/N with our own PID.
fn fd_link_number(p: &[u8]) -> Option<c_int> {
    let num = p
        .strip_prefix(b"/dev/fd/")
        .or_else(|| p.strip_prefix(b"/proc/self/fd/"))
        .or_else(|| p.strip_prefix(b"/proc/thread-self/fd/"))
        .or_else(|| {
            let rest = p.strip_prefix(b"/proc/")?;
            let slash = rest.iter().position(|&c| c == b'/')?;
            let pid: u32 = std::str::from_utf8(&rest[..slash]).ok()?.parse().ok()?;
            (pid == std::process::id()).then_some(())?;
            rest[slash..].strip_prefix(b"/fd/")
        })?;
    if num.is_empty() || !num.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(num).ok()?.parse().ok()
}

/// The path a real descriptor names (/proc/self/fd), if it has one.
fn fd_path(fd: c_int) -> Option<Vec<u8>> {
    let link = CString::new(format!("/proc/self/fd/{fd}")).ok()?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: readlinkat writes at most buf.len() bytes into buf.
    let n = unsafe {
        libc::syscall(
            libc::SYS_readlinkat,
            libc::AT_FDCWD,
            link.as_ptr(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n <= 0 || buf[0] != b'/' {
        return None;
    }
    buf.truncate(n as usize);
    Some(buf)
}

/// The st_dev of a mount: a device number no kernel file system uses (major 0x75, 'u').
pub(crate) fn dev_of(mount: usize) -> u64 {
    libc::makedev(0x75, mount as u32)
}

/// stat(2) attributes of a virtual inode.
pub(crate) fn fill_stat(m: &Metadata, mount: usize) -> libc::stat {
    // SAFETY: struct stat is plain old data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    st.st_dev = dev_of(mount);
    st.st_ino = m.ino;
    st.st_nlink = m.nlink;
    st.st_mode = m.mode();
    st.st_uid = m.uid;
    st.st_gid = m.gid;
    st.st_rdev = m.rdev;
    st.st_size = m.size as i64;
    st.st_blksize = m.blksize as i64;
    st.st_blocks = m.blocks as i64;
    st.st_atime = m.atime.sec;
    st.st_atime_nsec = m.atime.nsec as i64;
    st.st_mtime = m.mtime.sec;
    st.st_mtime_nsec = m.mtime.nsec as i64;
    st.st_ctime = m.ctime.sec;
    st.st_ctime_nsec = m.ctime.nsec as i64;
    st
}

/// statx(2) attributes of a virtual inode.
pub(crate) fn fill_statx(m: &Metadata, mount: usize) -> libc::statx {
    // SAFETY: struct statx is plain old data; all-zero is a valid value.
    let mut sx: libc::statx = unsafe { std::mem::zeroed() };
    let ts = |t: usfs_fs::Timestamp| {
        // SAFETY: plain old data; all-zero is valid.
        let mut x: libc::statx_timestamp = unsafe { std::mem::zeroed() };
        x.tv_sec = t.sec;
        x.tv_nsec = t.nsec;
        x
    };
    sx.stx_mask = libc::STATX_BASIC_STATS
        | if m.crtime.is_some() {
            libc::STATX_BTIME
        } else {
            0
        };
    sx.stx_blksize = m.blksize;
    sx.stx_nlink = m.nlink.min(u32::MAX as u64) as u32;
    sx.stx_uid = m.uid;
    sx.stx_gid = m.gid;
    sx.stx_mode = m.mode() as u16;
    sx.stx_ino = m.ino;
    sx.stx_size = m.size;
    sx.stx_blocks = m.blocks;
    sx.stx_atime = ts(m.atime);
    sx.stx_mtime = ts(m.mtime);
    sx.stx_ctime = ts(m.ctime);
    if let Some(b) = m.crtime {
        sx.stx_btime = ts(b);
    }
    sx.stx_rdev_major = libc::major(m.rdev);
    sx.stx_rdev_minor = libc::minor(m.rdev);
    let dev = dev_of(mount);
    sx.stx_dev_major = libc::major(dev);
    sx.stx_dev_minor = libc::minor(dev);
    sx
}
