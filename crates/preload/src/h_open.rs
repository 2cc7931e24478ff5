//! Opening and closing: the open/openat/creat family (with their 64 and __*_2 fortify
//! spellings), close, close_range, dup/dup2/dup3 and fcntl.

use crate::state::{sys_close, Target};
use crate::sys::{call_real, hooked, ret};
use libc::{c_char, c_int, c_uint, c_ulong};
use std::sync::Arc;

type OpenAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;

/// The kernel's checks of the flags alone, made before any lookup (EINVAL): O_TMPFILE
/// needs O_DIRECTORY, no O_CREAT, and write access; O_CREAT with O_DIRECTORY is invalid.
fn flags_errno(flags: c_int) -> Option<i32> {
    let creat = flags & libc::O_CREAT != 0;
    let dir = flags & libc::O_DIRECTORY != 0;
    if flags & crate::state::TMPFILE_BIT != 0 {
        let writes = flags & libc::O_ACCMODE != libc::O_RDONLY;
        return (!dir || creat || !writes).then_some(libc::EINVAL);
    }
    (creat && dir).then_some(libc::EINVAL)
}

/// The common body of every open: `None` when the call is not ours.
fn open_common(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> Option<c_int> {
    hooked(-1, |st| open_in(st, dirfd, path, flags, mode))
}

/// [`open_common`] inside a hook: `None` when the call is not ours.
pub(crate) fn open_in(
    st: &crate::state::State,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> Option<c_int> {
    {
        let excl = flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0;
        let follow = flags & libc::O_NOFOLLOW == 0 && !excl;
        let r = st.classify(dirfd, path, follow);
        if matches!(r, Ok(Target::Virt(_)) | Err(_)) {
            if let Some(e) = flags_errno(flags) {
                return Some(ret(Err(e)));
            }
        }
        match r {
            Ok(Target::Pass) => None,
            Ok(Target::HostAbs(p)) => {
                Some(call_real!(openat: OpenAtFn, -1; libc::AT_FDCWD, p.as_ptr(), flags, mode))
            }
            Ok(Target::Virt(vp)) => Some(ret(st.open_virtual(vp, flags).inspect(|&fd| {
                crate::h_stdio::retarget_std(st, fd);
            }))),
            // A name to create: made in a read-write mount; in a read-only one EROFS when
            // its directory exists, else that lookup's error.
            Err(libc::ENOENT) if flags & libc::O_CREAT != 0 => {
                let r = crate::h_modify::create_file(st, dirfd, path, flags, mode);
                Some(ret(r.inspect(|&fd| crate::h_stdio::retarget_std(st, fd))))
            }
            Err(e) => Some(ret(Err(e))),
        }
    }
}

macro_rules! open_hooks {
    ($($name:ident),*) => {$(
        /// open(2) (variadic in C: the mode is read only with O_CREAT/O_TMPFILE, as
        /// x86_64's calling convention allows).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
            match open_common(libc::AT_FDCWD, path, flags, mode) {
                Some(r) => r,
                None => call_real!($name: OpenFn, -1; path, flags, mode),
            }
        }
    )*};
}
type OpenFn = unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
open_hooks!(open, open64);

macro_rules! openat_hooks {
    ($($name:ident),*) => {$(
        /// openat(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint) -> c_int {
            match open_common(dirfd, path, flags, mode) {
                Some(r) => r,
                None => call_real!($name: OpenAtFn, -1; dirfd, path, flags, mode),
            }
        }
    )*};
}
openat_hooks!(openat, openat64);

macro_rules! open2_hooks {
    ($($name:ident),*) => {$(
        /// The fortified open without a mode (`__open_2`).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, flags: c_int) -> c_int {
            match open_common(libc::AT_FDCWD, path, flags, 0) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(*const c_char, c_int) -> c_int, -1; path, flags),
            }
        }
    )*};
}
open2_hooks!(__open_2, __open64_2);

macro_rules! openat2_hooks {
    ($($name:ident),*) => {$(
        /// The fortified openat without a mode (`__openat_2`).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
            match open_common(dirfd, path, flags, 0) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int, -1; dirfd, path, flags),
            }
        }
    )*};
}
openat2_hooks!(__openat_2, __openat64_2);

macro_rules! creat_hooks {
    ($($name:ident),*) => {$(
        /// creat(2): open with O_CREAT|O_WRONLY|O_TRUNC.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, mode: c_uint) -> c_int {
            let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;
            match open_common(libc::AT_FDCWD, path, flags, mode) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(*const c_char, c_uint) -> c_int, -1; path, mode),
            }
        }
    )*};
}
creat_hooks!(creat, creat64);

/// close(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn close(fd: c_int) -> c_int {
    let r = hooked(-1, |st| {
        if st.fds.remove(fd).is_none() {
            st.forget_internal_fds(fd as u32, fd as u32);
            return None;
        }
        crate::h_stdio::retarget_std(st, fd);
        Some(sys_close(fd))
    });
    match r {
        Some(r) => r,
        None => call_real!(close: unsafe extern "C" fn(c_int) -> c_int, -1; fd),
    }
}

/// close_range(2): virtual descriptors in the range are forgotten too (unless the call
/// only sets close-on-exec).
#[no_mangle]
pub(crate) unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let _ = hooked(0, |st| {
        if flags as u32 & libc::CLOSE_RANGE_CLOEXEC == 0 {
            st.fds.remove_range(first, last);
            st.forget_internal_fds(first, last);
        }
        None::<c_int>
    });
    call_real!(close_range: unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int, -1; first, last, flags)
}

/// dup(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let r = hooked(-1, |st| {
        let f = st.fds.get(fd)?;
        let new = call_real!(dup: unsafe extern "C" fn(c_int) -> c_int, -1; fd);
        if new >= 0 {
            st.fds.insert(new, f);
            crate::h_stdio::retarget_std(st, new);
        }
        Some(new)
    });
    match r {
        Some(r) => r,
        None => call_real!(dup: unsafe extern "C" fn(c_int) -> c_int, -1; fd),
    }
}

/// dup2/dup3 on the placeholder, then the table follows: `new` names what `old` names.
fn dup_to(old: c_int, new: c_int, real: impl Fn() -> c_int) -> c_int {
    let r = hooked(-1, |st| {
        let real = &real;
        if old != new && new >= 0 {
            st.forget_internal_fds(new as u32, new as u32);
        }
        let src = st.fds.get(old);
        if src.is_none() && !st.fds.is_virtual(new) {
            return None;
        }
        let r = real();
        if r >= 0 && old != new {
            match src {
                Some(f) => {
                    st.fds.insert(new, f);
                }
                None => {
                    st.fds.remove(new);
                }
            }
            crate::h_stdio::retarget_std(st, new);
        }
        Some(r)
    });
    match r {
        Some(r) => r,
        None => real(),
    }
}

/// dup2(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    dup_to(
        old,
        new,
        || call_real!(dup2: unsafe extern "C" fn(c_int, c_int) -> c_int, -1; old, new),
    )
}

/// dup3(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    dup_to(
        old,
        new,
        || call_real!(dup3: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int, -1; old, new, flags),
    )
}

type FcntlFn = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;

/// The kernel's O_LARGEFILE (the libc crate spells it 0 on 64-bit, as glibc's headers do).
const O_LARGEFILE: c_int = 0o100000;

/// F_GETFL of an open-file description opened with `flags`, as the kernel reports it: the
/// open(2) path adds O_LARGEFILE on 64-bit (force_o_largefile) and keeps neither the
/// creation flags (O_CREAT, O_EXCL, O_NOCTTY, O_TRUNC) nor O_CLOEXEC; an O_PATH
/// description keeps only O_PATH, O_DIRECTORY and O_NOFOLLOW.
fn status_flags(flags: c_int) -> c_int {
    if flags & libc::O_PATH != 0 {
        return flags & (libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW);
    }
    let dropped = libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_TRUNC | libc::O_CLOEXEC;
    (flags | O_LARGEFILE) & !dropped
}

/// fcntl on a virtual descriptor: duplication on the placeholder, flags from the
/// open-file description (as the kernel reports them, [`status_flags`]), record locks
/// granted for reading (the image cannot change).
fn fcntl_virtual(fd: c_int, cmd: c_int, arg: c_ulong) -> Option<c_int> {
    hooked(-1, |st| {
        let f = st.fds.get(fd)?;
        Some(match cmd {
            libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => {
                let new = call_real!(fcntl: FcntlFn, -1; fd, cmd, arg);
                if new >= 0 {
                    st.fds.insert(new, Arc::clone(&f));
                    crate::h_stdio::retarget_std(st, new);
                }
                new
            }
            libc::F_GETFD | libc::F_SETFD => call_real!(fcntl: FcntlFn, -1; fd, cmd, arg),
            libc::F_GETFL => status_flags(f.flags()),
            libc::F_SETFL => {
                f.set_status_flags(arg as c_int);
                0
            }
            libc::F_GETLK
            | libc::F_OFD_GETLK
            | libc::F_SETLK
            | libc::F_SETLKW
            | libc::F_OFD_SETLK
            | libc::F_OFD_SETLKW
                if f.node.writer.is_some() =>
            {
                if arg == 0 {
                    return Some(ret(Err(libc::EFAULT)));
                }
                // SAFETY: for these commands the argument is a struct flock pointer.
                let lk = unsafe { &mut *(arg as *mut libc::flock) };
                ret(record_lock(&f, fd, cmd, lk))
            }
            libc::F_GETLK | libc::F_OFD_GETLK => {
                if arg == 0 {
                    return Some(ret(Err(libc::EFAULT)));
                }
                // SAFETY: for these commands the argument is a struct flock pointer.
                unsafe { (*(arg as *mut libc::flock)).l_type = libc::F_UNLCK as i16 };
                0
            }
            libc::F_SETLK | libc::F_SETLKW | libc::F_OFD_SETLK | libc::F_OFD_SETLKW => {
                if arg == 0 {
                    return Some(ret(Err(libc::EFAULT)));
                }
                // SAFETY: for these commands the argument is a struct flock pointer.
                let t = unsafe { (*(arg as *const libc::flock)).l_type } as c_int;
                // A read-only mount: nobody writes, so read locks never conflict; a write
                // lock needs a descriptor open for writing.
                if t == libc::F_WRLCK {
                    ret(Err(libc::EBADF))
                } else {
                    0
                }
            }
            _ => ret(Err(libc::EINVAL)),
        })
    })
}

/// A record lock on a file of a read-write mount, kept in its owner's lock file (the
/// access mode must allow the lock's type: EBADF).
fn record_lock(
    f: &usfs_vfs::OpenFile,
    fd: c_int,
    cmd: c_int,
    lk: &mut libc::flock,
) -> Result<c_int, i32> {
    let w = f.node.writer.as_ref().ok_or(libc::EBADF)?;
    let acc = f.flags() & libc::O_ACCMODE;
    let setting = !matches!(cmd, libc::F_GETLK | libc::F_OFD_GETLK);
    match lk.l_type as c_int {
        libc::F_WRLCK if setting && acc == libc::O_RDONLY => return Err(libc::EBADF),
        libc::F_RDLCK if setting && acc == libc::O_WRONLY => return Err(libc::EBADF),
        libc::F_RDLCK | libc::F_WRLCK | libc::F_UNLCK => {}
        _ => return Err(libc::EINVAL),
    }
    let cur = f.offset_fd(fd)?;
    let size = if lk.l_whence as c_int == libc::SEEK_END {
        f.node.attrs()?.size
    } else {
        0
    };
    w.locks().fcntl(f.ino(), cmd, lk, cur, size)
}

macro_rules! fcntl_hooks {
    ($($name:ident),*) => {$(
        /// fcntl(2) (variadic in C: the third argument is read as a machine word).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
            match fcntl_virtual(fd, cmd, arg) {
                Some(r) => r,
                None => call_real!($name: FcntlFn, -1; fd, cmd, arg),
            }
        }
    )*};
}
fcntl_hooks!(fcntl, fcntl64);
