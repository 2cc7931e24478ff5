//! Chunk-based files: `i_u` holds the chunk format; the index table follows the inode's
//! xattrs (8-byte aligned for full indexes).

/// Mask of chunk bits in the chunk format (chunk size = block size << bits).
pub const CHUNK_BLKBITS_MASK: u16 = 0x1f;
/// Full 8-byte indexes rather than a 4-byte block address array.
pub const CHUNK_INDEXES: u16 = 0x20;
/// Block address of a hole.
pub const NULL_ADDR: u32 = u32::MAX;

usfs_fs::layout! {
    /// `struct erofs_inode_chunk_index`: one per chunk.
    pub struct ChunkIndex[8] {
        /// Advise bits (unused, zero).
        advise / set_advise: u16 @ 0,
        /// Device id (0 = the primary device).
        device_id / set_device_id: u16 @ 2,
        /// First block of the chunk, or [`NULL_ADDR`] for a hole.
        blkaddr / set_blkaddr: u32 @ 4,
    }
}
