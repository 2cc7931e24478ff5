//! Attribute calls: the stat family (stat/lstat/fstat/fstatat with 64 spellings, the
//! pre-2.33 __xstat family, statx), access/faccessat, statfs/statvfs, readlink and the
//! xattr readers. Calls that would change a mount are in h_modify.

use crate::h_io::on_vfile;
use crate::state::{empty_path_target, fill_stat, fill_statx, is_empty, State, Target};
use crate::sys::{call_real, hooked, ret};
use libc::{c_char, c_int, c_uint, c_void, size_t, ssize_t};
use usfs_fs::{FileType, Metadata};
use usfs_vfs::VPath;

/// A hook on a path argument: `virt` serves paths inside a mount; everything else calls
/// `real` with the path (rewritten to an absolute one with AT_FDCWD when it was relative
/// to a virtual directory but leads out of the mount).
pub(crate) fn path_hook<R: From<i8>>(
    dirfd: c_int,
    path: *const c_char,
    follow: bool,
    real: impl Fn(*const c_char, c_int) -> R,
    virt: impl FnOnce(&'static State, VPath) -> Result<R, i32>,
) -> R {
    let r = hooked(R::from(-1), |st| match st.classify(dirfd, path, follow) {
        Ok(Target::Pass) => None,
        Ok(Target::HostAbs(c)) => Some(real(c.as_ptr(), libc::AT_FDCWD)),
        Ok(Target::Virt(vp)) => Some(ret(virt(st, vp))),
        Err(e) => Some(ret(Err(e))),
    });
    match r {
        Some(r) => r,
        None => real(path, dirfd),
    }
}

fn put<T>(dst: *mut T, v: T) -> Result<c_int, i32> {
    if dst.is_null() {
        return Err(libc::EFAULT);
    }
    // SAFETY: the caller's buffer for this struct.
    unsafe { dst.write(v) };
    Ok(0)
}

fn stat_virtual(st: &State, vp: &VPath, buf: *mut libc::stat) -> Result<c_int, i32> {
    let m = st.meta(vp)?;
    put(buf, fill_stat(&m, vp.mount))
}

type StatFn = unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int;
type FstatatFn = unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat, c_int) -> c_int;

macro_rules! stat_hooks {
    ($follow:expr; $($name:ident),*) => {$(
        /// stat(2)/lstat(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, buf: *mut libc::stat) -> c_int {
            path_hook(libc::AT_FDCWD, path, $follow,
                |p, d| if d == libc::AT_FDCWD && p != path {
                    call_real!(fstatat64: FstatatFn, -1; d, p, buf, if $follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW })
                } else {
                    call_real!($name: StatFn, -1; p, buf)
                },
                |st, vp| stat_virtual(st, &vp, buf))
        }
    )*};
}
stat_hooks!(true; stat, stat64);
stat_hooks!(false; lstat, lstat64);

fn fstat_virtual(fd: c_int, buf: *mut libc::stat) -> Option<c_int> {
    on_vfile(fd, -1, |_, f| {
        ret(f
            .node
            .attrs()
            .and_then(|m| put(buf, fill_stat(&m, f.node.mount))))
    })
}

macro_rules! fstat_hooks {
    ($($name:ident),*) => {$(
        /// fstat(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, buf: *mut libc::stat) -> c_int {
            match fstat_virtual(fd, buf) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, *mut libc::stat) -> c_int, -1; fd, buf),
            }
        }
    )*};
}
fstat_hooks!(fstat, fstat64);

fn fstatat_common(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut libc::stat,
    flags: c_int,
    real: impl Fn(c_int, *const c_char) -> c_int,
) -> c_int {
    if flags & libc::AT_EMPTY_PATH != 0 && is_empty(path) {
        if let Some(r) = fstat_virtual(dirfd, buf) {
            return r;
        }
    }
    path_hook(
        dirfd,
        empty_path_target(dirfd, path, flags),
        flags & libc::AT_SYMLINK_NOFOLLOW == 0,
        |p, d| real(d, p),
        |st, vp| stat_virtual(st, &vp, buf),
    )
}

macro_rules! fstatat_hooks {
    ($($name:ident),*) => {$(
        /// fstatat(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
            fstatat_common(dirfd, path, buf, flags, |d, p| call_real!($name: FstatatFn, -1; d, p, buf, flags))
        }
    )*};
}
fstatat_hooks!(fstatat, fstatat64);

macro_rules! xstat_hooks {
    ($follow:expr; $($name:ident),*) => {$(
        /// The pre-2.33 stat entry point (`__xstat(version, path, buf)`).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
            path_hook(libc::AT_FDCWD, path, $follow,
                |p, d| if d == libc::AT_FDCWD && p != path {
                    call_real!(fstatat64: FstatatFn, -1; d, p, buf, if $follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW })
                } else {
                    call_real!($name: unsafe extern "C" fn(c_int, *const c_char, *mut libc::stat) -> c_int, -1; ver, p, buf)
                },
                |st, vp| stat_virtual(st, &vp, buf))
        }
    )*};
}
xstat_hooks!(true; __xstat, __xstat64);
xstat_hooks!(false; __lxstat, __lxstat64);

macro_rules! fxstat_hooks {
    ($($name:ident),*) => {$(
        /// The pre-2.33 fstat entry point.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
            match fstat_virtual(fd, buf) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, c_int, *mut libc::stat) -> c_int, -1; ver, fd, buf),
            }
        }
    )*};
}
fxstat_hooks!(__fxstat, __fxstat64);

macro_rules! fxstatat_hooks {
    ($($name:ident),*) => {$(
        /// The pre-2.33 fstatat entry point.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
            fstatat_common(dirfd, path, buf, flags, |d, p| call_real!($name: unsafe extern "C" fn(c_int, c_int, *const c_char, *mut libc::stat, c_int) -> c_int, -1; ver, d, p, buf, flags))
        }
    )*};
}
fxstatat_hooks!(__fxstatat, __fxstatat64);

/// statx(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buf: *mut libc::statx,
) -> c_int {
    if flags & libc::AT_EMPTY_PATH != 0 && is_empty(path) {
        if let Some(r) = on_vfile(dirfd, -1, |_, f| {
            ret(f
                .node
                .attrs()
                .and_then(|m| put(buf, fill_statx(&m, f.node.mount))))
        }) {
            return r;
        }
    }
    path_hook(
        dirfd,
        empty_path_target(dirfd, path, flags),
        flags & libc::AT_SYMLINK_NOFOLLOW == 0,
        |p, d| call_real!(statx: unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint, *mut libc::statx) -> c_int, -1; d, p, flags, mask, buf),
        |st, vp| {
            let m = st.meta(&vp)?;
            put(buf, fill_statx(&m, vp.mount))
        },
    )
}

/// access(2) rules on a read-only mount: W_OK is EROFS; R_OK and X_OK follow the
/// permission bits for the caller (root reads anything and executes anything with an
/// execute bit, or any directory).
fn check_access(st: &State, m: &Metadata, mode: c_int) -> Result<c_int, i32> {
    if mode & libc::W_OK != 0 {
        return Err(libc::EROFS);
    }
    let root = usfs_vfs::Creds {
        uid: 0,
        groups: vec![0],
    };
    let c = st.creds.as_ref().unwrap_or(&root);
    if c.may(m, (mode & 7) as u32) {
        Ok(0)
    } else {
        Err(libc::EACCES)
    }
}

macro_rules! access_hooks {
    ($($name:ident),*) => {$(
        /// access(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, mode: c_int) -> c_int {
            path_hook(libc::AT_FDCWD, path, true,
                |p, d| if d == libc::AT_FDCWD && p != path {
                    call_real!(faccessat: unsafe extern "C" fn(c_int, *const c_char, c_int, c_int) -> c_int, -1; d, p, mode, 0)
                } else {
                    call_real!($name: unsafe extern "C" fn(*const c_char, c_int) -> c_int, -1; p, mode)
                },
                |st, vp| check_access(st, &st.meta(&vp)?, mode))
        }
    )*};
}
access_hooks!(access, euidaccess, eaccess);

/// faccessat(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn faccessat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_int,
    flags: c_int,
) -> c_int {
    path_hook(
        dirfd,
        path,
        flags & libc::AT_SYMLINK_NOFOLLOW == 0,
        |p, d| call_real!(faccessat: unsafe extern "C" fn(c_int, *const c_char, c_int, c_int) -> c_int, -1; d, p, mode, flags),
        |st, vp| check_access(st, &st.meta(&vp)?, mode),
    )
}

fn fs_stats(st: &State, mount: usize) -> Result<usfs_fs::StatFs, i32> {
    let fs = st.table.get(mount).fs().map_err(|(e, _)| e)?;
    fs.statfs().map_err(|e| e.errno())
}

fn fill_statfs(s: &usfs_fs::StatFs) -> libc::statfs {
    // SAFETY: plain old data; all-zero is valid.
    let mut b: libc::statfs = unsafe { std::mem::zeroed() };
    b.f_type = s.magic as _;
    b.f_bsize = s.block_size as _;
    b.f_frsize = s.block_size as _;
    b.f_blocks = s.blocks;
    b.f_bfree = s.blocks_free;
    b.f_bavail = s.blocks_avail;
    b.f_files = s.files;
    b.f_ffree = s.files_free;
    b.f_namelen = s.name_max as _;
    b
}

fn fill_statvfs(s: &usfs_fs::StatFs, mount: usize) -> libc::statvfs {
    // SAFETY: plain old data; all-zero is valid.
    let mut b: libc::statvfs = unsafe { std::mem::zeroed() };
    b.f_bsize = s.block_size as _;
    b.f_frsize = s.block_size as _;
    b.f_blocks = s.blocks;
    b.f_bfree = s.blocks_free;
    b.f_bavail = s.blocks_avail;
    b.f_files = s.files;
    b.f_ffree = s.files_free;
    b.f_favail = s.files_free;
    b.f_fsid = crate::state::dev_of(mount) as _;
    b.f_flag = libc::ST_RDONLY | libc::ST_NOATIME;
    b.f_namemax = s.name_max as _;
    b
}

macro_rules! statfs_hooks {
    ($ty:ty, $fill:expr; $($name:ident, $fname:ident);*) => {$(
        /// statfs/statvfs on a path.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, buf: *mut $ty) -> c_int {
            path_hook(libc::AT_FDCWD, path, true,
                |p, _| call_real!($name: unsafe extern "C" fn(*const c_char, *mut $ty) -> c_int, -1; p, buf),
                |st, vp| put(buf, $fill(&fs_stats(st, vp.mount)?, vp.mount)))
        }
        /// fstatfs/fstatvfs.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $fname(fd: c_int, buf: *mut $ty) -> c_int {
            match on_vfile(fd, -1, |st, f| ret(fs_stats(st, f.node.mount).and_then(|s| put(buf, $fill(&s, f.node.mount))))) {
                Some(r) => r,
                None => call_real!($fname: unsafe extern "C" fn(c_int, *mut $ty) -> c_int, -1; fd, buf),
            }
        }
    )*};
}
statfs_hooks!(libc::statfs, |s, _| fill_statfs(s); statfs, fstatfs; statfs64, fstatfs64);
statfs_hooks!(libc::statvfs, fill_statvfs; statvfs, fstatvfs; statvfs64, fstatvfs64);

fn readlink_virtual(
    st: &State,
    vp: &VPath,
    buf: *mut c_char,
    size: size_t,
) -> Result<ssize_t, i32> {
    let fs = st.table.get(vp.mount).fs().map_err(|(e, _)| e)?;
    if st.meta(vp)?.file_type != FileType::Symlink {
        return Err(libc::EINVAL);
    }
    let t = fs.readlink(vp.ino()).map_err(|e| e.errno())?;
    copy_link(&t, buf, size)
}

/// Copies a link's target into readlink's buffer (truncated to `size`, no NUL); a zero
/// size is EINVAL, as the kernel says.
fn copy_link(t: &[u8], buf: *mut c_char, size: size_t) -> Result<ssize_t, i32> {
    if size == 0 {
        return Err(libc::EINVAL);
    }
    let n = t.len().min(size);
    if n > 0 {
        if buf.is_null() {
            return Err(libc::EFAULT);
        }
        // SAFETY: the caller's buffer holds `size` >= n bytes.
        unsafe { std::ptr::copy_nonoverlapping(t.as_ptr(), buf.cast::<u8>(), n) };
    }
    Ok(n as ssize_t)
}

/// readlink(2) on a magic link to a virtual descriptor (/dev/fd/N, /proc/self/fd/N,
/// /proc/PID/fd/N): the host path of its file; `None` for anything else. /dev/stdin is a
/// plain symbolic link (to /proc/self/fd/0) that the host answers: `Some` of the real call.
fn readlink_fd(
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
    real: impl Fn() -> ssize_t,
) -> Option<ssize_t> {
    if path.is_null() {
        return None;
    }
    // SAFETY: a non-null path argument is NUL-terminated.
    let p = unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes();
    if p == b"/dev/stdin" {
        return Some(real());
    }
    if !p.starts_with(b"/dev/fd/") && !p.starts_with(b"/proc/") {
        return None;
    }
    hooked(-1, |st| {
        st.fd_link(p).map(|t| ret(copy_link(&t, buf, size)))
    })
}

/// readlink(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn readlink(
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
) -> ssize_t {
    let real = |p, d| call_real!(readlinkat: unsafe extern "C" fn(c_int, *const c_char, *mut c_char, size_t) -> ssize_t, -1; d, p, buf, size);
    if let Some(r) = readlink_fd(path, buf, size, || real(path, libc::AT_FDCWD)) {
        return r;
    }
    path_hook(libc::AT_FDCWD, path, false, real, |st, vp| {
        readlink_virtual(st, &vp, buf, size)
    })
}

/// The fortified readlink.
#[no_mangle]
pub(crate) unsafe extern "C" fn __readlink_chk(
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
    _buflen: size_t,
) -> ssize_t {
    // SAFETY: same contract as readlink.
    unsafe { readlink(path, buf, size) }
}

/// readlinkat(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
) -> ssize_t {
    let real = |p, d| call_real!(readlinkat: unsafe extern "C" fn(c_int, *const c_char, *mut c_char, size_t) -> ssize_t, -1; d, p, buf, size);
    if let Some(r) = readlink_fd(path, buf, size, || real(path, dirfd)) {
        return r;
    }
    path_hook(dirfd, path, false, real, |st, vp| {
        readlink_virtual(st, &vp, buf, size)
    })
}

/// Copies an xattr answer out: the size when `size` is 0, ERANGE when too small.
fn xattr_out(data: &[u8], buf: *mut c_void, size: size_t) -> Result<ssize_t, i32> {
    if size == 0 {
        return Ok(data.len() as ssize_t);
    }
    if data.len() > size {
        return Err(libc::ERANGE);
    }
    if !data.is_empty() {
        // SAFETY: the caller's buffer holds `size` >= data.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.cast::<u8>(), data.len()) };
    }
    Ok(data.len() as ssize_t)
}

fn get_xattr(
    st: &State,
    mount: usize,
    ino: u64,
    name: *const c_char,
    buf: *mut c_void,
    size: size_t,
) -> Result<ssize_t, i32> {
    if name.is_null() {
        return Err(libc::EFAULT);
    }
    let fs = st.table.get(mount).fs().map_err(|(e, _)| e)?;
    // SAFETY: the attribute name is a NUL-terminated string.
    let n = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
    let v = fs.get_xattr(ino, n).map_err(|e| e.errno())?;
    xattr_out(&v, buf, size)
}

fn list_xattr(
    st: &State,
    mount: usize,
    ino: u64,
    buf: *mut c_char,
    size: size_t,
) -> Result<ssize_t, i32> {
    let fs = st.table.get(mount).fs().map_err(|(e, _)| e)?;
    let mut out = Vec::new();
    for n in fs.list_xattrs(ino).map_err(|e| e.errno())? {
        out.extend_from_slice(&n);
        out.push(0);
    }
    xattr_out(&out, buf.cast(), size)
}

macro_rules! getxattr_hooks {
    ($($name:ident: $follow:expr),*) => {$(
        /// getxattr(2)/lgetxattr(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, name: *const c_char, buf: *mut c_void, size: size_t) -> ssize_t {
            path_hook(libc::AT_FDCWD, path, $follow,
                |p, _| call_real!($name: unsafe extern "C" fn(*const c_char, *const c_char, *mut c_void, size_t) -> ssize_t, -1; p, name, buf, size),
                |st, vp| get_xattr(st, vp.mount, vp.ino(), name, buf, size))
        }
    )*};
}
getxattr_hooks!(getxattr: true, lgetxattr: false);

macro_rules! listxattr_hooks {
    ($($name:ident: $follow:expr),*) => {$(
        /// listxattr(2)/llistxattr(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
            path_hook(libc::AT_FDCWD, path, $follow,
                |p, _| call_real!($name: unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> ssize_t, -1; p, buf, size),
                |st, vp| list_xattr(st, vp.mount, vp.ino(), buf, size))
        }
    )*};
}
listxattr_hooks!(listxattr: true, llistxattr: false);

/// The xattr calls on a descriptor need one opened for I/O: O_PATH ones are EBADF.
fn not_path_only(f: &usfs_vfs::OpenFile) -> Result<(), i32> {
    if f.flags() & libc::O_PATH != 0 {
        Err(libc::EBADF)
    } else {
        Ok(())
    }
}

/// fgetxattr(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn fgetxattr(
    fd: c_int,
    name: *const c_char,
    buf: *mut c_void,
    size: size_t,
) -> ssize_t {
    match on_vfile(fd, -1, |st, f| {
        ret(not_path_only(f).and_then(|_| get_xattr(st, f.node.mount, f.ino(), name, buf, size)))
    }) {
        Some(r) => r,
        None => {
            call_real!(fgetxattr: unsafe extern "C" fn(c_int, *const c_char, *mut c_void, size_t) -> ssize_t, -1; fd, name, buf, size)
        }
    }
}

/// flistxattr(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn flistxattr(fd: c_int, buf: *mut c_char, size: size_t) -> ssize_t {
    match on_vfile(fd, -1, |st, f| {
        ret(not_path_only(f).and_then(|_| list_xattr(st, f.node.mount, f.ino(), buf, size)))
    }) {
        Some(r) => r,
        None => {
            call_real!(flistxattr: unsafe extern "C" fn(c_int, *mut c_char, size_t) -> ssize_t, -1; fd, buf, size)
        }
    }
}
