//! Fixed-size output compression: fill a physical cluster of exactly `dst.len()` bytes from
//! as much input as fits (LZ4_compress_destSize / LZ4_compress_HC_destSize), and the LZ4
//! decoder the reader uses.

mod lz4;

pub use lz4::{decompress_exact, decompress_partial, Compressor};

/// Which compressor to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// LZ4 (fast).
    Lz4,
    /// LZ4HC at a level 1..=12.
    Lz4Hc(i32),
}

/// LZ4HC's default level (LZ4HC_CLEVEL_DEFAULT, what mkfs.erofs uses).
pub const LZ4HC_DEFAULT_LEVEL: i32 = 9;
/// LZ4's largest match distance.
pub const LZ4_MAX_DISTANCE: u16 = 65535;
