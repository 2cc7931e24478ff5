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

use crate::state::{empty_path_target, is_empty, State, Target};
use crate::sys::{call_real, hooked, ret};
use libc::{c_char, c_int, c_uint, c_void, size_t};
use std::ffi::{CStr, CString};
use usfs_fs::FileType;
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
    /// exists there).
    Mount {
        mount: usize,
        entry: Option<VPath>,
        last: Last,
    },
    /// Looking the path (or its parent) up failed with this errno.
    Fail(i32),
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
            Spot::Mount {
                mount: vp.mount,
                last: split_last(p).1,
                entry: Some(vp),
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

/// A one-path modifying call: refused when `path` (relative to `dirfd`) lands in a mount,
/// else `real(dirfd, path)`, with AT_FDCWD and an absolute path when it was rewritten. A
/// null path (utimensat, futimesat), or "" with AT_EMPTY_PATH in `flags`, names `dirfd`
/// itself: refused when that is a virtual descriptor or, for AT_FDCWD, a virtual working
/// directory.
fn one_path(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    follow: bool,
    change: Change,
    real: impl Fn(c_int, *const c_char) -> c_int,
) -> c_int {
    let r = hooked(-1, |st| {
        let itself = path.is_null() || (flags & libc::AT_EMPTY_PATH != 0 && is_empty(path));
        if itself && dirfd != libc::AT_FDCWD {
            return st.fds.is_virtual(dirfd).then(|| ret(Err(libc::EROFS)));
        }
        match spot(st, dirfd, empty_path_target(dirfd, path, flags), follow) {
            Spot::Host(None) => None,
            Spot::Host(Some(abs)) => Some(real(libc::AT_FDCWD, abs.as_ptr())),
            Spot::Mount { entry, last, .. } => {
                Some(ret(Err(change.errno(st, entry.as_ref(), last))))
            }
            Spot::Fail(e) => Some(ret(Err(e))),
        }
    });
    r.unwrap_or_else(|| real(dirfd, path))
}

/// Hooks for one-path calls without a directory descriptor: (name, change, follow).
macro_rules! path_hooks {
    ($($name:ident($p:ident $(, $a:ident: $t:ty)*) => $change:ident, $follow:expr;)*) => {$(
        /// Refused inside mounts (read-only file system, with the kernel's errno); passed
        /// to libc otherwise.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name($p: *const c_char $(, $a: $t)*) -> c_int {
            one_path(libc::AT_FDCWD, $p, 0, $follow, Change::$change, |_, p| {
                call_real!($name: unsafe extern "C" fn(*const c_char $(, $t)*) -> c_int, -1; p $(, $a)*)
            })
        }
    )*};
}
path_hooks! {
    mkdir(path, mode: libc::mode_t) => Create, false;
    mknod(path, mode: libc::mode_t, dev: libc::dev_t) => Create, false;
    mkfifo(path, mode: libc::mode_t) => Create, false;
    rmdir(path) => Rmdir, false;
    unlink(path) => Unlink, false;
    chmod(path, mode: libc::mode_t) => Attr, true;
    lchmod(path, mode: libc::mode_t) => ChmodLink, false;
    chown(path, uid: libc::uid_t, gid: libc::gid_t) => Attr, true;
    lchown(path, uid: libc::uid_t, gid: libc::gid_t) => Attr, false;
    utime(path, t: *const libc::utimbuf) => Attr, true;
    utimes(path, t: *const libc::timeval) => Attr, true;
    lutimes(path, t: *const libc::timeval) => Attr, false;
    truncate(path, len: libc::off_t) => Truncate, true;
    truncate64(path, len: libc::off64_t) => Truncate, true;
    setxattr(path, name: *const c_char, v: *const c_void, n: size_t, fl: c_int) => Attr, true;
    lsetxattr(path, name: *const c_char, v: *const c_void, n: size_t, fl: c_int) => Attr, false;
    removexattr(path, name: *const c_char) => Attr, true;
    lremovexattr(path, name: *const c_char) => Attr, false;
}

/// Hooks for one-path `*at` calls: (name, change, follow unless this flag is set).
macro_rules! at_hooks {
    ($($name:ident($d:ident, $p:ident $(, $a:ident: $t:ty)*) => $change:ident, $follow:expr;)*) => {$(
        /// Refused inside mounts (read-only file system, with the kernel's errno); passed
        /// to libc otherwise.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name($d: c_int, $p: *const c_char $(, $a: $t)*) -> c_int {
            one_path($d, $p, 0, $follow, Change::$change, |d, p| {
                call_real!($name: unsafe extern "C" fn(c_int, *const c_char $(, $t)*) -> c_int, -1; d, p $(, $a)*)
            })
        }
    )*};
}
at_hooks! {
    mkdirat(d, path, mode: libc::mode_t) => Create, false;
    mknodat(d, path, mode: libc::mode_t, dev: libc::dev_t) => Create, false;
    mkfifoat(d, path, mode: libc::mode_t) => Create, false;
    futimesat(d, path, t: *const libc::timeval) => Attr, true;
}

/// Pre-2.33 mknod entry points (`__xmknod(version, path, mode, &dev)`).
#[no_mangle]
pub(crate) unsafe extern "C" fn __xmknod(
    ver: c_int,
    path: *const c_char,
    mode: libc::mode_t,
    dev: *mut libc::dev_t,
) -> c_int {
    one_path(
        libc::AT_FDCWD,
        path,
        0,
        false,
        Change::Create,
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
    one_path(
        dirfd,
        path,
        0,
        false,
        Change::Create,
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
        Spot::Mount { entry, last, .. } => {
            let change = if last == Last::Normal {
                Change::Unlink
            } else {
                Change::Rmdir
            };
            Some(ret(Err(change.errno(st, entry.as_ref(), last))))
        }
        Spot::Fail(e) => Some(ret(Err(e))),
    });
    r.unwrap_or_else(|| call_real!(remove: unsafe extern "C" fn(*const c_char) -> c_int, -1; path))
}

/// unlinkat(2): rmdir with AT_REMOVEDIR, else unlink.
#[no_mangle]
pub(crate) unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let change = if flags & libc::AT_REMOVEDIR != 0 {
        Change::Rmdir
    } else {
        Change::Unlink
    };
    one_path(
        dirfd,
        path,
        0,
        false,
        change,
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
    one_path(
        dirfd,
        path,
        flags,
        follow,
        Change::Attr,
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

/// rename(2) and friends: both names are looked up first; names on different mounts (a
/// mount and the host, or two images) are EXDEV; "." or ".." as either last component
/// EBUSY; anything else in a mount EROFS. Both on the host: libc, paths rewritten as
/// needed.
fn rename_common(
    d1: c_int,
    from: *const c_char,
    d2: c_int,
    to: *const c_char,
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
            let e = if dots(&a) || dots(&b) {
                libc::EBUSY
            } else {
                libc::EROFS
            };
            return Some(ret(Err(e)));
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
            Spot::Mount { entry, last, .. } => {
                return Some(ret(Err(Change::Create.errno(st, entry.as_ref(), *last))))
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

/// mkstemp(3) and friends: the file is made with glibc's internal open.
macro_rules! mkstemp_hooks {
    ($($name:ident($($a:ident: $t:ty),*) => $suffix:expr;)*) => {$(
        /// Refused in mounts (EROFS); passed to libc otherwise.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(template: *mut c_char $(, $a: $t)*) -> c_int {
            let real = |t: *mut c_char| call_real!($name: unsafe extern "C" fn(*mut c_char $(, $t)*) -> c_int, -1; t $(, $a)*);
            temp_in(template, $suffix, real).unwrap_or_else(|| real(template))
        }
    )*};
}
mkstemp_hooks! {
    mkstemp() => 0;
    mkstemp64() => 0;
    mkostemp(flags: c_int) => 0;
    mkostemp64(flags: c_int) => 0;
    mkstemps(suffix: c_int) => suffix;
    mkstemps64(suffix: c_int) => suffix;
    mkostemps(suffix: c_int, flags: c_int) => suffix;
    mkostemps64(suffix: c_int, flags: c_int) => suffix;
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
    match temp_in(template, 0, real) {
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
