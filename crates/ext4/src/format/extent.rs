//! Extent trees: a 12-byte header followed by 12-byte entries, in `i_block` (the root, 4
//! entries) or in tree blocks (with a 4-byte checksum tail after `eh_max` entries).

use super::checksum::crc32c_raw;

/// `eh_magic`.
pub const EXTENT_MAGIC: u16 = 0xF30A;
/// Size of the header and of each entry.
pub const ENTRY_SIZE: usize = 12;
/// Lengths above this mark an unwritten (preallocated) extent.
pub const EXT_INIT_MAX_LEN: u16 = 32768;
/// Deepest tree the kernel accepts.
pub const MAX_DEPTH: u16 = 5;

usfs_fs::layout! {
    /// Header of an extent tree node (struct ext4_extent_header).
    pub struct ExtentHeader[12] {
        /// Magic, 0xF30A.
        eh_magic / set_eh_magic: u16 @ 0,
        /// Valid entries following the header.
        eh_entries / set_eh_entries: u16 @ 2,
        /// Capacity of the node in entries.
        eh_max / set_eh_max: u16 @ 4,
        /// Depth of the subtree: 0 = entries are leaves (extents), else index entries.
        eh_depth / set_eh_depth: u16 @ 6,
        /// Generation of the tree (unused).
        eh_generation / set_eh_generation: u32 @ 8,
    }
}

usfs_fs::layout! {
    /// An interior entry (struct ext4_extent_idx): covers logical blocks from `ei_block`.
    pub struct ExtentIndex[12] {
        /// First logical block covered.
        ei_block / set_ei_block: u32 @ 0,
        /// Physical block of the child node, low 32 bits.
        ei_leaf_lo / set_ei_leaf_lo: u32 @ 4,
        /// Physical block of the child node, high 16 bits.
        ei_leaf_hi / set_ei_leaf_hi: u16 @ 8,
        /// Unused.
        ei_unused / set_ei_unused: u16 @ 10,
    }
}

usfs_fs::layout! {
    /// A leaf entry (struct ext4_extent): `ee_len` blocks from logical `ee_block` stored
    /// at physical `ee_start`.
    pub struct Extent[12] {
        /// First logical block.
        ee_block / set_ee_block: u32 @ 0,
        /// Length in blocks; above 32768 the extent is unwritten (length - 32768).
        ee_len / set_ee_len: u16 @ 4,
        /// Physical start, high 16 bits.
        ee_start_hi / set_ee_start_hi: u16 @ 6,
        /// Physical start, low 32 bits.
        ee_start_lo / set_ee_start_lo: u32 @ 8,
    }
}

impl<B: AsRef<[u8]>> ExtentIndex<B> {
    /// Child node block.
    pub fn leaf(&self) -> u64 {
        (self.ei_leaf_hi() as u64) << 32 | self.ei_leaf_lo() as u64
    }
}

impl<B: AsRef<[u8]>> Extent<B> {
    /// Physical start block.
    pub fn start(&self) -> u64 {
        (self.ee_start_hi() as u64) << 32 | self.ee_start_lo() as u64
    }
    /// Length in blocks.
    pub fn len(&self) -> u32 {
        let l = self.ee_len();
        if l > EXT_INIT_MAX_LEN {
            (l - EXT_INIT_MAX_LEN) as u32
        } else {
            l as u32
        }
    }
    /// True for a zero-length extent (invalid on disk).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Is the extent unwritten (reads as zeros)?
    pub fn is_unwritten(&self) -> bool {
        self.ee_len() > EXT_INIT_MAX_LEN
    }
}

/// libext2fs's ext2fs_extent_header_verify on `node` (an inode's i_block or a tree
/// block): the magic, no more entries than its maximum, and a maximum that fits the node
/// and is at most two entries short of it (room for a checksum tail).
pub fn header_ok(node: &[u8]) -> bool {
    let Some(h) = ExtentHeader::new(node) else {
        return false;
    };
    let fit = (node.len() - 12) / ENTRY_SIZE;
    let max = h.eh_max() as usize;
    h.eh_magic() == EXTENT_MAGIC && h.eh_entries() <= h.eh_max() && max <= fit && max + 2 >= fit
}

/// Byte offset of the checksum tail in an extent block with capacity `eh_max`.
pub fn tail_offset(eh_max: u16) -> usize {
    ENTRY_SIZE + ENTRY_SIZE * eh_max as usize
}

/// Checksum of an extent tree block: crc32c(seed, le32 ino || le32 gen || block[0..tail]).
pub fn block_checksum(seed: u32, ino: u32, generation: u32, block: &[u8], eh_max: u16) -> u32 {
    let c = crc32c_raw(seed, &ino.to_le_bytes());
    let c = crc32c_raw(c, &generation.to_le_bytes());
    crc32c_raw(c, &block[..tail_offset(eh_max)])
}
