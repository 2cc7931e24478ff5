//! `struct z_erofs_map_header`: 8 bytes at the first 8-byte boundary after a compressed
//! inode's xattrs; the lcluster indexes follow it.

/// `h_advise`: compact indexes use 2-byte packs in the middle.
pub const ADVISE_COMPACTED_2B: u16 = 0x1;
/// `h_advise`: HEAD1 pclusters may span several blocks.
pub const ADVISE_BIG_PCLUSTER_1: u16 = 0x2;
/// `h_advise`: HEAD2 (and plain) pclusters may span several blocks.
pub const ADVISE_BIG_PCLUSTER_2: u16 = 0x4;
/// `h_advise`: the last pcluster is inline after the indexes (ztailpacking).
pub const ADVISE_INLINE_PCLUSTER: u16 = 0x8;
/// `h_advise`: plain pclusters are stored rotated by the start offset.
pub const ADVISE_INTERLACED_PCLUSTER: u16 = 0x10;
/// `h_advise`: the tail extent lives in the packed inode.
pub const ADVISE_FRAGMENT_PCLUSTER: u16 = 0x20;
/// Bit 7 of `h_clusterbits`: the whole file is a fragment; bytes 0..8 (bit 63 cleared)
/// are its offset in the packed inode.
pub const FRAGMENT_INODE_BIT: u8 = 0x80;

usfs_fs::layout! {
    /// `struct z_erofs_map_header`.
    pub struct MapHeader[8] {
        /// With FRAGMENT_PCLUSTER: offset of the tail fragment in the packed inode
        /// (overlaps the two fields below).
        h_fragmentoff / set_h_fragmentoff: u32 @ 0,
        /// Reserved.
        h_reserved1 / set_h_reserved1: u16 @ 0,
        /// Bytes of the inline (ztailpacking) pcluster.
        h_idata_size / set_h_idata_size: u16 @ 2,
        /// `ADVISE_*` bits.
        h_advise / set_h_advise: u16 @ 4,
        /// Bits 0..3: algorithm of HEAD1 clusters (0 = LZ4); bits 4..7: of HEAD2.
        h_algorithmtype / set_h_algorithmtype: u8 @ 6,
        /// Bits 0..2: logical cluster bits minus the block bits; bit 7: FRAGMENT_INODE_BIT.
        h_clusterbits / set_h_clusterbits: u8 @ 7,
    }
}

/// Where the map header of an inode is: `inode_end` = byte after its xattrs.
pub fn map_header_pos(inode_end: u64) -> u64 {
    super::round_up(inode_end, 8)
}
