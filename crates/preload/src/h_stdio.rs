//! stdio: glibc's fopen does not call the interposable open, so virtual files get FILE
//! streams made with fopencookie over a virtual descriptor (fopen/fopen64/fdopen), and
//! fileno answers for them. freopen keeps the caller's FILE, so it cannot become one of
//! ours: onto a virtual path it reopens the stream on a private copy of the file (a memfd
//! filled from the image; read-only mounts make the copy exact).

use crate::state::{lock, sys_close, State, Target};
use crate::sys::{call_real, hooked, set_errno};
use libc::{c_char, c_int, c_void, size_t, ssize_t, FILE};
use std::ffi::CStr;
use std::ptr::null_mut;
use std::sync::atomic::Ordering;

/// The `off64_t` fopencookie's seek function gets.
type Off64 = i64;

/// glibc's `cookie_io_functions_t` (libio.h): read, write, seek and close callbacks.
#[repr(C)]
struct CookieIo {
    read: Option<unsafe extern "C" fn(*mut c_void, *mut c_char, size_t) -> ssize_t>,
    write: Option<unsafe extern "C" fn(*mut c_void, *const c_char, size_t) -> ssize_t>,
    seek: Option<unsafe extern "C" fn(*mut c_void, *mut Off64, c_int) -> c_int>,
    close: Option<unsafe extern "C" fn(*mut c_void) -> c_int>,
}

unsafe extern "C" fn ck_read(cookie: *mut c_void, buf: *mut c_char, n: size_t) -> ssize_t {
    let fd = cookie as usize as c_int;
    let r = hooked(-1, |st| {
        let f = st.fds.get(fd)?;
        // SAFETY: glibc hands us its buffer of n bytes.
        let b = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) };
        Some(crate::sys::ret(f.read_fd(fd, b).map(|n| n as ssize_t)))
    });
    r.unwrap_or_else(|| {
        set_errno(libc::EBADF);
        -1
    })
}

unsafe extern "C" fn ck_seek(cookie: *mut c_void, pos: *mut Off64, whence: c_int) -> c_int {
    let fd = cookie as usize as c_int;
    let r = hooked(-1, |st| {
        let f = st.fds.get(fd)?;
        // SAFETY: glibc passes a valid position pointer.
        let p = unsafe { &mut *pos };
        Some(match f.seek_fd(fd, *p, whence) {
            Ok(o) => {
                *p = o as Off64;
                0
            }
            Err(e) => {
                set_errno(e);
                -1
            }
        })
    });
    r.unwrap_or(-1)
}

unsafe extern "C" fn ck_close(cookie: *mut c_void) -> c_int {
    let fd = cookie as usize as c_int;
    hooked(-1, |st| {
        st.fds.remove(fd)?;
        Some(sys_close(fd))
    })
    .unwrap_or(0)
}

/// A read-only FILE over virtual descriptor `fd` (which it owns from now on).
pub fn cookie_file(st: &State, fd: c_int, mode: *const c_char) -> *mut FILE {
    let funcs = CookieIo {
        read: Some(ck_read),
        write: None,
        seek: Some(ck_seek),
        close: Some(ck_close),
    };
    type FopencookieFn = unsafe extern "C" fn(*mut c_void, *const c_char, CookieIo) -> *mut FILE;
    let fp =
        call_real!(fopencookie: FopencookieFn, null_mut(); fd as usize as *mut c_void, mode, funcs);
    if fp.is_null() {
        st.fds.remove(fd);
        sys_close(fd);
        return fp;
    }
    lock(&st.streams).insert(fp as usize, fd);
    st.n_streams.fetch_add(1, Ordering::Relaxed);
    fp
}

/// True when an fopen mode would write.
fn writes(mode: *const c_char) -> bool {
    if mode.is_null() {
        return false;
    }
    // SAFETY: the mode is a NUL-terminated string.
    let m = unsafe { CStr::from_ptr(mode) }.to_bytes();
    m.iter().any(|&c| matches!(c, b'w' | b'a' | b'+'))
}

type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;

fn fopen_common(path: *const c_char, mode: *const c_char) -> Option<*mut FILE> {
    hooked(null_mut(), |st| {
        match st.classify(libc::AT_FDCWD, path, true) {
            Ok(Target::Pass) => None,
            Ok(Target::HostAbs(c)) => {
                Some(call_real!(fopen64: FopenFn, null_mut(); c.as_ptr(), mode))
            }
            Ok(Target::Virt(vp)) => {
                if writes(mode) {
                    set_errno(libc::EROFS);
                    return Some(null_mut());
                }
                Some(
                    match st.open_virtual(vp, libc::O_RDONLY | libc::O_CLOEXEC) {
                        Ok(fd) => cookie_file(st, fd, mode),
                        Err(e) => {
                            set_errno(e);
                            null_mut()
                        }
                    },
                )
            }
            Err(e) => {
                set_errno(if e == libc::ENOENT && writes(mode) {
                    libc::EROFS
                } else {
                    e
                });
                Some(null_mut())
            }
        }
    })
}

macro_rules! fopen_hooks {
    ($($name:ident),*) => {$(
        /// fopen(3).
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, mode: *const c_char) -> *mut FILE {
            match fopen_common(path, mode) {
                Some(r) => r,
                None => call_real!($name: FopenFn, null_mut(); path, mode),
            }
        }
    )*};
}
fopen_hooks!(fopen, fopen64);

/// fdopen(3).
#[no_mangle]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
    let r = crate::h_io::on_vfile(fd, null_mut(), |st, _| {
        if writes(mode) {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        cookie_file(st, fd, mode)
    });
    match r {
        Some(r) => r,
        None => {
            call_real!(fdopen: unsafe extern "C" fn(c_int, *const c_char) -> *mut FILE, null_mut(); fd, mode)
        }
    }
}

type FreopenFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut FILE) -> *mut FILE;

/// freopen onto virtual path `vp`: copies the file into a memfd and reopens `fp` on it
/// through /proc/self/fd (a new open file description, offset 0).
fn freopen_virtual(
    st: &State,
    vp: usfs_vfs::VPath,
    mode: *const c_char,
    fp: *mut FILE,
) -> *mut FILE {
    if writes(mode) {
        set_errno(libc::EROFS);
        return null_mut();
    }
    let mfd = match crate::copy::to_memfd(st, vp, true) {
        Ok(m) => m,
        Err(e) => {
            set_errno(e);
            return null_mut();
        }
    };
    let path = std::ffi::CString::new(format!("/proc/self/fd/{mfd}")).expect("no NUL");
    let r = call_real!(freopen64: FreopenFn, null_mut(); path.as_ptr(), mode, fp);
    let e = crate::sys::errno();
    sys_close(mfd);
    set_errno(e);
    r
}

macro_rules! freopen_hooks {
    ($($name:ident),*) => {$(
        /// freopen(3): onto a virtual path, the stream reads a private copy of the file.
        #[no_mangle]
        pub unsafe extern "C" fn $name(path: *const c_char, mode: *const c_char, fp: *mut FILE) -> *mut FILE {
            let r = hooked(null_mut(), |st| match st.classify(libc::AT_FDCWD, path, true) {
                Ok(Target::Pass) | Ok(Target::HostAbs(_)) => None,
                Ok(Target::Virt(vp)) => Some(freopen_virtual(st, vp, mode, fp)),
                Err(e) => { set_errno(e); Some(null_mut()) }
            });
            match r {
                Some(r) => r,
                None => call_real!($name: FreopenFn, null_mut(); path, mode, fp),
            }
        }
    )*};
}
freopen_hooks!(freopen, freopen64);

fn stream_fd(fp: *mut FILE) -> Option<c_int> {
    hooked(-1, |st| {
        if st.n_streams.load(Ordering::Relaxed) == 0 {
            return None;
        }
        lock(&st.streams).get(&(fp as usize)).copied()
    })
}

macro_rules! fileno_hooks {
    ($($name:ident),*) => {$(
        /// fileno(3): our streams answer with their virtual descriptor.
        #[no_mangle]
        pub unsafe extern "C" fn $name(fp: *mut FILE) -> c_int {
            match stream_fd(fp) {
                Some(fd) => fd,
                None => call_real!($name: unsafe extern "C" fn(*mut FILE) -> c_int, -1; fp),
            }
        }
    )*};
}
fileno_hooks!(fileno, fileno_unlocked);

/// fclose(3): forgets our stream, then glibc closes it (its close function closes the
/// virtual descriptor).
#[no_mangle]
pub unsafe extern "C" fn fclose(fp: *mut FILE) -> c_int {
    let _ = hooked(0, |st| {
        if st.n_streams.load(Ordering::Relaxed) > 0
            && lock(&st.streams).remove(&(fp as usize)).is_some()
        {
            st.n_streams.fetch_sub(1, Ordering::Relaxed);
        }
        None::<c_int>
    });
    call_real!(fclose: unsafe extern "C" fn(*mut FILE) -> c_int, libc::EOF; fp)
}
