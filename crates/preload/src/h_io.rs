//! Data calls on descriptors: the read family (by memcpy from the image mapping through
//! usfs_vfs::read_file), lseek, mmap of virtual descriptors (a private copy), sendfile
//! and splice into a pipe (emulated: written to the destination straight from the image
//! mapping), copy_file_range (the kernel's EXDEV/EINVAL) and the terminal queries
//! (ENOTTY). The calls that change a file through a descriptor are in h_write.

use crate::state::{state, State};
use crate::sys::{call_real, hooked, ret, set_errno};
use libc::{c_int, c_uint, c_ulong, c_void, iovec, off_t, size_t, ssize_t};
use std::sync::Arc;
use usfs_vfs::OpenFile;

/// Runs `f` on the open file behind `fd` when `fd` is virtual; `None` otherwise (the
/// caller then calls libc). The check for ordinary descriptors is one atomic load.
#[inline]
pub(crate) fn on_vfile<R>(
    fd: c_int,
    fail: R,
    f: impl FnOnce(&'static State, &Arc<OpenFile>) -> R,
) -> Option<R> {
    let st = state()?;
    if !st.fds.is_virtual(fd) {
        return None;
    }
    hooked(fail, |st| st.fds.with(fd, |file| f(st, file)))
}

fn slice<'a>(buf: *mut c_void, n: size_t) -> &'a mut [u8] {
    if n == 0 || buf.is_null() {
        return &mut [];
    }
    // SAFETY: the caller of read/pread hands us `n` writable bytes at `buf`.
    unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) }
}

/// read(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    match on_vfile(fd, -1, |_, f| {
        ret(f.read_fd(fd, slice(buf, n)).map(|n| n as ssize_t))
    }) {
        Some(r) => r,
        None => {
            call_real!(read: unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t, -1; fd, buf, n)
        }
    }
}

/// The fortified read.
#[no_mangle]
pub(crate) unsafe extern "C" fn __read_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    _buflen: size_t,
) -> ssize_t {
    // SAFETY: same contract as read.
    unsafe { read(fd, buf, n) }
}

fn pread_virtual(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> Option<ssize_t> {
    on_vfile(fd, -1, |_, f| {
        if off < 0 {
            return ret(Err(libc::EINVAL));
        }
        ret(f.pread(slice(buf, n), off as u64).map(|n| n as ssize_t))
    })
}

macro_rules! pread_hooks {
    ($($name:ident),*) => {$(
        /// pread(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t {
            match pread_virtual(fd, buf, n, off) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, *mut c_void, size_t, off_t) -> ssize_t, -1; fd, buf, n, off),
            }
        }
    )*};
}
pread_hooks!(pread, pread64);

macro_rules! pread_chk_hooks {
    ($($name:ident),*) => {$(
        /// The fortified pread.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, _buflen: size_t) -> ssize_t {
            match pread_virtual(fd, buf, n, off) {
                Some(r) => r,
                None => call_real!(pread64: unsafe extern "C" fn(c_int, *mut c_void, size_t, off_t) -> ssize_t, -1; fd, buf, n, off),
            }
        }
    )*};
}
pread_chk_hooks!(__pread_chk, __pread64_chk);

/// Scatter read into `iov` at `off` (or the file offset when `off` is None).
fn readv_virtual(
    f: &OpenFile,
    fd: c_int,
    iov: *const iovec,
    cnt: c_int,
    off: Option<i64>,
) -> ssize_t {
    if cnt < 0 || (cnt > 0 && iov.is_null()) {
        return ret(Err(libc::EINVAL));
    }
    // SAFETY: the caller passes `cnt` iovecs at `iov`.
    let iovs = unsafe { std::slice::from_raw_parts(iov, cnt as usize) };
    let total: usize = iovs.iter().map(|v| v.iov_len).sum();
    let mut tmp = vec![0u8; total];
    let n = match off {
        Some(o) if o < 0 => return ret(Err(libc::EINVAL)),
        Some(o) => f.pread(&mut tmp, o as u64),
        None => f.read_fd(fd, &mut tmp),
    };
    let n = match n {
        Ok(n) => n,
        Err(e) => return ret(Err(e)),
    };
    let mut done = 0;
    for v in iovs {
        if done >= n {
            break;
        }
        let k = v.iov_len.min(n - done);
        slice(v.iov_base, k).copy_from_slice(&tmp[done..done + k]);
        done += k;
    }
    n as ssize_t
}

/// readv(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    match on_vfile(fd, -1, |_, f| readv_virtual(f, fd, iov, cnt, None)) {
        Some(r) => r,
        None => {
            call_real!(readv: unsafe extern "C" fn(c_int, *const iovec, c_int) -> ssize_t, -1; fd, iov, cnt)
        }
    }
}

macro_rules! preadv_hooks {
    ($($name:ident),*) => {$(
        /// preadv(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t) -> ssize_t {
            match on_vfile(fd, -1, |_, f| readv_virtual(f, fd, iov, cnt, Some(off))) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t) -> ssize_t, -1; fd, iov, cnt, off),
            }
        }
    )*};
}
preadv_hooks!(preadv, preadv64);

macro_rules! preadv2_hooks {
    ($($name:ident),*) => {$(
        /// preadv2(2): offset -1 means the file offset.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, iov: *const iovec, cnt: c_int, off: off_t, flags: c_int) -> ssize_t {
            match on_vfile(fd, -1, |_, f| readv_virtual(f, fd, iov, cnt, if off == -1 { None } else { Some(off) })) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, *const iovec, c_int, off_t, c_int) -> ssize_t, -1; fd, iov, cnt, off, flags),
            }
        }
    )*};
}
preadv2_hooks!(preadv2, preadv64v2);

macro_rules! lseek_hooks {
    ($($name:ident),*) => {$(
        /// lseek(2).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, off: off_t, whence: c_int) -> off_t {
            match on_vfile(fd, -1, |_, f| ret(f.seek_fd(fd, off, whence).map(|o| o as off_t))) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, off_t, c_int) -> off_t, -1; fd, off, whence),
            }
        }
    )*};
}
lseek_hooks!(lseek, lseek64);

/// Descriptor calls whose answer on a virtual descriptor is fixed: `fixed_fd_hooks!(doc,
/// answer; name(args) -> ret; ...)` defines each `name` to give `answer` (an expression
/// of type `ret`) on virtual descriptors and to call libc's `name` on all others.
macro_rules! fixed_fd_hooks {
    ($doc:literal, $answer:expr; $($name:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {$(
        #[doc = $doc]
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, $($a: $t),*) -> $r {
            match on_vfile(fd, -1, |_, _| $answer) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, $($t),*) -> $r, -1; fd, $($a),*),
            }
        }
    )*};
}

// Calls that are harmless no-ops on an image: 0. (The writing calls are in h_write.)
fixed_fd_hooks! {
    "A no-op on virtual descriptors (nothing to advise or lock: one owner serialises \
     every change); passed to libc otherwise.",
    0;
    flock(op: c_int) -> c_int;
    posix_fadvise(off: off_t, len: off_t, advice: c_int) -> c_int;
    posix_fadvise64(off: off_t, len: off_t, advice: c_int) -> c_int;
    readahead(off: off_t, count: size_t) -> ssize_t;
}

/// ioctl(2): no ioctls on virtual descriptors (ENOTTY), so e.g. FICLONE and terminal
/// queries fail cleanly.
#[no_mangle]
pub(crate) unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    match on_vfile(fd, -1, |_, _| ret(Err(libc::ENOTTY))) {
        Some(r) => r,
        None => {
            call_real!(ioctl: unsafe extern "C" fn(c_int, c_ulong, ...) -> c_int, -1; fd, req, arg)
        }
    }
}

/// The errno of a terminal query on a virtual descriptor: EBADF for an O_PATH one (the
/// kernel refuses any ioctl on it), ENOTTY otherwise (a file in an image is no terminal).
/// glibc's isatty, ttyname and tcgetattr ask with its internal ioctl, which would reach the
/// placeholder (EBADF) without these hooks.
fn not_a_tty(f: &OpenFile) -> i32 {
    if f.flags() & libc::O_PATH != 0 {
        libc::EBADF
    } else {
        libc::ENOTTY
    }
}

/// isatty(3): 0 with errno ENOTTY (or EBADF) on a virtual descriptor.
#[no_mangle]
pub(crate) unsafe extern "C" fn isatty(fd: c_int) -> c_int {
    match on_vfile(fd, 0, |_, f| {
        set_errno(not_a_tty(f));
        0
    }) {
        Some(r) => r,
        None => call_real!(isatty: unsafe extern "C" fn(c_int) -> c_int, 0; fd),
    }
}

/// ttyname(3): NULL with errno ENOTTY (or EBADF) on a virtual descriptor.
#[no_mangle]
pub(crate) unsafe extern "C" fn ttyname(fd: c_int) -> *mut libc::c_char {
    match on_vfile(fd, std::ptr::null_mut(), |_, f| {
        set_errno(not_a_tty(f));
        std::ptr::null_mut()
    }) {
        Some(r) => r,
        None => {
            call_real!(ttyname: unsafe extern "C" fn(c_int) -> *mut libc::c_char, std::ptr::null_mut(); fd)
        }
    }
}

/// ttyname_r on a virtual descriptor: glibc's checks of the buffer first (EINVAL for none,
/// ERANGE for one shorter than "/dev/pts/"), then ENOTTY (or EBADF); errno is set too.
fn ttyname_r_virtual(f: &OpenFile, buf: *mut libc::c_char, len: size_t) -> c_int {
    let e = if buf.is_null() {
        libc::EINVAL
    } else if len < b"/dev/pts/\0".len() {
        libc::ERANGE
    } else {
        not_a_tty(f)
    };
    set_errno(e);
    e
}

/// ttyname_r(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn ttyname_r(fd: c_int, buf: *mut libc::c_char, len: size_t) -> c_int {
    match on_vfile(fd, libc::EIO, |_, f| ttyname_r_virtual(f, buf, len)) {
        Some(r) => r,
        None => {
            call_real!(ttyname_r: unsafe extern "C" fn(c_int, *mut libc::c_char, size_t) -> c_int, libc::ENOSYS; fd, buf, len)
        }
    }
}

/// The fortified ttyname_r.
#[no_mangle]
pub(crate) unsafe extern "C" fn __ttyname_r_chk(
    fd: c_int,
    buf: *mut libc::c_char,
    len: size_t,
    buflen: size_t,
) -> c_int {
    match on_vfile(fd, libc::EIO, |_, f| ttyname_r_virtual(f, buf, len)) {
        Some(r) => r,
        None => {
            call_real!(__ttyname_r_chk: unsafe extern "C" fn(c_int, *mut libc::c_char, size_t, size_t) -> c_int, libc::ENOSYS; fd, buf, len, buflen)
        }
    }
}

/// The termios calls: `tty_hooks!(name(args) -> ret; ...)` defines each `name` to fail
/// with ENOTTY (EBADF for O_PATH) on virtual descriptors and to call libc's otherwise.
macro_rules! tty_hooks {
    ($($name:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {$(
        /// A terminal call: ENOTTY (EBADF for O_PATH) on virtual descriptors; passed to
        /// libc otherwise.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(fd: c_int, $($a: $t),*) -> $r {
            match on_vfile(fd, -1, |_, f| ret(Err(not_a_tty(f)))) {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(c_int, $($t),*) -> $r, -1; fd, $($a),*),
            }
        }
    )*};
}
tty_hooks! {
    tcgetattr(t: *mut libc::termios) -> c_int;
    tcsetattr(act: c_int, t: *const libc::termios) -> c_int;
    tcgetpgrp() -> libc::pid_t;
    tcgetsid() -> libc::pid_t;
}

type MmapFn = unsafe extern "C" fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void;

/// The mmap flags a MAP_SHARED_VALIDATE mapping may carry (the kernel's LEGACY_MAP_MASK;
/// MAP_SYNC, the one extra flag ext4 knows, needs DAX): any other bit is EOPNOTSUPP.
const LEGACY_MAP_MASK: c_int = libc::MAP_SHARED
    | libc::MAP_PRIVATE
    | libc::MAP_FIXED
    | libc::MAP_ANONYMOUS
    | libc::MAP_DENYWRITE
    | libc::MAP_EXECUTABLE
    | 0x400_0000 // MAP_UNINITIALIZED
    | libc::MAP_GROWSDOWN
    | libc::MAP_LOCKED
    | libc::MAP_NORESERVE
    | libc::MAP_POPULATE
    | libc::MAP_NONBLOCK
    | libc::MAP_STACK
    | libc::MAP_HUGETLB;

/// The map type bits of mmap's flags (MAP_SHARED 1, MAP_PRIVATE 2, MAP_SHARED_VALIDATE 3;
/// the kernel's MAP_TYPE).
const MAP_TYPE: c_int = 0x0f;

/// A private copy of a virtual file's bytes: an anonymous mapping filled from the file
/// (zeros past its end), then given the protection asked for. The checks are the
/// kernel's, in its order: a misaligned offset or an empty length is EINVAL, a map type
/// other than shared, private or shared-validate is EINVAL, unknown flags with
/// MAP_SHARED_VALIDATE are EOPNOTSUPP, a writable shared mapping is EACCES (the
/// descriptor is open read-only), a directory is ENODEV. A private mapping may be
/// writable: its pages are copy-on-write in the kernel, here they are ours from the start,
/// and writes never reach the image either way.
fn mmap_virtual(
    st: &State,
    f: &OpenFile,
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    off: off_t,
) -> *mut c_void {
    let fail = |e| {
        set_errno(e);
        libc::MAP_FAILED
    };
    if off < 0 || off % 4096 != 0 || len == 0 {
        return fail(libc::EINVAL);
    }
    let shared = match flags & MAP_TYPE {
        libc::MAP_SHARED => true,
        libc::MAP_SHARED_VALIDATE if flags & !(LEGACY_MAP_MASK | MAP_TYPE) != 0 => {
            return fail(libc::EOPNOTSUPP)
        }
        libc::MAP_SHARED_VALIDATE => true,
        libc::MAP_PRIVATE => false,
        _ => return fail(libc::EINVAL),
    };
    if f.kind != usfs_vfs::FileKind::File {
        return fail(libc::ENODEV);
    }
    if shared && prot & libc::PROT_WRITE != 0 {
        return crate::h_mmap::map_shared(st, f, addr, len, prot, flags, off);
    }
    let anon_flags = (flags & !MAP_TYPE) | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    let p = call_real!(mmap: MmapFn, libc::MAP_FAILED; addr, len, libc::PROT_READ | libc::PROT_WRITE, anon_flags, -1, 0);
    if p == libc::MAP_FAILED {
        return p;
    }
    let size = f.node.attrs().map_or(0, |m| m.size);
    let want = (size.saturating_sub(off as u64)).min(len as u64) as usize;
    if want > 0 {
        if let Err(e) = usfs_vfs::read_file(&*f.node.fs, f.ino(), off as u64, slice(p, want)) {
            // SAFETY: unmapping the mapping made just above.
            unsafe { libc::syscall(libc::SYS_munmap, p, len) };
            return fail(e);
        }
    }
    // SAFETY: changing the protection of the mapping made just above.
    if unsafe { libc::syscall(libc::SYS_mprotect, p, len, prot) } != 0 {
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL);
        // SAFETY: as above.
        unsafe { libc::syscall(libc::SYS_munmap, p, len) };
        return fail(e);
    }
    p
}

macro_rules! mmap_hooks {
    ($($name:ident),*) => {$(
        /// mmap(2): virtual descriptors get a private copy of the file's bytes.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void {
            if flags & libc::MAP_FIXED != 0 {
                // Whatever is mapped there goes: a shared mapping of ours is settled first.
                crate::h_mmap::replaced(addr as usize, len);
            }
            if flags & libc::MAP_ANONYMOUS == 0 {
                if let Some(r) = on_vfile(fd, libc::MAP_FAILED, |st, f| mmap_virtual(st, &f, addr, len, prot, flags, off)) {
                    return r;
                }
            }
            call_real!($name: MmapFn, libc::MAP_FAILED; addr, len, prot, flags, fd, off)
        }
    )*};
}
mmap_hooks!(mmap, mmap64);

/// Copies up to `len` bytes of virtual file `f` from `off` (or its offset) to the real
/// descriptor `out` (at `out_off`, or its offset), writing straight from the image mapping
/// where the data is stored uncompressed. Returns the bytes written.
pub(crate) fn copy_out(
    f: &OpenFile,
    fd: c_int,
    off: Option<&mut i64>,
    out: c_int,
    out_off: Option<&mut i64>,
    len: usize,
) -> ssize_t {
    let start = match &off {
        Some(o) if **o < 0 => return ret(Err(libc::EINVAL)),
        Some(o) => **o as u64,
        None => match f.offset_fd(fd) {
            Ok(o) => o,
            Err(e) => return ret(Err(e)),
        },
    };
    let len = len.min(1 << 20);
    let size = match f.node.attrs() {
        Ok(m) => m.size,
        Err(e) => return ret(Err(e)),
    };
    let len = (size.saturating_sub(start)).min(len as u64) as usize;
    if len == 0 {
        return 0;
    }
    let mapped = f.node.fs.mapped_data(f.ino(), start, len).ok().flatten();
    let mut tmp = Vec::new();
    let data: &[u8] = match mapped {
        Some(s) if !s.is_empty() => s,
        _ => {
            tmp.resize(len, 0);
            match f.pread(&mut tmp, start) {
                Ok(n) => &tmp[..n],
                Err(e) => return ret(Err(e)),
            }
        }
    };
    let n = match &out_off {
        Some(o) => {
            call_real!(pwrite64: unsafe extern "C" fn(c_int, *const c_void, size_t, off_t) -> ssize_t, -1; out, data.as_ptr().cast(), data.len(), **o)
        }
        None => {
            call_real!(write: unsafe extern "C" fn(c_int, *const c_void, size_t) -> ssize_t, -1; out, data.as_ptr().cast(), data.len())
        }
    };
    if n > 0 {
        match off {
            Some(o) => *o += n as i64,
            None => {
                let _ = f.seek_fd(fd, start as i64 + n as i64, libc::SEEK_SET);
            }
        }
        if let Some(o) = out_off {
            *o += n as i64;
        }
    }
    n
}

/// What the kernel's checks of copy_file_range and splice look at in one descriptor.
struct Ends {
    /// S_IFMT of the file.
    fmt: libc::mode_t,
    /// Open for reading (not O_PATH, not write-only).
    readable: bool,
    /// Open for writing and not O_APPEND.
    writable: bool,
}

/// [`Ends`] of a descriptor, virtual (read-only, never writable) or real (fstat and
/// F_GETFL, raw system calls); EBADF when it is not open.
fn ends(st: &State, fd: c_int) -> Result<Ends, i32> {
    if let Some(f) = st.fds.get(fd) {
        if f.flags() & libc::O_PATH != 0 {
            return Err(libc::EBADF);
        }
        let fmt = match f.kind {
            usfs_vfs::FileKind::Dir => libc::S_IFDIR,
            usfs_vfs::FileKind::File => libc::S_IFREG,
            usfs_vfs::FileKind::Other => libc::S_IFLNK,
        };
        return Ok(Ends {
            fmt,
            readable: true,
            writable: false,
        });
    }
    // SAFETY: struct stat is plain old data; all-zero is valid.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat and fcntl(F_GETFL) on a descriptor number, writing into `sb`.
    let (r, fl) = unsafe {
        (
            libc::syscall(libc::SYS_fstat, fd, &mut sb as *mut libc::stat),
            libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL),
        )
    };
    if r != 0 || fl < 0 {
        return Err(libc::EBADF);
    }
    let fl = fl as c_int;
    let acc = fl & libc::O_ACCMODE;
    Ok(Ends {
        fmt: sb.st_mode & libc::S_IFMT,
        readable: fl & libc::O_PATH == 0 && acc != libc::O_WRONLY,
        writable: fl & libc::O_PATH == 0 && acc != libc::O_RDONLY && fl & libc::O_APPEND == 0,
    })
}

/// copy_file_range(2) with a virtual descriptor on either side: the kernel's answer.
/// Flags are EINVAL; a directory on either side is EISDIR, anything else but regular files
/// EINVAL (a pipe, for one); then a source not open for reading or a destination not open
/// for writing (a virtual one never is) is EBADF; and a copy between two file systems
/// without a shared copy method is EXDEV, which is every copy out of a mount (the
/// destination is never on the same read-only image). Programs then fall back to
/// read/write or sendfile, as on a kernel mount.
fn copy_file_range_virtual(st: &State, fd_in: c_int, fd_out: c_int, flags: c_uint) -> ssize_t {
    let (i, o) = match (ends(st, fd_in), ends(st, fd_out)) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => return ret(Err(e)),
    };
    let e = if flags != 0 {
        libc::EINVAL
    } else if i.fmt == libc::S_IFDIR || o.fmt == libc::S_IFDIR {
        libc::EISDIR
    } else if i.fmt != libc::S_IFREG || o.fmt != libc::S_IFREG {
        libc::EINVAL
    } else if !i.readable || !o.writable {
        libc::EBADF
    } else {
        libc::EXDEV
    };
    ret(Err(e))
}

/// copy_file_range(2): a virtual descriptor on either side gets the kernel's errors
/// ([`copy_file_range_virtual`]); others go to libc.
#[no_mangle]
pub(crate) unsafe extern "C" fn copy_file_range(
    fd_in: c_int,
    off_in: *mut i64,
    fd_out: c_int,
    off_out: *mut i64,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    if let Some(st) = state() {
        if st.fds.is_virtual(fd_in) || st.fds.is_virtual(fd_out) {
            if let Some(r) = hooked(-1, |st| {
                Some(copy_file_range_virtual(st, fd_in, fd_out, flags))
            }) {
                return r;
            }
        }
    }
    call_real!(copy_file_range: unsafe extern "C" fn(c_int, *mut i64, c_int, *mut i64, size_t, c_uint) -> ssize_t, -1; fd_in, off_in, fd_out, off_out, len, flags)
}

macro_rules! sendfile_hooks {
    ($($name:ident),*) => {$(
        /// sendfile(2): from a virtual descriptor, emulated; into one, EBADF.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(out: c_int, fd_in: c_int, off: *mut off_t, count: size_t) -> ssize_t {
            if let Some(st) = state() {
                if st.fds.is_virtual(out) {
                    set_errno(libc::EBADF);
                    return -1;
                }
                // SAFETY: null or a valid pointer, as sendfile's contract says.
                let o = unsafe { off.as_mut() };
                if let Some(r) = on_vfile(fd_in, -1, |_, f| copy_out(f, fd_in, o, out, None, count)) {
                    return r;
                }
            }
            call_real!($name: unsafe extern "C" fn(c_int, c_int, *mut off_t, size_t) -> ssize_t, -1; out, fd_in, off, count)
        }
    )*};
}
sendfile_hooks!(sendfile, sendfile64);

/// splice(2)'s flags (SPLICE_F_MOVE | NONBLOCK | MORE | GIFT).
const SPLICE_F_ALL: c_uint = 0x0f;

/// Bytes a splice into pipe `p` may add without waiting: the free slots of the pipe, a
/// page each (the kernel's splice_file_to_pipe counts slots, not bytes).
fn pipe_room(p: c_int) -> usize {
    let mut queued: c_int = 0;
    // SAFETY: F_GETPIPE_SZ and FIONREAD on a descriptor number; FIONREAD writes an int.
    let (cap, r) = unsafe {
        (
            libc::syscall(libc::SYS_fcntl, p, libc::F_GETPIPE_SZ),
            libc::syscall(
                libc::SYS_ioctl,
                p,
                libc::FIONREAD,
                &mut queued as *mut c_int,
            ),
        )
    };
    if cap <= 0 || r != 0 {
        return 0;
    }
    (cap as usize).saturating_sub((queued.max(0) as usize).next_multiple_of(4096))
}

/// splice(2) with a virtual descriptor on either side, checked in the kernel's order:
/// len 0 is 0, unknown flags EINVAL, an offset given for a pipe ESPIPE, a side not open
/// for reading or writing (a virtual destination) EBADF, no pipe on either side EINVAL.
/// A virtual file into a pipe is emulated: the bytes at `*off_in` (advanced) or at the
/// file offset (moved) are written into the pipe, as many as fit (a page per free slot);
/// a full pipe is EAGAIN with SPLICE_F_NONBLOCK or an O_NONBLOCK pipe, and otherwise
/// waits for room (a write of at most a page); the end of the file gives 0.
fn splice_virtual(
    st: &State,
    fd_in: c_int,
    off_in: *mut i64,
    fd_out: c_int,
    off_out: *mut i64,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    if len == 0 {
        return 0;
    }
    if flags & !SPLICE_F_ALL != 0 {
        return ret(Err(libc::EINVAL));
    }
    let (i, o) = match (ends(st, fd_in), ends(st, fd_out)) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => return ret(Err(e)),
    };
    let (in_pipe, out_pipe) = (i.fmt == libc::S_IFIFO, o.fmt == libc::S_IFIFO);
    if (in_pipe && !off_in.is_null()) || (out_pipe && !off_out.is_null()) {
        return ret(Err(libc::ESPIPE));
    }
    if !i.readable || !o.writable {
        return ret(Err(libc::EBADF));
    }
    if !out_pipe || i.fmt != libc::S_IFREG {
        // Only a virtual source can get here with a pipe out; a directory cannot be
        // spliced (no splice_read), and a file-to-file splice needs a pipe.
        return ret(Err(libc::EINVAL));
    }
    let Some(f) = st.fds.get(fd_in) else {
        return ret(Err(libc::EBADF));
    };
    // SAFETY: splice's contract: null or a valid loff_t pointer.
    let off = unsafe { off_in.as_mut() };
    if off.as_deref().is_some_and(|o| *o < 0) {
        return ret(Err(libc::EINVAL));
    }
    // SAFETY: F_GETFL on a descriptor number.
    let pipe_fl = unsafe { libc::syscall(libc::SYS_fcntl, fd_out, libc::F_GETFL) } as c_int;
    let nonblock = flags & libc::SPLICE_F_NONBLOCK != 0 || pipe_fl & libc::O_NONBLOCK != 0;
    let room = pipe_room(fd_out);
    let n = match room {
        0 if nonblock => return ret(Err(libc::EAGAIN)),
        // Full: a write of up to a page waits for room (atomic, at most PIPE_BUF).
        0 => len.min(4096),
        r => len.min(r),
    };
    copy_out(&f, fd_in, off, fd_out, None, n)
}

/// splice(2): from a virtual file into a pipe, emulated; every other use of a virtual
/// descriptor gets the kernel's error ([`splice_virtual`]); others go to libc.
#[no_mangle]
pub(crate) unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut i64,
    fd_out: c_int,
    off_out: *mut i64,
    len: size_t,
    flags: c_uint,
) -> ssize_t {
    if let Some(st) = state() {
        if st.fds.is_virtual(fd_in) || st.fds.is_virtual(fd_out) {
            if let Some(r) = hooked(-1, |st| {
                Some(splice_virtual(
                    st, fd_in, off_in, fd_out, off_out, len, flags,
                ))
            }) {
                return r;
            }
        }
    }
    call_real!(splice: unsafe extern "C" fn(c_int, *mut i64, c_int, *mut i64, size_t, c_uint) -> ssize_t, -1; fd_in, off_in, fd_out, off_out, len, flags)
}
