//! The walk: depth-first from the root with an explicit stack (no recursion, whatever the
//! depth), each inode checked once; a second reference to a directory is a loop (or a
//! hard-linked directory) and is not followed. At the end, every inode's link count is
//! compared with the references found (a directory: 2 plus its subdirectories).

use super::{dir, inode, Report};
use crate::format::dirent::{from_file_type, ft};
use crate::format::superblock::incompat;
use crate::Erofs;
use std::collections::HashMap;
use usfs_fs::{Error, FileType, Structure};

/// An inode to visit, as a directory entry names it.
pub(super) struct Visit {
    /// The inode.
    pub nid: u64,
    /// The directory holding the entry (the root's parent is the root).
    pub parent: u64,
    /// Path from the root.
    pub path: String,
    /// File type the entry gives (`None` for the root).
    pub de_ftype: Option<u8>,
}

/// What the walk remembers of an inode.
struct Seen {
    /// Link count on disk.
    nlink: u32,
    /// Directory entries found referring to it.
    refs: u32,
    /// File type, as a directory entry would give it.
    ftype: u8,
    /// Subdirectories found in it (directories only).
    subdirs: u32,
    /// First path it was found at.
    path: String,
}

/// Walks the tree from the root, checking everything reachable.
pub(super) fn walk(fs: &Erofs, report: &mut Report) {
    let sb = fs.superblock();
    let root = u64::from(sb.root_nid());
    if fs.has_incompat(incompat::FRAGMENTS) && sb.packed_nid() != 0 {
        check_packed(fs, report, sb.packed_nid());
    }
    let mut seen: HashMap<u64, Seen> = HashMap::new();
    let mut stack = vec![Visit {
        nid: root,
        parent: root,
        path: "/".to_string(),
        de_ftype: None,
    }];
    while let Some(v) = stack.pop() {
        visit(fs, report, &mut seen, &mut stack, v);
    }
    link_counts(report, &seen);
}

/// The packed inode (fragments of other files): checked first, as fsck.erofs does; no
/// directory refers to it.
fn check_packed(fs: &Erofs, report: &mut Report, nid: u64) {
    let path = "(packed inode)";
    match fs.inode(nid) {
        Ok(ino) if ino.file_type == FileType::Regular => {
            report.inodes += 1;
            inode::check(fs, report, &ino, path);
        }
        Ok(_) => report.push(
            path,
            Some(nid),
            Error::corrupt(
                Structure::ErofsInode,
                "the packed inode is not a regular file",
            ),
        ),
        Err(e) => report.push(path, Some(nid), e),
    }
}

fn visit(
    fs: &Erofs,
    report: &mut Report,
    seen: &mut HashMap<u64, Seen>,
    stack: &mut Vec<Visit>,
    v: Visit,
) {
    if let Some(s) = seen.get_mut(&v.nid) {
        s.refs += 1;
        if s.ftype == ft::DIR {
            let e = format!(
                "directory already found at {} (a directory loop or a hard-linked directory)",
                s.path
            );
            report.push(&v.path, Some(v.nid), corrupt_dir(e));
            return;
        }
        let (ftype, path) = (s.ftype, v.path.clone());
        entry_type(report, &v, ftype, &path);
        return;
    }
    let ino = match fs.inode(v.nid) {
        Ok(i) => i,
        Err(e) => return report.push(&v.path, Some(v.nid), e),
    };
    report.inodes += 1;
    let ftype = from_file_type(ino.file_type);
    entry_type(report, &v, ftype, &v.path);
    seen.insert(
        v.nid,
        Seen {
            nlink: ino.nlink,
            refs: 1,
            ftype,
            subdirs: 0,
            path: v.path.clone(),
        },
    );
    let is_dir = ino.file_type == FileType::Directory;
    if is_dir && v.nid != v.parent {
        if let Some(p) = seen.get_mut(&v.parent) {
            p.subdirs += 1;
        }
    }
    let data_ok = inode::check(fs, report, &ino, &v.path);
    if is_dir {
        report.dirs += 1;
        if data_ok {
            let children = dir::check(fs, report, &ino, v.parent, &v.path);
            stack.extend(children.into_iter().rev());
        }
    }
}

/// The file type a directory entry gives must be the inode's (or unknown).
fn entry_type(report: &mut Report, v: &Visit, ftype: u8, path: &str) {
    match v.de_ftype {
        Some(d) if d != ft::UNKNOWN && d != ftype => report.push(
            path,
            Some(v.nid),
            corrupt_dir(format!(
                "directory {} has file type {d} for it, the inode's is {ftype}",
                v.parent
            )),
        ),
        _ => {}
    }
}

fn corrupt_dir(m: String) -> Error {
    Error::corrupt(Structure::ErofsDirectory, m)
}

/// Link counts against the references the walk found.
fn link_counts(report: &mut Report, seen: &HashMap<u64, Seen>) {
    let mut found: Vec<(&u64, &Seen)> = seen.iter().collect();
    found.sort_by_key(|(nid, _)| **nid);
    for (&nid, s) in found {
        let (want, what) = if s.ftype == ft::DIR {
            (2u64 + u64::from(s.subdirs), "2 + subdirectories")
        } else {
            (u64::from(s.refs), "directory entries")
        };
        if u64::from(s.nlink) != want {
            report.push(
                &s.path,
                Some(nid),
                Error::corrupt(
                    Structure::ErofsInode,
                    format!("link count {} but {want} found ({what})", s.nlink),
                )
                .with_ino(nid),
            );
        }
    }
}

/// The path of `name` in the directory at `dir_path`.
pub(super) fn child_path(dir_path: &str, name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    if dir_path == "/" {
        format!("/{name}")
    } else {
        format!("{dir_path}/{name}")
    }
}
