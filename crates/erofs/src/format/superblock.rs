//! The superblock: 128 bytes at byte 1024 of block 0, followed by `sb_extslots` 16-byte
//! slots; its checksum covers the rest of block 0.

use super::checksum::crc32c_raw;

/// Byte offset of the superblock in the image.
pub const SUPER_OFFSET: u64 = 1024;
/// `magic` of every EROFS superblock.
pub const EROFS_MAGIC: u32 = 0xE0F5_E1E2;
/// Size of one superblock extension slot.
pub const EXTSLOT_SIZE: u64 = 16;

/// `feature_compat` bits: readers may ignore them.
pub mod compat {
    /// `checksum` holds the CRC32C of the superblock block.
    pub const SB_CHKSUM: u32 = 0x1;
    /// Compact inodes carry `i_mtime` (seconds after `build_time`).
    pub const MTIME: u32 = 0x2;
    /// Xattr name bloom filters in the ibody headers.
    pub const XATTR_FILTER: u32 = 0x4;
}

/// `feature_incompat` bits: a reader must understand every bit that is set.
pub mod incompat {
    /// LZ4 data is right-aligned in its pcluster (leading zero padding).
    pub const ZERO_PADDING: u32 = 0x1;
    /// Compression configurations follow the superblock; `available_compr_algs` is valid.
    pub const COMPR_CFGS: u32 = 0x2;
    /// Physical clusters of more than one block (same bit as `COMPR_CFGS`).
    pub const BIG_PCLUSTER: u32 = 0x2;
    /// Chunk-based files.
    pub const CHUNKED_FILE: u32 = 0x4;
    /// A device table for extra devices.
    pub const DEVICE_TABLE: u32 = 0x8;
    /// A second compression head type (same bit as `DEVICE_TABLE`).
    pub const COMPR_HEAD2: u32 = 0x8;
    /// The last pcluster of a file may be stored inline after its indexes.
    pub const ZTAILPACKING: u32 = 0x10;
    /// File tails (or whole files) may live in the packed inode.
    pub const FRAGMENTS: u32 = 0x20;
    /// Pclusters may be shared by several extents (same bit as `FRAGMENTS`).
    pub const DEDUPE: u32 = 0x20;
    /// Long xattr name prefixes.
    pub const XATTR_PREFIXES: u32 = 0x40;
    /// The bits usfs understands.
    pub const SUPPORTED: u32 = ZERO_PADDING | COMPR_CFGS | CHUNKED_FILE | ZTAILPACKING | FRAGMENTS;
}

usfs_fs::layout! {
    /// `struct erofs_super_block`, at byte 1024 of the image.
    pub struct Superblock[128] {
        /// Magic number, [`EROFS_MAGIC`].
        magic / set_magic: u32 @ 0,
        /// CRC32C (seed ~0, no final xor) of bytes 1024..block end with this field zero,
        /// when `feature_compat` has [`compat::SB_CHKSUM`].
        checksum / set_checksum: u32 @ 4,
        /// Compatible feature bits ([`compat`]).
        feature_compat / set_feature_compat: u32 @ 8,
        /// log2 of the block size.
        blkszbits / set_blkszbits: u8 @ 12,
        /// Number of 16-byte extension slots after the 128-byte superblock.
        sb_extslots / set_sb_extslots: u8 @ 13,
        /// nid of the root directory (16 bits: the root lives in the first 2 MiB of metadata).
        root_nid / set_root_nid: u16 @ 14,
        /// Number of inodes (for statfs).
        inos / set_inos: u64 @ 16,
        /// Build time in seconds: the mtime of every compact inode.
        build_time / set_build_time: u64 @ 24,
        /// Nanoseconds of the build time.
        build_time_nsec / set_build_time_nsec: u32 @ 32,
        /// Total blocks of the image (for statfs).
        blocks / set_blocks: u32 @ 36,
        /// Block where the metadata area starts: inode `nid` is at `meta_blkaddr * bs + nid * 32`.
        meta_blkaddr / set_meta_blkaddr: u32 @ 40,
        /// Block where the shared xattr area starts (xattr id `n` at `+ n * 4`).
        xattr_blkaddr / set_xattr_blkaddr: u32 @ 44,
        /// Volume UUID.
        uuid / set_uuid: [16] @ 48,
        /// Volume label (NUL padded).
        volume_name / set_volume_name: [16] @ 64,
        /// Incompatible feature bits ([`incompat`]).
        feature_incompat / set_feature_incompat: u32 @ 80,
        /// With `COMPR_CFGS`: bitmap of the compression algorithms used (bit 0 LZ4);
        /// without: LZ4's maximum match distance (0 = 64 KiB).
        u1 / set_u1: u16 @ 84,
        /// Number of extra devices.
        extra_devices / set_extra_devices: u16 @ 86,
        /// Offset of the device table, in 128-byte slots.
        devt_slotoff / set_devt_slotoff: u16 @ 88,
        /// log2 of the directory block size minus the block size (0 here).
        dirblkbits / set_dirblkbits: u8 @ 90,
        /// Number of long xattr name prefixes.
        xattr_prefix_count / set_xattr_prefix_count: u8 @ 91,
        /// Where the long xattr prefixes start (in the packed inode, in 4-byte units).
        xattr_prefix_start / set_xattr_prefix_start: u32 @ 92,
        /// nid of the packed inode holding fragments (0 if none).
        packed_nid / set_packed_nid: u64 @ 96,
        /// Reserved for the xattr name filter.
        xattr_filter_reserved / set_xattr_filter_reserved: u8 @ 104,
        /// Reserved, zero.
        reserved2 / set_reserved2: [23] @ 105,
    }
}

usfs_fs::layout! {
    /// `struct erofs_deviceslot`: one extra device of the image (the device table holds
    /// `extra_devices` of them from byte `devt_slotoff * 128`).
    pub struct DeviceSlot[128] {
        /// The device's tag (a digest; mkfs.erofs --tar=i leaves it zero).
        tag / set_tag: [64] @ 0,
        /// Blocks of the device (low 32 bits).
        blocks_lo / set_blocks_lo: u32 @ 64,
        /// The device's first block in the unified address space (low 32 bits): where its
        /// blocks are when it follows the image in one file ("flatdev").
        uniaddr_lo / set_uniaddr_lo: u32 @ 68,
        /// Blocks of the device (high 16 bits).
        blocks_hi / set_blocks_hi: u16 @ 72,
        /// The unified first block (high 16 bits).
        uniaddr_hi / set_uniaddr_hi: u16 @ 74,
        /// Reserved, zero.
        reserved / set_reserved: [52] @ 76,
    }
}

/// Bytes of a device slot.
pub const DEVICE_SLOT_SIZE: u64 = 128;

impl<B: AsRef<[u8]>> DeviceSlot<B> {
    /// Blocks of the device.
    pub fn blocks(&self) -> u64 {
        u64::from(self.blocks_lo()) | u64::from(self.blocks_hi()) << 32
    }

    /// The device's first block in the unified address space.
    pub fn uniaddr(&self) -> u64 {
        u64::from(self.uniaddr_lo()) | u64::from(self.uniaddr_hi()) << 32
    }
}

/// Bytes from [`SUPER_OFFSET`] the superblock checksum covers with blocks of `bs`
/// bytes: the rest of block 0, or with blocks of 1 KiB and less one block (the kernel's
/// erofs_superblock_csum_verify).
pub fn checksum_len(bs: u64) -> u64 {
    if bs > SUPER_OFFSET {
        bs - SUPER_OFFSET
    } else {
        bs
    }
}

impl<B: AsRef<[u8]>> Superblock<B> {
    /// The checksum of the bytes it covers, `area` (from [`SUPER_OFFSET`], as many as
    /// [`checksum_len`] says), its own field taken as zero.
    pub fn compute_checksum(area: &[u8]) -> u32 {
        let mut v = area.to_vec();
        v[4..8].fill(0);
        crc32c_raw(!0, &v)
    }

    /// The block size in bytes.
    pub fn block_size(&self) -> u64 {
        1u64 << self.blkszbits()
    }

    /// Bytes of superblock including extension slots.
    pub fn sb_size(&self) -> u64 {
        128 + u64::from(self.sb_extslots()) * EXTSLOT_SIZE
    }
}

/// Fills in the checksum of the built head of an image (`head`: its first bytes, the
/// superblock at byte 1024) of blocks of `bs` bytes.
pub fn seal(head: &mut [u8], bs: u64) {
    let o = SUPER_OFFSET as usize;
    let c = Superblock::<Vec<u8>>::compute_checksum(&head[o..o + checksum_len(bs) as usize]);
    head[o + 4..o + 8].copy_from_slice(&c.to_le_bytes());
}
