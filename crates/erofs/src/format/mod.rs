//! The EROFS on-disk format (include/erofs_fs.h): one module per structure, each with the
//! constants that belong to it. Little-endian everywhere.

pub mod checksum;
pub mod chunk;
pub mod compr_cfgs;
pub mod dirent;
pub mod inode;
pub mod lcluster;
pub mod map_header;
pub mod superblock;
pub mod xattr;

/// Rounds `v` up to a multiple of `align` (a power of two).
pub const fn round_up(v: u64, align: u64) -> u64 {
    (v + align - 1) & !(align - 1)
}
