//! The one walker per on-disk structure that is walked: extent trees ([`extent`]),
//! ext2/ext3 indirect block maps ([`indirect`]), xattr entry lists ([`xattr`]) and htree
//! index nodes ([`dx`]); directory entries have theirs in
//! [`format::dirent`](crate::format::dirent). The reader (through [`Ext4`](crate::Ext4))
//! and the read-write mutators (through [`Meta`](crate::rw::Meta)) both find their way
//! to a logical block, an attribute or a leaf here, so the two cannot disagree about a
//! structure; both are strict: a bad header, a checksum that does not match or a
//! pointer out of bounds is an error naming the inode and the block. The checker walks
//! the same structures with the same walkers in [`Mode::Lenient`], getting each issue
//! as a value ([`MapIssue`] in [`issue`], [`xattr::XattrIssue`], [`dx::DxIssue`]).

pub mod dx;
pub mod extent;
pub mod indirect;
pub mod issue;
pub mod xattr;

pub use issue::{HeaderIssue, MapIssue, MapVisitor, Mode, Scratch};

use usfs_fs::{Error, Result, Structure};

/// Logical blocks a file can address (2^32).
pub const MAX_LBLK: u64 = 1 << 32;

/// Where a walker reads blocks from.
pub trait BlockSource {
    /// The contents of block `blk` (one block). The walker has already checked that
    /// `blk` lies inside the file system.
    fn read_block(&self, blk: u64) -> Result<Vec<u8>>;

    /// Reads block `blk` into `buf` (one block long); a source that can read in place
    /// overrides this to spare the allocation.
    fn read_into(&self, blk: u64, buf: &mut [u8]) -> Result<()> {
        let b = self.read_block(blk)?;
        if b.len() != buf.len() {
            return Err(Error::corrupt(
                Structure::Image,
                format!("block {blk} read as {} bytes", b.len()),
            )
            .with_block(blk));
        }
        buf.copy_from_slice(&b);
        Ok(())
    }
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
    /// The superblock's `s_first_data_block`: blocks below it (and block 0) hold no
    /// file's data or map.
    pub first_data_block: u64,
}

impl MapCtx {
    /// Reads tree/map block `blk` of `structure` after checking that it lies inside the
    /// file system; `what` names the block in the error.
    pub fn read(
        &self,
        src: &dyn BlockSource,
        blk: u64,
        structure: Structure,
        what: &str,
    ) -> Result<Vec<u8>> {
        let bad = |msg: String| {
            Error::corrupt(structure, msg)
                .with_ino(self.ino)
                .with_block(blk)
        };
        if !self.valid(blk) {
            return Err(bad(format!(
                "inode {}: {what}: block {blk} outside the file system (0..{})",
                self.ino, self.blocks_count
            )));
        }
        let b = src.read_block(blk)?;
        if b.len() != self.block_size as usize {
            return Err(bad(format!(
                "inode {}: {what}: block {blk} read as {} bytes",
                self.ino,
                b.len()
            )));
        }
        Ok(b)
    }

    /// Can block `blk` hold a file's data or map: at or past `s_first_data_block`
    /// (and not 0), below `blocks_count`?
    pub fn valid(&self, blk: u64) -> bool {
        blk >= self.first_data_block.max(1) && blk < self.blocks_count
    }

    /// Are data blocks `start..start+len` (`len` > 0) valid blocks?
    pub fn valid_run(&self, start: u64, len: u64) -> bool {
        len > 0 && self.valid(start) && self.valid(start.saturating_add(len - 1))
    }

    /// Checks that data blocks `start..start+len` lie inside the file system.
    pub fn check_data(&self, lblk: u64, start: u64, len: u64) -> Result<()> {
        if !self.valid_run(start, len) {
            return Err(MapIssue::ExtentOutOfRange {
                lblk,
                len,
                pblk: start,
            }
            .into_error(self.ino));
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

#[cfg(test)]
mod scan_tests;
#[cfg(test)]
mod xattr_dx_tests;
