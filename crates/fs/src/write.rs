//! The write interface every read-write back end implements: the mechanisms (create,
//! link, rename, write, truncate, attributes, xattrs, sync). Which errno a POSIX caller
//! gets for a request the rules forbid, and in which order the rules are checked, is the
//! front ends' shared layer's business (vfs); a back end still refuses what would corrupt
//! its format (a link to a directory, rmdir of a non-empty directory, ...).

use crate::{FileSystem, FileType, Ino, Metadata, Result, Timestamp};

/// Ownership and permissions of a new inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewNode {
    /// The kind of inode.
    pub file_type: FileType,
    /// Permission bits (mode & 0o7777).
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number (Linux encoding) for block and character devices, else 0.
    pub rdev: u64,
}

/// Attribute changes (None: leave as is). The back end sets ctime to now on any change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits (mode & 0o7777).
    pub perm: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate or extend with a hole).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<Timestamp>,
    /// New modification time.
    pub mtime: Option<Timestamp>,
}

/// rename(2) flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    /// Fail with EEXIST when the target exists (RENAME_NOREPLACE).
    pub noreplace: bool,
    /// Swap source and target, both must exist (RENAME_EXCHANGE).
    pub exchange: bool,
}

/// fallocate(2) modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallocate {
    /// Reserve blocks (unwritten extents); grows the size unless `keep_size`.
    Allocate {
        /// FALLOC_FL_KEEP_SIZE.
        keep_size: bool,
    },
    /// Deallocate the range (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE).
    PunchHole,
    /// Make the range read as zeros, blocks kept (FALLOC_FL_ZERO_RANGE).
    ZeroRange {
        /// FALLOC_FL_KEEP_SIZE.
        keep_size: bool,
    },
}

/// A file system that can be changed. Every method is one transaction: when it returns,
/// the change is visible to every reader, and durable once a later [`sync`](Self::sync)
/// or [`fsync`](Self::fsync) returns.
pub trait FileSystemWrite: FileSystem {
    /// Creates a non-directory inode (regular file, symlink excepted, fifo, socket,
    /// device) named `name` in `dir`.
    fn create(&self, dir: Ino, name: &[u8], node: NewNode) -> Result<Metadata>;

    /// Creates a directory.
    fn mkdir(&self, dir: Ino, name: &[u8], node: NewNode) -> Result<Metadata>;

    /// Creates a symbolic link to `target`.
    fn symlink(&self, dir: Ino, name: &[u8], target: &[u8], uid: u32, gid: u32)
        -> Result<Metadata>;

    /// Adds a hard link to `ino` (not a directory) as `name` in `dir`.
    fn link(&self, ino: Ino, dir: Ino, name: &[u8]) -> Result<Metadata>;

    /// Removes a non-directory entry; the inode goes when its last link and last opener do.
    fn unlink(&self, dir: Ino, name: &[u8]) -> Result<()>;

    /// Removes an empty directory.
    fn rmdir(&self, dir: Ino, name: &[u8]) -> Result<()>;

    /// Moves `name` in `dir` to `new_name` in `new_dir` (replacing a target of a
    /// compatible kind unless `flags` say otherwise).
    fn rename(
        &self,
        dir: Ino,
        name: &[u8],
        new_dir: Ino,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<()>;

    /// Writes `data` at `offset` (holes are left where nothing was written); returns the
    /// bytes written.
    fn write_at(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize>;

    /// Changes attributes (size changes truncate or extend).
    fn setattr(&self, ino: Ino, attr: SetAttr) -> Result<Metadata>;

    /// Allocates, punches or zeroes `len` bytes at `offset`.
    fn fallocate(&self, ino: Ino, mode: Fallocate, offset: u64, len: u64) -> Result<()>;

    /// Sets extended attribute `name` (with its namespace prefix) to `value`.
    fn set_xattr(&self, ino: Ino, name: &[u8], value: &[u8]) -> Result<()>;

    /// Removes extended attribute `name` ([`crate::Error::NoData`] if absent).
    fn remove_xattr(&self, ino: Ino, name: &[u8]) -> Result<()>;

    /// Makes `ino`'s data (and with `datasync == false` its attributes) durable.
    fn fsync(&self, ino: Ino, datasync: bool) -> Result<()>;

    /// Makes everything durable.
    fn sync(&self) -> Result<()>;

    /// A front end opened `ino`: an inode whose last link goes while it is open stays
    /// (on the orphan list) until the matching [`release_file`](Self::release_file).
    fn open_file(&self, _ino: Ino) -> Result<()> {
        Ok(())
    }

    /// A front end closed `ino` (once per [`open_file`](Self::open_file)).
    fn release_file(&self, _ino: Ino) -> Result<()> {
        Ok(())
    }
}
