//! Changes that land in a read-write mount (`usfs run --rw`): the path calls of
//! [`crate::h_modify`] and the creating open, carried out through the mount's owner once
//! the kernel's earlier checks (lookups, EEXIST, "." and "..") have passed. What stays to
//! check here is what the kernel checks after "is the file system writable": write and
//! search permission on the directory, the sticky bit, and the types rename and unlink
//! need. Attribute changes follow [`usfs_vfs::change`], owners of new inodes
//! [`usfs_vfs::attrs`].

use crate::state::State;
use std::sync::Arc;
use usfs_fs::{FileSystem, FileSystemWrite, FileType, Metadata, RenameFlags};
use usfs_vfs::change::{self, TimeSet};
use usfs_vfs::channel::Remote;
use usfs_vfs::creds::{MAY_EXEC, MAY_WRITE};
use usfs_vfs::VPath;

/// What a path call does, with its arguments.
#[derive(Clone, Copy)]
pub(crate) enum Op<'a> {
    /// mkdir(mode).
    Mkdir(u32),
    /// mknod(mode, dev) (mkfifo: a fifo mode, no device).
    Mknod(u32, u64),
    /// symlink(target).
    Symlink(&'a [u8]),
    Unlink,
    Rmdir,
    Chmod(u32),
    /// chown (`None`: -1).
    Chown(Option<u32>, Option<u32>),
    /// utimensat's (atime, mtime).
    Times(TimeSet, TimeSet),
    Truncate(i64),
    /// setxattr(name, value, flags).
    SetXattr(&'a [u8], &'a [u8], i32),
    RemoveXattr(&'a [u8]),
}

/// Where a call lands in a read-write mount.
pub(crate) struct Place<'a> {
    /// The named file, when it exists.
    pub entry: Option<&'a VPath>,
    /// Its directory (`None`: the name is the mount's root).
    pub parent: Option<&'a VPath>,
    pub name: &'a [u8],
}

fn errno(e: usfs_fs::Error) -> i32 {
    e.errno()
}

/// The process's umask (read from /proc, which does not change it, unlike umask(2)).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("Umask:"))?;
            u32::from_str_radix(l[6..].trim(), 8).ok()
        })
        .unwrap_or(0o022)
}

/// May the caller add or remove names in directory `dm`: write and search permission.
fn may_change_dir(st: &State, dm: &Metadata) -> Result<(), i32> {
    match &st.creds {
        Some(c) if !c.may(dm, MAY_WRITE | MAY_EXEC) => Err(libc::EACCES),
        _ => Ok(()),
    }
}

/// The sticky bit: in a sticky directory only the owner of the file or of the directory
/// (or root) removes or renames a name.
fn sticky_ok(st: &State, dm: &Metadata, fm: &Metadata) -> Result<(), i32> {
    match &st.creds {
        Some(c) if dm.perm & 0o1000 != 0 && c.uid != fm.uid && c.uid != dm.uid => Err(libc::EPERM),
        _ => Ok(()),
    }
}

/// Carries out `op` at `p` with the owner `w`.
pub(crate) fn apply(st: &State, w: &Arc<Remote>, p: Place<'_>, op: Op<'_>) -> Result<(), i32> {
    let w: &dyn FileSystemWrite = &**w;
    let a = st.actor();
    let entry_ino = || p.entry.map(VPath::ino).ok_or(libc::ENOENT);
    match op {
        Op::Mkdir(_) | Op::Mknod(..) | Op::Symlink(_) => create(st, w, &p, op).map(drop),
        Op::Unlink | Op::Rmdir => remove(st, w, &p, matches!(op, Op::Rmdir)),
        Op::Chmod(mode) => change::chmod(w, entry_ino()?, a, mode),
        Op::Chown(uid, gid) => change::chown(w, entry_ino()?, a, uid, gid),
        Op::Times(at, mt) => change::utimens(w, entry_ino()?, a, at, mt),
        Op::Truncate(len) => {
            let ino = entry_ino()?;
            let m = w.getattr(ino).map_err(errno)?;
            if st.creds.as_ref().is_some_and(|c| !c.may(&m, MAY_WRITE)) {
                return Err(libc::EACCES);
            }
            change::truncate(w, ino, a, len)
        }
        Op::SetXattr(name, value, flags) => {
            change::set_xattr(w, entry_ino()?, a, name, value, flags)
        }
        Op::RemoveXattr(name) => change::remove_xattr(w, entry_ino()?, a, name),
    }
}

/// Makes a new inode named `p.name` in `p.parent`: a directory, a node (mknod, or a
/// regular file for a creating open) or a symbolic link. Returns its attributes.
pub(crate) fn create(
    st: &State,
    w: &dyn FileSystemWrite,
    p: &Place<'_>,
    op: Op<'_>,
) -> Result<Metadata, i32> {
    let dir = p.parent.ok_or(libc::EEXIST)?;
    if p.entry.is_some() {
        return Err(libc::EEXIST);
    }
    let dm = w.getattr(dir.ino()).map_err(errno)?;
    may_change_dir(st, &dm)?;
    let c = st.actor().caller;
    let (ft, mode, rdev) = match op {
        Op::Mkdir(mode) => (FileType::Directory, mode, 0),
        Op::Mknod(mode, dev) => {
            let ft = match mode & libc::S_IFMT {
                0 => FileType::Regular,
                t => FileType::from_mode(t).ok_or(libc::EINVAL)?,
            };
            if ft == FileType::Directory || ft == FileType::Symlink {
                return Err(libc::EINVAL);
            }
            let dev = if matches!(ft, FileType::CharDevice | FileType::BlockDevice) {
                dev
            } else {
                0
            };
            (ft, mode, dev)
        }
        Op::Symlink(_) => (FileType::Symlink, 0o777, 0),
        _ => return Err(libc::EINVAL),
    };
    let umask = usfs_vfs::attrs::umask_for(w, dir.ino(), umask());
    let node = usfs_vfs::attrs::new_node(ft, mode, umask, rdev, c, &dm);
    let r = match op {
        Op::Mkdir(_) => w.mkdir(dir.ino(), p.name, node),
        Op::Symlink(target) => w.symlink(dir.ino(), p.name, target, node.uid, node.gid),
        _ => w.create(dir.ino(), p.name, node),
    };
    r.map_err(errno)
}

/// unlink (`dir == false`) or rmdir of an existing name.
fn remove(st: &State, w: &dyn FileSystemWrite, p: &Place<'_>, dir: bool) -> Result<(), i32> {
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
    may_change_dir(st, &dm)?;
    sticky_ok(st, &dm, &fm)?;
    if dir {
        w.rmdir(parent.ino(), p.name).map_err(errno)
    } else {
        w.unlink(parent.ino(), p.name).map_err(errno)
    }
}

/// rename (renameat2's `flags`: RENAME_NOREPLACE, RENAME_EXCHANGE) within one mount.
pub(crate) fn rename(
    st: &State,
    w: &Arc<Remote>,
    from: Place<'_>,
    to: Place<'_>,
    flags: u32,
) -> Result<(), i32> {
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
        sticky_ok(st, &ddm, &dm)?;
    } else if flags.exchange {
        return Err(libc::ENOENT);
    }
    let spm = w.getattr(sp.ino()).map_err(errno)?;
    may_change_dir(st, &spm)?;
    sticky_ok(st, &spm, &sm)?;
    if dp.ino() != sp.ino() {
        may_change_dir(st, &w.getattr(dp.ino()).map_err(errno)?)?;
    }
    w.rename(sp.ino(), from.name, dp.ino(), to.name, flags)
        .map_err(errno)
}

/// link: a new name `to` for the existing `from` (not a directory: EPERM).
pub(crate) fn link(st: &State, w: &Arc<Remote>, from: &VPath, to: Place<'_>) -> Result<(), i32> {
    let dir = to.parent.ok_or(libc::EEXIST)?;
    if to.entry.is_some() {
        return Err(libc::EEXIST);
    }
    let fm = w.getattr(from.ino()).map_err(errno)?;
    if fm.file_type == FileType::Directory {
        return Err(libc::EPERM);
    }
    may_change_dir(st, &w.getattr(dir.ino()).map_err(errno)?)?;
    w.link(from.ino(), dir.ino(), to.name)
        .map(drop)
        .map_err(errno)
}
