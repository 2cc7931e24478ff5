//! The final comparison of a worker's real subtree with its model: every name, kind,
//! byte, size, symlink target, permission, link count, shared inode, `user.` xattr and
//! known mtime.

use super::model::{Id, Kind, Node, Tree};
use super::namespace::first_difference;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Compares the directory `root` with `t`.
pub(super) fn tree(root: &Path, t: &Tree) -> Result<(), String> {
    // Model node -> real inode number, and back: hard links must agree both ways.
    let mut inos: HashMap<Id, u64> = HashMap::new();
    let mut ids: HashMap<u64, Id> = HashMap::new();
    let mut stack: Vec<(PathBuf, Id)> = vec![(root.to_path_buf(), t.root)];
    while let Some((p, id)) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        if *inos.entry(id).or_insert(m.ino()) != m.ino() || *ids.entry(m.ino()).or_insert(id) != id
        {
            return Err(format!(
                "{}: inode {} does not match the model's hard links",
                p.display(),
                m.ino()
            ));
        }
        node(&p, &m, t, id)?;
        if let Kind::Dir(entries) = &t.node(id).kind {
            let mut got = crate::sys::read_dir_names(&p, false)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            got.sort();
            let want: Vec<Vec<u8>> = entries.keys().cloned().collect();
            if got != want {
                return Err(format!(
                    "{}: {}",
                    p.display(),
                    first_difference(&got, &want)
                ));
            }
            for (name, &c) in entries {
                stack.push((p.join(OsStr::from_bytes(name)), c));
            }
        }
    }
    Ok(())
}

/// One node: kind, permissions, link count, contents, xattrs, mtime.
fn node(p: &Path, m: &std::fs::Metadata, t: &Tree, id: Id) -> Result<(), String> {
    let n: &Node = t.node(id);
    let d = p.display();
    let kind_ok = match &n.kind {
        Kind::File(_) => m.file_type().is_file(),
        Kind::Dir(_) => m.file_type().is_dir(),
        Kind::Symlink(_) => m.file_type().is_symlink(),
    };
    if !kind_ok {
        return Err(format!(
            "{d}: a {:?}, the model has a {}",
            m.file_type(),
            kind_name(&n.kind)
        ));
    }
    let nlink = match &n.kind {
        Kind::Dir(_) => 2 + u64::from(t.subdirs(id)),
        _ => u64::from(n.links),
    };
    if m.nlink() != nlink {
        return Err(format!("{d}: nlink {}, model {nlink}", m.nlink()));
    }
    match &n.kind {
        Kind::File(data) => {
            let got = std::fs::read(p).map_err(|e| format!("{d}: {e}"))?;
            super::ops::compare(p, &got, data)?;
        }
        Kind::Symlink(target) => {
            let got = std::fs::read_link(p).map_err(|e| format!("{d}: {e}"))?;
            if got.as_os_str().as_bytes() != target.as_slice() {
                return Err(format!("{d}: symlink target differs from the model"));
            }
        }
        Kind::Dir(_) => {}
    }
    if !matches!(n.kind, Kind::Symlink(_)) && m.mode() & 0o7777 != n.perm {
        return Err(format!(
            "{d}: mode {:o}, model {:o}",
            m.mode() & 0o7777,
            n.perm
        ));
    }
    if let Some((sec, nsec)) = n.mtime {
        if (m.mtime(), m.mtime_nsec() as u32) != (sec, nsec) {
            return Err(format!(
                "{d}: mtime {}.{:09}, model {sec}.{nsec:09}",
                m.mtime(),
                m.mtime_nsec()
            ));
        }
    }
    xattrs(p, n)
}

fn kind_name(k: &Kind) -> &'static str {
    match k {
        Kind::File(_) => "file",
        Kind::Dir(_) => "directory",
        Kind::Symlink(_) => "symlink",
    }
}

/// The `user.` attributes of `p` are the model's.
fn xattrs(p: &Path, n: &Node) -> Result<(), String> {
    if matches!(n.kind, Kind::Symlink(_)) {
        return Ok(());
    }
    let d = p.display();
    let mut names: Vec<Vec<u8>> = crate::xattr::list(p)
        .map_err(|e| format!("{d}: listxattr: {e}"))?
        .into_iter()
        .filter(|k| k.starts_with(b"user."))
        .collect();
    names.sort();
    let want: Vec<Vec<u8>> = n.xattrs.keys().cloned().collect();
    if names != want {
        return Err(format!("{d}: xattrs: {}", first_difference(&names, &want)));
    }
    for (k, v) in &n.xattrs {
        let got = crate::xattr::get(p, k).map_err(|e| format!("{d}: getxattr: {e}"))?;
        if &got != v {
            return Err(format!(
                "{d}: xattr {} differs from the model",
                crate::escape(k)
            ));
        }
    }
    Ok(())
}
