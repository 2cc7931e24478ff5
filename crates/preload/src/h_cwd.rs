//! The working directory and canonical paths: chdir/fchdir (a directory inside a mount
//! becomes the virtual cwd; the kernel's stays where it was), getcwd,
//! get_current_dir_name, realpath/__realpath_chk/canonicalize_file_name.

use crate::h_io::on_vfile;
use crate::state::{kernel_cwd, State, Target};
use crate::sys::{call_real, hooked, ret, set_errno};
use libc::{c_char, c_int, size_t};
use std::ptr::null_mut;
use usfs_fs::FileType;
use usfs_vfs::VPath;

fn set_vcwd(st: &State, vp: VPath) -> Result<c_int, i32> {
    if st.meta(&vp)?.file_type != FileType::Directory {
        return Err(libc::ENOTDIR);
    }
    *st.vcwd.write().unwrap_or_else(|e| e.into_inner()) = Some(vp);
    Ok(0)
}

fn host_moved(st: &State, r: c_int) -> c_int {
    if r == 0 {
        *st.vcwd.write().unwrap_or_else(|e| e.into_inner()) = None;
        *st.host_cwd.write().unwrap_or_else(|e| e.into_inner()) = kernel_cwd();
    }
    r
}

type ChdirFn = unsafe extern "C" fn(*const c_char) -> c_int;

/// chdir(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    let r = hooked(-1, |st| {
        Some(match st.classify(libc::AT_FDCWD, path, true) {
            Ok(Target::Pass) => host_moved(st, call_real!(chdir: ChdirFn, -1; path)),
            Ok(Target::HostAbs(c)) => host_moved(st, call_real!(chdir: ChdirFn, -1; c.as_ptr())),
            Ok(Target::Virt(vp)) => ret(set_vcwd(st, vp)),
            Err(e) => ret(Err(e)),
        })
    });
    match r {
        Some(r) => r,
        None => call_real!(chdir: ChdirFn, -1; path),
    }
}

/// fchdir(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    if let Some(r) = on_vfile(fd, -1, |st, f| ret(set_vcwd(st, f.vpath.clone()))) {
        return r;
    }
    let r = hooked(-1, |st| {
        Some(host_moved(
            st,
            call_real!(fchdir: unsafe extern "C" fn(c_int) -> c_int, -1; fd),
        ))
    });
    match r {
        Some(r) => r,
        None => call_real!(fchdir: unsafe extern "C" fn(c_int) -> c_int, -1; fd),
    }
}

/// The virtual cwd as a host path, if there is one.
fn vcwd_path(st: &State) -> Option<Vec<u8>> {
    let v = st.vcwd.read().unwrap_or_else(|e| e.into_inner());
    v.as_ref().map(|vp| vp.host_path(&st.table))
}

/// Copies `s` into `buf` of `size` bytes with a NUL, or into a malloc'd buffer when
/// `buf` is null (glibc's extension: `size` 0 = as large as needed).
fn out_string(s: &[u8], buf: *mut c_char, size: size_t) -> *mut c_char {
    let need = s.len() + 1;
    let dst = if buf.is_null() {
        let n = if size == 0 { need } else { size };
        if n < need {
            set_errno(libc::ERANGE);
            return null_mut();
        }
        // SAFETY: malloc; checked for null.
        let p = unsafe { libc::malloc(n) }.cast::<c_char>();
        if p.is_null() {
            set_errno(libc::ENOMEM);
            return null_mut();
        }
        p
    } else {
        if size < need {
            set_errno(libc::ERANGE);
            return null_mut();
        }
        buf
    };
    // SAFETY: dst holds at least `need` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), dst.cast::<u8>(), s.len());
        *dst.add(s.len()) = 0;
    }
    dst
}

/// getcwd(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn getcwd(buf: *mut c_char, size: size_t) -> *mut c_char {
    let r = hooked(null_mut(), |st| {
        vcwd_path(st).map(|p| {
            if !buf.is_null() && size == 0 {
                // glibc's answer for a buffer of no size.
                set_errno(libc::EINVAL);
                return null_mut();
            }
            out_string(&p, buf, size)
        })
    });
    match r {
        Some(r) => r,
        None => {
            call_real!(getcwd: unsafe extern "C" fn(*mut c_char, size_t) -> *mut c_char, null_mut(); buf, size)
        }
    }
}

/// The fortified getcwd.
#[no_mangle]
pub(crate) unsafe extern "C" fn __getcwd_chk(
    buf: *mut c_char,
    size: size_t,
    _buflen: size_t,
) -> *mut c_char {
    // SAFETY: same contract as getcwd.
    unsafe { getcwd(buf, size) }
}

/// get_current_dir_name(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn get_current_dir_name() -> *mut c_char {
    let r = hooked(null_mut(), |st| {
        vcwd_path(st).map(|p| out_string(&p, null_mut(), 0))
    });
    match r {
        Some(r) => r,
        None => {
            call_real!(get_current_dir_name: unsafe extern "C" fn() -> *mut c_char, null_mut();)
        }
    }
}

type RealpathFn = unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut c_char;

/// realpath(3): inside a mount, the path with every link resolved (in the image).
#[no_mangle]
pub(crate) unsafe extern "C" fn realpath(
    path: *const c_char,
    resolved: *mut c_char,
) -> *mut c_char {
    let r = hooked(null_mut(), |st| {
        match st.classify(libc::AT_FDCWD, path, true) {
            Ok(Target::Pass) => None,
            Ok(Target::HostAbs(c)) => {
                Some(call_real!(realpath: RealpathFn, null_mut(); c.as_ptr(), resolved))
            }
            Ok(Target::Virt(vp)) => Some(out_string(
                &vp.host_path(&st.table),
                resolved,
                if resolved.is_null() {
                    0
                } else {
                    libc::PATH_MAX as size_t
                },
            )),
            Err(e) => {
                set_errno(e);
                Some(null_mut())
            }
        }
    });
    match r {
        Some(r) => r,
        None => call_real!(realpath: RealpathFn, null_mut(); path, resolved),
    }
}

/// The fortified realpath.
#[no_mangle]
pub(crate) unsafe extern "C" fn __realpath_chk(
    path: *const c_char,
    resolved: *mut c_char,
    _len: size_t,
) -> *mut c_char {
    // SAFETY: same contract as realpath.
    unsafe { realpath(path, resolved) }
}

/// canonicalize_file_name(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn canonicalize_file_name(path: *const c_char) -> *mut c_char {
    // SAFETY: realpath with a null buffer allocates.
    unsafe { realpath(path, null_mut()) }
}
