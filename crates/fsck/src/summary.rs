//! The last step of a check: the numbers of e2fsck's closing line (files and blocks in
//! use, the share of non-contiguous files).

use crate::ctx::Counters;
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::Ext4;

/// The summary line's numbers (`U/N files (P.P% non-contiguous), B/M blocks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// Non-contiguous files and directories.
    pub fragmented: u64,
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
    let mut s = Summary {
        inodes: geo.inodes_count as u64,
        blocks: geo.blocks_count,
        fragmented: counters.fragmented + counters.fragmented_dirs,
        ..Summary::default()
    };
    s.recount(
        sb.s_free_inodes_count() as u64,
        sb.free_blocks_count(geo.is64()),
    );
    s
}

impl Summary {
    /// Sets the in-use counts (and the fragmented share of them) from the superblock's
    /// free counts, as a repair leaves them.
    pub(crate) fn recount(&mut self, free_inodes: u64, free_blocks: u64) {
        self.inodes_used = (self.inodes as u32).wrapping_sub(free_inodes as u32) as u64;
        // (Wrapping, as e2fsck prints it when the free count exceeds the total.)
        self.blocks_used = self.blocks.wrapping_sub(free_blocks);
        // e2fsck computes this in 32-bit arithmetic (it wraps past 429496 fragmented inodes).
        self.fragmented_tenths = 10000u32
            .wrapping_mul(self.fragmented as u32)
            .checked_div(self.inodes_used as u32)
            .map_or(0, |t| (t as u64 + 5) / 10);
    }
}
