//! Directory checks over the reader's block parser (which checks name offsets and
//! lengths): names strictly ascending through the whole directory (lookups binary-search
//! it), legal names (no `/` or NUL), known file types, exactly one `.` naming the
//! directory itself and one `..` naming its parent — erofs-utils' `traverse_dirents` in
//! fsck mode, plus the order across blocks.

use super::walk::{child_path, Visit};
use super::Report;
use crate::format::dirent::ft;
use crate::read::{parse_block, Inode, RawEntry};
use crate::Erofs;
use usfs_fs::{Error, Structure};

/// One past the largest file type (`EROFS_FT_MAX`).
const FT_MAX: u8 = ft::SYMLINK + 1;

/// What the walk of one directory has seen so far.
#[derive(Default)]
struct State {
    /// The previous name (for the order check).
    prev: Option<Vec<u8>>,
    /// `.` found.
    dot: bool,
    /// `..` found.
    dotdot: bool,
}

/// Checks directory `ino` (whose parent is `parent`, found at `path`); returns the
/// entries to visit (not `.` and `..`). Stops at the first block that does not parse.
pub(super) fn check(
    fs: &Erofs,
    report: &mut Report,
    ino: &Inode,
    parent: u64,
    path: &str,
) -> Vec<Visit> {
    let nid = ino.nid;
    let mut st = State::default();
    let mut children = Vec::new();
    let bad = |b: u64, i: usize, m: &str| {
        Error::corrupt(
            Structure::ErofsDirectory,
            format!("directory {nid} block {b} entry {i}: {m}"),
        )
        .with_ino(nid)
    };
    for b in 0..ino.size.div_ceil(fs.bs()) {
        let blk = match fs.dir_block(ino, b) {
            Ok(blk) => blk,
            Err(e) => return push_and(report, path, nid, e, children),
        };
        let entries = match parse_block(nid, &blk) {
            Ok(v) => v,
            Err(e) => return push_and(report, path, nid, e, children),
        };
        for (i, e) in entries.iter().enumerate() {
            if let Some(m) = entry_problem(&mut st, e, nid, parent) {
                report.push(path, Some(nid), bad(b, i, &m));
                continue;
            }
            if e.name != b"." && e.name != b".." {
                children.push(Visit {
                    nid: e.nid,
                    parent: nid,
                    path: child_path(path, e.name),
                    de_ftype: Some(e.file_type),
                });
            }
        }
    }
    if !st.dot || !st.dotdot {
        let which = if st.dot { "`..'" } else { "`.'" };
        report.push(
            path,
            Some(nid),
            Error::corrupt(
                Structure::ErofsDirectory,
                format!("directory {nid}: {which} entry is missing"),
            )
            .with_ino(nid),
        );
    }
    children
}

/// Records a problem that ends the directory's walk; returns the entries found so far.
fn push_and(
    report: &mut Report,
    path: &str,
    nid: u64,
    e: Error,
    children: Vec<Visit>,
) -> Vec<Visit> {
    report.push(path, Some(nid), e);
    children
}

/// What is wrong with one entry, if anything.
fn entry_problem(st: &mut State, e: &RawEntry<'_>, nid: u64, parent: u64) -> Option<String> {
    if let Some(p) = &st.prev {
        if e.name <= &p[..] {
            let m = format!(
                "name {:?} does not sort after {:?}",
                String::from_utf8_lossy(e.name),
                String::from_utf8_lossy(p)
            );
            st.prev = Some(e.name.to_vec());
            return Some(m);
        }
    }
    st.prev = Some(e.name.to_vec());
    if e.file_type >= FT_MAX {
        return Some(format!("invalid file type {}", e.file_type));
    }
    match e.name {
        b"." => {
            if std::mem::replace(&mut st.dot, true) {
                return Some("duplicated `.' entry".into());
            }
            (e.nid != nid).then(|| format!("`.' names nid {}, not the directory", e.nid))
        }
        b".." => {
            if std::mem::replace(&mut st.dotdot, true) {
                return Some("duplicated `..' entry".into());
            }
            (e.nid != parent).then(|| format!("`..' names nid {}, the parent is {parent}", e.nid))
        }
        n if n.iter().any(|&c| c == b'/' || c == 0) => {
            Some(format!("illegal name {:?}", String::from_utf8_lossy(n)))
        }
        _ => None,
    }
}
