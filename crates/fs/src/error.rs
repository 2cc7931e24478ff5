//! Errors every back end reports.

use std::io;

/// Result with the usfs [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong. `Corrupt` and `Incompatible` say which structure or feature, so a user
/// can tell a bad image from a limitation of usfs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The image is damaged: names the structure, and the inode or block where known.
    /// Boxed so that `Error` stays small.
    #[error("corrupt image: {}", .0.detail)]
    Corrupt(Box<Corruption>),
    /// The image uses something usfs does not support: names the feature.
    #[error("unsupported feature: {0}")]
    Incompatible(String),
    /// No such file or directory.
    #[error("no such file or directory")]
    NotFound,
    /// A path component is not a directory.
    #[error("not a directory")]
    NotDir,
    /// A directory where a file was expected.
    #[error("is a directory")]
    IsDir,
    /// Not a symbolic link, or another invalid argument.
    #[error("invalid argument")]
    Invalid,
    /// No such extended attribute.
    #[error("no such attribute")]
    NoData,
    /// The file system is read-only.
    #[error("read-only file system")]
    ReadOnly,
    /// Too many levels of symbolic links.
    #[error("too many levels of symbolic links")]
    Loop,
    /// A name longer than the format allows.
    #[error("file name too long")]
    NameTooLong,
    /// The caller may not search a directory on the way (a permission check of the front
    /// end; back ends themselves never check permissions).
    #[error("permission denied")]
    Access,
    /// The name already exists.
    #[error("file exists")]
    Exists,
    /// A directory that must be empty is not.
    #[error("directory not empty")]
    NotEmpty,
    /// Too many hard links (or subdirectories).
    #[error("too many links")]
    TooManyLinks,
    /// The operation is not permitted on this object (e.g. a link to a directory).
    #[error("operation not permitted")]
    NotPermitted,
    /// The image is in use by another writer (a usfs process or a kernel mount).
    #[error("resource busy: {0}")]
    Busy(String),
    /// The device failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

impl Error {
    /// A [`Error::Corrupt`] in `structure`, with the message a user sees; add the inode,
    /// block or byte offset with [`Error::with_ino`], [`Error::with_block`] and
    /// [`Error::with_offset`].
    pub fn corrupt(structure: Structure, detail: impl Into<String>) -> Self {
        Error::Corrupt(Box::new(Corruption::new(structure, detail)))
    }

    /// The damage this error reports, if it is [`Error::Corrupt`].
    pub fn corruption(&self) -> Option<&Corruption> {
        match self {
            Error::Corrupt(c) => Some(c),
            _ => None,
        }
    }

    /// Records the inode of a [`Error::Corrupt`]; other errors are returned unchanged.
    pub fn with_ino(self, ino: impl Into<u64>) -> Self {
        self.map_corruption(|c| c.ino = Some(ino.into()))
    }

    /// Records the block of a [`Error::Corrupt`]; other errors are returned unchanged.
    pub fn with_block(self, block: impl Into<u64>) -> Self {
        self.map_corruption(|c| c.block = Some(block.into()))
    }

    /// Records the byte offset of a [`Error::Corrupt`]; other errors are returned
    /// unchanged.
    pub fn with_offset(self, offset: impl Into<u64>) -> Self {
        self.map_corruption(|c| c.offset = Some(offset.into()))
    }

    /// Names the structure of a [`Error::Corrupt`] raised by a check shared between
    /// structures, for a caller that knows which one it was checking; other errors are
    /// returned unchanged.
    pub fn in_structure(self, structure: Structure) -> Self {
        self.map_corruption(|c| c.structure = structure)
    }

    /// Applies `f` to the corruption of a [`Error::Corrupt`].
    fn map_corruption(mut self, f: impl FnOnce(&mut Corruption)) -> Self {
        if let Error::Corrupt(c) = &mut self {
            f(c);
        }
        self
    }

    /// Shorthand for [`Error::Incompatible`].
    pub fn incompatible(msg: impl Into<String>) -> Self {
        Error::Incompatible(msg.into())
    }

    /// The errno a POSIX caller sees for this error: the workspace's one mapping, used by
    /// every front end (vfs, `usfs run`'s preload library, `usfs mount`'s FUSE server).
    ///
    /// A damaged image ([`Error::Corrupt`]) is EIO, chosen over the kernel's errnos: Linux
    /// says EFSCORRUPTED (EUCLEAN) for damaged ext4 and EROFS metadata but EFSBADCRC
    /// (EBADMSG) for a failed ext4 checksum, and usfs has one `Corrupt` for both. EIO is
    /// POSIX's "could not read this", the errno `usfs run` and `usfs mount` have always
    /// returned for a damaged image (issue 6: "a corrupt image gives EIO"; run_mount's
    /// `corrupt_images_give_eio_not_crashes` tests it). Code that must tell damage from a
    /// failing device matches on the variant, not the errno. An I/O error keeps the OS
    /// errno it carries, or one chosen by its kind.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Corrupt(_) => libc::EIO,
            Error::Incompatible(_) => libc::EOPNOTSUPP,
            Error::NotFound => libc::ENOENT,
            Error::NotDir => libc::ENOTDIR,
            Error::IsDir => libc::EISDIR,
            Error::Invalid => libc::EINVAL,
            Error::NoData => libc::ENODATA,
            Error::ReadOnly => libc::EROFS,
            Error::Loop => libc::ELOOP,
            Error::NameTooLong => libc::ENAMETOOLONG,
            Error::Access => libc::EACCES,
            Error::Exists => libc::EEXIST,
            Error::NotEmpty => libc::ENOTEMPTY,
            Error::TooManyLinks => libc::EMLINK,
            Error::NotPermitted => libc::EPERM,
            Error::Busy(_) => libc::EBUSY,
            Error::Io(e) => e.raw_os_error().unwrap_or_else(|| kind_errno(e.kind())),
        }
    }

    /// The error an errno stands for: the inverse of [`Error::errno`] (a process that got
    /// an errno over a channel rebuilds the error). `detail` is the message of errors
    /// that carry one (EBUSY, EOPNOTSUPP); any other errno is an I/O error carrying it.
    pub fn from_errno(errno: i32, detail: &str) -> Error {
        match errno {
            libc::ENOENT => Error::NotFound,
            libc::ENOTDIR => Error::NotDir,
            libc::EISDIR => Error::IsDir,
            libc::EINVAL => Error::Invalid,
            libc::ENODATA => Error::NoData,
            libc::EROFS => Error::ReadOnly,
            libc::ELOOP => Error::Loop,
            libc::ENAMETOOLONG => Error::NameTooLong,
            libc::EACCES => Error::Access,
            libc::EEXIST => Error::Exists,
            libc::ENOTEMPTY => Error::NotEmpty,
            libc::EMLINK => Error::TooManyLinks,
            libc::EPERM => Error::NotPermitted,
            libc::EBUSY => Error::Busy(detail.to_string()),
            libc::EOPNOTSUPP => Error::Incompatible(detail.to_string()),
            e => Error::Io(std::io::Error::from_raw_os_error(e)),
        }
    }
}

/// Damage found in an image: which structure, where (inode, block, byte offset, as far as
/// the code that found it knows), and the message a user sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    /// The damaged structure.
    pub structure: Structure,
    /// The inode the damage belongs to: an ext4 inode number, or an EROFS nid.
    pub ino: Option<u64>,
    /// The damaged block, where the code knows it: an ext4 physical block number, except
    /// for [`Structure::Directory`] and [`Structure::Htree`] damage in a directory's own
    /// blocks, where it is the logical block of that directory (as the message says:
    /// "directory 12 block 0"). EROFS sites give [`Corruption::offset`] instead.
    pub block: Option<u64>,
    /// The byte offset of the damage in the image, where the code knows a byte position
    /// rather than a block (EROFS inodes, inline tails, compressed clusters, reads past
    /// the end of the image).
    pub offset: Option<u64>,
    /// What is wrong, as shown to the user after "corrupt image: ".
    pub detail: String,
}

impl Corruption {
    /// Damage in `structure` described by `detail`, at no known place.
    pub fn new(structure: Structure, detail: impl Into<String>) -> Self {
        Corruption {
            structure,
            ino: None,
            block: None,
            offset: None,
            detail: detail.into(),
        }
    }
}

impl std::fmt::Display for Corruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

impl From<Corruption> for Error {
    fn from(c: Corruption) -> Self {
        Error::Corrupt(Box::new(c))
    }
}

/// The kinds of on-disk structure a [`Corruption`] can be found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Structure {
    /// The ext4 superblock (also: an image too small to hold one, a bad geometry).
    Superblock,
    /// An ext4 block group descriptor.
    GroupDescriptor,
    /// An ext4 block or inode bitmap, or the free counts and allocator state built
    /// from them.
    Bitmap,
    /// The ext4 inode table (an inode number outside it, an unreadable slot).
    InodeTable,
    /// An ext4 inode's own fields (mode, checksum, size, flags).
    Inode,
    /// An ext4 extent tree (the root in the inode, index and leaf blocks).
    ExtentTree,
    /// An ext4 block map: the direct and indirect blocks of a file without extents.
    BlockMap,
    /// An ext4 directory block or entry (also a directory of any back end whose
    /// readdir positions run out).
    Directory,
    /// An ext4 hashed directory index (htree root and nodes).
    Htree,
    /// An ext4 extended attribute (in-inode area or xattr block).
    Xattr,
    /// The ext4 journal (its superblock, descriptors, commit blocks, fast commits).
    Journal,
    /// The ext4 orphan list.
    Orphan,
    /// File data stored with the inode: ext4 inline data, an EROFS inline tail.
    InlineData,
    /// A symbolic link's target (ext4 or EROFS).
    Symlink,
    /// The image as a whole: an address past its end, or a short read, met by code that
    /// reads for several structures and does not know which one pointed there (the
    /// message names what was being read).
    Image,
    /// The EROFS superblock.
    ErofsSuperblock,
    /// An EROFS inode (its header, layout, chunk index, metadata position).
    ErofsInode,
    /// An EROFS directory block or entry.
    ErofsDirectory,
    /// An EROFS extended attribute.
    ErofsXattr,
    /// An EROFS compressed file's map: the compression indexes and logical clusters.
    CompressedIndex,
    /// An EROFS compressed physical cluster (its data does not decompress as mapped).
    CompressedData,
}

/// The errno of an I/O error made without one (`io::Error::new(kind, ...)`), such as
/// the allocators' StorageFull.
fn kind_errno(kind: std::io::ErrorKind) -> i32 {
    use std::io::ErrorKind as K;
    match kind {
        K::StorageFull => libc::ENOSPC,
        K::FileTooLarge => libc::EFBIG,
        K::QuotaExceeded => libc::EDQUOT,
        K::NotFound => libc::ENOENT,
        K::PermissionDenied => libc::EACCES,
        K::AlreadyExists => libc::EEXIST,
        K::InvalidInput => libc::EINVAL,
        K::ReadOnlyFilesystem => libc::EROFS,
        K::Unsupported => libc::EOPNOTSUPP,
        _ => libc::EIO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_map_back_to_the_errors_that_give_them() {
        for e in [
            libc::ENOENT,
            libc::EEXIST,
            libc::ENOTEMPTY,
            libc::EBUSY,
            libc::ENOSPC,
            libc::EXDEV,
            libc::EOPNOTSUPP,
            libc::EIO,
        ] {
            assert_eq!(Error::from_errno(e, "m").errno(), e);
        }
        assert!(matches!(
            Error::from_errno(libc::ENOENT, ""),
            Error::NotFound
        ));
    }

    #[test]
    fn io_errors_without_an_errno_map_by_kind() {
        let full = Error::Io(std::io::Error::new(std::io::ErrorKind::StorageFull, "x"));
        assert_eq!(full.errno(), libc::ENOSPC);
        let raw = Error::Io(std::io::Error::from_raw_os_error(libc::EFBIG));
        assert_eq!(raw.errno(), libc::EFBIG);
        let other = Error::Io(std::io::Error::other("x"));
        assert_eq!(other.errno(), libc::EIO);
    }

    #[test]
    fn a_damaged_image_is_eio() {
        let e = Error::corrupt(Structure::Directory, "bad directory block");
        assert_eq!(e.errno(), libc::EIO);
        assert_eq!(Error::incompatible("x").errno(), libc::EOPNOTSUPP);
    }

    #[test]
    fn corruption_keeps_the_text_and_carries_the_place() {
        let e = Error::corrupt(Structure::Directory, "directory 12 block 0: bad rec_len")
            .with_ino(12u32)
            .with_block(0u64);
        assert_eq!(
            e.to_string(),
            "corrupt image: directory 12 block 0: bad rec_len"
        );
        let c = e.corruption().expect("a corruption");
        assert_eq!(c.structure, Structure::Directory);
        assert_eq!((c.ino, c.block, c.offset), (Some(12), Some(0), None));
        assert_eq!(c.to_string(), "directory 12 block 0: bad rec_len");
        let e = Error::from(Corruption::new(Structure::CompressedData, "x")).with_offset(7u64);
        assert_eq!(e.to_string(), "corrupt image: x");
        assert_eq!(e.corruption().and_then(|c| c.offset), Some(7));
    }

    #[test]
    fn the_place_is_only_added_to_corruptions() {
        let e = Error::NotFound.with_ino(3u32).with_block(4u64);
        assert!(matches!(e, Error::NotFound) && e.corruption().is_none());
    }
}
