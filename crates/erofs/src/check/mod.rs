//! Checking an EROFS image, as fsck.erofs does, and more: the superblock, every inode
//! reachable from the root (and the packed inode), every directory block, every xattr,
//! every lcluster index, every pcluster decompressed, and link counts against the
//! references found.
//!
//! The checker walks the image with the reader's own parsers (one walker per structure,
//! as erofs-utils' `erofs_iterate_dir(ctx, fsck)`): what the reader rejects is a problem
//! here, and the checks only the checker needs (ordering, `.` and `..`, file types, link
//! counts, bounds of whole files) sit on top. A problem never stops the walk of the
//! rest of the tree; a damaged directory's entries are not trusted beyond the damage.

mod data;
mod dir;
mod inode;
mod superblock;
#[cfg(test)]
mod tests;
mod walk;

use crate::Erofs;
use usfs_dev::Device;
use usfs_fs::Error;

/// One problem found: where (a path from the root, and the nid when known) and what.
#[derive(Debug)]
pub struct Problem {
    /// Path from the root (`/` for the root and for the superblock).
    pub path: String,
    /// The inode concerned, when there is one.
    pub nid: Option<u64>,
    /// What is wrong: a corruption (with its structure), or a feature the checker does
    /// not support (an unknown algorithm, say).
    pub error: Error,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.nid {
            Some(nid) => write!(f, "{} (nid {nid}): {}", self.path, self.error),
            None => write!(f, "{}: {}", self.path, self.error),
        }
    }
}

/// What a check found.
#[derive(Debug, Default)]
pub struct Report {
    /// Problems, in walk order.
    pub problems: Vec<Problem>,
    /// Inodes checked.
    pub inodes: u64,
    /// Directories among them.
    pub dirs: u64,
    /// Compressed extents decompressed.
    pub extents: u64,
    /// File bytes checked (decompressed or mapped).
    pub bytes: u64,
}

impl Report {
    /// Is the image free of problems?
    pub fn clean(&self) -> bool {
        self.problems.is_empty()
    }

    fn push(&mut self, path: &str, nid: Option<u64>, error: Error) {
        self.problems.push(Problem {
            path: path.to_string(),
            nid,
            error,
        });
    }
}

/// Checks the EROFS image on `dev`. An image that cannot be opened (bad magic, checksum,
/// block size, unknown features) is a report with that one problem; only an I/O error
/// reading the device is an `Err`.
pub fn check(dev: Box<dyn Device>) -> Result<Report, Error> {
    check_with_devices(dev, Vec::new())
}

/// [`check`] with the image's extra devices (`extra`, in device-table order).
pub fn check_with_devices(
    dev: Box<dyn Device>,
    extra: Vec<Box<dyn Device>>,
) -> Result<Report, Error> {
    let mut report = Report::default();
    let fs = match Erofs::open_with_devices(dev, extra) {
        Ok(fs) => fs,
        Err(e @ Error::Io(_)) => return Err(e),
        Err(e) => {
            report.push("/", None, e);
            return Ok(report);
        }
    };
    superblock::check(&fs, &mut report);
    if !report.clean() {
        return Ok(report);
    }
    walk::walk(&fs, &mut report);
    Ok(report)
}
