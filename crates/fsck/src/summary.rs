//! The last step of a check: the numbers of e2fsck's closing line (files and blocks in
//! use, the share of non-contiguous files).

use crate::ctx::Counters;
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::Ext4;

/// The summary line's numbers (`U/N files (P.P% non-contiguous), B/M blocks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Inodes in use per the superblock (count - free).
    pub inodes_used: u64,
    /// Inodes.
    pub inodes: u64,
    /// Blocks in use per the superblock (count - free).
    pub blocks_used: u64,
    /// Blocks.
    pub blocks: u64,
    /// Non-contiguous files and directories, in tenths of a percent of inodes_used.
    pub fragmented_tenths: u64,
}

impl Summary {
    /// The line e2fsck prints, for `name`.
    pub fn line(&self, name: &str) -> String {
        format!(
            "{name}: {}/{} files ({}.{}% non-contiguous), {}/{} blocks",
            self.inodes_used,
            self.inodes,
            self.fragmented_tenths / 10,
            self.fragmented_tenths % 10,
            self.blocks_used,
            self.blocks
        )
    }
}

/// The summary of the file system on `fs` (geometry `geo`): in-use counts from the
/// superblock, fragmentation from the merged `counters`.
pub(crate) fn summarize(fs: &Ext4, geo: &Geometry, counters: &Counters) -> Summary {
    let sb = fs.superblock();
    let inodes = geo.inodes_count as u64;
    let inodes_used = (geo.inodes_count.wrapping_sub(sb.s_free_inodes_count())) as u64;
    let blocks = geo.blocks_count;
    // (Wrapping, as e2fsck prints it when the free count exceeds the total.)
    let blocks_used = blocks.wrapping_sub(sb.free_blocks_count(geo.is64()));
    let frag = counters.fragmented + counters.fragmented_dirs;
    // e2fsck computes this in 32-bit arithmetic (it wraps past 429496 fragmented inodes).
    let fragmented_tenths = 10000u32
        .wrapping_mul(frag as u32)
        .checked_div(inodes_used as u32)
        .map_or(0, |t| (t as u64 + 5) / 10);
    Summary {
        inodes_used,
        inodes,
        blocks_used,
        blocks,
        fragmented_tenths,
    }
}
