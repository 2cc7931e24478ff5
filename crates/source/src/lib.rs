//! Input trees for usfs's image builders: one place that reads a source tree, for
//! mkfs.ext4 (`-d`), mkfs.erofs and the tests, so the format crates make no directory
//! walking OS calls of their own (as erofs-utils' importer feeds one builder from a
//! directory or a tar stream).
//!
//! A [`Source`] fills a [`Tree`] of format-neutral entries ([`Node`]: name, [`Meta`]
//! attributes with nanosecond times and the hard-link identity `(dev, ino)`, xattrs,
//! and by [`Kind`] a directory's entries, a file's non-zero block runs and kept bytes, a
//! symlink's target), in parallel and while its consumer already walks it
//! ([`Tree::dir`] waits for a directory's scan), then reads file data again through
//! per-thread [`Reader`]s. [`HostDir`] is a host directory: descriptor-relative
//! `openat`/`fstat`/`flistxattr`/`getdents64`, many workers, each regular file read once
//! and small files kept in memory ([`Hold`]). [`TarSource`] is a tar stream (plain,
//! gzip or zstd; ustar, pax, GNU), read once into a tree whose file data is read
//! back at recorded offsets.
//!
//! [`xattr`] reads a path's extended attributes (the tests compare trees with it).

mod blocks;
mod chunk;
mod entry;
mod exclude;
mod hold;
mod host;
mod tar;
mod tree;
pub mod xattr;

pub use entry::{DirScan, FileData, Kind, Meta, Node, Runs, Xattrs};
pub use exclude::{Exclude, PosixRegex};
pub use hold::{Held, Hold};
pub use host::sys::read_full;
pub use host::HostDir;
pub use tar::{TarOptions, TarSource};
pub use tree::{DirWorker, Listing, ScanOptions, Tree};

use std::path::{Path, PathBuf};
use usfs_fs::{Error, Result};

/// Where the entries of a tree come from: a host directory ([`HostDir`]) or a tar
/// stream ([`TarSource`]).
pub trait Source: Sync {
    /// The source as the user named it (a directory, a tar file), for messages.
    fn origin(&self) -> &Path;

    /// Fills `tree` (fresh from [`Tree::new`]) with `threads` workers: returns once
    /// every directory is in it, or with the first error. Consumers may walk the tree
    /// meanwhile ([`Tree::dir`] waits for a directory's scan).
    fn scan(&self, tree: &Tree, threads: usize) -> Result<()>;

    /// A reader of file data, for one thread.
    fn reader<'a>(&'a self, tree: &'a Tree) -> Box<dyn Reader + 'a>;

    /// Where node `i` of `tree` is in the source, for messages.
    fn path(&self, tree: &Tree, i: usize) -> PathBuf {
        tree.path_under(self.origin(), i)
    }
}

/// Reads the data of a tree's regular files (for one thread; it may keep the last file
/// open between calls).
pub trait Reader {
    /// Reads bytes of file `node` from byte `off` into `buf` until it is full or the
    /// file ends; returns the bytes read.
    fn read_at(&mut self, node: usize, buf: &mut [u8], off: u64) -> Result<usize>;

    /// The size file `node` has now (a file changed since the scan shows here).
    fn size(&mut self, node: usize) -> Result<u64>;

    /// Where all of file `node`'s bytes lie, in order and without holes, in the
    /// source's own file (a tar's data in place), as a byte offset; `None` when they do
    /// not (files of a directory, spooled or sparse tar members).
    fn contiguous_at(&mut self, _node: usize) -> Option<u64> {
        None
    }

    /// Appends up to `len` bytes of file `node` from byte `off` to `buf` (fewer when the
    /// file ends first); returns the bytes appended. Sources override it to read into
    /// `buf`'s spare capacity without zeroing it first (a builder reading every file's
    /// bytes this way would otherwise clear all of them once more).
    fn read_vec(&mut self, node: usize, off: u64, len: u64, buf: &mut Vec<u8>) -> Result<usize> {
        let start = buf.len();
        buf.resize(start + len as usize, 0);
        let got = self.read_at(node, &mut buf[start..], off)?;
        buf.truncate(start + got);
        Ok(got)
    }
}

/// Scan workers to use: on a source that is not in the page cache they wait on its disk
/// far more than they compute (each small file is a synchronous read), so eight per CPU
/// (8..=64) keep reads in flight; on a cached source more only add switching (on the
/// generated 200k-file tree, 2 CPUs: 16 workers 10% faster than 32 when cached, 6%
/// slower when not).
pub fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cpus * 8).clamp(8, 64)
}

/// An I/O error naming the path it happened on.
pub(crate) fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        e.kind(),
        format!("{}: {e}", path.display()),
    ))
}
