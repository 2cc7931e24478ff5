//! Logical-to-physical block mapping for the reader: extent trees and ext2/ext3 indirect
//! block maps, through the shared walkers in [`crate::walk`].

use super::inode::LoadedInode;
use super::Ext4;
use crate::format::inode::flags;
use crate::walk::{self, BlockSource, MapCtx};
use usfs_fs::{Result, Structure};

/// A run of logical blocks with one fate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    /// First logical block of the run.
    pub lblk: u64,
    /// Length in blocks (at least 1).
    pub len: u64,
    /// Physical block of `lblk`, or `None` for a hole or an unwritten extent.
    pub pblk: Option<u64>,
}

impl BlockSource for Ext4 {
    fn read_block(&self, blk: u64) -> Result<Vec<u8>> {
        Ext4::read_block(self, blk, Structure::Image, "block map")
    }
}

/// The structure that maps `inode`'s blocks: its extent tree or its block map.
pub(crate) fn map_structure(inode: &LoadedInode) -> Structure {
    if inode.has_flag(flags::EXTENTS) {
        Structure::ExtentTree
    } else {
        Structure::BlockMap
    }
}

impl Ext4 {
    /// Maps logical block `lblk` of `inode`: the run containing it.
    pub(crate) fn map_block(&self, inode: &LoadedInode, lblk: u64) -> Result<Run> {
        let cx = MapCtx {
            ino: inode.ino,
            generation: inode.raw.i_generation(),
            seed: self.core.csum_seed,
            block_size: self.core.geo.block_size,
            blocks_count: self.core.geo.blocks_count,
            first_data_block: self.core.geo.first_data_block,
        };
        let extents = inode.has_flag(flags::EXTENTS);
        let m = walk::map(self, &cx, inode.raw.i_block(), extents, lblk)?;
        Ok(Run {
            lblk: m.lblk,
            len: m.len,
            pblk: m.pblk.filter(|_| !m.unwritten),
        })
    }
}
