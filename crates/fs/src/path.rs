//! Path resolution inside one file system: the single resolver every front end uses.

use crate::{Error, FileSystem, FileType, Ino, Result};

/// Longest chain of symbolic links followed while resolving one path (Linux's limit).
pub const MAX_SYMLINKS: usize = 40;

/// Resolves `path` (relative to the root; leading `/` ignored) to an inode.
///
/// `.` and `..` are handled lexically against the directories actually walked, so `..`
/// never leaves the image (`..` of the root is the root). Symbolic links in the middle of
/// the path are followed (absolute targets restart at the image root); the last component
/// is followed only when `follow_last` is set. More than [`MAX_SYMLINKS`] links gives
/// [`Error::Loop`].
pub fn resolve(fs: &dyn FileSystem, path: &[u8], follow_last: bool) -> Result<Ino> {
    let mut stack: Vec<Ino> = vec![fs.root()];
    // Components still to walk, in reverse order (so pushing a link's target is cheap).
    let mut todo: Vec<Vec<u8>> = components(path).rev().map(<[u8]>::to_vec).collect();
    let mut links = 0;
    while let Some(name) = todo.pop() {
        let here = *stack.last().expect("stack never empty");
        match name.as_slice() {
            b"." => continue,
            b".." => {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            _ => {}
        }
        let meta = fs.getattr(here)?;
        if meta.file_type != FileType::Directory {
            return Err(Error::NotDir);
        }
        let ino = fs.lookup(here, &name)?;
        let is_last = todo.is_empty();
        let meta = fs.getattr(ino)?;
        if meta.file_type == FileType::Symlink && (!is_last || follow_last) {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(Error::Loop);
            }
            let target = fs.readlink(ino)?;
            if target.is_empty() {
                return Err(Error::NotFound);
            }
            if target[0] == b'/' {
                stack.truncate(1);
            }
            todo.extend(components(&target).rev().map(<[u8]>::to_vec));
            continue;
        }
        stack.push(ino);
    }
    Ok(*stack.last().expect("stack never empty"))
}

/// The non-empty components of a path.
pub fn components(path: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    path.split(|&b| b == b'/').filter(|c| !c.is_empty())
}
