//! Calls that change a file through a descriptor: the write family, fallocate and
//! posix_fallocate, ftruncate, fchmod, fchown, futimens, fsetxattr and fremovexattr, and
//! the sync calls (sync(2) commits every read-write mount too).
//!
//! A virtual descriptor of a read-write mount (`usfs run --rw`) sends them to the image's
//! owner (usfs_vfs::OpenFile's write methods, usfs_vfs::change's rules). On a read-only
//! mount every virtual descriptor is open for reading only, and the answers are the
//! kernel's for that: EBADF for writes and fallocate, EINVAL for ftruncate, EROFS for
//! attribute changes, and 0 for the sync calls (nothing to sync).

use crate::h_io::on_vfile;
use crate::h_modify::timespec_times;
use crate::state::State;
use crate::sys::{call_real, ret};
use libc::{c_char, c_int, c_void, iovec, off_t, size_t, ssize_t};
use std::sync::Arc;
use usfs_fs::{Fallocate, FileSystemWrite};
use usfs_vfs::change;
use usfs_vfs::channel::Remote;
use usfs_vfs::OpenFile;

fn bytes<'a>(buf: *const c_void, n: size_t) -> &'a [u8] {
    if n == 0 || buf.is_null() {
        return &[];
    }
    // SAFETY: the caller of write/pwrite hands us `n` readable bytes at `buf`.
    unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) }
}

/// The caller's (uid, gid), which a write passes on (a write by anyone but root clears
/// setuid and setgid).
fn by(st: &State) -> (u32, u32) {
    let c = st.actor().caller;
    (c.uid, c.gid)
}

/// The gathered bytes of `cnt` iovecs (EINVAL for a bad count).
fn gather(iov: *const iovec, cnt: c_int) -> Result<Vec<u8>, i32> {
    if !(0..=libc::UIO_MAXIOV).contains(&cnt) || (cnt > 0 && iov.is_null()) {
        return Err(libc::EINVAL);
    }
    if cnt == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the caller passes `cnt` iovecs at `iov`.
    let iovs = unsafe { std::slice::from_raw_parts(iov, cnt as usize) };
    let mut out = Vec::with_capacity(iovs.iter().map(|v| v.iov_len).sum());
    for v in iovs {
        out.extend_from_slice(bytes(v.iov_base, v.iov_len));
    }
    Ok(out)
}

/// write(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    match on_vfile(fd, -1, |st, f| {
        ret(f.write_fd(fd, bytes(buf, n), by(st)).map(|n| n as ssize_t))
    }) {
        Some(r) => r,
        None => {
            call_real!(write: unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t, -1; fd, buf, n)
        }
    }
}

/// A positional write of `data` at `off` (EINVAL when negative).
fn pwrite_virtual(st: &State, f: &OpenFile, data: &[u8], off: off_t) -> ssize_t {
    if off < 0 {
        return ret(Err(libc::EINVAL));
    }
    ret(f.pwrite(data, off as u64, by(st)).map(|n| n as ssize_t))
}

macro_rules! pwrite_hooks {
    ($($name:ident),*) => {$(
        /// pwrite(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t {
            match on_vfile(fd, -1, |st, f| pwrite_virtual(st, f, bytes(buf, n), off)) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t, -1; fd, buf, n, off),
            }
        }
    )*};
}
pwrite_hooks!(pwrite, pwrite64);

/// writev(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    match on_vfile(fd, -1, |st, f| {
        ret(gather(iov, cnt).and_then(|d| f.write_fd(fd, &d, by(st)).map(|n| n as ssize_t)))
    }) {
        Some(r) => r,
        None => {
            call_real!(writev: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t, -1; fd, iov, cnt)
        }
    }
}

macro_rules! pwritev_hooks {
    ($($name:ident),*) => {$(
        /// pwritev(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
            match on_vfile(fd, -1, |st, f| match gather(iov, cnt) {
                Ok(d) => pwrite_virtual(st, f, &d, off),
                Err(e) => ret(Err(e)),
            }) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t, -1; fd, iov, cnt, off),
            }
        }
    )*};
}
pwritev_hooks!(pwritev, pwritev64);

/// The owner behind a virtual descriptor open for writing, or `bad` (the errno the kernel
/// gives for a descriptor not open for writing).
fn writable(f: &OpenFile, bad: i32) -> Result<&Arc<Remote>, i32> {
    let fl = f.flags();
    match &f.node.writer {
        Some(w) if fl & libc::O_PATH == 0 && fl & libc::O_ACCMODE != libc::O_RDONLY => Ok(w),
        _ => Err(bad),
    }
}

/// fallocate(2)'s mode bits.
fn fallocate_mode(mode: c_int) -> Result<Fallocate, i32> {
    let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
    match mode & !libc::FALLOC_FL_KEEP_SIZE {
        0 => Ok(Fallocate::Allocate { keep_size: keep }),
        libc::FALLOC_FL_PUNCH_HOLE if keep => Ok(Fallocate::PunchHole),
        libc::FALLOC_FL_ZERO_RANGE => Ok(Fallocate::ZeroRange { keep_size: keep }),
        _ => Err(libc::EOPNOTSUPP),
    }
}

/// fallocate on a virtual descriptor.
fn fallocate_virtual(f: &OpenFile, mode: c_int, off: off_t, len: off_t) -> Result<(), i32> {
    if off < 0 || len <= 0 {
        return Err(libc::EINVAL);
    }
    let w = writable(f, libc::EBADF)?;
    let m = fallocate_mode(mode)?;
    if f.kind != usfs_vfs::FileKind::File {
        return Err(libc::ENODEV);
    }
    w.fallocate(f.ino(), m, off as u64, len as u64)
        .map_err(|e| e.errno())
}

macro_rules! fallocate_hooks {
    ($($name:ident),*) => {$(
        /// fallocate(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int {
            match on_vfile(fd, -1, |_, f| ret(fallocate_virtual(f, mode, off, len).map(|()| 0))) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, c_int, off_t, off_t) -> c_int, -1; fd, mode, off, len),
            }
        }
    )*};
}
fallocate_hooks!(fallocate, fallocate64);

macro_rules! posix_fallocate_hooks {
    ($($name:ident),*) => {$(
        /// posix_fallocate(3): returns the errno (glibc calls fallocate internally).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, off: off_t, len: off_t) -> c_int {
            match on_vfile(fd, libc::EIO, |_, f| match fallocate_virtual(f, 0, off, len) {
                Ok(()) => 0,
                Err(e) => e,
            }) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, off_t, off_t) -> c_int, libc::ENOSYS; fd, off, len),
            }
        }
    )*};
}
posix_fallocate_hooks!(posix_fallocate, posix_fallocate64);

macro_rules! ftruncate_hooks {
    ($($name:ident),*) => {$(
        /// ftruncate(2): EINVAL unless open for writing.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, len: off_t) -> c_int {
            match on_vfile(fd, -1, |st, f| {
                ret(writable(f, libc::EINVAL)
                    .and_then(|w| {
                        if f.kind != usfs_vfs::FileKind::File {
                            return Err(libc::EINVAL);
                        }
                        change::truncate(&**w, f.ino(), st.actor(), len)
                    })
                    .map(|()| 0))
            }) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, off_t) -> c_int, -1; fd, len),
            }
        }
    )*};
}
ftruncate_hooks!(ftruncate, ftruncate64);

/// An attribute change through a virtual descriptor: EROFS on a read-only mount.
fn attr_change(
    f: &OpenFile,
    act: impl FnOnce(&dyn FileSystemWrite, usfs_fs::Ino) -> Result<(), i32>,
) -> c_int {
    if f.flags() & libc::O_PATH != 0 {
        return ret(Err(libc::EBADF));
    }
    match &f.node.writer {
        Some(w) => ret(act(&**w, f.ino()).map(|()| 0)),
        None => ret(Err(libc::EROFS)),
    }
}

/// fchmod(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn fchmod(fd: c_int, mode: libc::mode_t) -> c_int {
    match on_vfile(fd, -1, |st, f| {
        attr_change(f, |w, ino| change::chmod(w, ino, st.actor(), mode))
    }) {
        Some(r) => r,
        None => {
            call_real!(fchmod: unsafe extern "C" fn(c_int, libc::mode_t) -> c_int, -1; fd, mode)
        }
    }
}

/// fchown(2) (-1: unchanged).
#[no_mangle]
pub(crate) unsafe extern "C" fn fchown(fd: c_int, uid: libc::uid_t, gid: libc::gid_t) -> c_int {
    let id = |v: u32| (v != u32::MAX).then_some(v);
    match on_vfile(fd, -1, |st, f| {
        attr_change(f, |w, ino| {
            change::chown(w, ino, st.actor(), id(uid), id(gid))
        })
    }) {
        Some(r) => r,
        None => {
            call_real!(fchown: unsafe extern "C" fn(c_int, libc::uid_t, libc::gid_t) -> c_int, -1; fd, uid, gid)
        }
    }
}

/// futimens(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn futimens(fd: c_int, times: *const libc::timespec) -> c_int {
    match on_vfile(fd, -1, |st, f| match timespec_times(times) {
        Ok((at, mt)) => attr_change(f, |w, ino| change::utimens(w, ino, st.actor(), at, mt)),
        Err(e) => ret(Err(e)),
    }) {
        Some(r) => r,
        None => {
            call_real!(futimens: unsafe extern "C" fn(c_int, *const libc::timespec) -> c_int, -1; fd, times)
        }
    }
}

fn cbytes<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        return &[];
    }
    // SAFETY: a non-null string argument is NUL-terminated.
    unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes()
}

/// fsetxattr(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn fsetxattr(
    fd: c_int,
    name: *const c_char,
    value: *const c_void,
    size: size_t,
    flags: c_int,
) -> c_int {
    match on_vfile(fd, -1, |st, f| {
        attr_change(f, |w, ino| {
            change::set_xattr(w, ino, st.actor(), cbytes(name), bytes(value, size), flags)
        })
    }) {
        Some(r) => r,
        None => {
            call_real!(fsetxattr: unsafe extern "C" fn(c_int, *const c_char, *const c_void, size_t, c_int) -> c_int, -1; fd, name, value, size, flags)
        }
    }
}

/// fremovexattr(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn fremovexattr(fd: c_int, name: *const c_char) -> c_int {
    match on_vfile(fd, -1, |st, f| {
        attr_change(f, |w, ino| {
            change::remove_xattr(w, ino, st.actor(), cbytes(name))
        })
    }) {
        Some(r) => r,
        None => {
            call_real!(fremovexattr: unsafe extern "C" fn(c_int, *const c_char) -> c_int, -1; fd, name)
        }
    }
}

/// fsync and fdatasync on a virtual descriptor: the owner makes the file durable; on a
/// read-only mount there is nothing to do.
fn sync_virtual(f: &OpenFile, datasync: bool) -> c_int {
    match &f.node.writer {
        Some(w) => ret(w
            .fsync(f.ino(), datasync)
            .map_err(|e| e.errno())
            .map(|()| 0)),
        None => 0,
    }
}

/// fsync(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    match on_vfile(fd, -1, |_, f| sync_virtual(f, false)) {
        Some(r) => r,
        None => call_real!(fsync: unsafe extern "C" fn(c_int) -> c_int, -1; fd),
    }
}

/// fdatasync(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    match on_vfile(fd, -1, |_, f| sync_virtual(f, true)) {
        Some(r) => r,
        None => call_real!(fdatasync: unsafe extern "C" fn(c_int) -> c_int, -1; fd),
    }
}

/// syncfs(2): the whole image.
#[no_mangle]
pub(crate) unsafe extern "C" fn syncfs(fd: c_int) -> c_int {
    match on_vfile(fd, -1, |_, f| match &f.node.writer {
        Some(w) => ret(w.sync().map_err(|e| e.errno()).map(|()| 0)),
        None => 0,
    }) {
        Some(r) => r,
        None => call_real!(syncfs: unsafe extern "C" fn(c_int) -> c_int, -1; fd),
    }
}

/// sync(2): every read-write mount's image is committed too.
#[no_mangle]
pub(crate) unsafe extern "C" fn sync() {
    let _ = crate::sys::hooked((), |st| {
        for i in 0..st.table.len() {
            if let Some(w) = st.writer(i) {
                let _ = w.sync();
            }
        }
        None::<()>
    });
    call_real!(sync: unsafe extern "C" fn(), (););
}
