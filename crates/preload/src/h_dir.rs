//! Directory streams: opendir/fdopendir/readdir(64)(_r)/closedir/dirfd/rewinddir/
//! seekdir/telldir, getdents64, scandir(64), scandirat(64). glibc's own opendir and
//! scandir do not call the interposable open, so virtual directories get DIR objects of
//! ours (told apart from glibc's by address).

use crate::h_io::on_vfile;
use crate::state::{sys_close, State, Target};
use crate::sys::{call_real, hooked, ret, set_errno};
use libc::{c_char, c_int, c_long, c_void, dirent64, size_t, ssize_t, DIR};
use std::ptr::null_mut;

/// Our DIR: the virtual descriptor it reads, the entry readdir hands out, and the
/// entries read ahead.
struct VDir {
    fd: c_int,
    ent: dirent64,
    ahead: ReadAhead,
}

/// Entries listed ahead of a directory stream, as glibc's DIR keeps what one getdents64
/// returned: one listing per batch rather than per entry (a listing of a hash-ordered
/// ext4 directory hashes a whole leaf block before it returns its first entry). The
/// descriptor's position is past the batch; the stream's is that of the first entry
/// left.
#[derive(Default)]
struct ReadAhead {
    entries: std::collections::VecDeque<Ahead>,
    /// Position of the first entry left (meaningful while there is one).
    pos: u64,
}

/// One entry read ahead: name, inode, d_type and the position after it.
struct Ahead {
    name: Vec<u8>,
    ino: u64,
    dtype: u8,
    next: u64,
}

/// Entries listed per batch.
const READ_AHEAD: usize = 256;

impl ReadAhead {
    /// The next entry of the stream on `fd`, listing another batch when none is left;
    /// None at the end.
    fn next(&mut self, st: &State, fd: c_int) -> Result<Option<Ahead>, i32> {
        if self.entries.is_empty() {
            let f = st.fds.get(fd).ok_or(libc::EBADF)?;
            self.pos = f.offset();
            let entries = &mut self.entries;
            f.read_dir(&mut |name, ino, dtype, next| {
                if entries.len() == READ_AHEAD {
                    return false;
                }
                let name = name.to_vec();
                entries.push_back(Ahead {
                    name,
                    ino,
                    dtype,
                    next,
                });
                true
            })?;
        }
        let e = self.entries.pop_front();
        if let Some(e) = &e {
            self.pos = e.next;
        }
        Ok(e)
    }

    /// The position of the stream (telldir), if entries are read ahead of the
    /// descriptor's.
    fn position(&self) -> Option<u64> {
        (!self.entries.is_empty()).then_some(self.pos)
    }
}

fn new_vdir(st: &State, fd: c_int) -> *mut DIR {
    let d = Box::new(VDir {
        fd,
        // SAFETY: dirent64 is plain old data; all-zero is valid.
        ent: unsafe { std::mem::zeroed() },
        ahead: ReadAhead::default(),
    });
    let p = Box::into_raw(d);
    st.add_dir(p as usize, fd);
    p.cast()
}

fn vdir<'a>(st: &State, dir: *mut DIR) -> Option<&'a mut VDir> {
    st.dir_fd(dir as usize)?;
    // SAFETY: the address is one of our live VDir boxes (registered in `st.dirs`).
    Some(unsafe { &mut *dir.cast::<VDir>() })
}

fn fail_null<T>(e: i32) -> *mut T {
    set_errno(e);
    null_mut()
}

/// The flags glibc's opendir opens a directory with (O_LARGEFILE is the kernel's to add).
const OPENDIR_FLAGS: c_int =
    libc::O_RDONLY | libc::O_NONBLOCK | libc::O_DIRECTORY | libc::O_CLOEXEC;

/// opendir(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn opendir(path: *const c_char) -> *mut DIR {
    let r = hooked(null_mut(), |st| {
        match st.classify(libc::AT_FDCWD, path, true) {
            Ok(Target::Pass) => None,
            Ok(Target::HostAbs(c)) => Some(
                call_real!(opendir: unsafe extern "C" fn(*const c_char) -> *mut DIR, null_mut(); c.as_ptr()),
            ),
            // glibc's opendir opens with O_NONBLOCK too (F_GETFL on dirfd shows it).
            Ok(Target::Virt(vp)) => Some(match st.open_virtual(vp, OPENDIR_FLAGS) {
                Ok(fd) => new_vdir(st, fd),
                Err(e) => fail_null(e),
            }),
            Err(e) => Some(fail_null(e)),
        }
    });
    match r {
        Some(r) => r,
        None => {
            call_real!(opendir: unsafe extern "C" fn(*const c_char) -> *mut DIR, null_mut(); path)
        }
    }
}

/// fdopendir(3): the stream takes over the descriptor.
#[no_mangle]
pub(crate) unsafe extern "C" fn fdopendir(fd: c_int) -> *mut DIR {
    let r = on_vfile(fd, null_mut(), |st, f| {
        if f.kind != usfs_vfs::FileKind::Dir {
            return fail_null(libc::ENOTDIR);
        }
        new_vdir(st, fd)
    });
    match r {
        Some(r) => r,
        None => call_real!(fdopendir: unsafe extern "C" fn(c_int) -> *mut DIR, null_mut(); fd),
    }
}

/// Reads the next entry of a virtual directory stream into `ent`; false at the end.
/// Names longer than a dirent holds are skipped.
fn next_entry(
    st: &State,
    fd: c_int,
    ahead: &mut ReadAhead,
    ent: &mut dirent64,
) -> Result<bool, i32> {
    let e = loop {
        match ahead.next(st, fd)? {
            None => return Ok(false),
            Some(e) if e.name.len() > 255 => continue,
            Some(e) => break e,
        }
    };
    ent.d_ino = e.ino;
    ent.d_off = e.next as i64;
    ent.d_type = e.dtype;
    ent.d_reclen = std::mem::size_of::<dirent64>() as u16;
    for (d, &s) in ent.d_name.iter_mut().zip(&e.name) {
        *d = s as c_char;
    }
    ent.d_name[e.name.len()] = 0;
    Ok(true)
}

fn readdir_common(dir: *mut DIR) -> Option<*mut dirent64> {
    hooked(null_mut(), |st| {
        let d = vdir(st, dir)?;
        Some(match next_entry(st, d.fd, &mut d.ahead, &mut d.ent) {
            Ok(true) => &mut d.ent as *mut dirent64,
            Ok(false) => null_mut(),
            Err(e) => fail_null(e),
        })
    })
}

/// readdir(3) (struct dirent and dirent64 have one layout on x86_64).
#[no_mangle]
pub(crate) unsafe extern "C" fn readdir(dir: *mut DIR) -> *mut dirent64 {
    match readdir_common(dir) {
        Some(r) => r,
        None => {
            call_real!(readdir: unsafe extern "C" fn(*mut DIR) -> *mut dirent64, null_mut(); dir)
        }
    }
}

/// readdir64(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn readdir64(dir: *mut DIR) -> *mut dirent64 {
    match readdir_common(dir) {
        Some(r) => r,
        None => {
            call_real!(readdir64: unsafe extern "C" fn(*mut DIR) -> *mut dirent64, null_mut(); dir)
        }
    }
}

macro_rules! readdir_r_hooks {
    ($($name:ident),*) => {$(
        /// readdir_r(3).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(dir: *mut DIR, entry: *mut dirent64, result: *mut *mut dirent64) -> c_int {
            let r = hooked(libc::EIO, |st| {
                let d = vdir(st, dir)?;
                // SAFETY: the caller passes a dirent buffer and a result pointer.
                let (entry, result) = unsafe { (&mut *entry, &mut *result) };
                Some(match next_entry(st, d.fd, &mut d.ahead, entry) {
                    Ok(true) => { *result = entry; 0 }
                    Ok(false) => { *result = null_mut(); 0 }
                    Err(e) => e,
                })
            });
            match r {
                Some(r) => r,
                None => call_real!($name: unsafe extern "C" fn(*mut DIR, *mut dirent64, *mut *mut dirent64) -> c_int, libc::ENOSYS; dir, entry, result),
            }
        }
    )*};
}
readdir_r_hooks!(readdir_r, readdir64_r);

/// closedir(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn closedir(dir: *mut DIR) -> c_int {
    let r = hooked(-1, |st| {
        let fd = st.remove_dir(dir as usize)?;
        // SAFETY: the address was one of our VDir boxes, now unregistered: we own it.
        drop(unsafe { Box::from_raw(dir.cast::<VDir>()) });
        st.fds.remove(fd);
        Some(sys_close(fd))
    });
    match r {
        Some(r) => r,
        None => call_real!(closedir: unsafe extern "C" fn(*mut DIR) -> c_int, -1; dir),
    }
}

/// dirfd(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn dirfd(dir: *mut DIR) -> c_int {
    match hooked(-1, |st| st.dir_fd(dir as usize)) {
        Some(r) => r,
        None => call_real!(dirfd: unsafe extern "C" fn(*mut DIR) -> c_int, -1; dir),
    }
}

/// rewinddir(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn rewinddir(dir: *mut DIR) {
    let r = hooked((), |st| {
        let d = vdir(st, dir)?;
        d.ahead = ReadAhead::default();
        if let Some(f) = st.fds.get(d.fd) {
            let _ = f.seek(0, libc::SEEK_SET);
        }
        Some(())
    });
    if r.is_none() {
        call_real!(rewinddir: unsafe extern "C" fn(*mut DIR), (); dir)
    }
}

/// telldir(3): the position of the next entry.
#[no_mangle]
pub(crate) unsafe extern "C" fn telldir(dir: *mut DIR) -> c_long {
    let r = hooked(-1, |st| {
        let d = vdir(st, dir)?;
        let told = d.ahead.position();
        Some(
            st.fds
                .get(d.fd)
                .map_or(-1, |f| told.unwrap_or(f.offset()) as c_long),
        )
    });
    match r {
        Some(r) => r,
        None => call_real!(telldir: unsafe extern "C" fn(*mut DIR) -> c_long, -1; dir),
    }
}

/// seekdir(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn seekdir(dir: *mut DIR, pos: c_long) {
    let r = hooked((), |st| {
        let d = vdir(st, dir)?;
        d.ahead = ReadAhead::default();
        if let Some(f) = st.fds.get(d.fd) {
            let _ = f.seek(pos, libc::SEEK_SET);
        }
        Some(())
    });
    if r.is_none() {
        call_real!(seekdir: unsafe extern "C" fn(*mut DIR, c_long), (); dir, pos)
    }
}

/// getdents64(2): linux_dirent64 records (ino, off, reclen, type, name, NUL, padding to 8).
#[no_mangle]
pub(crate) unsafe extern "C" fn getdents64(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t {
    let r = on_vfile(fd, -1, |_, f| {
        if buf.is_null() {
            return ret(Err(libc::EFAULT));
        }
        // SAFETY: the caller's buffer of `count` bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), count) };
        let mut used = 0usize;
        let r = f.read_dir(&mut |name, ino, dtype, next| {
            let reclen = (19 + name.len() + 1).next_multiple_of(8);
            if used + reclen > out.len() {
                return false;
            }
            let rec = &mut out[used..used + reclen];
            rec[0..8].copy_from_slice(&ino.to_ne_bytes());
            rec[8..16].copy_from_slice(&(next as i64).to_ne_bytes());
            rec[16..18].copy_from_slice(&(reclen as u16).to_ne_bytes());
            rec[18] = dtype;
            rec[19..19 + name.len()].copy_from_slice(name);
            rec[19 + name.len()..].fill(0);
            used += reclen;
            true
        });
        match r {
            Err(e) => ret(Err(e)),
            Ok(()) if used == 0 => {
                // Either the end (0), or the first entry did not fit (EINVAL).
                let mut more = false;
                let _ = f.read_dir(&mut |_, _, _, _| {
                    more = true;
                    false
                });
                if more {
                    ret(Err(libc::EINVAL))
                } else {
                    0
                }
            }
            Ok(()) => used as ssize_t,
        }
    });
    match r {
        Some(r) => r,
        None => {
            call_real!(getdents64: unsafe extern "C" fn(c_int, *mut c_void, size_t) -> ssize_t, -1; fd, buf, count)
        }
    }
}

type Filter = Option<unsafe extern "C" fn(*const dirent64) -> c_int>;
type Compar = Option<unsafe extern "C" fn(*const c_void, *const c_void) -> c_int>;

/// scandir on a virtual directory: entries copied into malloc'd dirents (the caller
/// frees them), filtered and sorted with the caller's functions.
fn scandir_virtual(
    st: &State,
    fd: c_int,
    list: *mut *mut *mut dirent64,
    filter: Filter,
    compar: Compar,
) -> c_int {
    let mut items: Vec<*mut dirent64> = Vec::new();
    // SAFETY: dirent64 is plain old data; all-zero is valid.
    let mut ent: dirent64 = unsafe { std::mem::zeroed() };
    let mut ahead = ReadAhead::default();
    let result = loop {
        match next_entry(st, fd, &mut ahead, &mut ent) {
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
            Ok(true) => {
                if let Some(keep) = filter {
                    // SAFETY: calling the caller's filter on a valid entry.
                    if unsafe { keep(&ent) } == 0 {
                        continue;
                    }
                }
                // SAFETY: malloc of a dirent64; checked for null.
                let p = unsafe { libc::malloc(std::mem::size_of::<dirent64>()) }.cast::<dirent64>();
                if p.is_null() {
                    break Err(libc::ENOMEM);
                }
                // SAFETY: p is a fresh allocation of the right size.
                unsafe { p.write(ent) };
                items.push(p);
            }
        }
    };
    let cleanup = |items: &[*mut dirent64]| {
        for &p in items {
            // SAFETY: each came from malloc above.
            unsafe { libc::free(p.cast()) };
        }
    };
    if let Err(e) = result {
        cleanup(&items);
        return ret(Err(e));
    }
    let n = items.len();
    // SAFETY: malloc of the pointer array (at least one slot); checked for null.
    let arr = unsafe { libc::malloc(std::mem::size_of::<*mut dirent64>() * n.max(1)) }
        .cast::<*mut dirent64>();
    if arr.is_null() {
        cleanup(&items);
        return ret(Err(libc::ENOMEM));
    }
    // SAFETY: arr holds n slots.
    unsafe { std::ptr::copy_nonoverlapping(items.as_ptr(), arr, n) };
    if let Some(c) = compar {
        // SAFETY: qsort over the n pointers with the caller's comparison function.
        unsafe { libc::qsort(arr.cast(), n, std::mem::size_of::<*mut dirent64>(), Some(c)) };
    }
    if list.is_null() {
        return ret(Err(libc::EFAULT));
    }
    // SAFETY: the caller's result pointer.
    unsafe { *list = arr };
    n as c_int
}

/// The common body of scandir and scandirat: `None` when the directory is not ours; a
/// host path reached through a mount (`..` out of it) goes to `real` as an absolute path.
fn scandir_common(
    dirfd: c_int,
    path: *const c_char,
    list: *mut *mut *mut dirent64,
    filter: Filter,
    compar: Compar,
    real: impl FnOnce(*const c_char) -> c_int,
) -> Option<c_int> {
    hooked(-1, |st| match st.classify(dirfd, path, true) {
        Ok(Target::Pass) => None,
        Ok(Target::HostAbs(c)) => Some(real(c.as_ptr())),
        Ok(Target::Virt(vp)) => Some(
            match st.open_virtual(vp, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) {
                Ok(fd) => {
                    let r = scandir_virtual(st, fd, list, filter, compar);
                    st.fds.remove(fd);
                    sys_close(fd);
                    r
                }
                Err(e) => ret(Err(e)),
            },
        ),
        Err(e) => Some(ret(Err(e))),
    })
}

type ScandirFn =
    unsafe extern "C" fn(*const c_char, *mut *mut *mut dirent64, Filter, Compar) -> c_int;
type ScandiratFn =
    unsafe extern "C" fn(c_int, *const c_char, *mut *mut *mut dirent64, Filter, Compar) -> c_int;

macro_rules! scandir_hooks {
    ($($name:ident),*) => {$(
        /// scandir(3).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(path: *const c_char, list: *mut *mut *mut dirent64, filter: Filter, compar: Compar) -> c_int {
            let real = |p| call_real!($name: ScandirFn, -1; p, list, filter, compar);
            match scandir_common(libc::AT_FDCWD, path, list, filter, compar, real) {
                Some(r) => r,
                None => real(path),
            }
        }
    )*};
}
scandir_hooks!(scandir, scandir64);

macro_rules! scandirat_hooks {
    ($($name:ident),*) => {$(
        /// scandirat(3): glibc's opens the directory with its internal openat, which
        /// never reaches our hooks, so a directory in a mount (by a virtual `dirfd`, an
        /// absolute path, or a path relative to a directory above the mount) is read here.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(dirfd: c_int, path: *const c_char, list: *mut *mut *mut dirent64, filter: Filter, compar: Compar) -> c_int {
            match scandir_common(dirfd, path, list, filter, compar, |p| {
                call_real!($name: ScandiratFn, -1; libc::AT_FDCWD, p, list, filter, compar)
            }) {
                Some(r) => r,
                None => call_real!($name: ScandiratFn, -1; dirfd, path, list, filter, compar),
            }
        }
    )*};
}
scandirat_hooks!(scandirat, scandirat64);
