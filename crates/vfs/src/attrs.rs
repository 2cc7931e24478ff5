//! The attribute rules of changes, as the kernel applies them above every file system, so
//! `usfs mount -o rw` and the editing commands change attributes alike:
//! - who owns a new inode (inode_init_owner: the caller, or the group of a setgid
//!   directory, whose new subdirectories keep the bit), and which umask applies (none
//!   when the directory has a default ACL: POSIX lets the ACL replace it);
//! - which privileges a change takes away (chown_common, do_truncate, file_remove_privs,
//!   setattr_should_drop_sgid): chown clears setuid, and setgid when group-executable or
//!   when the caller lacks CAP_FSETID (here: is not root) and is not in the file's group;
//!   so do a truncate and a write by a caller without CAP_FSETID; chown, truncate and
//!   every write drop file capabilities (`security.capability`).

use usfs_fs::{Error, FileSystemWrite, FileType, Ino, Metadata, NewNode, Result, SetAttr};

/// The xattr holding a file's capabilities.
const CAPABILITY: &[u8] = b"security.capability";

/// The caller of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    /// Effective user ID.
    pub uid: u32,
    /// Effective group ID.
    pub gid: u32,
}

/// The owner, group and mode of a new inode of type `ft` in directory `parent` (its
/// attributes `pm`), asked for with `mode` under `umask`.
pub fn new_node(
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

/// The umask that applies to a new inode in `dir`: none when `dir` has a default ACL.
pub fn umask_for(fs: &dyn FileSystemWrite, dir: Ino, umask: u32) -> u32 {
    match fs.get_xattr(dir, b"system.posix_acl_default") {
        Ok(_) => 0,
        Err(_) => umask,
    }
}

/// The mode bits `perm` of a file in group `gid` keep after a change by `c`: no setuid;
/// no setgid when group-executable, or when `c` is neither root nor in the group (setgid
/// without group execute marks mandatory locking and otherwise stays).
pub fn drop_suidgid(perm: u32, gid: u32, c: Caller) -> u32 {
    let mut p = perm & !0o4000;
    if p & 0o010 != 0 || (c.uid != 0 && c.gid != gid) {
        p &= !0o2000;
    }
    p
}

/// Applies `attr` to `ino` for caller `c` with what the change takes away: chown (an
/// owner or group given) and a truncate by a non-root caller clear setuid/setgid of a
/// non-directory (unless the same call sets the mode); chown and truncate drop file
/// capabilities.
pub fn setattr(
    w: &dyn FileSystemWrite,
    ino: Ino,
    c: Caller,
    mut attr: SetAttr,
) -> Result<Metadata> {
    let cur = w.getattr(ino)?;
    let chown = attr.uid.is_some() || attr.gid.is_some();
    if cur.file_type != FileType::Directory && (chown || attr.size.is_some()) {
        if attr.perm.is_none() && (chown || c.uid != 0) {
            let p = drop_suidgid(cur.perm, cur.gid, c);
            attr.perm = (p != cur.perm).then_some(p);
        }
        drop_capabilities(w, ino)?;
    }
    w.setattr(ino, attr)
}

/// What a write to `ino` by `c` takes away: file capabilities always, setuid/setgid when
/// `kill_suidgid` (the writer lacks CAP_FSETID; the kernel says so in the request).
pub fn before_write(
    w: &dyn FileSystemWrite,
    ino: Ino,
    c: Caller,
    kill_suidgid: bool,
) -> Result<()> {
    drop_capabilities(w, ino)?;
    if kill_suidgid {
        let m = w.getattr(ino)?;
        // The kernel asks only for writers without CAP_FSETID.
        let unprivileged = Caller {
            uid: c.uid.max(1),
            ..c
        };
        let p = drop_suidgid(m.perm, m.gid, unprivileged);
        if p != m.perm && m.file_type != FileType::Directory {
            let attr = SetAttr {
                perm: Some(p),
                ..Default::default()
            };
            w.setattr(ino, attr)?;
        }
    }
    Ok(())
}

/// Removes `security.capability` from `ino` when it has it.
fn drop_capabilities(w: &dyn FileSystemWrite, ino: Ino) -> Result<()> {
    match w.get_xattr(ino, CAPABILITY) {
        Ok(_) => w.remove_xattr(ino, CAPABILITY),
        Err(Error::NoData) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::{drop_suidgid, Caller};

    #[test]
    fn setgid_goes_with_group_execute_or_outside_the_group() {
        let root = Caller { uid: 0, gid: 0 };
        let member = Caller { uid: 5, gid: 7 };
        let stranger = Caller { uid: 5, gid: 8 };
        assert_eq!(drop_suidgid(0o6755, 7, root), 0o0755);
        assert_eq!(drop_suidgid(0o6745, 7, root), 0o2745);
        assert_eq!(drop_suidgid(0o6745, 7, member), 0o2745);
        assert_eq!(drop_suidgid(0o6745, 7, stranger), 0o0745);
        assert_eq!(drop_suidgid(0o4700, 7, root), 0o0700);
        assert_eq!(drop_suidgid(0o0644, 7, stranger), 0o0644);
    }
}
