//! Errors every back end reports.

use std::io;

/// Result with the usfs [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong. `Corrupt` and `Incompatible` say which structure or feature, so a user
/// can tell a bad image from a limitation of usfs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The image is damaged: names the structure, and the inode or block where known.
    #[error("corrupt image: {0}")]
    Corrupt(String),
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
    /// Shorthand for [`Error::Corrupt`].
    pub fn corrupt(msg: impl Into<String>) -> Self {
        Error::Corrupt(msg.into())
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
        assert_eq!(Error::corrupt("bad directory block").errno(), libc::EIO);
        assert_eq!(Error::incompatible("x").errno(), libc::EOPNOTSUPP);
    }
}
