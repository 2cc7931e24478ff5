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
        reserved_zero / set_reserved_zero: u32 @ 0,
        /// Hash version (0 legacy, 1 half_md4, 2 tea; +3 for the unsigned variants).
        hash_version / set_hash_version: u8 @ 4,
        /// Length of this info, 8.
        info_length / set_info_length: u8 @ 5,
        /// Depth of the tree below the root: 0 = the root points at leaves.
        indirect_levels / set_indirect_levels: u8 @ 6,
        /// Unused flags.
        unused_flags / set_unused_flags: u8 @ 7,
    }
}

usfs_fs::layout! {
    /// The count/limit header occupying the first entry slot of a dx node.
    pub struct DxCountLimit[8] {
        /// Capacity in entries (including this header's slot).
        limit / set_limit: u16 @ 0,
        /// Entries in use (including this header's slot).
        count / set_count: u16 @ 2,
        /// Block of the first child (hash 0).
        block / set_block: u32 @ 4,
    }
}

usfs_fs::layout! {
    /// The checksum tail after `limit` entries of a dx node (metadata_csum).
    pub struct DxTail[8] {
        /// Reserved (included in the checksum as stored).
        dt_reserved / set_dt_reserved: u32 @ 0,
        /// crc32c(seed, ino || gen || node[0..count_offset + count*8] || dt_reserved || 0).
        dt_checksum / set_dt_checksum: u32 @ 4,
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

/// Why a dx node's count/limit header cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DxHeaderFault {
    /// `limit` is not the capacity the block size gives (`expected`).
    Limit {
        /// Stored limit.
        limit: usize,
        /// What the block holds.
        expected: usize,
    },
    /// `count` is 0 or above the limit.
    Count {
        /// Stored count.
        count: usize,
        /// The (valid) limit.
        limit: usize,
    },
}

impl std::fmt::Display for DxHeaderFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DxHeaderFault::Limit { limit, expected } => {
                write!(f, "bad limit ({limit}, expected {expected})")
            }
            DxHeaderFault::Count { count, limit } => {
                write!(f, "bad count ({count}, limit {limit})")
            }
        }
    }
}

/// Checks the count/limit header of the dx node in `block` (header at `count_offset`; a
/// checksum tail follows the entries when `has_tail`) and returns (count, limit).
pub fn check_header(
    block: &[u8],
    count_offset: usize,
    has_tail: bool,
) -> Result<(usize, usize), DxHeaderFault> {
    let cl = DxCountLimit::new(&block[count_offset..]).expect("header inside the block");
    let (count, limit) = (cl.count() as usize, cl.limit() as usize);
    let tail = if has_tail { DX_TAIL_SIZE } else { 0 };
    let expected = (block.len() - count_offset - tail) / DX_ENTRY_SIZE;
    if limit != expected {
        return Err(DxHeaderFault::Limit { limit, expected });
    }
    if count == 0 || count > limit {
        return Err(DxHeaderFault::Count { count, limit });
    }
    Ok((count, limit))
}

/// Does the checksum tail of a node (header checked by [`check_header`]) match?
pub fn tail_checksum_ok(
    seed: u32,
    ino: u32,
    generation: u32,
    block: &[u8],
    count_offset: usize,
    count: usize,
    limit: usize,
) -> bool {
    let tail_off = count_offset + limit * DX_ENTRY_SIZE;
    let t = DxTail::new(&block[tail_off..]).expect("tail inside the block");
    t.dt_checksum() == node_checksum(seed, ino, generation, block, count_offset, count, tail_off)
}

/// Entry `i` of a node as (hash, child block); entry 0 (the header's slot) has hash 0.
pub fn entry(block: &[u8], count_offset: usize, i: usize) -> (u32, u32) {
    let o = count_offset + i * DX_ENTRY_SIZE;
    let word = |at: usize| u32::from_le_bytes(block[at..at + 4].try_into().expect("4 bytes"));
    if i == 0 {
        (0, word(o + 4))
    } else {
        (word(o), word(o + 4))
    }
}

/// The first entry whose hash is below its predecessor's, if any.
pub fn first_unordered(block: &[u8], count_offset: usize, count: usize) -> Option<usize> {
    (2..count).find(|&i| entry(block, count_offset, i).0 < entry(block, count_offset, i - 1).0)
}

/// Are the fixed fields of a root's info sane (reserved zero, length 8, depth below the
/// limit: 2 levels, 3 with large_dir; no incompatible flag)?
pub fn root_info_ok<B: AsRef<[u8]>>(info: &DxRootInfo<B>, large_dir: bool) -> bool {
    let max_levels = if large_dir { 3 } else { 2 };
    info.reserved_zero() == 0
        && info.info_length() == 8
        && (info.indirect_levels() as usize) < max_levels
        && info.unused_flags() & HASH_FLAG_INCOMPAT == 0
}

/// The root info flag no implementation knows (the kernel refuses the index, e2fsck's
/// "uses an incompatible htree root node flag").
pub const HASH_FLAG_INCOMPAT: u8 = 0x1;
