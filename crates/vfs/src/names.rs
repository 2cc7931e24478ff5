//! The POSIX rules of namespace changes, as the kernel checks them after "is the file
//! system writable": write and search permission on the directories, the sticky bit, the
//! types unlink, rmdir and rename need, and rename's traps (a directory moved below
//! itself, a target that is an ancestor of the source). Lookups (ENOENT, ENOTDIR, ELOOP,
//! EEXIST for "." and "..") come before, from the caller's path walk; the back end keeps
//! the format right. The preload library of `usfs run --rw` calls these.

use crate::change::Actor;
use crate::creds::{MAY_EXEC, MAY_WRITE};
use crate::resolve::{Errno, VPath};
use usfs_fs::{FileSystemWrite, FileType, Metadata, RenameFlags};

/// Where a call lands: the named file when it exists, its directory (`None`: the name is
/// a mount's root) and the name.
pub struct Place<'a> {
    /// The named file, when it exists.
    pub entry: Option<&'a VPath>,
    /// Its directory.
    pub parent: Option<&'a VPath>,
    /// The last component.
    pub name: &'a [u8],
}

/// What a creating call makes.
#[derive(Clone, Copy, Debug)]
pub enum NewKind<'a> {
    /// mkdir with this mode.
    Dir(u32),
    /// mknod(mode, dev), or a regular file (no type bits) for a creating open.
    Node(u32, u64),
    /// symlink to this target.
    Symlink(&'a [u8]),
}

fn errno(e: usfs_fs::Error) -> Errno {
    e.errno()
}

/// May the caller add or remove names in directory `dm`: write and search permission.
fn may_change_dir(a: Actor<'_>, dm: &Metadata) -> Result<(), Errno> {
    match a.creds {
        Some(c) if !c.may(dm, MAY_WRITE | MAY_EXEC) => Err(libc::EACCES),
        _ => Ok(()),
    }
}

/// The sticky bit: in a sticky directory only the owner of the file or of the directory
/// (or root) removes or renames a name.
fn sticky_ok(a: Actor<'_>, dm: &Metadata, fm: &Metadata) -> Result<(), Errno> {
    match a.creds {
        Some(c) if dm.perm & 0o1000 != 0 && c.uid != fm.uid && c.uid != dm.uid => Err(libc::EPERM),
        _ => Ok(()),
    }
}

/// Makes a new inode named `p.name` in `p.parent`: a directory, a node (mknod, or a
/// regular file for a creating open) or a symbolic link. Returns its attributes.
pub fn create(
    w: &dyn FileSystemWrite,
    a: Actor<'_>,
    p: &Place<'_>,
    kind: NewKind<'_>,
    umask: u32,
) -> Result<Metadata, Errno> {
    let dir = p.parent.ok_or(libc::EEXIST)?;
    if p.entry.is_some() {
        return Err(libc::EEXIST);
    }
    let dm = w.getattr(dir.ino()).map_err(errno)?;
    may_change_dir(a, &dm)?;
    let (ft, mode, rdev) = match kind {
        NewKind::Dir(mode) => (FileType::Directory, mode, 0),
        NewKind::Node(mode, dev) => {
            let ft = match mode & libc::S_IFMT {
                0 => FileType::Regular,
                t => FileType::from_mode(t).ok_or(libc::EINVAL)?,
            };
            if ft == FileType::Directory || ft == FileType::Symlink {
                return Err(libc::EINVAL);
            }
            let device = matches!(ft, FileType::CharDevice | FileType::BlockDevice);
            if device && a.creds.is_some() {
                // Devices take CAP_MKNOD.
                return Err(libc::EPERM);
            }
            let dev = if device { dev } else { 0 };
            (ft, mode, dev)
        }
        NewKind::Symlink(_) => (FileType::Symlink, 0o777, 0),
    };
    let umask = crate::attrs::umask_for(w, dir.ino(), umask);
    let node = crate::attrs::new_node(ft, mode, umask, rdev, a.caller, &dm);
    let r = match kind {
        NewKind::Dir(_) => w.mkdir(dir.ino(), p.name, node),
        NewKind::Symlink(target) => w.symlink(dir.ino(), p.name, target, node.uid, node.gid),
        NewKind::Node(..) => w.create(dir.ino(), p.name, node),
    };
    r.map_err(errno)
}

/// unlink (`dir == false`) or rmdir of an existing name.
pub fn remove(
    w: &dyn FileSystemWrite,
    a: Actor<'_>,
    p: &Place<'_>,
    dir: bool,
) -> Result<(), Errno> {
    let entry = p.entry.ok_or(libc::ENOENT)?;
    let parent = p.parent.ok_or(libc::EBUSY)?;
    let fm = w.getattr(entry.ino()).map_err(errno)?;
    let is_dir = fm.file_type == FileType::Directory;
    match (dir, is_dir) {
        (false, true) => return Err(libc::EISDIR),
        (true, false) => return Err(libc::ENOTDIR),
        _ => {}
    }
    let dm = w.getattr(parent.ino()).map_err(errno)?;
    may_change_dir(a, &dm)?;
    sticky_ok(a, &dm, &fm)?;
    if dir {
        w.rmdir(parent.ino(), p.name).map_err(errno)
    } else {
        w.unlink(parent.ino(), p.name).map_err(errno)
    }
}

/// rename (renameat2's `flags`: RENAME_NOREPLACE, RENAME_EXCHANGE) within one file system.
pub fn rename(
    w: &dyn FileSystemWrite,
    a: Actor<'_>,
    from: Place<'_>,
    to: Place<'_>,
    flags: u32,
) -> Result<(), Errno> {
    let known = libc::RENAME_NOREPLACE | libc::RENAME_EXCHANGE;
    if flags & !known != 0 || flags == known {
        return Err(libc::EINVAL);
    }
    let flags = RenameFlags {
        noreplace: flags & libc::RENAME_NOREPLACE != 0,
        exchange: flags & libc::RENAME_EXCHANGE != 0,
    };
    let src = from.entry.ok_or(libc::ENOENT)?;
    let (sp, dp) = (
        from.parent.ok_or(libc::EBUSY)?,
        to.parent.ok_or(libc::EBUSY)?,
    );
    let sm = w.getattr(src.ino()).map_err(errno)?;
    // The kernel's lock_rename traps come before any type check: the source may not be
    // an ancestor of the target's directory (EINVAL), the target not one of the
    // source's (ENOTEMPTY).
    if dp.stack.iter().any(|(i, _)| *i == src.ino()) {
        return Err(libc::EINVAL);
    }
    if let Some(dst) = to.entry {
        if dst.ino() != src.ino() && sp.stack.iter().any(|(i, _)| *i == dst.ino()) {
            return Err(libc::ENOTEMPTY);
        }
    }
    if let Some(dst) = to.entry {
        if flags.noreplace {
            return Err(libc::EEXIST);
        }
        if dst.ino() == src.ino() {
            // The same file under both names (or hard links to one): nothing happens.
            return Ok(());
        }
        let dm = w.getattr(dst.ino()).map_err(errno)?;
        let (s_dir, d_dir) = (
            sm.file_type == FileType::Directory,
            dm.file_type == FileType::Directory,
        );
        if !flags.exchange {
            if s_dir && !d_dir {
                return Err(libc::ENOTDIR);
            }
            if !s_dir && d_dir {
                return Err(libc::EISDIR);
            }
        }
        let ddm = w.getattr(dp.ino()).map_err(errno)?;
        sticky_ok(a, &ddm, &dm)?;
    } else if flags.exchange {
        return Err(libc::ENOENT);
    }
    let spm = w.getattr(sp.ino()).map_err(errno)?;
    may_change_dir(a, &spm)?;
    sticky_ok(a, &spm, &sm)?;
    if dp.ino() != sp.ino() {
        may_change_dir(a, &w.getattr(dp.ino()).map_err(errno)?)?;
    }
    w.rename(sp.ino(), from.name, dp.ino(), to.name, flags)
        .map_err(errno)
}

/// link: a new name `to` for the existing `from` (not a directory: EPERM).
pub fn link(
    w: &dyn FileSystemWrite,
    a: Actor<'_>,
    from: &VPath,
    to: Place<'_>,
) -> Result<(), Errno> {
    let dir = to.parent.ok_or(libc::EEXIST)?;
    if to.entry.is_some() {
        return Err(libc::EEXIST);
    }
    let fm = w.getattr(from.ino()).map_err(errno)?;
    if fm.file_type == FileType::Directory {
        return Err(libc::EPERM);
    }
    may_change_dir(a, &w.getattr(dir.ino()).map_err(errno)?)?;
    w.link(from.ino(), dir.ino(), to.name)
        .map(drop)
        .map_err(errno)
}
