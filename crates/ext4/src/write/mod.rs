//! Writing ext4 in bulk: format a device ([`format()`]: a complete, empty file system),
//! then open it ([`Writer::open`]: the shared [`VolumeCore`](crate::VolumeCore), and the
//! [allocators](crate::alloc) seeded from its bitmaps, as the read-write volume opens an
//! image) and create inodes, directories (linear and htree), extent trees, extended
//! attributes (in-inode and shared blocks), symlinks and device nodes through the
//! [`Writer`], which keeps inode tables and bitmaps in memory; [`Writer::finish`] writes
//! inode tables, bitmaps, descriptors and superblocks with every checksum. [`populate`]
//! fills a new file system from a directory tree (mkfs.ext4 -d).
//!
//! What is written: mke2fs 1.47's default ext4 feature set (has_journal with an empty
//! clean jbd2 journal, ext_attr, dir_index, filetype, extent, 64bit, flex_bg,
//! sparse_super, large_file, huge_file, dir_nlink, extra_isize, metadata_csum) minus
//! resize_inode (no reserved GDT blocks: the file system cannot be grown online), with
//! 256-byte (or larger) inodes. Untouched groups are left BLOCK_UNINIT / INODE_UNINIT and
//! inode tables are assumed zero (the device must read as zeros: a new image file).

mod dir;
mod extent;
mod file;
mod format;
mod itable;
mod options;
pub mod populate;
mod writer;
mod xattr;

#[cfg(test)]
mod tests;

pub use dir::DirEntryIn;
pub(crate) use format::random_bytes;
pub use format::{default_journal_blocks, format, lost_found_entry, LOST_FOUND_INO};
pub use options::{apply_feature_edits, default_features, MkfsOptions};
pub use populate::{populate, PopulateOptions, PopulateReport};
pub use writer::{no_space, Writer};
