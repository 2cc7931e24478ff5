//! The namespace and attribute operations of a worker: rename, link, unlink, mkdir,
//! rmdir, symlink, xattrs, chmod, utimens, fsync, readdir — each with the errno POSIX
//! (Linux) gives when the model says the call must fail.

use super::model::{Id, Kind};
use super::ops::{bytes, done, expect, OpResult, Outcome, Worker};
use crate::sys::{read_dir_names, set_times, Timespec};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;

impl Worker<'_> {
    pub(super) fn rename(&mut self) -> OpResult {
        let Some(src) = self.pick_entry(|_, _| true) else {
            return Ok(Outcome::Skipped);
        };
        let (dir, did) = self.pick_dir();
        let names: Vec<Vec<u8>> = self.tree.dir(did).keys().cloned().collect();
        let name = match self
            .rng
            .chance(1, 2)
            .then(|| self.rng.pick(&names).cloned())
            .flatten()
        {
            Some(n) => n,
            None => self.name(),
        };
        let new_rel = dir.join(OsStr::from_bytes(&name));
        if !self.fits(new_rel.as_os_str().len() + self.tree.deepest(src.id)) {
            return Ok(Outcome::Skipped); // the moved subtree would pass PATH_LIMIT
        }
        let (from, to) = (self.path(&src.path), self.path(&new_rel));
        self.note(format!("rename {} -> {}", from.display(), to.display()));
        let want = self.rename_errno(src.id, src.parent, did, &name);
        if let Some(()) = expect(std::fs::rename(&from, &to), want, "rename")? {
            self.tree.rename(src.parent, &src.name, did, &name);
            return Ok(Outcome::Done);
        }
        Ok(Outcome::ExpectedError)
    }

    /// The errnos renaming node `id` (in directory `parent`) to `name` in `dir` must fail
    /// with (empty: success), in Linux's order: the source is an ancestor of the target
    /// (EINVAL), the target an ancestor of the source (ENOTEMPTY), both name one inode
    /// (success), then the kinds, then a non-empty target directory.
    fn rename_errno(&self, id: Id, parent: Id, dir: Id, name: &[u8]) -> &'static [i32] {
        let t = &self.tree;
        if t.is_dir(id) && t.is_within(dir, id) {
            return &[libc::EINVAL];
        }
        let Some(&target) = t.dir(dir).get(name) else {
            return &[];
        };
        if t.is_dir(target) && t.is_within(parent, target) {
            return &[libc::ENOTEMPTY];
        }
        match (t.is_dir(id), t.is_dir(target)) {
            _ if target == id => &[],
            (true, false) => &[libc::ENOTDIR],
            (false, true) => &[libc::EISDIR],
            (true, true) if !t.dir(target).is_empty() => &[libc::ENOTEMPTY, libc::EEXIST],
            _ => &[],
        }
    }

    pub(super) fn link(&mut self) -> OpResult {
        // Mostly files; now and then a directory, which may not be linked.
        let dirs_too = self.rng.chance(1, 10);
        let Some(src) =
            self.pick_entry(|t, id| Worker::is_file(t, id) || (dirs_too && t.is_dir(id)))
        else {
            return Ok(Outcome::Skipped);
        };
        let (dir, did) = self.pick_dir();
        let name = self.name();
        let (from, to) = (
            self.path(&src.path),
            self.path(&dir.join(OsStr::from_bytes(&name))),
        );
        self.note(format!("link {} -> {}", from.display(), to.display()));
        // The new name is looked up (EEXIST) before the source's kind is checked (EPERM).
        let want: &[i32] = if self.tree.dir(did).contains_key(&name) {
            &[libc::EEXIST]
        } else if self.tree.is_dir(src.id) {
            &[libc::EPERM]
        } else {
            &[]
        };
        let r = expect(std::fs::hard_link(&from, &to), want, "link")?;
        if r.is_some() {
            self.tree.link(src.id, did, &name);
        }
        Ok(done(r))
    }

    pub(super) fn unlink(&mut self) -> OpResult {
        let Some(e) = self.pick_entry(|_, _| true) else {
            return Ok(Outcome::Skipped);
        };
        let p = self.path(&e.path);
        self.note(format!("unlink {}", p.display()));
        let want: &[i32] = if self.tree.is_dir(e.id) {
            &[libc::EISDIR]
        } else {
            &[]
        };
        let r = expect(std::fs::remove_file(&p), want, "unlink")?;
        if r.is_some() {
            self.tree.remove(e.parent, &e.name);
        }
        Ok(done(r))
    }

    pub(super) fn mkdir(&mut self) -> OpResult {
        if self.full() {
            return Ok(Outcome::Skipped);
        }
        let (dir, did) = self.pick_dir();
        let name = self.name();
        let perm = 0o700 | (self.rng.below(0o100) as u32);
        let p = self.path(&dir.join(OsStr::from_bytes(&name)));
        self.note(format!("mkdir {} perm {perm:o}", p.display()));
        let want: &[i32] = if self.tree.dir(did).contains_key(&name) {
            &[libc::EEXIST]
        } else {
            &[]
        };
        let r = expect(std::fs::create_dir(&p), want, "mkdir")?;
        if r.is_some() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(perm))
                .map_err(|e| format!("mkdir: chmod: {e}"))?;
            self.tree
                .add(did, &name, Kind::Dir(Default::default()), perm);
        }
        Ok(done(r))
    }

    pub(super) fn rmdir(&mut self) -> OpResult {
        let files_too = self.rng.chance(1, 10);
        let Some(e) = self.pick_entry(|t, id| t.is_dir(id) || files_too) else {
            return Ok(Outcome::Skipped);
        };
        let p = self.path(&e.path);
        self.note(format!("rmdir {}", p.display()));
        let want: &[i32] = if !self.tree.is_dir(e.id) {
            &[libc::ENOTDIR]
        } else if !self.tree.dir(e.id).is_empty() {
            &[libc::ENOTEMPTY, libc::EEXIST]
        } else {
            &[]
        };
        let r = expect(std::fs::remove_dir(&p), want, "rmdir")?;
        if r.is_some() {
            self.tree.remove(e.parent, &e.name);
        }
        Ok(done(r))
    }

    pub(super) fn symlink(&mut self) -> OpResult {
        if self.full() {
            return Ok(Outcome::Skipped);
        }
        let (dir, did) = self.pick_dir();
        let name = self.name();
        let target = match self.rng.below(3) {
            0 => self.name(),
            1 => b"../dangling/target".to_vec(),
            _ => vec![b'x'; self.rng.range(60, 500) as usize],
        };
        let p = self.path(&dir.join(OsStr::from_bytes(&name)));
        self.note(format!(
            "symlink {} ({} byte target)",
            p.display(),
            target.len()
        ));
        let want: &[i32] = if self.tree.dir(did).contains_key(&name) {
            &[libc::EEXIST]
        } else {
            &[]
        };
        let r = expect(
            std::os::unix::fs::symlink(OsStr::from_bytes(&target), &p),
            want,
            "symlink",
        )?;
        if r.is_some() {
            self.tree.add(did, &name, Kind::Symlink(target), 0o777);
        }
        Ok(done(r))
    }

    /// setxattr (`set`) or removexattr of a `user.` attribute on a file or directory.
    pub(super) fn xattr(&mut self, set: bool) -> OpResult {
        if !self.opts.xattrs {
            return Ok(Outcome::Skipped);
        }
        let Some(e) = self.pick_entry(Worker::not_symlink) else {
            return Ok(Outcome::Skipped);
        };
        let p = self.path(&e.path);
        let name = format!("user.k{}", self.rng.below(6)).into_bytes();
        if set {
            let len = self.rng.below(257) as usize;
            let value = bytes(&mut self.rng, len);
            self.note(format!(
                "setxattr {} {} ({len} bytes)",
                p.display(),
                String::from_utf8_lossy(&name)
            ));
            let r = crate::xattr::set(&p, &name, &value);
            if r.as_ref().err().and_then(|e| e.raw_os_error()) == Some(libc::EOPNOTSUPP) {
                return Ok(Outcome::Unsupported);
            }
            // ext4 keeps a file's xattrs in its inode and one block: on 1 KiB blocks six
            // values of up to 256 bytes do not fit, and the kernel says ENOSPC.
            let want: &[i32] = if xattr_bytes(&self.tree.node(e.id).xattrs, &name, len) > FITS {
                &[libc::ENOSPC]
            } else {
                &[]
            };
            match r {
                Err(err) if !want.is_empty() && err.raw_os_error() == Some(libc::ENOSPC) => {
                    return Ok(Outcome::ExpectedError);
                }
                r => {
                    expect(r, &[], "setxattr")?;
                }
            }
            self.tree.node_mut(e.id).xattrs.insert(name, value);
            return Ok(Outcome::Done);
        }
        self.note(format!(
            "removexattr {} {}",
            p.display(),
            String::from_utf8_lossy(&name)
        ));
        let want: &[i32] = if self.tree.node(e.id).xattrs.contains_key(&name) {
            &[]
        } else {
            &[libc::ENODATA]
        };
        let r = expect(crate::xattr::remove(&p, &name), want, "removexattr")?;
        if r.is_some() {
            self.tree.node_mut(e.id).xattrs.remove(&name);
        }
        Ok(done(r))
    }

    pub(super) fn chmod(&mut self) -> OpResult {
        let Some(e) = self.pick_entry(Worker::not_symlink) else {
            return Ok(Outcome::Skipped);
        };
        let p = self.path(&e.path);
        let floor = if self.tree.is_dir(e.id) { 0o700 } else { 0o600 };
        let perm = floor | (self.rng.below(0o1000) as u32);
        self.note(format!("chmod {} {perm:o}", p.display()));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(perm))
            .map_err(|e| format!("chmod: {e}"))?;
        self.tree.node_mut(e.id).perm = perm;
        Ok(Outcome::Done)
    }

    pub(super) fn utimens(&mut self) -> OpResult {
        let Some(e) = self.pick_entry(|_, _| true) else {
            return Ok(Outcome::Skipped);
        };
        let p = self.path(&e.path);
        let sec = self.rng.below(1 << 31) as i64;
        let nsec = self.rng.below(1_000_000_000) as u32;
        self.note(format!("utimens {} mtime {sec}.{nsec:09}", p.display()));
        let t = Timespec::new(sec, nsec);
        set_times(&p, t, t).map_err(|e| format!("utimens: {e}"))?;
        self.tree.node_mut(e.id).mtime = Some((sec, nsec));
        Ok(Outcome::Done)
    }

    pub(super) fn fsync(&mut self) -> OpResult {
        let pick = self.pick_entry(Worker::not_symlink).map(|e| e.path);
        let p = self.path(&pick.unwrap_or_default());
        self.note(format!("fsync {}", p.display()));
        std::fs::File::open(&p)
            .and_then(|f| f.sync_all())
            .map_err(|e| format!("fsync {}: {e}", p.display()))?;
        Ok(Outcome::Done)
    }

    pub(super) fn readdir(&mut self) -> OpResult {
        let (dir, did) = self.pick_dir();
        let p = self.path(&dir);
        self.note(format!("readdir {}", p.display()));
        let mut got =
            read_dir_names(&p, false).map_err(|e| format!("readdir {}: {e}", p.display()))?;
        got.sort();
        let want: Vec<Vec<u8>> = self.tree.dir(did).keys().cloned().collect();
        if got != want {
            return Err(format!(
                "readdir {}: {} names, model has {}; first difference: {}",
                p.display(),
                got.len(),
                want.len(),
                first_difference(&got, &want)
            ));
        }
        Ok(Outcome::Done)
    }
}

/// The first name in one sorted list and not the other.
pub(super) fn first_difference(got: &[Vec<u8>], want: &[Vec<u8>]) -> String {
    for n in got {
        if want.binary_search(n).is_err() {
            return format!("{} is there, not in the model", crate::escape(n));
        }
    }
    for n in want {
        if got.binary_search(n).is_err() {
            return format!("{} is missing", crate::escape(n));
        }
    }
    "none".into()
}

/// The xattr bytes (entries and values, as an ext4 xattr block lays them out) under
/// which a file's attributes surely fit in the smallest block (1 KiB, less its header),
/// whatever the inode holds.
const FITS: usize = 768;

/// The bytes a file's `user.` attributes `have`, with `name` set to a value of `len`
/// bytes, take in an ext4 xattr block: per entry 16 bytes and the name without its
/// `user.` prefix, rounded up to 4, and the value rounded up to 4.
fn xattr_bytes(
    have: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    name: &[u8],
    len: usize,
) -> usize {
    let one =
        |n: &[u8], v: usize| 16 + (n.len().saturating_sub(5)).div_ceil(4) * 4 + v.div_ceil(4) * 4;
    have.iter()
        .filter(|(n, _)| n.as_slice() != name)
        .map(|(n, v)| one(n, v.len()))
        .sum::<usize>()
        + one(name, len)
}
