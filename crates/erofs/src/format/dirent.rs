//! Directory entries: each directory block holds 12-byte `erofs_dirent`s first, then the
//! names (not NUL-terminated; the last name ends at the block end, a NUL or the file end).
//! Entries are sorted by name bytes across all blocks, `.` and `..` included.

/// Longest name.
pub const NAME_LEN: usize = 255;

/// EROFS file types in `file_type`.
pub mod ft {
    /// Unknown.
    pub const UNKNOWN: u8 = 0;
    /// Regular file.
    pub const REG_FILE: u8 = 1;
    /// Directory.
    pub const DIR: u8 = 2;
    /// Character device.
    pub const CHRDEV: u8 = 3;
    /// Block device.
    pub const BLKDEV: u8 = 4;
    /// FIFO.
    pub const FIFO: u8 = 5;
    /// Socket.
    pub const SOCK: u8 = 6;
    /// Symbolic link.
    pub const SYMLINK: u8 = 7;
}

usfs_fs::layout! {
    /// `struct erofs_dirent`, 12 bytes, at the start of a directory block.
    pub struct Dirent[12] {
        /// nid of the inode the entry names.
        nid / set_nid: u64 @ 0,
        /// Offset of the name in the block; the first entry's `nameoff / 12` is the number
        /// of entries in the block.
        nameoff / set_nameoff: u16 @ 8,
        /// File type ([`ft`]).
        file_type / set_file_type: u8 @ 10,
        /// Reserved.
        reserved / set_reserved: u8 @ 11,
    }
}

/// The EROFS file type for a `usfs_fs::FileType`.
pub fn from_file_type(t: usfs_fs::FileType) -> u8 {
    use usfs_fs::FileType as F;
    match t {
        F::Regular => ft::REG_FILE,
        F::Directory => ft::DIR,
        F::CharDevice => ft::CHRDEV,
        F::BlockDevice => ft::BLKDEV,
        F::Fifo => ft::FIFO,
        F::Socket => ft::SOCK,
        F::Symlink => ft::SYMLINK,
    }
}

/// The `usfs_fs::FileType` of an EROFS file type, if valid.
pub fn to_file_type(t: u8) -> Option<usfs_fs::FileType> {
    use usfs_fs::FileType as F;
    Some(match t {
        ft::REG_FILE => F::Regular,
        ft::DIR => F::Directory,
        ft::CHRDEV => F::CharDevice,
        ft::BLKDEV => F::BlockDevice,
        ft::FIFO => F::Fifo,
        ft::SOCK => F::Socket,
        ft::SYMLINK => F::Symlink,
        _ => return None,
    })
}
