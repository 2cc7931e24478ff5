//! Compression configurations: with `COMPR_CFGS`, one record per algorithm in
//! `available_compr_algs` follows the superblock (at 1024 + sb size), in algorithm order
//! (LZ4, LZMA, DEFLATE, Zstandard): a le16 length, then the payload. The kernel reads
//! each record of a listed algorithm and refuses an image whose record has the wrong
//! length or an unknown format; mkfs.erofs sets `COMPR_CFGS` whenever an algorithm
//! other than LZ4 is used (or pclusters are big: the same bit is `BIG_PCLUSTER`).

/// Bit of LZ4 in `available_compr_algs`.
pub const ALG_LZ4: u16 = 1 << 0;
/// Bit of MicroLZMA in `available_compr_algs`.
pub const ALG_LZMA: u16 = 1 << 1;
/// Bit of DEFLATE in `available_compr_algs`.
pub const ALG_DEFLATE: u16 = 1 << 2;
/// Bit of Zstandard in `available_compr_algs`.
pub const ALG_ZSTD: u16 = 1 << 3;
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

/// Size of the LZMA record payload.
pub const LZMA_CFGS_SIZE: usize = 14;

usfs_fs::layout! {
    /// `struct z_erofs_lzma_cfgs` (payload of the MicroLZMA record).
    pub struct LzmaCfgs[14] {
        /// Dictionary size in bytes the streams were made with (at most 8 MiB).
        dict_size / set_dict_size: u32 @ 0,
        /// Stream format: 0 (MicroLZMA) is the only one.
        format / set_format: u16 @ 4,
        /// Reserved, zero.
        reserved / set_reserved: [8] @ 6,
    }
}

/// Size of the DEFLATE record payload.
pub const DEFLATE_CFGS_SIZE: usize = 6;

usfs_fs::layout! {
    /// `struct z_erofs_deflate_cfgs` (payload of the DEFLATE record).
    pub struct DeflateCfgs[6] {
        /// log2 of the window size the streams were made with (8..=15).
        windowbits / set_windowbits: u8 @ 0,
        /// Reserved, zero.
        reserved / set_reserved: [5] @ 1,
    }
}

/// Size of the Zstandard record payload.
pub const ZSTD_CFGS_SIZE: usize = 6;

usfs_fs::layout! {
    /// `struct z_erofs_zstd_cfgs` (payload of the Zstandard record).
    pub struct ZstdCfgs[6] {
        /// Stream format: 0 (Zstandard frames) is the only one.
        format / set_format: u8 @ 0,
        /// log2 of the largest window minus 10 (ZSTD_WINDOWLOG_ABSOLUTEMIN).
        windowlog / set_windowlog: u8 @ 1,
        /// Reserved, zero.
        reserved / set_reserved: [4] @ 2,
    }
}

/// The configuration records (each a le16 length and its payload) for an image whose
/// algorithms are `algs` (bits of `available_compr_algs`): LZ4 with `max_pclusterblks`,
/// LZMA with `lzma_dict`, DEFLATE with `deflate_windowbits`, Zstandard with a
/// `zstd_window`-byte window.
pub fn build_records(
    algs: u16,
    max_pclusterblks: u16,
    lzma_dict: u32,
    deflate_windowbits: u8,
    zstd_window: u32,
) -> Vec<u8> {
    let mut v = Vec::new();
    if algs & ALG_LZ4 != 0 {
        let mut c = Lz4Cfgs::new(vec![0u8; LZ4_CFGS_SIZE]).expect("size");
        c.set_max_distance(crate::compress::LZ4_MAX_DISTANCE);
        c.set_max_pclusterblks(max_pclusterblks);
        v.extend_from_slice(&(LZ4_CFGS_SIZE as u16).to_le_bytes());
        v.extend_from_slice(c.bytes());
    }
    if algs & ALG_LZMA != 0 {
        let mut c = LzmaCfgs::new(vec![0u8; LZMA_CFGS_SIZE]).expect("size");
        c.set_dict_size(lzma_dict);
        v.extend_from_slice(&(LZMA_CFGS_SIZE as u16).to_le_bytes());
        v.extend_from_slice(c.bytes());
    }
    if algs & ALG_DEFLATE != 0 {
        let mut c = DeflateCfgs::new(vec![0u8; DEFLATE_CFGS_SIZE]).expect("size");
        c.set_windowbits(deflate_windowbits);
        v.extend_from_slice(&(DEFLATE_CFGS_SIZE as u16).to_le_bytes());
        v.extend_from_slice(c.bytes());
    }
    if algs & ALG_ZSTD != 0 {
        let mut c = ZstdCfgs::new(vec![0u8; ZSTD_CFGS_SIZE]).expect("size");
        c.set_windowlog((31 - zstd_window.max(1 << 10).leading_zeros() - 10) as u8);
        v.extend_from_slice(&(ZSTD_CFGS_SIZE as u16).to_le_bytes());
        v.extend_from_slice(c.bytes());
    }
    v
}
