//! A directory of the host as a [`Source`]: scanned in parallel relative to open
//! directory descriptors ([`walk`], [`sys`]), file data read again through a
//! per-thread reader that keeps the last directory and file open ([`HostReader`]).

pub(crate) mod sys;
mod walk;

use crate::tree::Tree;
use crate::{io_err, Reader, Source};
use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use sys::Dir;
use usfs_fs::{Error, Result};

/// A directory tree on the host (mkfs's `-d DIR`, mkfs.erofs's SOURCE).
#[derive(Clone, Debug)]
pub struct HostDir {
    root: PathBuf,
}

impl HostDir {
    /// The tree below directory `root` (a final symlink is not followed: the root must
    /// be a directory).
    pub fn new(root: impl Into<PathBuf>) -> HostDir {
        HostDir { root: root.into() }
    }
}

impl Source for HostDir {
    fn origin(&self) -> &Path {
        &self.root
    }

    fn scan(&self, tree: &Tree, threads: usize) -> Result<()> {
        tree.scan(threads, || walk::Walker::new(&self.root, tree))
    }

    fn reader<'a>(&'a self, tree: &'a Tree) -> Box<dyn Reader + 'a> {
        Box::new(HostReader {
            root: &self.root,
            tree,
            dir: None,
            file: None,
        })
    }
}

/// Reads files of a host tree: opened relative to their directory, which stays open
/// while files of it follow, and the file while reads of it follow.
struct HostReader<'a> {
    root: &'a Path,
    tree: &'a Tree,
    /// The directory last opened (its node).
    dir: Option<(usize, Dir)>,
    /// The file last opened (its node).
    file: Option<(usize, File)>,
}

impl HostReader<'_> {
    /// File `node`, open.
    fn open(&mut self, node: usize) -> Result<&File> {
        if !matches!(&self.file, Some((n, _)) if *n == node) {
            self.file = None;
            let n = self.tree.node(node);
            let parent = n.parent;
            let dir = match &mut self.dir {
                Some((p, d)) if *p == parent => d,
                slot => {
                    let dpath = self.tree.path_under(self.root, parent);
                    let d = Dir::open(&dpath).map_err(|e| io_err(&dpath, e))?;
                    &mut slot.insert((parent, d)).1
                }
            };
            let name = CString::new(n.name.clone()).map_err(|_| Error::Invalid)?;
            let f = dir
                .open_file(&name)
                .map_err(|e| io_err(&self.tree.path_under(self.root, node), e))?;
            self.file = Some((node, f));
        }
        match &self.file {
            Some((_, f)) => Ok(f),
            None => Err(Error::Invalid),
        }
    }
}

impl Reader for HostReader<'_> {
    fn read_at(&mut self, node: usize, buf: &mut [u8], off: u64) -> Result<usize> {
        let f = self.open(node)?;
        sys::read_full(f, buf, off).map_err(|e| io_err(&self.tree.path_under(self.root, node), e))
    }

    fn read_vec(&mut self, node: usize, off: u64, len: u64, buf: &mut Vec<u8>) -> Result<usize> {
        let named = |tree: &Tree, e| io_err(&tree.path_under(self.root, node), e);
        let mut f = self.open(node)?;
        // Read through the descriptor's offset (this reader's alone) into the spare
        // capacity, which `read_to_end` does not zero.
        let start = buf.len();
        f.seek(SeekFrom::Start(off))
            .and_then(|_| f.take(len).read_to_end(buf))
            .map_err(|e| named(self.tree, e))?;
        Ok(buf.len() - start)
    }

    fn size(&mut self, node: usize) -> Result<u64> {
        let f = self.open(node)?;
        let st =
            sys::fstat(f.as_fd()).map_err(|e| io_err(&self.tree.path_under(self.root, node), e))?;
        Ok(st.st_size.max(0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Hold, Kind, ScanOptions};

    /// Scans a small tree both ways (attributes only; with data, small files kept) and
    /// reads a file back through a reader.
    #[test]
    fn scans_a_host_directory_and_reads_files_back() {
        let d = std::env::temp_dir().join(format!("usfs-source-host-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        let mut big = vec![0u8; 3 * 4096];
        big[2 * 4096] = 9;
        std::fs::write(d.join("sub/big"), &big).unwrap();
        std::fs::write(d.join("a"), b"hello").unwrap();
        std::fs::hard_link(d.join("a"), d.join("b")).unwrap();
        std::os::unix::fs::symlink("a", d.join("l")).unwrap();
        let src = HostDir::new(&d);
        for block_size in [None, Some(4096)] {
            let tree = Tree::new(ScanOptions {
                block_size,
                hold: Hold::new(1 << 20, 1 << 20),
                background: false,
            });
            src.scan(&tree, 3).unwrap();
            let root = tree.dir(0).unwrap();
            let names: Vec<&[u8]> = root.kids.iter().map(|&k| &tree.node(k).name[..]).collect();
            assert_eq!(names, [&b"a"[..], b"b", b"l", b"sub"]);
            let (a, b, l, sub) = (root.kids[0], root.kids[1], root.kids[2], root.kids[3]);
            let (ma, mb) = (&tree.node(a).meta, &tree.node(b).meta);
            assert_eq!((ma.dev, ma.ino, ma.nlink), (mb.dev, mb.ino, 2));
            assert!(matches!(&tree.node(l).kind, Kind::Symlink(t) if t == b"a"));
            let big_node = tree.dir(sub).unwrap().kids[0];
            assert_eq!(src.path(&tree, big_node), d.join("sub/big"));
            match (&tree.node(big_node).kind, block_size) {
                (Kind::File(f), None) => assert!(f.blocks.is_empty() && f.held.is_none()),
                (Kind::File(f), Some(_)) => {
                    // Only the block that is not all zeros is data; kept in memory.
                    assert_eq!(f.blocks[..], [(2, 1)]);
                    assert_eq!(tree.hold.bytes(f.held.unwrap(), 3 * 4096), &big[..]);
                }
                _ => panic!("not a file"),
            }
            let mut r = src.reader(&tree);
            assert_eq!(r.size(big_node).unwrap(), big.len() as u64);
            let mut v = b"x".to_vec();
            assert_eq!(r.read_vec(big_node, 8190, 10, &mut v).unwrap(), 10);
            assert_eq!(v[1..], big[8190..8200]);
            let mut buf = [0u8; 8];
            assert_eq!(r.read_at(a, &mut buf, 1).unwrap(), 4);
            assert_eq!(&buf[..4], b"ello");
        }
        let file = Tree::new(ScanOptions {
            block_size: None,
            hold: Hold::new(0, 0),
            background: false,
        });
        let e = HostDir::new(d.join("a")).scan(&file, 1).unwrap_err();
        assert!(matches!(e, Error::NotDir), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
