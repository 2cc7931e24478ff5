//! Changes that land in a read-write mount (`usfs run --rw`): the path calls of
//! [`crate::h_modify`] and the creating open, carried out through the mount's owner once
//! the kernel's earlier checks (lookups, EEXIST, "." and "..") have passed. The rules
//! after "is the file system writable" are vfs's: [`usfs_vfs::names`] for names,
//! [`usfs_vfs::change`] for attributes; this process adds its IDs and umask.

use crate::state::State;
use std::sync::Arc;
use usfs_fs::{FileSystemWrite, Metadata};
use usfs_vfs::change::{self, TimeSet};
use usfs_vfs::channel::Remote;
use usfs_vfs::creds::MAY_WRITE;
pub(crate) use usfs_vfs::names::{self, NewKind, Place};
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

fn errno(e: usfs_fs::Error) -> i32 {
    e.errno()
}

/// The process's umask: as the umask hook last set it, else read once from /proc (which,
/// unlike umask(2), does not change it).
fn process_umask(st: &State) -> u32 {
    use std::sync::atomic::Ordering;
    let known = st.umask.load(Ordering::Relaxed);
    if known != u32::MAX {
        return known;
    }
    let m = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("Umask:"))?;
            u32::from_str_radix(l[6..].trim(), 8).ok()
        })
        .unwrap_or(0o022);
    // A concurrent umask(2) wins: it stored the newer value.
    let _ = st
        .umask
        .compare_exchange(u32::MAX, m, Ordering::Relaxed, Ordering::Relaxed);
    st.umask.load(Ordering::Relaxed)
}

/// umask(2): the new mask is remembered for the files made in read-write mounts.
#[no_mangle]
pub(crate) unsafe extern "C" fn umask(mask: libc::mode_t) -> libc::mode_t {
    let old = crate::sys::call_real!(umask: unsafe extern "C" fn(libc::mode_t) -> libc::mode_t, 0o022; mask);
    if let Some(st) = crate::state::state() {
        st.umask
            .store(mask & 0o777, std::sync::atomic::Ordering::Relaxed);
    }
    old
}

/// Carries out `op` at `p` with the owner `w`.
pub(crate) fn apply(st: &State, w: &Arc<Remote>, p: Place<'_>, op: Op<'_>) -> Result<(), i32> {
    let w: &dyn FileSystemWrite = &**w;
    let a = st.actor();
    let entry_ino = || p.entry.map(VPath::ino).ok_or(libc::ENOENT);
    match op {
        Op::Mkdir(mode) => create(st, w, &p, NewKind::Dir(mode)).map(drop),
        Op::Mknod(mode, dev) => create(st, w, &p, NewKind::Node(mode, dev)).map(drop),
        Op::Symlink(target) => create(st, w, &p, NewKind::Symlink(target)).map(drop),
        Op::Unlink | Op::Rmdir => names::remove(w, a, &p, matches!(op, Op::Rmdir)),
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

/// Makes a new inode at `p` for this process (its IDs and umask).
pub(crate) fn create(
    st: &State,
    w: &dyn FileSystemWrite,
    p: &Place<'_>,
    kind: NewKind<'_>,
) -> Result<Metadata, i32> {
    names::create(w, st.actor(), p, kind, process_umask(st))
}
