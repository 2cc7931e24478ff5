//! What a source yields for each entry of its tree: attributes ([`Meta`]), extended
//! attributes, and by kind a directory's entries, a regular file's data runs (and its
//! bytes when kept in memory), a symlink's target. Format-neutral: mkfs.ext4 and
//! mkfs.erofs build their inodes from these.

use crate::hold::Held;
use std::sync::OnceLock;
use usfs_fs::Timestamp;

/// The attributes of a source entry, as `lstat` gives them.
#[derive(Clone, Debug, Default)]
pub struct Meta {
    /// File type and permission bits (`st_mode`).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes (a symlink: its target's length).
    pub size: u64,
    /// Last access.
    pub atime: Timestamp,
    /// Last modification of the data.
    pub mtime: Timestamp,
    /// Last change of the inode.
    pub ctime: Timestamp,
    /// Device number of a character or block device.
    pub rdev: u64,
    /// Device the entry lives on: with `ino` its hard-link identity.
    pub dev: u64,
    /// Inode number on `dev`.
    pub ino: u64,
    /// Links to the inode in the source (hard links share `(dev, ino)`).
    pub nlink: u64,
}

/// A timestamp from `stat`'s seconds and nanoseconds (nanoseconds clamped to 0..1e9).
fn ts(sec: i64, nsec: i64) -> Timestamp {
    Timestamp {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

impl Meta {
    /// The attributes in a `struct stat`.
    pub(crate) fn from_stat(st: &libc::stat) -> Meta {
        Meta {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size.max(0) as u64,
            atime: ts(st.st_atime, st.st_atime_nsec),
            mtime: ts(st.st_mtime, st.st_mtime_nsec),
            ctime: ts(st.st_ctime, st.st_ctime_nsec),
            rdev: st.st_rdev,
            dev: st.st_dev,
            ino: st.st_ino,
            nlink: st.st_nlink,
        }
    }
}

/// Extended attributes as (full name with namespace prefix, value) pairs, in the order
/// the source lists them.
pub type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// Block ranges `(lblk, count)`: most files have one, kept inline (no allocation).
pub type Runs = smallvec::SmallVec<[(u64, u64); 1]>;

/// A regular file's data as the scan found it.
#[derive(Debug, Default)]
pub struct FileData {
    /// Block ranges `(lblk, count)`, sorted, that hold data other than zeros: what gets
    /// allocated (everything else is a hole). Empty when the tree was scanned without
    /// reading data ([`crate::Tree::new`]).
    pub blocks: Runs,
    /// The file's bytes, when kept in memory ([`crate::Hold::bytes`]).
    pub held: Option<Held>,
}

/// What scanning a directory found: its own attributes and its entries.
pub struct DirScan {
    /// The directory's attributes.
    pub meta: Meta,
    /// The directory's extended attributes.
    pub xattrs: Xattrs,
    /// Children (node indexes), sorted by name.
    pub kids: Vec<usize>,
}

/// What an entry is, with what only that kind has.
pub enum Kind {
    /// A directory: set once it has been scanned ([`crate::Tree::dir`]).
    Dir(OnceLock<Box<DirScan>>),
    /// A regular file.
    File(FileData),
    /// A symbolic link and its target.
    Symlink(Vec<u8>),
    /// A device node, fifo or socket (the type is in the mode).
    Special,
}

/// One entry of the source tree.
pub struct Node {
    /// Its name in its directory (empty for the root).
    pub name: Vec<u8>,
    /// The parent directory's node (the root is its own parent).
    pub parent: usize,
    /// Attributes; for a directory they are in its [`DirScan`] (default here).
    pub meta: Meta,
    /// Extended attributes; for a directory in its [`DirScan`] (empty here).
    pub xattrs: Xattrs,
    /// What it is.
    pub kind: Kind,
}

impl Node {
    /// A directory entry not scanned yet (its attributes come with its scan).
    pub fn unscanned_dir(name: Vec<u8>, parent: usize) -> Node {
        Node {
            name,
            parent,
            meta: Meta::default(),
            xattrs: Vec::new(),
            kind: Kind::Dir(OnceLock::new()),
        }
    }

    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir(_))
    }
}
