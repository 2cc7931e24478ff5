//! Compression configurations: with `COMPR_CFGS`, one record per algorithm in
//! `available_compr_algs` follows the superblock (at 1024 + sb size): a le16 length, then
//! the payload.

/// Bit of LZ4 in `available_compr_algs`.
pub const ALG_LZ4: u16 = 1 << 0;
/// Size of the LZ4 record payload.
pub const LZ4_CFGS_SIZE: usize = 14;

usfs_fs::layout! {
    /// `struct z_erofs_lz4_cfgs` (payload of the LZ4 record).
    pub struct Lz4Cfgs[14] {
        /// LZ4 maximum match distance in bytes (0 = 64 KiB).
        max_distance / set_max_distance: u16 @ 0,
        /// Largest pcluster in blocks.
        max_pclusterblks / set_max_pclusterblks: u16 @ 2,
        /// Reserved.
        reserved / set_reserved: [10] @ 4,
    }
}
