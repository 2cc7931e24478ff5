//! stdio: glibc's fopen does not call the interposable open, so virtual files get FILE
//! streams made with fopencookie over a virtual descriptor (fopen/fopen64/fdopen), and
//! fileno answers for them. A stream's cookie is its descriptor number; the callbacks read
//! whatever that number names, as glibc's file streams do: a virtual descriptor through
//! the image, any other (after freopen onto a host file, or a dup2 onto the number)
//! through the kernel. freopen lives in h_freopen.
//!
//! glibc writes stdout and stderr with an internal write we cannot see, so while
//! descriptor 1 or 2 is a file of a read-write mount (a shell's `> file`, or a program
//! started with its output there), `stdout`/`stderr` are write streams of ours over the
//! descriptor ([`retarget_std`]); the original streams come back when the descriptor
//! leaves the mount. Such a stream borrows its descriptor (the [`BORROWED`] bit of its
//! cookie): closing the stream leaves the descriptor to its owner.

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

/// A cookie bit: the stream does not own its descriptor (closing it closes nothing).
const BORROWED: usize = 1 << 40;

/// The descriptor of a cookie.
fn cookie_fd(cookie: *mut c_void) -> c_int {
    (cookie as usize & !BORROWED) as c_int
}

/// The cookie's read: through the image for a virtual descriptor, else read(2).
unsafe extern "C" fn ck_read(cookie: *mut c_void, buf: *mut c_char, n: size_t) -> ssize_t {
    let fd = cookie_fd(cookie);
    let r = hooked(-1, |st| {
        let f = st.fds.get(fd)?;
        // SAFETY: glibc hands us its buffer of n bytes.
        let b = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) };
        Some(crate::sys::ret(f.read_fd(fd, b).map(|n| n as ssize_t)))
    });
    // SAFETY: read(2) into glibc's buffer of n bytes (raw system call).
    r.unwrap_or_else(|| unsafe { libc::syscall(libc::SYS_read, fd, buf, n) as ssize_t })
}

/// The cookie's write: through the image for a virtual descriptor, else write(2).
unsafe extern "C" fn ck_write(cookie: *mut c_void, buf: *const c_char, n: size_t) -> ssize_t {
    let fd = cookie_fd(cookie);
    let r = hooked(-1, |st| {
        let f = st.fds.get(fd)?;
        // SAFETY: glibc hands us n bytes of its buffer.
        let b = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) };
        let c = st.actor().caller;
        Some(crate::sys::ret(
            f.write_fd(fd, b, (c.uid, c.gid)).map(|n| n as ssize_t),
        ))
    });
    // SAFETY: write(2) of glibc's n bytes (raw system call).
    r.unwrap_or_else(|| unsafe { libc::syscall(libc::SYS_write, fd, buf, n) as ssize_t })
}

/// The cookie's seek: through the image for a virtual descriptor, else lseek(2).
unsafe extern "C" fn ck_seek(cookie: *mut c_void, pos: *mut Off64, whence: c_int) -> c_int {
    let fd = cookie_fd(cookie);
    // SAFETY: glibc passes a valid position pointer.
    let p = unsafe { &mut *pos };
    let r = hooked(Err(libc::EIO), |st| {
        Some(st.fds.get(fd)?.seek_fd(fd, *p, whence))
    });
    let r = r.unwrap_or_else(|| {
        // SAFETY: lseek(2) on a descriptor number (raw system call).
        let o = unsafe { libc::syscall(libc::SYS_lseek, fd, *p, whence) };
        if o < 0 {
            Err(crate::sys::errno())
        } else {
            Ok(o as u64)
        }
    });
    match r {
        Ok(o) => {
            *p = o as Off64;
            0
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// The cookie's close: closes the descriptor (and forgets it if virtual), as fclose of a
/// file stream closes its descriptor.
unsafe extern "C" fn ck_close(cookie: *mut c_void) -> c_int {
    if cookie as usize & BORROWED != 0 {
        return 0;
    }
    let fd = cookie_fd(cookie);
    hooked(-1, |st| {
        if st.fds.remove(fd).is_none() {
            st.forget_internal_fds(fd as u32, fd as u32);
        }
        Some(sys_close(fd))
    })
    .unwrap_or_else(|| sys_close(fd))
}

/// A FILE over virtual descriptor `fd` (which it owns from now on), reading or writing
/// as `mode` says.
pub(crate) fn cookie_file(st: &State, fd: c_int, mode: *const c_char) -> *mut FILE {
    let fp = new_cookie(st, fd as usize, mode);
    if fp.is_null() {
        st.fds.remove(fd);
        sys_close(fd);
    }
    fp
}

/// fopencookie over descriptor `cookie` (with [`BORROWED`] set: not closed with the
/// stream), registered as a stream of ours.
fn new_cookie(st: &State, cookie: usize, mode: *const c_char) -> *mut FILE {
    let funcs = CookieIo {
        read: Some(ck_read),
        write: Some(ck_write),
        seek: Some(ck_seek),
        close: Some(ck_close),
    };
    type FopencookieFn = unsafe extern "C" fn(*mut c_void, *const c_char, CookieIo) -> *mut FILE;
    let fp = call_real!(fopencookie: FopencookieFn, null_mut(); cookie as *mut c_void, mode, funcs);
    if fp.is_null() {
        return fp;
    }
    let fd = (cookie & !BORROWED) as c_int;
    lock(&st.streams).insert(fp as usize, fd);
    st.n_streams.fetch_add(1, Ordering::Relaxed);
    fp
}

extern "C" {
    static mut stdout: *mut FILE;
    static mut stderr: *mut FILE;
}

/// Descriptor `fd` changed (opened, dup'd onto, closed): when it is 1 or 2, `stdout` or
/// `stderr` becomes a write stream of ours while the descriptor is a file open for
/// writing in a read-write mount, and the original stream again when it is not.
pub(crate) fn retarget_std(st: &State, fd: c_int) {
    if fd != 1 && fd != 2 {
        return;
    }
    let ours = st
        .fds
        .get(fd)
        .is_some_and(|f| f.node.writer.is_some() && f.flags() & libc::O_ACCMODE != libc::O_RDONLY);
    let mut slots = lock(&st.std_streams);
    let slot = &mut slots[fd as usize];
    // SAFETY: reading and replacing the process's stdout/stderr pointers, as freopen
    // does; the hooks serialise through the slot lock.
    unsafe {
        let global = if fd == 1 {
            &raw mut stdout
        } else {
            &raw mut stderr
        };
        match (ours, *slot) {
            (true, None) => {
                let fp = new_cookie(st, fd as usize | BORROWED, c"w".as_ptr());
                if fp.is_null() {
                    return;
                }
                if fd == 2 {
                    libc::setvbuf(fp, null_mut(), libc::_IONBF, 0);
                }
                libc::fflush(*global);
                *slot = Some((*global as usize, fp as usize));
                *global = fp;
            }
            (false, Some((orig, fp))) => {
                *slot = None;
                let fp = fp as *mut FILE;
                if *global == fp {
                    *global = orig as *mut FILE;
                }
                drop(slots);
                // Flushes what is left and frees the stream; the descriptor is borrowed.
                fclose(fp);
            }
            _ => {}
        }
    }
}

/// What an fopen mode string asks for (glibc's parse: `r`, `w` or `a`, then up to six
/// modifier characters up to a `,`).
pub(crate) struct Mode {
    /// `w`, `a` or `+`: the file is opened for writing.
    pub writes: bool,
    /// `w` or `a`: O_CREAT.
    pub creates: bool,
    /// `e`: O_CLOEXEC.
    pub cloexec: bool,
    /// `w`: O_TRUNC (`a`: O_APPEND).
    pub truncates: bool,
    /// `x`: O_EXCL.
    pub excl: bool,
}

impl Mode {
    /// The open(2) flags glibc's fopen passes for this mode (without O_CLOEXEC).
    pub(crate) fn open_flags(&self) -> c_int {
        let mut f = if self.writes {
            libc::O_RDWR
        } else {
            libc::O_RDONLY
        };
        if self.creates {
            f |= libc::O_CREAT;
            f |= if self.truncates {
                libc::O_TRUNC
            } else {
                libc::O_APPEND
            };
        }
        if self.excl {
            f |= libc::O_EXCL;
        }
        f
    }
}

/// The errno of an fopen-family open of `path` that writes, where `found` is what the
/// lookup in a mount gave: what open(2) with the mode's flags answers on a read-only mount
/// (EISDIR, EEXIST, then EROFS for a file found; for a missing one, the creating open's
/// answer: EROFS in an existing directory, else the lookup's error).
pub(crate) fn refused_errno(
    st: &State,
    path: *const c_char,
    m: &Mode,
    found: Result<usfs_vfs::VPath, i32>,
) -> i32 {
    match found {
        // A probe: it must not truncate (in a read-write mount the open succeeds).
        Ok(vp) => match st.open_virtual(vp, m.open_flags() & !libc::O_TRUNC) {
            Err(e) => e,
            Ok(fd) => {
                // A read-write mount (freopen of a writing stream there is not made yet);
                // never for a read-only one.
                st.fds.remove(fd);
                crate::state::sys_close(fd);
                libc::EROFS
            }
        },
        Err(libc::ENOENT) if m.creates => crate::h_modify::create_errno(st, libc::AT_FDCWD, path),
        Err(e) => e,
    }
}

/// Parses an fopen mode; EINVAL for a mode glibc rejects.
pub(crate) fn parse_mode(mode: *const c_char) -> Result<Mode, c_int> {
    if mode.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: a non-null mode is a NUL-terminated string.
    let m = unsafe { CStr::from_ptr(mode) }.to_bytes();
    let creates = match m.first() {
        Some(b'r') => false,
        Some(b'w' | b'a') => true,
        _ => return Err(libc::EINVAL),
    };
    let mut out = Mode {
        writes: creates,
        creates,
        cloexec: false,
        truncates: m.first() == Some(&b'w'),
        excl: false,
    };
    for &c in m[1..].iter().take(6).take_while(|&&c| c != b',') {
        match c {
            b'+' => out.writes = true,
            b'e' => out.cloexec = true,
            b'x' => out.excl = true,
            _ => {}
        }
    }
    Ok(out)
}

type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;

/// The open(2) flags of a writing fopen mode, as glibc's fopen makes them.
fn write_flags(m: &Mode, mode: *const c_char) -> c_int {
    // SAFETY: parse_mode accepted `mode`, a NUL-terminated string.
    let b = unsafe { CStr::from_ptr(mode) }.to_bytes();
    let first = b[0];
    let plus = b[1..]
        .iter()
        .take(6)
        .take_while(|&&c| c != b',')
        .any(|&c| c == b'+');
    let mut f = if plus { libc::O_RDWR } else { libc::O_WRONLY };
    match first {
        b'w' => f |= libc::O_CREAT | libc::O_TRUNC,
        b'a' => f |= libc::O_CREAT | libc::O_APPEND,
        _ => {}
    }
    if m.excl {
        f |= libc::O_EXCL;
    }
    if m.cloexec {
        f |= libc::O_CLOEXEC;
    }
    f
}

/// A writing fopen of `path` when some mount is read-write: the stream of the open
/// the open hooks make (`None`: not in a mount, or no mount is read-write).
fn fopen_writing(st: &State, path: *const c_char, mode: *const c_char) -> Option<*mut FILE> {
    let m = parse_mode(mode).ok().filter(|m| m.writes)?;
    if !(0..st.table.len()).any(|i| st.table.get(i).writable()) {
        return None;
    }
    let fd = crate::h_open::open_in(st, libc::AT_FDCWD, path, write_flags(&m, mode), 0o666)?;
    if fd < 0 {
        return Some(null_mut());
    }
    Some(cookie_file(st, fd, mode))
}

fn fopen_common(path: *const c_char, mode: *const c_char) -> Option<*mut FILE> {
    hooked(null_mut(), |st| {
        if let Some(r) = fopen_writing(st, path, mode) {
            return Some(r);
        }
        match st.classify(libc::AT_FDCWD, path, true) {
            Ok(Target::Pass) => None,
            Ok(Target::HostAbs(c)) => {
                Some(call_real!(fopen64: FopenFn, null_mut(); c.as_ptr(), mode))
            }
            Ok(Target::Virt(vp)) => {
                let m = match parse_mode(mode) {
                    Ok(m) if m.writes => {
                        set_errno(refused_errno(st, path, &m, Ok(vp)));
                        return Some(null_mut());
                    }
                    r => r,
                };
                // Close-on-exec only for mode `e`, as glibc's fopen.
                let r = m.and_then(|m| {
                    let cloexec = if m.cloexec { libc::O_CLOEXEC } else { 0 };
                    st.open_virtual(vp, libc::O_RDONLY | cloexec)
                });
                Some(match r {
                    Ok(fd) => cookie_file(st, fd, mode),
                    Err(e) => {
                        set_errno(e);
                        null_mut()
                    }
                })
            }
            Err(e) => {
                set_errno(match parse_mode(mode) {
                    Ok(m) => refused_errno(st, path, &m, Err(e)),
                    Err(_) => e,
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
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, mode: *const c_char) -> *mut FILE {
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
pub(crate) unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
    let r = crate::h_io::on_vfile(fd, null_mut(), |st, f| {
        // A mode glibc rejects, or one that writes on a descriptor open for reading only:
        // EINVAL.
        let read_only = f.node.writer.is_none() || f.flags() & libc::O_ACCMODE == libc::O_RDONLY;
        if parse_mode(mode).map_or(true, |m| m.writes && read_only) {
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

/// The descriptor of one of our streams, -1 (errno EBADF) for one a failed freopen
/// closed (its number holds a placeholder outside the descriptor table, see h_freopen).
fn stream_fd(fp: *mut FILE) -> Option<c_int> {
    hooked(-1, |st| {
        let fd = st.stream_fd(fp as usize)?;
        if !st.fds.is_virtual(fd) && crate::h_exec::is_placeholder(fd) {
            set_errno(libc::EBADF);
            return Some(-1);
        }
        Some(fd)
    })
}

macro_rules! fileno_hooks {
    ($($name:ident),*) => {$(
        /// fileno(3): our streams answer with their virtual descriptor.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fp: *mut FILE) -> c_int {
            match stream_fd(fp) {
                Some(fd) => fd,
                None => call_real!($name: unsafe extern "C" fn(*mut FILE) -> c_int, -1; fp),
            }
        }
    )*};
}
fileno_hooks!(fileno, fileno_unlocked);

/// fclose(3): forgets our stream, then glibc closes it (its close function closes the
/// virtual descriptor); a popen stream is pclose'd.
#[no_mangle]
pub(crate) unsafe extern "C" fn fclose(fp: *mut FILE) -> c_int {
    // fclose of a popen stream waits for its command, as glibc's does.
    if let Some(r) = crate::h_shell::close_popen(fp) {
        return r;
    }
    let _ = hooked(0, |st| {
        if st.n_streams.load(Ordering::Relaxed) > 0
            && lock(&st.streams).remove(&(fp as usize)).is_some()
        {
            st.n_streams.fetch_sub(1, Ordering::Relaxed);
        }
        // Our stand-in for stdout or stderr closed by the program: it is gone, so it is
        // no longer ours to replace or free.
        for slot in lock(&st.std_streams).iter_mut() {
            if slot.is_some_and(|(_, ours)| ours == fp as usize) {
                *slot = None;
            }
        }
        None::<c_int>
    });
    call_real!(fclose: unsafe extern "C" fn(*mut FILE) -> c_int, libc::EOF; fp)
}
