//! The write half of the FUSE server (`usfs mount -o rw`): each request becomes one call
//! of [`usfs_fs::FileSystemWrite`]; the kernel checks permissions (default_permissions),
//! the back end keeps the format right. New inodes take the caller's uid and gid, and the
//! setgid rule of a setgid parent directory (group inherited, directories keep the bit),
//! as the kernel's inode_init_owner.

use std::time::{SystemTime, UNIX_EPOCH};
use usfs_fs::{
    Error, Fallocate, FileSystemWrite, FileType, Ino, Metadata, NewNode, SetAttr, Timestamp,
};

/// The caller of a request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caller {
    pub uid: u32,
    pub gid: u32,
}

/// The owner, group and mode of a new inode in directory `parent` (attributes `pm`).
pub(crate) fn new_node(
    ft: FileType,
    mode: u32,
    umask: u32,
    rdev: u64,
    c: Caller,
    pm: &Metadata,
) -> NewNode {
    let mut perm = mode & 0o7777 & !(umask & 0o777);
    let gid = if pm.perm & 0o2000 != 0 {
        if ft == FileType::Directory {
            perm |= 0o2000;
        }
        pm.gid
    } else {
        c.gid
    };
    NewNode {
        file_type: ft,
        perm,
        uid: c.uid,
        gid,
        rdev,
    }
}

/// The umask that applies to a new inode in `dir`: none when `dir` has a default ACL
/// (POSIX: the ACL replaces it).
pub(crate) fn umask_for(fs: &dyn FileSystemWrite, dir: Ino, umask: u32) -> u32 {
    match fs.get_xattr(dir, b"system.posix_acl_default") {
        Ok(_) => 0,
        Err(_) => umask,
    }
}

/// The file type in a mode's S_IFMT bits.
pub(crate) fn type_of_mode(mode: u32) -> Result<FileType, Error> {
    FileType::from_mode(mode).ok_or(Error::Invalid)
}

/// A FUSE time (or "now") as a timestamp.
pub(crate) fn timestamp(t: Option<fuser::TimeOrNow>) -> Option<Timestamp> {
    t.map(|t| {
        let st = match t {
            fuser::TimeOrNow::SpecificTime(s) => s,
            fuser::TimeOrNow::Now => SystemTime::now(),
        };
        match st.duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp {
                sec: d.as_secs() as i64,
                nsec: d.subsec_nanos(),
            },
            Err(e) => {
                let d = e.duration();
                let (mut sec, mut nsec) = (-(d.as_secs() as i64), d.subsec_nanos());
                if nsec > 0 {
                    sec -= 1;
                    nsec = 1_000_000_000 - nsec;
                }
                Timestamp { sec, nsec }
            }
        }
    })
}

/// setattr as the kernel applies it: a size change of a non-root caller clears setuid
/// and setgid; chown by a non-root caller clears them too.
pub(crate) fn setattr(
    w: &dyn FileSystemWrite,
    ino: Ino,
    c: Caller,
    mut attr: SetAttr,
) -> Result<Metadata, Error> {
    let cur = w.getattr(ino)?;
    let owner_change =
        attr.uid.is_some_and(|u| u != cur.uid) || attr.gid.is_some_and(|g| g != cur.gid);
    if (owner_change || attr.size.is_some())
        && attr.perm.is_none()
        && cur.file_type != FileType::Directory
    {
        let p = cur.perm;
        let mut cleared = p & !0o4000;
        if p & 0o010 != 0 {
            cleared &= !0o2000;
        }
        if cleared != p && (owner_change || c.uid != 0) {
            attr.perm = Some(cleared);
        }
    }
    w.setattr(ino, attr)
}

/// fallocate(2)'s mode bits.
pub(crate) fn fallocate_mode(mode: i32) -> Result<Fallocate, Error> {
    let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
    match mode & !libc::FALLOC_FL_KEEP_SIZE {
        0 => Ok(Fallocate::Allocate { keep_size: keep }),
        libc::FALLOC_FL_PUNCH_HOLE if keep => Ok(Fallocate::PunchHole),
        libc::FALLOC_FL_ZERO_RANGE => Ok(Fallocate::ZeroRange { keep_size: keep }),
        _ => Err(Error::Io(std::io::Error::from_raw_os_error(
            libc::EOPNOTSUPP,
        ))),
    }
}
