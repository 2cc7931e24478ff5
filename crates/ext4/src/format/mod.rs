//! The ext4 on-disk format: one module per structure, each with its checksum. This is the
//! single definition shared by the reader, the checker and the writer.

pub mod checksum;
pub mod dirent;
pub mod dx;
pub mod dx_hash;
pub mod extent;
pub mod features;
pub mod geometry;
pub mod group_desc;
pub mod inode;
pub mod quota;
pub mod superblock;
pub mod xattr;
