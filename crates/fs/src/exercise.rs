//! A bounded walk over a whole file system calling every read operation: what the fuzz
//! targets run on arbitrary bytes, so a back end's parsers meet every code path without
//! the walk itself becoming unbounded on a corrupt image.

use crate::{FileSystem, FileType, Ino};

/// Most directory entries visited, entries taken from one directory, and directory depth.
const MAX_ENTRIES: usize = 2000;
const MAX_PER_DIR: usize = 256;
const MAX_DEPTH: u32 = 16;

/// Walks `fs` from its root: describe, statfs, then for each entry lookup, getattr, the
/// xattrs, and by type readdir (recursing; also resumed entry by entry), reads at two
/// offsets and SEEK_DATA, or readlink. Every error is ignored: the point is that nothing panics or hangs.
pub fn exercise(fs: &dyn FileSystem) {
    let _ = fs.describe();
    let _ = fs.statfs();
    let mut stack: Vec<(Ino, u32)> = vec![(fs.root(), 0)];
    let mut visited = 0;
    let mut buf = vec![0u8; 8192];
    while let Some((dir, depth)) = stack.pop() {
        let mut entries = Vec::new();
        let _ = fs.readdir(dir, 0, &mut |e, _| {
            entries.push(e);
            entries.len() < MAX_PER_DIR
        });
        resume_one_by_one(fs, dir);
        for e in entries {
            visited += 1;
            if visited > MAX_ENTRIES {
                return;
            }
            let _ = fs.lookup(dir, &e.name);
            let Ok(m) = fs.getattr(e.ino) else { continue };
            if let Ok(names) = fs.list_xattrs(e.ino) {
                for n in names {
                    let _ = fs.get_xattr(e.ino, &n);
                }
            }
            match m.file_type {
                FileType::Directory if depth < MAX_DEPTH => stack.push((e.ino, depth + 1)),
                FileType::Regular => {
                    let _ = fs.read_at(e.ino, 0, &mut buf);
                    let _ = fs.read_at(e.ino, 5000, &mut buf[..100]);
                    let _ = fs.next_data(e.ino, 0);
                }
                FileType::Symlink => {
                    let _ = fs.readlink(e.ino);
                }
                _ => {}
            }
        }
    }
}

/// Lists `dir` with `.` and `..` one entry per call, resuming at the position each call
/// gave, for at most [`MAX_PER_DIR`] calls.
fn resume_one_by_one(fs: &dyn FileSystem, dir: Ino) {
    let mut pos = 0;
    for _ in 0..MAX_PER_DIR {
        let mut next = None;
        let _ = fs.readdir_with_dots(dir, pos, &mut |_, n| {
            next = Some(n);
            false
        });
        match next {
            Some(n) => pos = n,
            None => return,
        }
    }
}
