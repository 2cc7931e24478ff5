//! A directory of the host as a [`Source`]: scanned in parallel relative to open
//! directory descriptors ([`walk`], [`sys`]), file data read again through a
//! per-thread reader that keeps the last directory and file open ([`HostReader`]).

pub(crate) mod sys;
mod walk;

use crate::tree::Tree;
use crate::{io_err, Reader, Source};
use std::ffi::CString;
use std::fs::File;
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

    fn size(&mut self, node: usize) -> Result<u64> {
        let f = self.open(node)?;
        let st =
            sys::fstat(f.as_fd()).map_err(|e| io_err(&self.tree.path_under(self.root, node), e))?;
        Ok(st.st_size.max(0) as u64)
    }
}
