//! One inode's block map as the read-write volume changes it: [`BlockMap`] looks up,
//! inserts, removes and converts runs of blocks, whether the inode has an extent tree
//! (`extent_edit.rs`) or an ext2/ext3 indirect map (`indirect_edit.rs`), so its caller
//! does not care which. Lookups go through the same walkers as the reader
//! ([`crate::walk`]); every change goes through [`Meta`].

use super::meta::{Freed, Meta};
use crate::format::extent::{ExtentHeader, EXTENT_MAGIC};
use crate::walk::{self, extent::ROOT_ENTRIES, BlockSource, MapCtx};
use usfs_fs::{Error, Result, Structure};

/// A run of logical blocks with one fate: `pblk` is `None` for a hole; for an unwritten
/// extent it is the preallocated block (reads must still return zeros).
pub type Run = walk::Mapped;

/// The block map of one inode, borrowed from the inode being changed.
///
/// `meta_blocks` counts tree and indirect blocks allocated minus freed by the calls
/// made through this value, so the caller can keep `i_blocks` right; data blocks are
/// the caller's (it allocated what it inserts; [`BlockMap::remove`] returns how many
/// data blocks it freed).
pub struct BlockMap<'a> {
    /// Inode number (owner of allocations, part of tree block checksums).
    pub ino: u32,
    /// The inode's i_generation (part of tree block checksums).
    pub generation: u32,
    /// The inode's `i_block`: the extent tree root or the 15 block pointers.
    pub i_block: &'a mut [u8; 60],
    /// Is the inode's EXTENTS flag set?
    pub extents: bool,
    /// Tree/map blocks allocated minus freed so far.
    pub meta_blocks: i64,
}

/// Reads blocks through [`Meta`] (the running transaction's view).
pub(super) struct MetaSource<'a>(pub &'a dyn Meta);

impl BlockSource for MetaSource<'_> {
    fn read_block(&self, blk: u64) -> Result<Vec<u8>> {
        self.0.read_meta(blk)
    }
}

/// The most blocks one extent maps: 32768 written, 32767 unwritten.
pub(super) fn max_extent_len(unwritten: bool) -> u64 {
    if unwritten {
        32767
    } else {
        32768
    }
}

impl<'a> BlockMap<'a> {
    /// The map of inode `ino` (generation `generation`) in `i_block`; `extents` is the
    /// inode's EXTENTS flag.
    pub fn new(ino: u32, generation: u32, i_block: &'a mut [u8; 60], extents: bool) -> Self {
        BlockMap {
            ino,
            generation,
            i_block,
            extents,
            meta_blocks: 0,
        }
    }

    /// Writes an empty extent tree root (a leaf with room for 4 extents) into `i_block`,
    /// for a new inode with the EXTENTS flag.
    pub fn init_extent_root(i_block: &mut [u8; 60]) {
        i_block.fill(0);
        let mut h = ExtentHeader::new(&mut i_block[..12]).expect("12 bytes");
        h.set_eh_magic(EXTENT_MAGIC);
        h.set_eh_max(ROOT_ENTRIES as u16);
    }

    /// The structure this map is: an extent tree or an indirect block map.
    fn map_structure(&self) -> Structure {
        if self.extents {
            Structure::ExtentTree
        } else {
            Structure::BlockMap
        }
    }

    /// The walk context for this inode on `m`.
    pub(super) fn cx(&self, m: &dyn Meta) -> MapCtx {
        MapCtx {
            ino: self.ino,
            generation: self.generation,
            seed: m.csum_seed(),
            block_size: m.geo().block_size,
            blocks_count: m.geo().blocks_count,
            first_data_block: m.geo().first_data_block,
        }
    }

    /// The run containing logical block `lblk`.
    pub fn lookup(&self, m: &dyn Meta, lblk: u64) -> Result<Run> {
        let cx = self.cx(m);
        walk::map(&MetaSource(m), &cx, &self.i_block[..], self.extents, lblk)
    }

    /// Maps `len` blocks from logical `lblk` to physical `pblk..` (allocated by the
    /// caller); they must be a hole now. `unwritten` inserts preallocated blocks that
    /// read as zeros (fallocate; extent-mapped inodes only). Merges with neighbouring
    /// extents where it can; tree blocks come from `m.alloc_blocks`.
    pub fn insert(
        &mut self,
        m: &mut dyn Meta,
        lblk: u64,
        pblk: u64,
        len: u64,
        unwritten: bool,
    ) -> Result<()> {
        if len == 0 || lblk.checked_add(len).is_none_or(|e| e > walk::MAX_LBLK) {
            return Err(Error::Invalid);
        }
        self.cx(m)
            .check_data(lblk, pblk, len)
            .map_err(|e| e.in_structure(self.map_structure()))?;
        if self.extents {
            self.ext_insert_run(
                m,
                super::extent_edit::Ext {
                    lblk,
                    len,
                    pblk,
                    unwritten,
                },
            )
        } else if unwritten {
            Err(Error::incompatible(format!(
                "inode {}: unwritten blocks need the extents feature",
                self.ino
            )))
        } else {
            self.ind_insert(m, lblk, pblk, len)
        }
    }

    /// Unmaps logical blocks `from..to` (punch hole; truncate with `to` = 2^32): frees
    /// their data blocks ([`Freed::Data`]) and the tree blocks left empty
    /// ([`Freed::Metadata`]); an extent tree that fits in the inode again moves back
    /// there. Returns the data blocks freed.
    pub fn remove(&mut self, m: &mut dyn Meta, from: u64, to: u64) -> Result<u64> {
        let to = to.min(walk::MAX_LBLK);
        if from >= to {
            return Ok(0);
        }
        if self.extents {
            self.ext_remove(m, from, to)
        } else {
            self.ind_remove(m, from, to)
        }
    }

    /// Marks the unwritten blocks among `lblk..lblk+len` written (after data was written
    /// into fallocated space); holes and written blocks are left alone.
    pub fn mark_written(&mut self, m: &mut dyn Meta, lblk: u64, len: u64) -> Result<()> {
        if !self.extents {
            return Ok(());
        }
        self.ext_convert(m, lblk, len, false)
    }

    /// Marks the written blocks among `lblk..lblk+len` unwritten (FALLOC_FL_ZERO_RANGE:
    /// they read as zeros from now on, keeping their blocks).
    pub fn mark_unwritten(&mut self, m: &mut dyn Meta, lblk: u64, len: u64) -> Result<()> {
        if !self.extents {
            return Err(Error::incompatible(format!(
                "inode {}: unwritten blocks need the extents feature",
                self.ino
            )));
        }
        self.ext_convert(m, lblk, len, true)
    }

    /// Allocates `n` tree/map blocks near `goal`, counted in `meta_blocks`. On failure
    /// nothing stays allocated.
    pub(super) fn alloc_meta_blocks(
        &mut self,
        m: &mut dyn Meta,
        goal: u64,
        n: usize,
    ) -> Result<Vec<u64>> {
        let mut got: Vec<u64> = Vec::with_capacity(n);
        while got.len() < n {
            let want = (n - got.len()) as u32;
            let r = m.alloc_blocks(self.ino, goal, want).and_then(|(s, c)| {
                if c == 0 || s == 0 {
                    Err(Error::corrupt(
                        Structure::Bitmap,
                        format!("allocator gave {c} blocks at {s}"),
                    )
                    .with_block(s))
                } else {
                    Ok((s, c.min(want)))
                }
            });
            match r {
                Ok((s, c)) => got.extend(s..s + c as u64),
                Err(e) => {
                    for &b in &got {
                        // Never written: no revoke needed.
                        m.free_blocks(self.ino, b, 1, Freed::Data)?;
                    }
                    return Err(e);
                }
            }
        }
        self.meta_blocks += n as i64;
        Ok(got)
    }

    /// Frees tree/map block `blk`, counted in `meta_blocks`.
    pub(super) fn free_meta_block(&mut self, m: &mut dyn Meta, blk: u64) -> Result<()> {
        m.free_blocks(self.ino, blk, 1, Freed::Metadata)?;
        self.meta_blocks -= 1;
        Ok(())
    }
}
