//! freopen(3) and freopen64.
//!
//! A stream of ours (a fopencookie FILE from `h_stdio::cookie_file`: fopen of an image
//! file, fdopen of a virtual descriptor, the stdin made at load time) must never reach
//! glibc's freopen: it treats every FILE as a file stream (it swaps in the file jump table
//! and crashes on a cookie FILE). Such a stream stays a cookie stream and keeps its
//! descriptor number, as glibc's freopen keeps it (it dup3s the new file onto the old
//! number): the new file is opened, moved onto the number, and the cookie's callbacks,
//! which read whatever that number names (a virtual descriptor through the image, any
//! other through the kernel), read it from then on. The cookie FILE was made read-only,
//! so a writing mode works only where the kernel's answer is an error anyway (EROFS
//! inside an image); onto a host path it fails with EINVAL (a limitation: glibc gives no
//! way to make a read-only FILE writable).
//!
//! Any other stream goes to glibc's freopen: onto a virtual path through a private copy
//! of the file (a memfd filled from the image; read-only mounts make the copy exact),
//! onto a path relative to a virtual working directory that leaves the mount with the
//! path made absolute (the kernel's working directory is elsewhere).

use crate::h_stdio::{parse_mode, refused_errno};
use crate::state::{placeholder, sys_close, State, Target};
use crate::sys::{call_real, errno, hooked, set_errno};
use libc::{c_char, c_int, FILE};
use std::ffi::CString;
use std::ptr::null_mut;

extern "C" {
    fn flockfile(fp: *mut FILE);
    fn funlockfile(fp: *mut FILE);
}

type FreopenFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut FILE) -> *mut FILE;

/// freopen onto virtual path `vp` for a stream that is not ours: copies the file into a
/// memfd and reopens `fp` on it through /proc/self/fd (a new open file description,
/// offset 0).
fn freopen_virtual(
    st: &State,
    vp: usfs_vfs::VPath,
    mode: *const c_char,
    fp: *mut FILE,
) -> *mut FILE {
    if let Some(m) = parse_mode(mode).ok().filter(|m| m.writes) {
        // Refused as open(2) would refuse it; a failed freopen closes the stream.
        let e = refused_errno(st, std::ptr::null(), &m, Ok(vp));
        call_real!(fclose: unsafe extern "C" fn(*mut FILE) -> c_int, -1; fp);
        set_errno(e);
        return null_mut();
    }
    let mfd = match crate::copy::to_memfd(st, vp, c"usfs-copy", libc::MFD_CLOEXEC) {
        Ok(m) => m,
        Err(e) => {
            set_errno(e);
            return null_mut();
        }
    };
    let path = CString::new(format!("/proc/self/fd/{mfd}")).expect("no NUL");
    let r = call_real!(freopen64: FreopenFn, null_mut(); path.as_ptr(), mode, fp);
    let e = errno();
    sys_close(mfd);
    set_errno(e);
    r
}

/// Opens a host file read-only for a stream of ours (raw system call: `path` is absolute
/// or relative to the kernel's working directory, which is the host one here).
fn open_host(path: *const c_char, cloexec: bool) -> Result<c_int, c_int> {
    let flags = libc::O_RDONLY | if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: openat with a NUL-terminated path.
    let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, path, flags, 0o666) };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd as c_int)
    }
}

/// Moves kernel descriptor `from` onto number `to` (dup3, then close `from`).
fn move_fd(from: c_int, to: c_int, cloexec: bool) -> Result<(), c_int> {
    let flags = if cloexec { libc::O_CLOEXEC } else { 0 };
    // SAFETY: dup3 on descriptor numbers.
    let r = unsafe { libc::syscall(libc::SYS_dup3, from, to, flags) };
    let e = errno();
    sys_close(from);
    if r < 0 {
        Err(e)
    } else {
        Ok(())
    }
}

/// Points descriptor `fd` of one of our streams at the file freopen names (`path`, or the
/// file `fd` names when null), as glibc's freopen does for a file stream: the new file is
/// opened while the old one is still open (so a null path or /dev/fd/N can name it), then
/// takes the number over. Returns the errno of a failure.
fn repoint(st: &State, path: *const c_char, mode: *const c_char, fd: c_int) -> Result<(), c_int> {
    let mut m = parse_mode(mode)?;
    // glibc never clears a stream's close-on-exec flag once a mode `e` set it: the new
    // descriptor keeps the old one's flag.
    // SAFETY: F_GETFD on a descriptor number.
    let flags = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFD) };
    m.cloexec |= flags > 0 && flags & libc::FD_CLOEXEC as i64 != 0;
    let alias;
    let path = if path.is_null() {
        alias = CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL");
        alias.as_ptr()
    } else {
        path
    };
    let host = |p: *const c_char| {
        if m.writes {
            // The cookie FILE is read-only (see the module text).
            Err(libc::EINVAL)
        } else {
            open_host(p, m.cloexec)
        }
    };
    match st.classify(libc::AT_FDCWD, path, true) {
        Ok(Target::Virt(vp)) if m.writes => Err(refused_errno(st, path, &m, Ok(vp))),
        Ok(Target::Virt(vp)) => {
            let new = st.open_virtual(vp, libc::O_RDONLY | libc::O_CLOEXEC)?;
            let file = st.fds.remove(new).ok_or(libc::EBADF)?;
            move_fd(new, fd, m.cloexec)?;
            st.fds.insert(fd, file);
            Ok(())
        }
        Ok(Target::Pass) => {
            let new = host(path)?;
            st.fds.remove(fd);
            move_fd(new, fd, m.cloexec)
        }
        Ok(Target::HostAbs(abs)) => {
            let new = host(abs.as_ptr())?;
            st.fds.remove(fd);
            move_fd(new, fd, m.cloexec)
        }
        Err(e) => Err(refused_errno(st, path, &m, Err(e))),
    }
}

/// After a failed freopen the stream is closed: its number holds a placeholder that reads
/// nothing (EBADF) and that fileno reports as -1, until the program's fclose closes it
/// or a later freopen reopens the stream on it. (glibc frees the number at once; a
/// cookie FILE cannot be moved to another number, and closing it now would let fclose
/// close whatever file takes the number next.)
fn close_stream(st: &State, fd: c_int) {
    st.fds.remove(fd);
    if let Ok(p) = placeholder(false) {
        let _ = move_fd(p, fd, false);
    }
}

/// freopen of one of our streams (`fd`: its descriptor; see the module text). The FILE
/// lock is held throughout; what the stream buffered from the old file is dropped
/// (fflush forgets glibc's idea of the offset, __fpurge the unread bytes and any
/// pushback), and the rewind after the switch sets glibc's offset from the new file.
unsafe fn reopen_ours(
    path: *const c_char,
    mode: *const c_char,
    fp: *mut FILE,
    fd: c_int,
) -> *mut FILE {
    type StreamFn = unsafe extern "C" fn(*mut FILE) -> c_int;
    // SAFETY: (all calls on fp) fp is a live stream of ours (it is in our table); these
    // stdio calls take the caller's FILE as freopen does. They run outside a hook body,
    // so the cookie's callbacks can reach the image.
    unsafe {
        flockfile(fp);
        libc::fflush(fp);
    }
    let _ = call_real!(__fpurge: StreamFn, 0; fp);
    let r = hooked(Err(libc::EIO), |st| {
        let r = repoint(st, path, mode, fd);
        if r.is_err() {
            close_stream(st, fd);
        }
        Some(r)
    })
    .unwrap_or(Err(libc::EBADF));
    let out = match r {
        Ok(()) => {
            // SAFETY: as above.
            unsafe {
                libc::fseeko(fp, 0, libc::SEEK_SET);
                libc::clearerr(fp);
            }
            fp
        }
        Err(e) => {
            set_errno(e);
            null_mut()
        }
    };
    let e = errno();
    // SAFETY: releasing the lock taken above.
    unsafe { funlockfile(fp) };
    set_errno(e);
    out
}

/// The descriptor of `fp` when it is one of our streams.
fn our_stream(fp: *mut FILE) -> Option<c_int> {
    hooked(None, |st| Some(st.stream_fd(fp as usize))).flatten()
}

macro_rules! freopen_hooks {
    ($($name:ident),*) => {$(
        /// freopen(3): see the module text.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, mode: *const c_char, fp: *mut FILE) -> *mut FILE {
            if let Some(fd) = our_stream(fp) {
                // SAFETY: the caller's arguments; fp is a stream of ours.
                return unsafe { reopen_ours(path, mode, fp, fd) };
            }
            let mut abs = None;
            let r = hooked(null_mut(), |st| match st.classify(libc::AT_FDCWD, path, true) {
                Ok(Target::Pass) => None,
                Ok(Target::HostAbs(c)) => {
                    abs = Some(c);
                    None
                }
                Ok(Target::Virt(vp)) => Some(freopen_virtual(st, vp, mode, fp)),
                Err(e) => {
                    set_errno(match parse_mode(mode) {
                        Ok(m) => refused_errno(st, path, &m, Err(e)),
                        Err(_) => e,
                    });
                    Some(null_mut())
                }
            });
            match r {
                Some(r) => r,
                None => {
                    let p = abs.as_ref().map_or(path, |c| c.as_ptr());
                    call_real!($name: FreopenFn, null_mut(); p, mode, fp)
                }
            }
        }
    )*};
}
freopen_hooks!(freopen, freopen64);
