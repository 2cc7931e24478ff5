//! Tree walks glibc does with its internal calls (which never reach our hooks): glob is
//! pointed at our directory and stat functions (GLOB_ALTDIRFUNC); nftw/ftw on a path
//! inside a mount are walked here, through our own hooks. The walks run outside the
//! reentrancy guard, so the caller's callbacks see the mounts too.

use crate::h_dir::{closedir, opendir, readdir};
use crate::h_stat::{lstat, stat};
use crate::state::{state, Target};
use crate::sys::{call_real, hooked};
use libc::{c_char, c_int, c_void, dirent64, size_t};
use std::ffi::{CStr, CString};

/// glibc's glob_t (glob.h), with the GLOB_ALTDIRFUNC callbacks the libc crate hides.
#[repr(C)]
pub(crate) struct GlobT {
    gl_pathc: size_t,
    gl_pathv: *mut *mut c_char,
    gl_offs: size_t,
    gl_flags: c_int,
    gl_closedir: Option<unsafe extern "C" fn(*mut c_void)>,
    gl_readdir: Option<unsafe extern "C" fn(*mut c_void) -> *mut dirent64>,
    gl_opendir: Option<unsafe extern "C" fn(*const c_char) -> *mut c_void>,
    gl_lstat: Option<unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int>,
    gl_stat: Option<unsafe extern "C" fn(*const c_char, *mut libc::stat) -> c_int>,
}

const GLOB_ALTDIRFUNC: c_int = 1 << 9;

unsafe extern "C" fn g_closedir(d: *mut c_void) {
    // SAFETY: `d` came from g_opendir.
    unsafe { closedir(d.cast()) };
}

unsafe extern "C" fn g_readdir(d: *mut c_void) -> *mut dirent64 {
    // SAFETY: `d` came from g_opendir.
    unsafe { readdir(d.cast()) }
}

unsafe extern "C" fn g_opendir(p: *const c_char) -> *mut c_void {
    // SAFETY: glob passes a NUL-terminated path.
    unsafe { opendir(p) }.cast()
}

type GlobFn = unsafe extern "C" fn(
    *const c_char,
    c_int,
    Option<unsafe extern "C" fn(*const c_char, c_int) -> c_int>,
    *mut GlobT,
) -> c_int;

macro_rules! glob_hooks {
    ($($name:ident),*) => {$(
        /// glob(3): with mounts, glibc's glob reads directories through our opendir,
        /// readdir, closedir, lstat and stat (which pass host paths on to libc).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(pat: *const c_char, flags: c_int, errf: Option<unsafe extern "C" fn(*const c_char, c_int) -> c_int>, g: *mut GlobT) -> c_int {
            if state().is_some() && flags & GLOB_ALTDIRFUNC == 0 && !g.is_null() {
                // SAFETY: the caller's glob_t.
                let gt = unsafe { &mut *g };
                gt.gl_closedir = Some(g_closedir);
                gt.gl_readdir = Some(g_readdir);
                gt.gl_opendir = Some(g_opendir);
                gt.gl_lstat = Some(lstat);
                gt.gl_stat = Some(stat);
                return call_real!($name: GlobFn, libc::GLOB_ABORTED; pat, flags | GLOB_ALTDIRFUNC, errf, g);
            }
            call_real!($name: GlobFn, libc::GLOB_ABORTED; pat, flags, errf, g)
        }
    )*};
}
glob_hooks!(glob, glob64);

/// glibc's struct FTW.
#[repr(C)]
pub(crate) struct Ftw {
    base: c_int,
    level: c_int,
}

type NftwCb = unsafe extern "C" fn(*const c_char, *const libc::stat, c_int, *mut Ftw) -> c_int;
type FtwCb = unsafe extern "C" fn(*const c_char, *const libc::stat, c_int) -> c_int;

const FTW_F: c_int = 0;
const FTW_D: c_int = 1;
const FTW_DNR: c_int = 2;
const FTW_NS: c_int = 3;
const FTW_SL: c_int = 4;
const FTW_DP: c_int = 5;
const FTW_SLN: c_int = 6;
const FTW_PHYS: c_int = 1;
const FTW_DEPTH: c_int = 8;
const FTW_ACTIONRETVAL: c_int = 16;
const FTW_SKIP_SUBTREE: c_int = 2;
const FTW_SKIP_SIBLINGS: c_int = 3;

/// The callback as the walk calls it.
enum Cb {
    Nftw(NftwCb),
    Ftw(FtwCb),
}

struct Walk {
    cb: Cb,
    flags: c_int,
}

/// What a callback's answer means for the walk.
enum Next {
    Go,
    SkipSubtree,
    SkipSiblings,
    Stop(c_int),
}

impl Walk {
    fn call(&self, path: &CStr, sb: &libc::stat, kind: c_int, base: usize, level: usize) -> Next {
        let mut f = Ftw {
            base: base as c_int,
            level: level as c_int,
        };
        // SAFETY: calling the caller's callback with a valid path, stat and FTW.
        let r = unsafe {
            match self.cb {
                Cb::Nftw(cb) => cb(path.as_ptr(), sb, kind, &mut f),
                Cb::Ftw(cb) => cb(path.as_ptr(), sb, kind),
            }
        };
        if self.flags & FTW_ACTIONRETVAL != 0 {
            match r {
                0 => Next::Go,
                FTW_SKIP_SUBTREE => Next::SkipSubtree,
                FTW_SKIP_SIBLINGS => Next::SkipSiblings,
                r => Next::Stop(r),
            }
        } else if r != 0 {
            Next::Stop(r)
        } else {
            Next::Go
        }
    }

    /// Walks `path` (at depth `level`); names come from our readdir, attributes from our
    /// stat/lstat, so paths inside mounts and on the host both work.
    fn walk(&self, path: &[u8], level: usize) -> Next {
        let Ok(c) = CString::new(path) else {
            return Next::Stop(-1);
        };
        let base = path.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        // SAFETY: plain old data.
        let mut sb: libc::stat = unsafe { std::mem::zeroed() };
        let phys = self.flags & FTW_PHYS != 0;
        // SAFETY: our own stat hooks with a valid path and buffer.
        let ok = unsafe {
            if phys {
                lstat(c.as_ptr(), &mut sb)
            } else {
                stat(c.as_ptr(), &mut sb)
            }
        } == 0;
        let fmt = sb.st_mode & libc::S_IFMT;
        if !ok {
            // As glibc: a failure other than EACCES/ENOENT ends the walk with -1.
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if e != libc::EACCES && e != libc::ENOENT {
                return Next::Stop(-1);
            }
            // SAFETY: as above.
            let dangling = !phys
                && unsafe { lstat(c.as_ptr(), &mut sb) } == 0
                && sb.st_mode & libc::S_IFMT == libc::S_IFLNK;
            return self.call(
                &c,
                &sb,
                if dangling { FTW_SLN } else { FTW_NS },
                base,
                level,
            );
        }
        if fmt != libc::S_IFDIR {
            let kind = if fmt == libc::S_IFLNK { FTW_SL } else { FTW_F };
            return self.call(&c, &sb, kind, base, level);
        }
        let depth = self.flags & FTW_DEPTH != 0;
        if !depth {
            match self.call(&c, &sb, FTW_D, base, level) {
                Next::Go => {}
                Next::SkipSubtree => return Next::Go,
                other => return other,
            }
        }
        // SAFETY: our opendir hook with a valid path.
        let d = unsafe { opendir(c.as_ptr()) };
        if d.is_null() {
            return self.call(&c, &sb, FTW_DNR, base, level);
        }
        let mut names = Vec::new();
        loop {
            // SAFETY: `d` is open.
            let e = unsafe { readdir(d) };
            if e.is_null() {
                break;
            }
            // SAFETY: readdir returns a valid entry with a NUL-terminated name.
            let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) }
                .to_bytes()
                .to_vec();
            if name != b"." && name != b".." {
                names.push(name);
            }
        }
        // SAFETY: closing what we opened.
        unsafe { closedir(d) };
        for name in names {
            let mut child = path.to_vec();
            if !child.ends_with(b"/") {
                child.push(b'/');
            }
            child.extend_from_slice(&name);
            match self.walk(&child, level + 1) {
                Next::Go | Next::SkipSubtree => {}
                Next::SkipSiblings => break,
                Next::Stop(r) => return Next::Stop(r),
            }
        }
        if depth {
            return self.call(&c, &sb, FTW_DP, base, level);
        }
        Next::Go
    }
}

/// True when `path` leads into a mount (the walk is then ours).
pub(crate) fn is_virtual(path: *const c_char) -> bool {
    hooked(false, |st| {
        Some(matches!(
            st.classify(libc::AT_FDCWD, path, true),
            Ok(Target::Virt(_))
        ))
    })
    .unwrap_or(false)
}

fn walk_virtual(path: *const c_char, cb: Cb, flags: c_int) -> c_int {
    // SAFETY: a NUL-terminated path (checked virtual, so non-null).
    let p = unsafe { CStr::from_ptr(path) }.to_bytes().to_vec();
    let w = Walk { cb, flags };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.walk(&p, 0))) {
        Ok(Next::Stop(r)) => r,
        Ok(_) => 0,
        Err(_) => {
            crate::sys::set_errno(libc::EIO);
            -1
        }
    }
}

macro_rules! nftw_hooks {
    ($($name:ident),*) => {$(
        /// nftw(3): walked here for paths inside a mount (FTW_CHDIR and FTW_MOUNT are not
        /// honoured there).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, cb: NftwCb, nfd: c_int, flags: c_int) -> c_int {
            if is_virtual(path) {
                return walk_virtual(path, Cb::Nftw(cb), flags);
            }
            call_real!($name: unsafe extern "C" fn(*const c_char, NftwCb, c_int, c_int) -> c_int, -1; path, cb, nfd, flags)
        }
    )*};
}
nftw_hooks!(nftw, nftw64);

macro_rules! ftw_hooks {
    ($($name:ident),*) => {$(
        /// ftw(3): walked here for paths inside a mount.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, cb: FtwCb, nfd: c_int) -> c_int {
            if is_virtual(path) {
                return walk_virtual(path, Cb::Ftw(cb), 0);
            }
            call_real!($name: unsafe extern "C" fn(*const c_char, FtwCb, c_int) -> c_int, -1; path, cb, nfd)
        }
    )*};
}
ftw_hooks!(ftw, ftw64);
