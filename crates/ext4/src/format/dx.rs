//! Hashed (htree) directory index blocks: the root in block 0 of the directory (after the
//! `.` and `..` entries), interior nodes disguised as one empty entry, each a sorted array
//! of (hash, block) pairs whose first slot holds `limit`/`count` instead of a hash.

use super::checksum::crc32c_raw;

/// Offset of the count/limit header in the root block (after `.`, `..` and the info).
pub const ROOT_COUNT_OFFSET: usize = 0x20;
/// Offset of the count/limit header in an interior node (after the fake entry).
pub const NODE_COUNT_OFFSET: usize = 0x08;
/// Size of one (hash, block) entry.
pub const DX_ENTRY_SIZE: usize = 8;
/// Size of the dx checksum tail.
pub const DX_TAIL_SIZE: usize = 8;

usfs_fs::layout! {
    /// The dx_root_info after the `..` entry of block 0 (at byte 0x18).
    pub struct DxRootInfo[8] {
        /// Always 0.
        reserved_zero: u32 @ 0,
        /// Hash version (0 legacy, 1 half_md4, 2 tea; +3 for the unsigned variants).
        hash_version: u8 @ 4,
        /// Length of this info, 8.
        info_length: u8 @ 5,
        /// Depth of the tree below the root: 0 = the root points at leaves.
        indirect_levels: u8 @ 6,
        /// Unused flags.
        unused_flags: u8 @ 7,
    }
}

usfs_fs::layout! {
    /// The count/limit header occupying the first entry slot of a dx node.
    pub struct DxCountLimit[8] {
        /// Capacity in entries (including this header's slot).
        limit: u16 @ 0,
        /// Entries in use (including this header's slot).
        count: u16 @ 2,
        /// Block of the first child (hash 0).
        block: u32 @ 4,
    }
}

usfs_fs::layout! {
    /// The checksum tail after `limit` entries of a dx node (metadata_csum).
    pub struct DxTail[8] {
        /// Reserved (included in the checksum as stored).
        dt_reserved: u32 @ 0,
        /// crc32c(seed, ino || gen || node[0..count_offset + count*8] || dt_reserved || 0).
        dt_checksum: u32 @ 4,
    }
}

/// Checksum of a dx node whose header is at `count_offset`, with `count` entries and the
/// tail at `tail_off`.
pub fn node_checksum(
    seed: u32,
    ino: u32,
    generation: u32,
    block: &[u8],
    count_offset: usize,
    count: usize,
    tail_off: usize,
) -> u32 {
    let c = crc32c_raw(seed, &ino.to_le_bytes());
    let c = crc32c_raw(c, &generation.to_le_bytes());
    let c = crc32c_raw(c, &block[..count_offset + count * DX_ENTRY_SIZE]);
    let c = crc32c_raw(c, &block[tail_off..tail_off + 4]);
    crc32c_raw(c, &[0, 0, 0, 0])
}
