//! Path resolution inside one file system: the one rule for walking an image.
//!
//! [`step`] is the single place that looks a name up in a directory and decides whether a
//! symbolic link is followed; [`resolve`] walks a whole path inside one image with it, and
//! the vfs resolver (host paths, mount table, virtual cwd) uses the same [`step`] for the
//! part of a walk inside an image.

use crate::{Error, FileSystem, FileType, Ino, Metadata, Result};

/// Longest chain of symbolic links followed while resolving one path (Linux's limit).
pub const MAX_SYMLINKS: usize = 40;

/// Longest name one directory entry can hold (ext4 and EROFS alike).
pub const NAME_MAX: usize = 255;

/// What one step of a walk found.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The name leads to this inode (not a symbolic link to follow).
    Node(Ino),
    /// The name is a symbolic link to follow: its target, non-empty. An absolute target
    /// restarts the walk at the image root.
    Link(Vec<u8>),
}

/// Looks `name` up in directory `dir` — the step every walk inside an image takes.
///
/// `dir` must be a directory (else [`Error::NotDir`]) that `may_search` allows (else
/// [`Error::Access`]; front ends check permissions, back ends never do). A symbolic link
/// is returned as [`Step::Link`] when `follow` is set; each link followed counts in
/// `links`, and more than [`MAX_SYMLINKS`] gives [`Error::Loop`]. An empty link target is
/// [`Error::NotFound`], as in Linux.
pub fn step(
    fs: &dyn FileSystem,
    dir: Ino,
    name: &[u8],
    follow: bool,
    links: &mut usize,
    may_search: &dyn Fn(&Metadata) -> bool,
) -> Result<Step> {
    let s = fs.step_attrs(dir, name, follow)?;
    let Some(found) = s.found else {
        return Err(Error::NotDir);
    };
    if !may_search(&s.dir) {
        return Err(Error::Access);
    }
    if name.len() > NAME_MAX {
        return Err(Error::NameTooLong);
    }
    let (ino, child) = found?;
    let is_link = follow
        && match child {
            Some(m) => m.file_type == FileType::Symlink,
            None => fs.getattr(ino)?.file_type == FileType::Symlink,
        };
    if !is_link {
        return Ok(Step::Node(ino));
    }
    *links += 1;
    if *links > MAX_SYMLINKS {
        return Err(Error::Loop);
    }
    let target = fs.readlink(ino)?;
    if target.is_empty() {
        return Err(Error::NotFound);
    }
    Ok(Step::Link(target))
}

/// Resolves `path` (relative to the root; leading `/` ignored) to an inode.
///
/// `.` and `..` are handled against the directories actually walked, so `..` never
/// leaves the image (`..` of the root is the root). Symbolic links in the middle of the
/// path are followed (absolute targets restart at the image root); the last component
/// is followed only when `follow_last` is set. See [`step`] for the rules of one lookup.
pub fn resolve(fs: &dyn FileSystem, path: &[u8], follow_last: bool) -> Result<Ino> {
    let mut stack: Vec<Ino> = vec![fs.root()];
    // Components still to walk, in reverse order (so pushing a link's target is cheap).
    let mut todo: Vec<Vec<u8>> = components(path).rev().map(<[u8]>::to_vec).collect();
    let mut links = 0;
    while let Some(name) = todo.pop() {
        let here = *stack.last().expect("stack never empty");
        match name.as_slice() {
            b"." => {}
            b".." => {
                if stack.len() > 1 {
                    stack.pop();
                }
            }
            _ => {
                let follow = !todo.is_empty() || follow_last;
                match step(fs, here, &name, follow, &mut links, &|_| true)? {
                    Step::Node(ino) => stack.push(ino),
                    Step::Link(target) => {
                        if target[0] == b'/' {
                            stack.truncate(1);
                        }
                        todo.extend(components(&target).rev().map(<[u8]>::to_vec));
                    }
                }
            }
        }
    }
    Ok(*stack.last().expect("stack never empty"))
}

/// The non-empty components of a path.
pub fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DirEntry, StatFs};

    /// A tiny image: `/a/f` (file), `/a/rel -> ../a/f`, `/a/abs -> /a/f`,
    /// `/a/esc -> ../../../a/f`, `/loop -> loop`, `/empty -> ""`, `/locked/` (mode 0).
    /// A small tree; `eager`: its step_attrs always gives the child's attributes, as a
    /// file system served by another process does.
    struct Tree {
        eager: bool,
    }

    const TREE: Tree = Tree { eager: false };

    const ROOT: Ino = 1;
    const NODES: &[(Ino, Ino, &str, FileType, &str)] = &[
        // (ino, parent, name, type, link target)
        (2, ROOT, "a", FileType::Directory, ""),
        (3, 2, "f", FileType::Regular, ""),
        (4, 2, "rel", FileType::Symlink, "../a/f"),
        (5, 2, "abs", FileType::Symlink, "/a/f"),
        (6, 2, "esc", FileType::Symlink, "../../../a/f"),
        (7, ROOT, "loop", FileType::Symlink, "loop"),
        (8, ROOT, "empty", FileType::Symlink, ""),
        (9, ROOT, "locked", FileType::Directory, ""),
        (10, 9, "g", FileType::Regular, ""),
    ];

    impl FileSystem for Tree {
        fn format_name(&self) -> &'static str {
            "test"
        }
        fn root(&self) -> Ino {
            ROOT
        }
        fn lookup(&self, dir: Ino, name: &[u8]) -> Result<Ino> {
            NODES
                .iter()
                .find(|n| n.1 == dir && n.2.as_bytes() == name)
                .map(|n| n.0)
                .ok_or(Error::NotFound)
        }
        fn step_attrs(&self, dir: Ino, name: &[u8], child: bool) -> Result<crate::StepAttrs> {
            let d = self.getattr(dir)?;
            let found = (d.file_type == FileType::Directory).then(|| {
                let ino = self.lookup(dir, name)?;
                let m = (child || self.eager)
                    .then(|| self.getattr(ino))
                    .transpose()?;
                Ok((ino, m))
            });
            Ok(crate::StepAttrs { dir: d, found })
        }
        fn getattr(&self, ino: Ino) -> Result<Metadata> {
            let (file_type, perm) = match NODES.iter().find(|n| n.0 == ino) {
                Some(n) => (n.3, if n.0 == 9 { 0 } else { 0o755 }),
                None if ino == ROOT => (FileType::Directory, 0o755),
                None => return Err(Error::NotFound),
            };
            Ok(Metadata::synthetic(ino, file_type, perm, 0, 0))
        }
        fn readdir(&self, _: Ino, _: u64, _: &mut dyn FnMut(DirEntry, u64) -> bool) -> Result<()> {
            Ok(())
        }
        fn read_at(&self, _: Ino, _: u64, _: &mut [u8]) -> Result<usize> {
            Ok(0)
        }
        fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
            let n = NODES.iter().find(|n| n.0 == ino).ok_or(Error::NotFound)?;
            Ok(n.4.as_bytes().to_vec())
        }
        fn list_xattrs(&self, _: Ino) -> Result<Vec<Vec<u8>>> {
            Ok(Vec::new())
        }
        fn get_xattr(&self, _: Ino, _: &[u8]) -> Result<Vec<u8>> {
            Err(Error::NoData)
        }
        fn next_data(&self, _: Ino, _: u64) -> Result<Option<std::ops::Range<u64>>> {
            Ok(None)
        }
        fn statfs(&self) -> Result<StatFs> {
            Ok(StatFs::default())
        }
        fn io_stats(&self) -> usfs_dev::IoSnapshot {
            usfs_dev::IoSnapshot::default()
        }
        fn describe(&self) -> Vec<(String, String)> {
            Vec::new()
        }
    }

    fn r(path: &str, follow: bool) -> Result<Ino> {
        let plain = resolve(&TREE, path.as_bytes(), follow);
        let eager = resolve(&Tree { eager: true }, path.as_bytes(), follow);
        assert_eq!(
            format!("{plain:?}"),
            format!("{eager:?}"),
            "{path}: the walk depends on whether step_attrs gives the child's attributes"
        );
        plain
    }

    #[test]
    fn walks_dots_and_links_without_leaving_the_image() {
        assert_eq!(r("/a/f", true).unwrap(), 3);
        assert_eq!(r("a/./f", true).unwrap(), 3);
        assert_eq!(r("/../../a/../a/f", true).unwrap(), 3);
        assert_eq!(r("/a/rel", true).unwrap(), 3);
        assert_eq!(r("/a/rel", false).unwrap(), 4);
        assert_eq!(r("/a/abs", true).unwrap(), 3);
        // `..` from a link's target stops at the image root.
        assert_eq!(r("/a/esc", true).unwrap(), 3);
        assert_eq!(r("/", true).unwrap(), ROOT);
    }

    #[test]
    fn errors_name_the_rule() {
        assert!(matches!(r("/loop", true), Err(Error::Loop)));
        assert_eq!(r("/loop", false).unwrap(), 7);
        assert!(matches!(r("/empty", true), Err(Error::NotFound)));
        assert!(matches!(r("/a/f/x", true), Err(Error::NotDir)));
        assert!(matches!(r("/a/missing", true), Err(Error::NotFound)));
        let long = format!("/a/{}", "x".repeat(NAME_MAX + 1));
        assert!(matches!(r(&long, true), Err(Error::NameTooLong)));
    }

    #[test]
    fn step_asks_the_front_end_for_search_permission() {
        let mut links = 0;
        let deny_mode_0 = |m: &Metadata| m.perm != 0;
        let got = step(&TREE, 9, b"g", true, &mut links, &deny_mode_0);
        assert!(matches!(got, Err(Error::Access)));
        assert_eq!(
            step(&TREE, 9, b"g", true, &mut links, &|_| true).unwrap(),
            Step::Node(10)
        );
        assert_eq!(
            step(&TREE, 2, b"rel", true, &mut links, &|_| true).unwrap(),
            Step::Link(b"../a/f".to_vec())
        );
        assert_eq!(links, 1);
    }
}
