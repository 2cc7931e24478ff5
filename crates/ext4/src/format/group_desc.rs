//! Block group descriptors: 32 bytes each (64 with the 64bit feature, `s_desc_size`), in
//! the group descriptor table after the superblock (or per meta group with meta_bg).

use super::checksum::{crc16, crc32c_raw};
use super::superblock::join;

/// Offset of `bg_checksum` inside a descriptor.
pub const GD_CHECKSUM_OFFSET: usize = 0x1E;

/// `bg_flags`: the inode table and bitmap are not initialised.
pub const BG_INODE_UNINIT: u16 = 0x1;
/// `bg_flags`: the block bitmap is not initialised.
pub const BG_BLOCK_UNINIT: u16 = 0x2;
/// `bg_flags`: the inode table is zeroed.
pub const BG_INODE_ZEROED: u16 = 0x4;

usfs_fs::layout! {
    /// One block group descriptor (struct ext4_group_desc). The view always holds 64 bytes:
    /// 32-byte descriptors are zero-padded, so the `_hi` halves read as zero.
    pub struct GroupDesc[64] {
        /// Block bitmap location, low 32 bits.
        bg_block_bitmap_lo / set_bg_block_bitmap_lo: u32 @ 0x00,
        /// Inode bitmap location, low 32 bits.
        bg_inode_bitmap_lo / set_bg_inode_bitmap_lo: u32 @ 0x04,
        /// Inode table location, low 32 bits.
        bg_inode_table_lo / set_bg_inode_table_lo: u32 @ 0x08,
        /// Free blocks in the group, low 16 bits.
        bg_free_blocks_count_lo / set_bg_free_blocks_count_lo: u16 @ 0x0C,
        /// Free inodes in the group, low 16 bits.
        bg_free_inodes_count_lo / set_bg_free_inodes_count_lo: u16 @ 0x0E,
        /// Directories in the group, low 16 bits.
        bg_used_dirs_count_lo / set_bg_used_dirs_count_lo: u16 @ 0x10,
        /// Flags: BG_INODE_UNINIT, BG_BLOCK_UNINIT, BG_INODE_ZEROED.
        bg_flags / set_bg_flags: u16 @ 0x12,
        /// Snapshot exclusion bitmap location, low 32 bits.
        bg_exclude_bitmap_lo / set_bg_exclude_bitmap_lo: u32 @ 0x14,
        /// crc32c of the block bitmap, low 16 bits.
        bg_block_bitmap_csum_lo / set_bg_block_bitmap_csum_lo: u16 @ 0x18,
        /// crc32c of the inode bitmap, low 16 bits.
        bg_inode_bitmap_csum_lo / set_bg_inode_bitmap_csum_lo: u16 @ 0x1A,
        /// Unused inodes at the end of the inode table, low 16 bits.
        bg_itable_unused_lo / set_bg_itable_unused_lo: u16 @ 0x1C,
        /// Descriptor checksum (crc16 with gdt_csum, crc32c low 16 bits with metadata_csum).
        bg_checksum / set_bg_checksum: u16 @ 0x1E,
        /// Block bitmap location, high 32 bits.
        bg_block_bitmap_hi / set_bg_block_bitmap_hi: u32 @ 0x20,
        /// Inode bitmap location, high 32 bits.
        bg_inode_bitmap_hi / set_bg_inode_bitmap_hi: u32 @ 0x24,
        /// Inode table location, high 32 bits.
        bg_inode_table_hi / set_bg_inode_table_hi: u32 @ 0x28,
        /// Free blocks, high 16 bits.
        bg_free_blocks_count_hi / set_bg_free_blocks_count_hi: u16 @ 0x2C,
        /// Free inodes, high 16 bits.
        bg_free_inodes_count_hi / set_bg_free_inodes_count_hi: u16 @ 0x2E,
        /// Directories, high 16 bits.
        bg_used_dirs_count_hi / set_bg_used_dirs_count_hi: u16 @ 0x30,
        /// Unused inodes, high 16 bits.
        bg_itable_unused_hi / set_bg_itable_unused_hi: u16 @ 0x32,
        /// Exclusion bitmap location, high 32 bits.
        bg_exclude_bitmap_hi / set_bg_exclude_bitmap_hi: u32 @ 0x34,
        /// Block bitmap checksum, high 16 bits (desc_size >= 0x3A).
        bg_block_bitmap_csum_hi / set_bg_block_bitmap_csum_hi: u16 @ 0x38,
        /// Inode bitmap checksum, high 16 bits (desc_size >= 0x3C).
        bg_inode_bitmap_csum_hi / set_bg_inode_bitmap_csum_hi: u16 @ 0x3A,
        /// Padding.
        bg_reserved / set_bg_reserved: u32 @ 0x3C,
    }
}

impl GroupDesc<[u8; 64]> {
    /// Copies a descriptor of `raw.len()` (32 or 64..) bytes into a padded view.
    pub fn from_raw(raw: &[u8]) -> Self {
        let mut b = [0u8; 64];
        let n = raw.len().min(64);
        b[..n].copy_from_slice(&raw[..n]);
        GroupDesc(b)
    }
}

impl<B: AsRef<[u8]>> GroupDesc<B> {
    /// Block bitmap block.
    pub fn block_bitmap(&self) -> u64 {
        join(self.bg_block_bitmap_lo(), self.bg_block_bitmap_hi(), true)
    }
    /// Inode bitmap block.
    pub fn inode_bitmap(&self) -> u64 {
        join(self.bg_inode_bitmap_lo(), self.bg_inode_bitmap_hi(), true)
    }
    /// First block of the inode table.
    pub fn inode_table(&self) -> u64 {
        join(self.bg_inode_table_lo(), self.bg_inode_table_hi(), true)
    }
    /// Free blocks.
    pub fn free_blocks_count(&self) -> u32 {
        self.bg_free_blocks_count_lo() as u32 | (self.bg_free_blocks_count_hi() as u32) << 16
    }
    /// Free inodes.
    pub fn free_inodes_count(&self) -> u32 {
        self.bg_free_inodes_count_lo() as u32 | (self.bg_free_inodes_count_hi() as u32) << 16
    }
    /// Directories.
    pub fn used_dirs_count(&self) -> u32 {
        self.bg_used_dirs_count_lo() as u32 | (self.bg_used_dirs_count_hi() as u32) << 16
    }
    /// Unused inodes at the end of the table.
    pub fn itable_unused(&self) -> u32 {
        self.bg_itable_unused_lo() as u32 | (self.bg_itable_unused_hi() as u32) << 16
    }
    /// Is a `bg_flags` bit set?
    pub fn has_flag(&self, flag: u16) -> bool {
        self.bg_flags() & flag != 0
    }

    /// Does the block bitmap `bitmap` (clusters_per_group / 8 bytes) match the checksum
    /// stored here? The high half is stored only when `desc_size` reaches it (0x3A).
    pub fn block_bitmap_checksum_ok(&self, seed: u32, bitmap: &[u8], desc_size: usize) -> bool {
        let (lo, hi) = (
            self.bg_block_bitmap_csum_lo(),
            self.bg_block_bitmap_csum_hi(),
        );
        bitmap_checksum_matches(crc32c_raw(seed, bitmap), lo, hi, desc_size >= 0x3A)
    }

    /// Does the inode bitmap `bitmap` (inodes_per_group / 8 bytes) match the checksum
    /// stored here? The high half is stored only when `desc_size` reaches it (0x3C).
    pub fn inode_bitmap_checksum_ok(&self, seed: u32, bitmap: &[u8], desc_size: usize) -> bool {
        let (lo, hi) = (
            self.bg_inode_bitmap_csum_lo(),
            self.bg_inode_bitmap_csum_hi(),
        );
        bitmap_checksum_matches(crc32c_raw(seed, bitmap), lo, hi, desc_size >= 0x3C)
    }

    /// The checksum this descriptor should carry: with `csum_seed` (metadata_csum) the
    /// low 16 bits of crc32c(seed, le32 group || desc with bg_checksum zeroed); otherwise
    /// crc16(~0, uuid || le32 group || desc without bg_checksum). `desc_size` is the
    /// on-disk size (32 or s_desc_size).
    pub fn compute_checksum(
        &self,
        group: u32,
        desc_size: usize,
        csum_seed: Option<u32>,
        uuid: &[u8; 16],
    ) -> u16 {
        let d = &self.bytes()[..desc_size.min(64)];
        let g = group.to_le_bytes();
        match csum_seed {
            Some(seed) => {
                let c = crc32c_raw(seed, &g);
                let c = crc32c_raw(c, &d[..GD_CHECKSUM_OFFSET]);
                let c = crc32c_raw(c, &[0, 0]);
                let c = crc32c_raw(c, &d[GD_CHECKSUM_OFFSET + 2..]);
                c as u16
            }
            None => {
                let c = crc16(!0, uuid);
                let c = crc16(c, &g);
                let c = crc16(c, &d[..GD_CHECKSUM_OFFSET]);
                crc16(c, &d[GD_CHECKSUM_OFFSET + 2..])
            }
        }
    }
}

/// Compares a bitmap's crc32c with the stored halves (only the low 16 bits when the
/// descriptor has no room for the high half).
fn bitmap_checksum_matches(crc: u32, lo: u16, hi: u16, has_hi: bool) -> bool {
    if has_hi {
        crc == (hi as u32) << 16 | lo as u32
    } else {
        crc & 0xFFFF == lo as u32
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> GroupDesc<B> {
    /// Sets the block bitmap location (both halves).
    pub fn set_block_bitmap(&mut self, b: u64) {
        self.set_bg_block_bitmap_lo(b as u32);
        self.set_bg_block_bitmap_hi((b >> 32) as u32);
    }
    /// Sets the inode bitmap location (both halves).
    pub fn set_inode_bitmap(&mut self, b: u64) {
        self.set_bg_inode_bitmap_lo(b as u32);
        self.set_bg_inode_bitmap_hi((b >> 32) as u32);
    }
    /// Sets the inode table location (both halves).
    pub fn set_inode_table(&mut self, b: u64) {
        self.set_bg_inode_table_lo(b as u32);
        self.set_bg_inode_table_hi((b >> 32) as u32);
    }
    /// Sets the free block count (both halves).
    pub fn set_free_blocks_count(&mut self, n: u32) {
        self.set_bg_free_blocks_count_lo(n as u16);
        self.set_bg_free_blocks_count_hi((n >> 16) as u16);
    }
    /// Sets the free inode count (both halves).
    pub fn set_free_inodes_count(&mut self, n: u32) {
        self.set_bg_free_inodes_count_lo(n as u16);
        self.set_bg_free_inodes_count_hi((n >> 16) as u16);
    }
    /// Sets the directory count (both halves).
    pub fn set_used_dirs_count(&mut self, n: u32) {
        self.set_bg_used_dirs_count_lo(n as u16);
        self.set_bg_used_dirs_count_hi((n >> 16) as u16);
    }
    /// Sets the unused-inode count (both halves).
    pub fn set_itable_unused(&mut self, n: u32) {
        self.set_bg_itable_unused_lo(n as u16);
        self.set_bg_itable_unused_hi((n >> 16) as u16);
    }
    /// Stores the checksum of a block bitmap (the high half only if `desc_size` has it).
    pub fn set_block_bitmap_checksum(&mut self, seed: u32, bitmap: &[u8], desc_size: usize) {
        let c = crc32c_raw(seed, bitmap);
        self.set_bg_block_bitmap_csum_lo(c as u16);
        if desc_size >= 0x3A {
            self.set_bg_block_bitmap_csum_hi((c >> 16) as u16);
        }
    }
    /// Stores the checksum of an inode bitmap (the high half only if `desc_size` has it).
    pub fn set_inode_bitmap_checksum(&mut self, seed: u32, bitmap: &[u8], desc_size: usize) {
        let c = crc32c_raw(seed, bitmap);
        self.set_bg_inode_bitmap_csum_lo(c as u16);
        if desc_size >= 0x3C {
            self.set_bg_inode_bitmap_csum_hi((c >> 16) as u16);
        }
    }
    /// Stores the descriptor checksum (see [`GroupDesc::compute_checksum`]).
    pub fn update_checksum(
        &mut self,
        group: u32,
        desc_size: usize,
        csum_seed: Option<u32>,
        uuid: &[u8; 16],
    ) {
        let c = self.compute_checksum(group, desc_size, csum_seed, uuid);
        self.set_bg_checksum(c);
    }
}
