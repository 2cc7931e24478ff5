//! Compression configurations: with `COMPR_CFGS`, one record per algorithm in
//! `available_compr_algs` follows the superblock (at 1024 + sb size): a le16 length, then
//! the payload.

/// Bit of LZ4 in `available_compr_algs`.
pub const ALG_LZ4: u16 = 1 << 0;
/// The name of compression algorithm number `alg` (`h_algorithmtype`, and the bit
/// number in `available_compr_algs`), as erofs-utils prints it.
pub fn alg_name(alg: u8) -> &'static str {
    match alg {
        0 => "lz4",
        1 => "lzma",
        2 => "deflate",
        3 => "zstd",
        _ => "unknown",
    }
}

/// Names of the algorithms whose bits are set in `available_compr_algs`.
pub fn alg_names(algs: u16) -> String {
    (0..16u8)
        .filter(|b| algs & (1 << b) != 0)
        .map(|b| match alg_name(b) {
            "unknown" => format!("algorithm {b}"),
            n => n.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

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
