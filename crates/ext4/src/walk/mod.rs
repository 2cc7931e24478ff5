//! The one walker per block-map structure: extent trees ([`extent`]) and ext2/ext3
//! indirect block maps ([`indirect`]). The reader (through [`Ext4`](crate::Ext4)) and the
//! read-write mutators (through [`Meta`](crate::rw::Meta)) both find their way to a logical
//! block here, so the two cannot disagree about a tree; both are strict: a bad header,
//! a checksum that does not match or a block outside the file system is an error naming
//! the inode and the block.

pub mod extent;
pub mod indirect;

use usfs_fs::{Error, Result};

/// Logical blocks a file can address (2^32).
pub const MAX_LBLK: u64 = 1 << 32;

/// Where a walker reads blocks from.
pub trait BlockSource {
    /// The contents of block `blk` (one block). The walker has already checked that
    /// `blk` lies inside the file system.
    fn read_block(&self, blk: u64) -> Result<Vec<u8>>;
}

/// What a walk needs to know about the file system and the inode.
#[derive(Clone, Copy, Debug)]
pub struct MapCtx {
    /// Inode number (named in errors, part of extent block checksums).
    pub ino: u32,
    /// The inode's i_generation (part of extent block checksums).
    pub generation: u32,
    /// The metadata checksum seed when metadata_csum is on.
    pub seed: Option<u32>,
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks in the file system.
    pub blocks_count: u64,
}

impl MapCtx {
    /// Reads tree/map block `blk` after checking that it lies inside the file system;
    /// `what` names the structure in the error.
    pub fn read(&self, src: &dyn BlockSource, blk: u64, what: &str) -> Result<Vec<u8>> {
        if blk == 0 || blk >= self.blocks_count {
            return Err(Error::corrupt(format!(
                "inode {}: {what}: block {blk} outside the file system (0..{})",
                self.ino, self.blocks_count
            )));
        }
        let b = src.read_block(blk)?;
        if b.len() != self.block_size as usize {
            return Err(Error::corrupt(format!(
                "inode {}: {what}: block {blk} read as {} bytes",
                self.ino,
                b.len()
            )));
        }
        Ok(b)
    }

    /// Checks that data blocks `start..start+len` lie inside the file system.
    pub fn check_data(&self, lblk: u64, start: u64, len: u64) -> Result<()> {
        if start == 0 || start.saturating_add(len) > self.blocks_count {
            return Err(Error::corrupt(format!(
                "inode {}: extent ({lblk}, {len}) at physical block {start} lies outside the file system",
                self.ino
            )));
        }
        Ok(())
    }
}

/// A run of logical blocks with one fate, as the walkers find it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// First logical block of the run.
    pub lblk: u64,
    /// Length in blocks (at least 1).
    pub len: u64,
    /// Physical block of `lblk` (also for unwritten extents), or `None` for a hole.
    pub pblk: Option<u64>,
    /// The run is an unwritten (preallocated) extent: it reads as zeros.
    pub unwritten: bool,
}

impl Mapped {
    fn hole(lblk: u64, len: u64) -> Mapped {
        Mapped {
            lblk,
            len: len.max(1),
            pblk: None,
            unwritten: false,
        }
    }
}

/// Maps logical block `lblk` of the inode whose `i_block` is `root`: through the extent
/// tree when `extents`, else through the indirect block map.
pub fn map(
    src: &dyn BlockSource,
    cx: &MapCtx,
    root: &[u8],
    extents: bool,
    lblk: u64,
) -> Result<Mapped> {
    if lblk >= MAX_LBLK {
        return Ok(Mapped::hole(lblk, u64::MAX - lblk));
    }
    if extents {
        extent::map(src, cx, root, lblk)
    } else {
        indirect::map(src, cx, root, lblk)
    }
}
