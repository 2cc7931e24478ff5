//! What every metadata mutator (extent trees and block maps, directories, xattrs, inodes)
//! needs from the read-write volume, as two small traits: [`Meta`] (metadata blocks inside
//! the running transaction, block allocation and freeing) and [`DirFile`] (the blocks of
//! one directory). The mutators are written against these traits only, so each can be
//! tested on an in-memory volume ([`MemMeta`]) and the volume stays the one place that
//! knows about journals, overlays and allocators.

use crate::format::geometry::Geometry;
use std::collections::HashMap;
use usfs_fs::{Error, Result, Structure};

/// How a freed block was used, which decides what the journal must record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freed {
    /// File data: no journal record (the block was never logged).
    Data,
    /// A metadata block (tree node, directory block, xattr block): the journal gets a
    /// revoke record, so replaying an older transaction never overwrites what the block
    /// holds after it is reused.
    Metadata,
}

/// Metadata access inside the running transaction.
///
/// Reads see every change made so far in the transaction. Nothing written here reaches its
/// home location before the transaction commits to the journal.
pub trait Meta {
    /// The file system's geometry (block size, counts, features).
    fn geo(&self) -> &Geometry;

    /// The metadata checksum seed when metadata_csum is on, else `None`.
    fn csum_seed(&self) -> Option<u32>;

    /// The current contents of metadata block `blk` (one block).
    fn read_meta(&self, blk: u64) -> Result<Vec<u8>>;

    /// Replaces metadata block `blk` with `data` (one block, checksums already set) in the
    /// running transaction.
    fn write_meta(&mut self, blk: u64, data: Vec<u8>) -> Result<()>;

    /// Allocates up to `len` contiguous blocks near `goal` (0: no preference) for inode
    /// `owner`; returns the first block and how many were given (at least 1). Errors with
    /// ENOSPC ([`Error::Io`] of kind StorageFull) when the file system is full.
    fn alloc_blocks(&mut self, owner: u32, goal: u64, len: u32) -> Result<(u64, u32)>;

    /// Frees `len` blocks from `start` that inode `owner` used as `how`. They are not
    /// handed out again before the transaction commits.
    fn free_blocks(&mut self, owner: u32, start: u64, len: u64, how: Freed) -> Result<()>;
}

/// The blocks of one directory, as its directory mutator sees them.
pub trait DirFile {
    /// The directory's inode number.
    fn ino(&self) -> u32;
    /// Its i_generation (part of every directory checksum).
    fn generation(&self) -> u32;
    /// Blocks the directory holds (i_size / block size).
    fn nblocks(&self) -> u64;
    /// Physical block of logical block `lblk` (< `nblocks()`).
    fn pblk(&mut self, m: &mut dyn Meta, lblk: u64) -> Result<u64>;
    /// Allocates a block, maps it at logical block `nblocks()` and grows i_size by one
    /// block; returns the physical block. Its contents are the caller's to write.
    fn append_block(&mut self, m: &mut dyn Meta) -> Result<u64>;
    /// Unmaps and frees logical blocks `from..nblocks()` and shrinks i_size to match.
    fn truncate_blocks(&mut self, m: &mut dyn Meta, from: u64) -> Result<()>;
    /// Is the INDEX (htree) flag set?
    fn is_indexed(&self) -> bool;
    /// Sets or clears the INDEX flag.
    fn set_indexed(&mut self, on: bool);
}

/// An in-memory [`Meta`] for the mutators' unit tests: blocks in a map, a bump allocator,
/// every allocation and free recorded.
pub struct MemMeta {
    /// The geometry the mutators see.
    pub geo: Geometry,
    /// The checksum seed (Some to exercise checksums).
    pub seed: Option<u32>,
    /// Blocks written so far.
    pub blocks: HashMap<u64, Vec<u8>>,
    /// The next block the allocator hands out.
    pub next_free: u64,
    /// Blocks still free (the allocator fails with ENOSPC when this reaches 0).
    pub free_left: u64,
    /// Every free: (owner, start, len, how).
    pub freed: Vec<(u32, u64, u64, Freed)>,
}

impl MemMeta {
    /// A volume of `geo` whose allocator starts at block `first_free` with `free` blocks.
    pub fn new(geo: Geometry, seed: Option<u32>, first_free: u64, free: u64) -> MemMeta {
        MemMeta {
            geo,
            seed,
            blocks: HashMap::new(),
            next_free: first_free,
            free_left: free,
            freed: Vec::new(),
        }
    }
}

impl Meta for MemMeta {
    fn geo(&self) -> &Geometry {
        &self.geo
    }
    fn csum_seed(&self) -> Option<u32> {
        self.seed
    }
    fn read_meta(&self, blk: u64) -> Result<Vec<u8>> {
        Ok(self
            .blocks
            .get(&blk)
            .cloned()
            .unwrap_or_else(|| vec![0u8; self.geo.block_size as usize]))
    }
    fn write_meta(&mut self, blk: u64, data: Vec<u8>) -> Result<()> {
        assert_eq!(data.len(), self.geo.block_size as usize);
        self.blocks.insert(blk, data);
        Ok(())
    }
    fn alloc_blocks(&mut self, _owner: u32, _goal: u64, len: u32) -> Result<(u64, u32)> {
        if self.free_left == 0 {
            return Err(crate::write::no_space("blocks", "file system full"));
        }
        let n = (len as u64).min(self.free_left);
        let b = self.next_free;
        self.next_free += n;
        self.free_left -= n;
        Ok((b, n as u32))
    }
    fn free_blocks(&mut self, owner: u32, start: u64, len: u64, how: Freed) -> Result<()> {
        if start == 0 || len == 0 {
            return Err(
                Error::corrupt(Structure::Image, format!("free of blocks {start}+{len}"))
                    .with_ino(owner)
                    .with_block(start),
            );
        }
        self.freed.push((owner, start, len, how));
        Ok(())
    }
}
