//! The POSIX rules of attribute changes, for callers that are processes (the preload
//! library of `usfs run --rw`): who may chmod, chown, set times and truncate, and which
//! errno says no, as the kernel's setattr_prepare and inode_owner_or_capable decide.
//! What a permitted change takes away (setuid, capabilities) is [`crate::attrs`].

use crate::attrs::{self, Caller};
use crate::creds::{Creds, MAY_WRITE};
use crate::resolve::Errno;
use usfs_fs::{FileSystemWrite, Ino, Metadata, SetAttr, Timestamp};

/// Who changes something: the caller's IDs and, for permission checks, its credentials
/// (`None`: root, which may do anything here).
#[derive(Clone, Copy)]
pub struct Actor<'a> {
    /// Effective user and group.
    pub caller: Caller,
    /// Credentials of a caller that is not root.
    pub creds: Option<&'a Creds>,
}

impl Actor<'_> {
    fn owns(&self, m: &Metadata) -> bool {
        self.creds.is_none_or(|c| c.uid == m.uid)
    }
    fn in_group(&self, gid: u32) -> bool {
        self.creds.is_none_or(|c| c.groups.contains(&gid))
    }
    fn may_write(&self, m: &Metadata) -> bool {
        self.creds.is_none_or(|c| c.may(m, MAY_WRITE))
    }
}

fn errno(e: usfs_fs::Error) -> Errno {
    e.errno()
}

/// chmod: the owner or root; a caller outside the file's group loses setgid.
pub fn chmod(w: &dyn FileSystemWrite, ino: Ino, a: Actor<'_>, mode: u32) -> Result<(), Errno> {
    let m = w.getattr(ino).map_err(errno)?;
    if !a.owns(&m) {
        return Err(libc::EPERM);
    }
    let mut perm = mode & 0o7777;
    if a.creds.is_some() && !a.in_group(m.gid) && m.file_type != usfs_fs::FileType::Directory {
        perm &= !0o2000;
    }
    let attr = SetAttr {
        perm: Some(perm),
        ..SetAttr::default()
    };
    w.setattr(ino, attr).map(drop).map_err(errno)
}

/// chown (`None`: unchanged, as -1): root may give anything; the owner may only set the
/// group to one of its own groups.
pub fn chown(
    w: &dyn FileSystemWrite,
    ino: Ino,
    a: Actor<'_>,
    uid: Option<u32>,
    gid: Option<u32>,
) -> Result<(), Errno> {
    let m = w.getattr(ino).map_err(errno)?;
    if a.creds.is_some() {
        let uid_ok = uid.is_none_or(|u| u == m.uid && a.owns(&m));
        // Giving a group, even the same one, takes the owner (chgrp_ok).
        let gid_ok = gid.is_none_or(|g| a.owns(&m) && (g == m.gid || a.in_group(g)));
        if !uid_ok || !gid_ok {
            return Err(libc::EPERM);
        }
    }
    let attr = SetAttr {
        uid,
        gid,
        ..SetAttr::default()
    };
    attrs::setattr(w, ino, a.caller, attr)
        .map(drop)
        .map_err(errno)
}

/// One of utimensat's times: a time, now, or left alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeSet {
    /// This time.
    At(Timestamp),
    /// The current time (UTIME_NOW).
    Now,
    /// Unchanged (UTIME_OMIT).
    Omit,
}

/// utimensat: setting both to now takes the owner or write permission; any other time
/// the owner (EPERM).
pub fn utimens(
    w: &dyn FileSystemWrite,
    ino: Ino,
    a: Actor<'_>,
    atime: TimeSet,
    mtime: TimeSet,
) -> Result<(), Errno> {
    if atime == TimeSet::Omit && mtime == TimeSet::Omit {
        return Ok(());
    }
    let m = w.getattr(ino).map_err(errno)?;
    let explicit = matches!(atime, TimeSet::At(_)) || matches!(mtime, TimeSet::At(_));
    if !a.owns(&m) {
        if explicit {
            return Err(libc::EPERM);
        }
        if !a.may_write(&m) {
            return Err(libc::EACCES);
        }
    }
    let now = now();
    let pick = |t| match t {
        TimeSet::At(t) => Some(t),
        TimeSet::Now => Some(now),
        TimeSet::Omit => None,
    };
    let attr = SetAttr {
        atime: pick(atime),
        mtime: pick(mtime),
        ..SetAttr::default()
    };
    w.setattr(ino, attr).map(drop).map_err(errno)
}

/// truncate to `size` (the caller has checked write access): EINVAL for a negative size,
/// EFBIG past what a file may hold.
pub fn truncate(w: &dyn FileSystemWrite, ino: Ino, a: Actor<'_>, size: i64) -> Result<(), Errno> {
    if size < 0 {
        return Err(libc::EINVAL);
    }
    let attr = SetAttr {
        size: Some(size as u64),
        ..SetAttr::default()
    };
    attrs::setattr(w, ino, a.caller, attr)
        .map(drop)
        .map_err(errno)
}

/// setxattr with XATTR_CREATE (EEXIST when present) or XATTR_REPLACE (ENODATA when
/// absent); `user.` attributes need write permission, others root (trusted) or the owner.
pub fn set_xattr(
    w: &dyn FileSystemWrite,
    ino: Ino,
    a: Actor<'_>,
    name: &[u8],
    value: &[u8],
    flags: i32,
) -> Result<(), Errno> {
    let m = w.getattr(ino).map_err(errno)?;
    xattr_access(&m, a, name)?;
    if flags & !(libc::XATTR_CREATE | libc::XATTR_REPLACE) != 0 {
        return Err(libc::EINVAL);
    }
    if flags != 0 {
        let present = match w.get_xattr(ino, name) {
            Ok(_) => true,
            Err(usfs_fs::Error::NoData) => false,
            Err(e) => return Err(e.errno()),
        };
        if present && flags & libc::XATTR_CREATE != 0 {
            return Err(libc::EEXIST);
        }
        if !present && flags & libc::XATTR_REPLACE != 0 {
            return Err(libc::ENODATA);
        }
    }
    w.set_xattr(ino, name, value).map_err(errno)
}

/// removexattr, with setxattr's access rule.
pub fn remove_xattr(
    w: &dyn FileSystemWrite,
    ino: Ino,
    a: Actor<'_>,
    name: &[u8],
) -> Result<(), Errno> {
    let m = w.getattr(ino).map_err(errno)?;
    xattr_access(&m, a, name)?;
    w.remove_xattr(ino, name).map_err(errno)
}

/// May `a` change attribute `name` of a file with attributes `m`?
fn xattr_access(m: &Metadata, a: Actor<'_>, name: &[u8]) -> Result<(), Errno> {
    if a.creds.is_none() {
        return Ok(());
    }
    if name.starts_with(b"user.") {
        return if a.may_write(m) {
            Ok(())
        } else {
            Err(libc::EACCES)
        };
    }
    if name.starts_with(b"trusted.") || name.starts_with(b"security.") && !a.owns(m) {
        return Err(libc::EPERM);
    }
    if a.owns(m) {
        Ok(())
    } else {
        Err(libc::EPERM)
    }
}

/// The current time.
pub fn now() -> Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp {
        sec: d.as_secs() as i64,
        nsec: d.subsec_nanos(),
    }
}
