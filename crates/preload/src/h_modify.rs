//! Path calls that would change a file system: creating names (mkdir, mknod, mkfifo,
//! symlink, link, the mkstemp family), removing them (unlink, rmdir), renaming, and
//! changing attributes (chmod, chown, utimes, truncate, set/removexattr), with their
//! `*at`, `l*` and pre-2.33 spellings.
//!
//! Mounts are read-only, so a call that lands in one fails, with the errno the kernel gives
//! on a read-only kernel mount of the same image; its checks come in a fixed order, which
//! [`Change::errno`] follows: the path's parent is looked up first (ENOENT, ENOTDIR,
//! ELOOP, EACCES), then a new name that exists is EEXIST and "." or ".." as the last
//! component is EEXIST/EISDIR/EINVAL/ENOTEMPTY depending on the call, then the mount's
//! write access is asked for (EROFS), and only then is a missing file ENOENT for calls
//! that change an existing one (chmod of a missing file is ENOENT, unlink of one EROFS).
//! truncate looks at the file's type before asking for write access (EISDIR, EINVAL).
//!
//! Every call that does not land in a mount goes to libc, with its path rewritten to an
//! absolute one when it was relative to a virtual directory and leaves the mount through
//! `..` (the kernel's working directory is not the virtual one). glibc's mkstemp family
//! creates its file with an internal open we cannot see, so those are hooked here too.

use crate::apply::{self, Op, Place};
use crate::state::{empty_path_target, is_empty, State, Target};
use crate::sys::{call_real, hooked, ret};
use libc::{c_char, c_int, c_uint, c_void, size_t};
use std::ffi::{CStr, CString};
use usfs_fs::{FileType, Timestamp};
use usfs_vfs::change::TimeSet;
use usfs_vfs::VPath;

/// The last component of a path, as the kernel's path walk classes it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Last {
    Normal,
    Dot,
    DotDot,
}

/// Where a path of a modifying call lands.
enum Spot {
    /// On the host: call libc with the caller's path (`None`) or this absolute one.
    Host(Option<CString>),
    /// In mount `mount`: the named entry (`None`: there is none, but its parent directory
    /// exists there), and where a new entry of that name would go (its directory, `None`
    /// for a mount's root, and the name).
    Mount {
        mount: usize,
        entry: Option<VPath>,
        last: Last,
        parent: Option<VPath>,
        name: Vec<u8>,
    },
    /// Looking the path (or its parent) up failed with this errno.
    Fail(i32),
}

/// The last component of `p` without trailing slashes.
fn last_name(p: &[u8]) -> Vec<u8> {
    let mut end = p.len();
    while end > 1 && p[end - 1] == b'/' {
        end -= 1;
    }
    let p = &p[..end];
    p[p.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1)..].to_vec()
}

/// Splits `p` (no NUL) into its parent directory and the class of its last component,
/// ignoring trailing slashes: "a/b/" -> ("a", Normal), "b" -> (".", Normal), "/b" ->
/// ("/", Normal), "a/.." -> ("a", DotDot); the root "/" is its own parent.
fn split_last(p: &[u8]) -> (Vec<u8>, Last) {
    let mut end = p.len();
    while end > 1 && p[end - 1] == b'/' {
        end -= 1;
    }
    let p = &p[..end];
    let (parent, name) = match p.iter().rposition(|&c| c == b'/') {
        None => (&b"."[..], p),
        Some(0) => (&b"/"[..], &p[1..]),
        Some(i) => (&p[..i], &p[i + 1..]),
    };
    let last = match name {
        b"." | b"" => Last::Dot,
        b".." => Last::DotDot,
        _ => Last::Normal,
    };
    (parent.to_vec(), last)
}

/// Where `path` (relative to `dirfd`) lands; `follow`: a symbolic link as the last
/// component is followed.
fn spot(st: &State, dirfd: c_int, path: *const c_char, follow: bool) -> Spot {
    match st.classify(dirfd, path, follow) {
        Ok(Target::Pass) => Spot::Host(None),
        Ok(Target::HostAbs(c)) => Spot::Host(Some(c)),
        Ok(Target::Virt(vp)) => {
            // SAFETY: classify found a non-null, NUL-terminated path.
            let p = unsafe { CStr::from_ptr(path) }.to_bytes();
            let (parent, name) = if vp.stack.len() > 1 {
                let mut dir = vp.clone();
                let (_, name) = dir.stack.pop().expect("longer than one");
                (Some(dir), name)
            } else {
                (None, Vec::new())
            };
            Spot::Mount {
                mount: vp.mount,
                last: split_last(p).1,
                entry: Some(vp),
                parent,
                name,
            }
        }
        Err(libc::ENOENT) => {
            // SAFETY: as above (an error means the path reached a mount).
            let p = unsafe { CStr::from_ptr(path) }.to_bytes();
            let (parent, last) = split_last(p);
            let Ok(parent) = CString::new(parent) else {
                return Spot::Fail(libc::ENOENT);
            };
            match st.classify(dirfd, parent.as_ptr(), true) {
                Ok(Target::Virt(dir)) => match st.meta(&dir) {
                    Ok(m) if m.file_type == FileType::Directory => Spot::Mount {
                        mount: dir.mount,
                        entry: None,
                        last,
                        name: last_name(p),
                        parent: Some(dir),
                    },
                    Ok(_) => Spot::Fail(libc::ENOTDIR),
                    Err(e) => Spot::Fail(e),
                },
                Err(e) => Spot::Fail(e),
                // The parent is on the host, so the name is a mount's root, which exists:
                // the lookup failed for another reason.
                Ok(_) => Spot::Fail(libc::ENOENT),
            }
        }
        Err(e) => Spot::Fail(e),
    }
}

/// The errno of open(O_CREAT) without O_EXCL on `path` (relative to `dirfd`), which the
/// lookup following symbolic links did not find in a mount: EROFS when its directory
/// exists (a name that exists here is a dangling symbolic link, whose target open would
/// create), else that lookup's error (a missing or non-directory parent).
pub(crate) fn create_errno(st: &State, dirfd: c_int, path: *const c_char) -> i32 {
    match spot(st, dirfd, path, false) {
        Spot::Mount { last, .. } if last != Last::Normal => libc::EISDIR,
        Spot::Mount { .. } => libc::EROFS,
        Spot::Fail(e) => e,
        Spot::Host(_) => libc::ENOENT,
    }
}

/// open(O_CREAT) of `path` (relative to `dirfd`), which the lookup following symbolic
/// links did not find in a mount: in a read-write mount the file is made (with `mode`)
/// and opened, as the kernel's creating open; otherwise [`create_errno`].
pub(crate) fn create_file(
    st: &State,
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
) -> Result<c_int, i32> {
    let s = spot(st, dirfd, path, false);
    let writable = mount_of(&s)
        .ok()
        .flatten()
        .and_then(|m| st.writer(m))
        .is_some();
    if let (Spot::Mount { entry: Some(_), .. }, true) = (&s, writable) {
        // Another process made it since the caller's lookup: without O_EXCL, open it.
        return existing(st, dirfd, path, flags);
    }
    let (
        Spot::Mount {
            mount,
            entry: None,
            last: Last::Normal,
            parent: Some(dir),
            name,
        },
        Some(w),
    ) = (&s, mount_of(&s).ok().flatten().and_then(|m| st.writer(m)))
    else {
        return Err(create_errno(st, dirfd, path));
    };
    // SAFETY: classify found a non-null, NUL-terminated path.
    if unsafe { CStr::from_ptr(path) }.to_bytes().ends_with(b"/") {
        return Err(libc::EISDIR);
    }
    let place = Place {
        entry: None,
        parent: Some(dir),
        name,
    };
    let file = apply::NewKind::Node(libc::S_IFREG | (mode & 0o7777), 0);
    let m = match apply::create(st, &**w, &place, file) {
        // Another process made it since the lookup: without O_EXCL, open theirs.
        Err(libc::EEXIST) => return existing(st, dirfd, path, flags),
        r => r?,
    };
    let mut vp = dir.clone();
    vp.stack.push((m.ino, name.clone()));
    debug_assert_eq!(vp.mount, *mount);
    // The new file is empty and ours: no O_EXCL or O_TRUNC left to apply, and the
    // permission check is skipped as the kernel skips it for the creator.
    st.open_new(
        vp,
        m,
        flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC),
    )
}

/// A creating open of `path` that another process made first: EEXIST with O_EXCL, else
/// the open of that file.
fn existing(st: &State, dirfd: c_int, path: *const c_char, flags: c_int) -> Result<c_int, i32> {
    if flags & libc::O_EXCL != 0 {
        return Err(libc::EEXIST);
    }
    let follow = flags & libc::O_NOFOLLOW == 0;
    match st.classify(dirfd, path, follow)? {
        Target::Virt(vp) => st.open_virtual(vp, flags),
        _ => Err(libc::EEXIST),
    }
}

/// What a modifying call does to the name it is given.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Change {
    /// Makes a new name (mkdir, mknod, mkfifo, symlink, the new name of link).
    Create,
    /// Changes an existing file's attributes (chmod, chown, utimes, setxattr...).
    Attr,
    /// chmod of a name not followed if it is a symbolic link (lchmod, fchmodat with
    /// AT_SYMLINK_NOFOLLOW): glibc answers EOPNOTSUPP for a link itself.
    ChmodLink,
    /// truncate.
    Truncate,
    /// unlink.
    Unlink,
    /// rmdir.
    Rmdir,
}

impl Change {
    /// The kernel's errno for this change landing in a read-only mount.
    fn errno(self, st: &State, entry: Option<&VPath>, last: Last) -> i32 {
        match self {
            Change::Create if last != Last::Normal || entry.is_some() => libc::EEXIST,
            Change::Create => libc::EROFS,
            Change::Unlink if last != Last::Normal => libc::EISDIR,
            Change::Unlink => libc::EROFS,
            Change::Rmdir if last == Last::Dot => libc::EINVAL,
            Change::Rmdir if last == Last::DotDot => libc::ENOTEMPTY,
            Change::Rmdir => libc::EROFS,
            Change::Attr | Change::ChmodLink if entry.is_none() => libc::ENOENT,
            Change::ChmodLink
                if entry.is_some_and(|vp| {
                    st.meta(vp).is_ok_and(|m| m.file_type == FileType::Symlink)
                }) =>
            {
                libc::EOPNOTSUPP
            }
            Change::Attr | Change::ChmodLink => libc::EROFS,
            Change::Truncate => match entry.map(|vp| st.meta(vp)) {
                None => libc::ENOENT,
                Some(Err(e)) => e,
                Some(Ok(m)) if m.file_type == FileType::Directory => libc::EISDIR,
                Some(Ok(m)) if m.file_type != FileType::Regular => libc::EINVAL,
                Some(Ok(_)) => libc::EROFS,
            },
        }
    }
}

/// A change landing in a mount: the kernel's errno for it on a read-only mount, unless
/// that errno is EROFS (every earlier check passed) and the mount is read-write: then
/// `op` is carried out there.
fn land<'a>(st: &State, change: Change, s: &Spot, op: impl FnOnce() -> Op<'a>) -> c_int {
    let Spot::Mount {
        mount,
        entry,
        last,
        parent,
        name,
    } = s
    else {
        return ret(Err(libc::EINVAL));
    };
    let e = change.errno(st, entry.as_ref(), *last);
    match st.writer(*mount) {
        Some(w) if e == libc::EROFS => {
            let place = Place {
                entry: entry.as_ref(),
                parent: parent.as_ref(),
                name,
            };
            ret(apply::apply(st, w, place, op()).map(|()| 0))
        }
        _ => ret(Err(e)),
    }
}

/// A one-path modifying call: carried out or refused (as [`land`] says) when `path`
/// (relative to `dirfd`) lands in a mount, else `real(dirfd, path)`, with AT_FDCWD and an
/// absolute path when it was rewritten. A null path (utimensat, futimesat), or "" with
/// AT_EMPTY_PATH in `flags`, names `dirfd` itself: a virtual descriptor's file or, for
/// AT_FDCWD, a virtual working directory.
fn one_path<'a>(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    follow: bool,
    change: Change,
    op: impl FnOnce() -> Op<'a>,
    real: impl Fn(c_int, *const c_char) -> c_int,
) -> c_int {
    let r = hooked(-1, |st| {
        let itself = path.is_null() || (flags & libc::AT_EMPTY_PATH != 0 && is_empty(path));
        if itself && dirfd != libc::AT_FDCWD {
            let f = st.fds.get(dirfd)?;
            let s = Spot::Mount {
                mount: f.vpath.mount,
                entry: Some(f.vpath.clone()),
                last: Last::Normal,
                parent: None,
                name: Vec::new(),
            };
            return Some(land(st, change, &s, op));
        }
        match spot(st, dirfd, empty_path_target(dirfd, path, flags), follow) {
            Spot::Host(None) => None,
            Spot::Host(Some(abs)) => Some(real(libc::AT_FDCWD, abs.as_ptr())),
            Spot::Fail(e) => Some(ret(Err(e))),
            s => Some(land(st, change, &s, op)),
        }
    });
    r.unwrap_or_else(|| real(dirfd, path))
}

/// An ID argument of chown: -1 leaves it alone.
fn id(v: u32) -> Option<u32> {
    (v != u32::MAX).then_some(v)
}

/// A C string argument's bytes (empty for null).
fn cbytes<'a>(p: *const c_char) -> &'a [u8] {
    if p.is_null() {
        return &[];
    }
    // SAFETY: a non-null string argument is NUL-terminated.
    unsafe { CStr::from_ptr(p) }.to_bytes()
}

/// A buffer argument (`n` bytes at `v`).
fn buf<'a>(v: *const c_void, n: size_t) -> &'a [u8] {
    if v.is_null() || n == 0 {
        return &[];
    }
    // SAFETY: the caller passes `n` readable bytes at `v`.
    unsafe { std::slice::from_raw_parts(v.cast(), n) }
}

/// Times of utime(2) (null: now).
fn utimbuf_times(t: *const libc::utimbuf) -> (TimeSet, TimeSet) {
    if t.is_null() {
        return (TimeSet::Now, TimeSet::Now);
    }
    // SAFETY: a non-null utimbuf argument points to one.
    let t = unsafe { &*t };
    let at = |s| TimeSet::At(Timestamp { sec: s, nsec: 0 });
    (at(t.actime), at(t.modtime))
}

/// Times of utimes(2) and futimesat: two timevals (null: now).
pub(crate) fn timeval_times(t: *const libc::timeval) -> (TimeSet, TimeSet) {
    if t.is_null() {
        return (TimeSet::Now, TimeSet::Now);
    }
    // SAFETY: a non-null argument points to two timevals.
    let t = unsafe { std::slice::from_raw_parts(t, 2) };
    let at = |v: &libc::timeval| {
        TimeSet::At(Timestamp {
            sec: v.tv_sec,
            nsec: (v.tv_usec.clamp(0, 999_999) * 1000) as u32,
        })
    };
    (at(&t[0]), at(&t[1]))
}

/// Times of utimensat and futimens: two timespecs with UTIME_NOW and UTIME_OMIT (null:
/// now); EINVAL for nanoseconds out of range.
pub(crate) fn timespec_times(t: *const libc::timespec) -> Result<(TimeSet, TimeSet), i32> {
    if t.is_null() {
        return Ok((TimeSet::Now, TimeSet::Now));
    }
    // SAFETY: a non-null argument points to two timespecs.
    let t = unsafe { std::slice::from_raw_parts(t, 2) };
    let one = |v: &libc::timespec| match v.tv_nsec {
        libc::UTIME_NOW => Ok(TimeSet::Now),
        libc::UTIME_OMIT => Ok(TimeSet::Omit),
        n if (0..1_000_000_000).contains(&n) => Ok(TimeSet::At(Timestamp {
            sec: v.tv_sec,
            nsec: n as u32,
        })),
        _ => Err(libc::EINVAL),
    };
    Ok((one(&t[0])?, one(&t[1])?))
}

/// Hooks for one-path calls without a directory descriptor: (name, change, follow).
macro_rules! path_hooks {
    ($($name:ident($p:ident $(, $a:ident: $t:ty)*) => $change:ident, $follow:expr, $op:expr;)*) => {$(
        /// Carried out in read-write mounts, refused in read-only ones (with the kernel's
        /// errno); passed to libc outside mounts.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name($p: *const c_char $(, $a: $t)*) -> c_int {
            one_path(libc::AT_FDCWD, $p, 0, $follow, Change::$change, || $op, |_, p| {
                call_real!($name: unsafe extern "C" fn(*const c_char $(, $t)*) -> c_int, -1; p $(, $a)*)
            })
        }
    )*};
}
path_hooks! {
    mkdir(path, mode: libc::mode_t) => Create, false, Op::Mkdir(mode);
    mknod(path, mode: libc::mode_t, dev: libc::dev_t) => Create, false, Op::Mknod(mode, dev);
    mkfifo(path, mode: libc::mode_t) => Create, false, Op::Mknod(libc::S_IFIFO | (mode & 0o7777), 0);
    rmdir(path) => Rmdir, false, Op::Rmdir;
    unlink(path) => Unlink, false, Op::Unlink;
    chmod(path, mode: libc::mode_t) => Attr, true, Op::Chmod(mode);
    lchmod(path, mode: libc::mode_t) => ChmodLink, false, Op::Chmod(mode);
    chown(path, uid: libc::uid_t, gid: libc::gid_t) => Attr, true, Op::Chown(id(uid), id(gid));
    lchown(path, uid: libc::uid_t, gid: libc::gid_t) => Attr, false, Op::Chown(id(uid), id(gid));
    utime(path, t: *const libc::utimbuf) => Attr, true, { let (a, m) = utimbuf_times(t); Op::Times(a, m) };
    utimes(path, t: *const libc::timeval) => Attr, true, { let (a, m) = timeval_times(t); Op::Times(a, m) };
    lutimes(path, t: *const libc::timeval) => Attr, false, { let (a, m) = timeval_times(t); Op::Times(a, m) };
    truncate(path, len: libc::off_t) => Truncate, true, Op::Truncate(len);
    truncate64(path, len: libc::off64_t) => Truncate, true, Op::Truncate(len);
    setxattr(path, name: *const c_char, v: *const c_void, n: size_t, fl: c_int) => Attr, true, Op::SetXattr(cbytes(name), buf(v, n), fl);
    lsetxattr(path, name: *const c_char, v: *const c_void, n: size_t, fl: c_int) => Attr, false, Op::SetXattr(cbytes(name), buf(v, n), fl);
    removexattr(path, name: *const c_char) => Attr, true, Op::RemoveXattr(cbytes(name));
    lremovexattr(path, name: *const c_char) => Attr, false, Op::RemoveXattr(cbytes(name));
}

/// Hooks for one-path `*at` calls: (name, change, follow unless this flag is set).
macro_rules! at_hooks {
    ($($name:ident($d:ident, $p:ident $(, $a:ident: $t:ty)*) => $change:ident, $follow:expr, $op:expr;)*) => {$(
        /// Carried out in read-write mounts, refused in read-only ones (with the kernel's
        /// errno); passed to libc outside mounts.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name($d: c_int, $p: *const c_char $(, $a: $t)*) -> c_int {
            one_path($d, $p, 0, $follow, Change::$change, || $op, |d, p| {
                call_real!($name: unsafe extern "C" fn(c_int, *const c_char $(, $t)*) -> c_int, -1; d, p $(, $a)*)
            })
        }
    )*};
}
at_hooks! {
    mkdirat(d, path, mode: libc::mode_t) => Create, false, Op::Mkdir(mode);
    mknodat(d, path, mode: libc::mode_t, dev: libc::dev_t) => Create, false, Op::Mknod(mode, dev);
    mkfifoat(d, path, mode: libc::mode_t) => Create, false, Op::Mknod(libc::S_IFIFO | (mode & 0o7777), 0);
    futimesat(d, path, t: *const libc::timeval) => Attr, true, { let (a, m) = timeval_times(t); Op::Times(a, m) };
}

/// Pre-2.33 mknod entry points (`__xmknod(version, path, mode, &dev)`).
#[no_mangle]
pub(crate) unsafe extern "C" fn __xmknod(
    ver: c_int,
    path: *const c_char,
    mode: libc::mode_t,
    dev: *mut libc::dev_t,
) -> c_int {
    // SAFETY: a non-null device argument points to a dev_t.
    let d = if dev.is_null() { 0 } else { unsafe { *dev } };
    one_path(
        libc::AT_FDCWD,
        path,
        0,
        false,
        Change::Create,
        || Op::Mknod(mode, d),
        |_, p| call_real!(__xmknod: unsafe extern "C" fn(c_int, *const c_char, libc::mode_t, *mut libc::dev_t) -> c_int, -1; ver, p, mode, dev),
    )
}

/// Pre-2.33 mknodat entry point.
#[no_mangle]
pub(crate) unsafe extern "C" fn __xmknodat(
    ver: c_int,
    dirfd: c_int,
    path: *const c_char,
    mode: libc::mode_t,
    dev: *mut libc::dev_t,
) -> c_int {
    // SAFETY: a non-null device argument points to a dev_t.
    let rdev = if dev.is_null() { 0 } else { unsafe { *dev } };
    one_path(
        dirfd,
        path,
        0,
        false,
        Change::Create,
        || Op::Mknod(mode, rdev),
        |d, p| call_real!(__xmknodat: unsafe extern "C" fn(c_int, c_int, *const c_char, libc::mode_t, *mut libc::dev_t) -> c_int, -1; ver, d, p, mode, dev),
    )
}

/// remove(3): glibc unlinks, and removes a directory when unlink says EISDIR, with its
/// internal calls, which never reach the unlink and rmdir hooks. On a read-only mount
/// unlink answers EROFS for anything but "." or ".." as the last component (EISDIR, so
/// rmdir's EINVAL or ENOTEMPTY).
#[no_mangle]
pub(crate) unsafe extern "C" fn remove(path: *const c_char) -> c_int {
    let r = hooked(-1, |st| match spot(st, libc::AT_FDCWD, path, false) {
        Spot::Host(None) => None,
        Spot::Host(Some(abs)) => {
            Some(call_real!(remove: unsafe extern "C" fn(*const c_char) -> c_int, -1; abs.as_ptr()))
        }
        Spot::Fail(e) => Some(ret(Err(e))),
        s => {
            let Spot::Mount { entry, last, .. } = &s else {
                return None;
            };
            let is_dir = *last != Last::Normal
                || entry.as_ref().is_some_and(|vp| {
                    st.meta(vp)
                        .is_ok_and(|m| m.file_type == FileType::Directory)
                });
            let (change, op) = if is_dir {
                (Change::Rmdir, Op::Rmdir)
            } else {
                (Change::Unlink, Op::Unlink)
            };
            Some(land(st, change, &s, || op))
        }
    });
    r.unwrap_or_else(|| call_real!(remove: unsafe extern "C" fn(*const c_char) -> c_int, -1; path))
}

/// unlinkat(2): rmdir with AT_REMOVEDIR, else unlink.
#[no_mangle]
pub(crate) unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let (change, op) = if flags & libc::AT_REMOVEDIR != 0 {
        (Change::Rmdir, Op::Rmdir)
    } else {
        (Change::Unlink, Op::Unlink)
    };
    one_path(
        dirfd,
        path,
        0,
        false,
        change,
        || op,
        |d, p| call_real!(unlinkat: unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int, -1; d, p, flags),
    )
}

/// fchmodat(2) (AT_SYMLINK_NOFOLLOW: the link itself).
#[no_mangle]
pub(crate) unsafe extern "C" fn fchmodat(
    dirfd: c_int,
    path: *const c_char,
    mode: libc::mode_t,
    flags: c_int,
) -> c_int {
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    let change = if follow {
        Change::Attr
    } else {
        Change::ChmodLink
    };
    one_path(
        dirfd,
        path,
        flags,
        follow,
        change,
        || Op::Chmod(mode),
        |d, p| call_real!(fchmodat: unsafe extern "C" fn(c_int, *const c_char, libc::mode_t, c_int) -> c_int, -1; d, p, mode, flags),
    )
}

/// fchownat(2) (AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH).
#[no_mangle]
pub(crate) unsafe extern "C" fn fchownat(
    dirfd: c_int,
    path: *const c_char,
    uid: libc::uid_t,
    gid: libc::gid_t,
    flags: c_int,
) -> c_int {
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    one_path(
        dirfd,
        path,
        flags,
        follow,
        Change::Attr,
        || Op::Chown(id(uid), id(gid)),
        |d, p| call_real!(fchownat: unsafe extern "C" fn(c_int, *const c_char, libc::uid_t, libc::gid_t, c_int) -> c_int, -1; d, p, uid, gid, flags),
    )
}

/// utimensat(2) (a null path: `dirfd` itself; AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH).
#[no_mangle]
pub(crate) unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const libc::timespec,
    flags: c_int,
) -> c_int {
    let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
    // The kernel checks the times before the path (EINVAL), wherever it leads.
    let (at, mt) = match timespec_times(times) {
        Ok(t) => t,
        Err(e) => return ret(Err(e)),
    };
    one_path(
        dirfd,
        path,
        flags,
        follow,
        Change::Attr,
        || Op::Times(at, mt),
        |d, p| call_real!(utimensat: unsafe extern "C" fn(c_int, *const c_char, *const libc::timespec, c_int) -> c_int, -1; d, p, times, flags),
    )
}

/// symlink(2): the new name is the second argument.
#[no_mangle]
pub(crate) unsafe extern "C" fn symlink(target: *const c_char, path: *const c_char) -> c_int {
    one_path(
        libc::AT_FDCWD,
        path,
        0,
        false,
        Change::Create,
        || Op::Symlink(cbytes(target)),
        |_, p| call_real!(symlink: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int, -1; target, p),
    )
}

/// symlinkat(2): the new name is relative to `dirfd`.
#[no_mangle]
pub(crate) unsafe extern "C" fn symlinkat(
    target: *const c_char,
    dirfd: c_int,
    path: *const c_char,
) -> c_int {
    one_path(
        dirfd,
        path,
        0,
        false,
        Change::Create,
        || Op::Symlink(cbytes(target)),
        |d, p| call_real!(symlinkat: unsafe extern "C" fn(*const c_char, c_int, *const c_char) -> c_int, -1; target, d, p),
    )
}

/// The mount a spot is in (`None`: the host), or the errno of a failed lookup.
fn mount_of(s: &Spot) -> Result<Option<usize>, i32> {
    match s {
        Spot::Host(_) => Ok(None),
        Spot::Mount { mount, .. } => Ok(Some(*mount)),
        Spot::Fail(e) => Err(*e),
    }
}

/// A two-path call whose names both lie on the host: `real` with the rewritten absolute
/// paths (and AT_FDCWD) where there are some; `None` when neither was rewritten (the
/// caller's arguments go to libc as they are).
fn host_pair(
    a: &Spot,
    d1: c_int,
    from: *const c_char,
    b: &Spot,
    d2: c_int,
    to: *const c_char,
    real: impl Fn(c_int, *const c_char, c_int, *const c_char) -> c_int,
) -> Option<c_int> {
    let side = |s: &Spot, d, p| match s {
        Spot::Host(Some(abs)) => (true, libc::AT_FDCWD, abs.as_ptr()),
        _ => (false, d, p),
    };
    let ((ra, da, pa), (rb, db, pb)) = (side(a, d1, from), side(b, d2, to));
    (ra || rb).then(|| real(da, pa, db, pb))
}

/// The [`Place`] of a spot in a mount.
fn place(s: &Spot) -> Option<Place<'_>> {
    match s {
        Spot::Mount {
            entry,
            parent,
            name,
            ..
        } => Some(Place {
            entry: entry.as_ref(),
            parent: parent.as_ref(),
            name,
        }),
        _ => None,
    }
}

/// rename(2) and friends: both names are looked up first; names on different mounts (a
/// mount and the host, or two images) are EXDEV; "." or ".." as either last component
/// EBUSY; anything else in a read-only mount EROFS, in a read-write one the rename
/// (renameat2's `flags`). Both on the host: libc, paths rewritten as needed.
fn rename_common(
    d1: c_int,
    from: *const c_char,
    d2: c_int,
    to: *const c_char,
    flags: u32,
    real: impl Fn(c_int, *const c_char, c_int, *const c_char) -> c_int,
) -> c_int {
    let r = hooked(-1, |st| {
        let (a, b) = (spot(st, d1, from, false), spot(st, d2, to, false));
        let (ma, mb) = match (mount_of(&a), mount_of(&b)) {
            (Err(e), _) | (_, Err(e)) => return Some(ret(Err(e))),
            (Ok(ma), Ok(mb)) => (ma, mb),
        };
        if ma != mb {
            return Some(ret(Err(libc::EXDEV)));
        }
        if ma.is_some() {
            let dots = |s: &Spot| matches!(s, Spot::Mount { last, .. } if *last != Last::Normal);
            if dots(&a) || dots(&b) {
                return Some(ret(Err(libc::EBUSY)));
            }
            let (Some(pa), Some(pb), Some(m)) = (place(&a), place(&b), ma) else {
                return Some(ret(Err(libc::EROFS)));
            };
            return Some(ret(match st.writer(m) {
                Some(w) => apply::names::rename(&**w, st.actor(), pa, pb, flags).map(|()| 0),
                None => Err(libc::EROFS),
            }));
        }
        host_pair(&a, d1, from, &b, d2, to, &real)
    });
    r.unwrap_or_else(|| real(d1, from, d2, to))
}

/// rename(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn rename(from: *const c_char, to: *const c_char) -> c_int {
    rename_common(
        libc::AT_FDCWD,
        from,
        libc::AT_FDCWD,
        to,
        0,
        |d1, p1, d2, p2| call_real!(renameat: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int, -1; d1, p1, d2, p2),
    )
}

/// renameat(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn renameat(
    d1: c_int,
    from: *const c_char,
    d2: c_int,
    to: *const c_char,
) -> c_int {
    rename_common(
        d1,
        from,
        d2,
        to,
        0,
        |d1, p1, d2, p2| call_real!(renameat: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int, -1; d1, p1, d2, p2),
    )
}

/// renameat2(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn renameat2(
    d1: c_int,
    from: *const c_char,
    d2: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    rename_common(
        d1,
        from,
        d2,
        to,
        flags,
        |d1, p1, d2, p2| call_real!(renameat2: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_uint) -> c_int, -1; d1, p1, d2, p2, flags),
    )
}

/// link(2) and linkat(2): the old name is looked up first (ENOENT when missing), then the
/// new one is created (its parent's errors, EEXIST, then EROFS when it is in a mount);
/// an old name in a mount with a new one on the host is EXDEV.
fn link_common(
    d1: c_int,
    from: *const c_char,
    d2: c_int,
    to: *const c_char,
    follow: bool,
    real: impl Fn(c_int, *const c_char, c_int, *const c_char) -> c_int,
) -> c_int {
    let r = hooked(-1, |st| {
        let a = spot(st, d1, from, follow);
        match &a {
            Spot::Fail(e) => return Some(ret(Err(*e))),
            Spot::Mount { entry: None, .. } => return Some(ret(Err(libc::ENOENT))),
            _ => {}
        }
        let b = spot(st, d2, to, false);
        match &b {
            Spot::Fail(e) => return Some(ret(Err(*e))),
            Spot::Mount {
                mount, entry, last, ..
            } => {
                let e = Change::Create.errno(st, entry.as_ref(), *last);
                let w = st.writer(*mount);
                return Some(ret(match (&a, place(&b), w) {
                    (
                        Spot::Mount {
                            mount: ma,
                            entry: Some(old),
                            ..
                        },
                        Some(to),
                        Some(w),
                    ) if e == libc::EROFS => {
                        if ma != mount {
                            Err(libc::EXDEV)
                        } else {
                            apply::names::link(&**w, st.actor(), old, to).map(|()| 0)
                        }
                    }
                    (Spot::Host(_), _, Some(_)) if e == libc::EROFS => Err(libc::EXDEV),
                    _ => Err(e),
                }));
            }
            Spot::Host(_) => {}
        }
        if let Spot::Mount { .. } = a {
            return Some(ret(Err(libc::EXDEV)));
        }
        host_pair(&a, d1, from, &b, d2, to, &real)
    });
    r.unwrap_or_else(|| real(d1, from, d2, to))
}

/// link(2) (does not follow a symbolic link as the old name).
#[no_mangle]
pub(crate) unsafe extern "C" fn link(from: *const c_char, to: *const c_char) -> c_int {
    link_common(
        libc::AT_FDCWD,
        from,
        libc::AT_FDCWD,
        to,
        false,
        |d1, p1, d2, p2| call_real!(linkat: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int, -1; d1, p1, d2, p2, 0),
    )
}

/// linkat(2) (AT_SYMLINK_FOLLOW; AT_EMPTY_PATH with "": `d1` itself).
#[no_mangle]
pub(crate) unsafe extern "C" fn linkat(
    d1: c_int,
    from: *const c_char,
    d2: c_int,
    to: *const c_char,
    flags: c_int,
) -> c_int {
    // AT_EMPTY_PATH with "": the file `d1` has open, which for a virtual descriptor lies
    // on the image, another file system than any name the call could make.
    if flags & libc::AT_EMPTY_PATH != 0
        && is_empty(from)
        && d1 != libc::AT_FDCWD
        && hooked(false, |st| Some(st.fds.is_virtual(d1))).unwrap_or(false)
    {
        return ret(Err(libc::EXDEV));
    }
    let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
    link_common(
        d1,
        empty_path_target(d1, from, flags),
        d2,
        to,
        follow,
        |d1, p1, d2, p2| call_real!(linkat: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int, -1; d1, p1, d2, p2, flags),
    )
}

/// A mkstemp-family template: refused (EROFS, or the lookup's errno) when its directory
/// is in a mount; when the directory is reached through a virtual working directory but
/// lies on the host, `real` gets an absolute copy and the name it made is copied back
/// into the caller's template (same tail: the X's and the suffix). `None`: pass the
/// caller's template to libc unchanged (also when the template itself is invalid: glibc
/// checks it first and answers EINVAL). `suffix`: the length of the suffix after the X's.
fn temp_in(
    template: *mut c_char,
    suffix: c_int,
    real: impl Fn(*mut c_char) -> c_int,
    make: impl Fn(&State, *const c_char) -> c_int,
) -> Option<c_int> {
    if template.is_null() {
        return None;
    }
    hooked(-1, |st| {
        // SAFETY: a template is a NUL-terminated, writable string.
        let t = unsafe { CStr::from_ptr(template) }.to_bytes();
        let suffix = usize::try_from(suffix).ok()?;
        let xs = t.len().checked_sub(6 + suffix)?;
        if &t[xs..xs + 6] != b"XXXXXX" {
            return None;
        }
        let (dir, _) = split_last(t);
        let dir_c = CString::new(dir).ok()?;
        match st.classify(libc::AT_FDCWD, dir_c.as_ptr(), true) {
            Ok(Target::Pass) => None,
            Ok(Target::Virt(vp)) if st.writer(vp.mount).is_some() => {
                Some(temp_in_mount(st, template, xs, &make))
            }
            Ok(Target::Virt(_)) => Some(ret(Err(libc::EROFS))),
            Err(e) => Some(ret(Err(e))),
            Ok(Target::HostAbs(abs_dir)) => {
                let name = &t[t.iter().rposition(|&c| c == b'/').map_or(0, |i| i + 1)..];
                let mut abs = abs_dir.into_bytes();
                abs.push(b'/');
                abs.extend_from_slice(name);
                let abs = CString::new(abs).ok()?;
                let mut buf = abs.into_bytes_with_nul();
                let r = real(buf.as_mut_ptr().cast());
                if r >= 0 {
                    // The tail of `buf` is the caller's last component, now filled in.
                    let made = &buf[buf.len() - 1 - name.len()..buf.len() - 1];
                    let at = t.len() - name.len();
                    // SAFETY: the caller's template has `t.len()` writable bytes; we
                    // overwrite its last `name.len()` with as many.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            made.as_ptr(),
                            template.cast::<u8>().add(at),
                            made.len(),
                        )
                    };
                }
                Some(r)
            }
        }
    })
}

/// A name for the template (six X's at `xs`) made in a read-write mount by `make`, tried
/// with new random letters while the name exists, as glibc's loop (at most 62^3 tries
/// there; 100 here, each a round trip to the owner). The template holds the name made.
fn temp_in_mount(
    st: &State,
    template: *mut c_char,
    xs: usize,
    make: &dyn Fn(&State, *const c_char) -> c_int,
) -> c_int {
    const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for _ in 0..100 {
        let mut r = [0u8; 6];
        // SAFETY: getrandom writes at most 6 bytes into our buffer.
        unsafe { libc::getrandom(r.as_mut_ptr().cast(), 6, 0) };
        for (i, b) in r.iter().enumerate() {
            // SAFETY: the template has six X's at `xs` (checked by the caller).
            unsafe { *template.add(xs + i) = LETTERS[*b as usize % LETTERS.len()] as c_char };
        }
        let fd = make(st, template);
        if fd >= 0 || crate::sys::errno() != libc::EEXIST {
            return fd;
        }
    }
    ret(Err(libc::EEXIST))
}

/// mkstemp(3) and friends: the file is made with glibc's internal open.
macro_rules! mkstemp_hooks {
    ($($name:ident($($a:ident: $t:ty),*) => $suffix:expr, $flags:expr;)*) => {$(
        /// Made in read-write mounts, refused in read-only ones (EROFS); passed to libc
        /// otherwise.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(template: *mut c_char $(, $a: $t)*) -> c_int {
            let real = |t: *mut c_char| call_real!($name: unsafe extern "C" fn(*mut c_char $(, $t)*) -> c_int, -1; t $(, $a)*);
            let extra: c_int = $flags;
            let make = |st: &State, t: *const c_char| {
                let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | (extra & !libc::O_ACCMODE);
                crate::h_open::open_in(st, libc::AT_FDCWD, t, flags, 0o600).unwrap_or(-1)
            };
            temp_in(template, $suffix, real, make).unwrap_or_else(|| real(template))
        }
    )*};
}
mkstemp_hooks! {
    mkstemp() => 0, 0;
    mkstemp64() => 0, 0;
    mkostemp(flags: c_int) => 0, flags;
    mkostemp64(flags: c_int) => 0, flags;
    mkstemps(suffix: c_int) => suffix, 0;
    mkstemps64(suffix: c_int) => suffix, 0;
    mkostemps(suffix: c_int, flags: c_int) => suffix, flags;
    mkostemps64(suffix: c_int, flags: c_int) => suffix, flags;
}

/// mkdtemp(3): the directory is made with glibc's internal mkdir.
#[no_mangle]
pub(crate) unsafe extern "C" fn mkdtemp(template: *mut c_char) -> *mut c_char {
    let real = |t: *mut c_char| {
        let p = call_real!(mkdtemp: unsafe extern "C" fn(*mut c_char) -> *mut c_char, std::ptr::null_mut(); t);
        if p.is_null() {
            -1
        } else {
            0
        }
    };
    let make = |st: &State, t: *const c_char| {
        let s = spot(st, libc::AT_FDCWD, t, false);
        land(st, Change::Create, &s, || Op::Mkdir(0o700))
    };
    match temp_in(template, 0, real, make) {
        Some(0) => template,
        Some(_) => std::ptr::null_mut(),
        None => {
            call_real!(mkdtemp: unsafe extern "C" fn(*mut c_char) -> *mut c_char, std::ptr::null_mut(); template)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_components_are_classed_like_the_kernel() {
        for (p, parent, last) in [
            (&b"a/b"[..], &b"a"[..], Last::Normal),
            (b"a/b///", b"a", Last::Normal),
            (b"b", b".", Last::Normal),
            (b"/b", b"/", Last::Normal),
            (b"/", b"/", Last::Dot),
            (b"a/.", b"a", Last::Dot),
            (b"a/..", b"a", Last::DotDot),
            (b"..", b".", Last::DotDot),
            (b"/x/y/z", b"/x/y", Last::Normal),
        ] {
            assert_eq!(split_last(p), (parent.to_vec(), last), "{:?}", p);
        }
    }
}
