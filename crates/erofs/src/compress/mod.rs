//! Fixed-size output compression: fill a physical cluster of at most `dst.len()` bytes from
//! as much input as fits, and the decoders the reader uses. One file per algorithm, each
//! over one well-kept library:
//! - `lz4.rs`: LZ4 / LZ4HC (liblz4: LZ4_compress_destSize, LZ4_compress_HC_destSize);
//! - `lzma.rs`: MicroLZMA (liblzma's lzma_microlzma_encoder fills the output natively);
//! - `deflate.rs`: raw DEFLATE (libdeflate; the input that fills a pcluster found by
//!   `search.rs`; miniz_oxide decodes prefixes);
//! - `zstd.rs`: Zstandard frames (libzstd; the same search).

mod deflate;
mod lz4;
mod lzma;
mod search;
mod zstd;

/// `h_algorithmtype` of LZ4 (and the bit number in `available_compr_algs`).
pub const ALG_LZ4: u8 = 0;
/// `h_algorithmtype` of MicroLZMA.
pub const ALG_LZMA: u8 = 1;
/// `h_algorithmtype` of raw DEFLATE.
pub const ALG_DEFLATE: u8 = 2;
/// `h_algorithmtype` of Zstandard.
pub const ALG_ZSTD: u8 = 3;

/// Which compressor to use, with its level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// LZ4 (fast).
    Lz4,
    /// LZ4HC at a level 1..=12.
    Lz4Hc(i32),
    /// MicroLZMA at a level 0..=9, or 100..=109 for the extreme presets (mkfs.erofs's
    /// numbering).
    Lzma(u32),
    /// Raw DEFLATE at a libdeflate level 0..=12.
    Deflate(i32),
    /// Zstandard at a level 0..=22 (0: libzstd's default, 3).
    Zstd(i32),
}

/// LZ4HC's default level (LZ4HC_CLEVEL_DEFAULT, what mkfs.erofs uses).
pub const LZ4HC_DEFAULT_LEVEL: i32 = 9;
/// LZ4's largest match distance.
pub const LZ4_MAX_DISTANCE: u16 = 65535;
/// LZMA's default level (LZMA_PRESET_DEFAULT, what mkfs.erofs uses).
pub const LZMA_DEFAULT_LEVEL: u32 = 6;
/// The DEFLATE level by default: 1, as mkfs.erofs 1.9.3 (libdeflate level 1 packs tighter
/// than erofs-utils' own encoder at its level 1).
pub const DEFLATE_DEFAULT_LEVEL: i32 = 1;
/// Zstandard's default level (ZSTD_CLEVEL_DEFAULT, what mkfs.erofs uses).
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;
/// The largest LZMA dictionary the kernel accepts (8 x the largest pcluster, 1 MiB).
pub const LZMA_MAX_DICT_SIZE: u32 = 8 << 20;
/// The largest Zstandard window the kernel accepts (the largest pcluster, 1 MiB).
pub const ZSTD_MAX_DICT_SIZE: u32 = 1 << 20;
/// DEFLATE's window: 32 KiB (`windowbits` 15).
pub const DEFLATE_WINDOW_BITS: u8 = 15;

impl Algorithm {
    /// The on-disk algorithm number (`h_algorithmtype`, bit of `available_compr_algs`).
    pub fn id(self) -> u8 {
        match self {
            Algorithm::Lz4 | Algorithm::Lz4Hc(_) => ALG_LZ4,
            Algorithm::Lzma(_) => ALG_LZMA,
            Algorithm::Deflate(_) => ALG_DEFLATE,
            Algorithm::Zstd(_) => ALG_ZSTD,
        }
    }

    /// The dictionary (window) size the encoder uses with pclusters of at most
    /// `pcluster` bytes, as mkfs.erofs 1.9.3 picks it: LZMA 4 x the pcluster (at least
    /// 32 KiB, at most [`LZMA_MAX_DICT_SIZE`]); Zstandard 8 x the pcluster rounded down to a
    /// power of two (at most [`ZSTD_MAX_DICT_SIZE`]); DEFLATE 32 KiB; LZ4 64 KiB.
    pub fn dict_size(self, pcluster: u32) -> u32 {
        match self {
            Algorithm::Lz4 | Algorithm::Lz4Hc(_) => 1 << 16,
            Algorithm::Lzma(_) => (pcluster.saturating_mul(4)).clamp(32 << 10, LZMA_MAX_DICT_SIZE),
            Algorithm::Deflate(_) => 1 << DEFLATE_WINDOW_BITS,
            Algorithm::Zstd(_) => {
                let d = pcluster
                    .saturating_mul(8)
                    .clamp(1 << 10, ZSTD_MAX_DICT_SIZE);
                1 << (31 - d.leading_zeros())
            }
        }
    }

    /// The largest input one pcluster may take: LZ4 takes what fits (it cannot expand
    /// more than ~255 times); the others stop at mkfs.erofs's queue size (4000 KiB) so a
    /// decompressed extent stays well under the kernel's 12 MiB limit.
    pub fn max_input(self) -> usize {
        match self {
            Algorithm::Lz4 | Algorithm::Lz4Hc(_) => i32::MAX as usize >> 1,
            _ => 4000 << 10,
        }
    }
}

/// A compressor with its own state (one per worker thread).
pub struct Compressor {
    alg: Algorithm,
    state: State,
}

enum State {
    Lz4(lz4::Lz4),
    Lzma(lzma::Encoder),
    Deflate(deflate::Encoder),
    Zstd(zstd::Encoder),
}

impl Compressor {
    /// A compressor for `alg`, for pclusters of at most `pcluster` bytes (which sets the
    /// dictionary size, [`Algorithm::dict_size`]).
    pub fn new(alg: Algorithm, pcluster: u32) -> Compressor {
        let dict = alg.dict_size(pcluster);
        let state = match alg {
            Algorithm::Lz4 | Algorithm::Lz4Hc(_) => State::Lz4(lz4::Lz4::new(alg)),
            Algorithm::Lzma(level) => State::Lzma(lzma::Encoder::new(level, dict)),
            Algorithm::Deflate(level) => State::Deflate(deflate::Encoder::new(level)),
            Algorithm::Zstd(level) => State::Zstd(zstd::Encoder::new(level, dict)),
        };
        Compressor { alg, state }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    /// Compresses a prefix of `src` into at most `dst.len()` bytes, taking as much input
    /// as fits (at most [`Algorithm::max_input`]). Returns (input bytes consumed, output
    /// bytes), or `None` when nothing fits (or the library fails).
    pub fn compress_dest_size(&mut self, src: &[u8], dst: &mut [u8]) -> Option<(usize, usize)> {
        let src = &src[..src.len().min(self.alg.max_input())];
        let r = match &mut self.state {
            State::Lz4(c) => c.compress_dest_size(src, dst),
            State::Lzma(c) => c.compress_dest_size(src, dst),
            State::Deflate(c) => c.compress_dest_size(src, dst),
            State::Zstd(c) => c.compress_dest_size(src, dst),
        };
        r.filter(|&(used, n)| used > 0 && n > 0 && n <= dst.len())
    }
}

/// The name of algorithm number `alg` in messages ("LZ4", "MicroLZMA", ...).
pub fn alg_label(alg: u8) -> &'static str {
    match alg {
        ALG_LZ4 => "LZ4",
        ALG_LZMA => "MicroLZMA",
        ALG_DEFLATE => "DEFLATE",
        ALG_ZSTD => "Zstandard",
        _ => "unknown-algorithm",
    }
}

/// What decoding needs from the image's compression configurations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeCfg {
    /// The LZMA dictionary size (`z_erofs_lzma_cfgs.dict_size`).
    pub lzma_dict: u32,
    /// log2 of the largest Zstandard window (`z_erofs_zstd_cfgs.windowlog` + 10).
    pub zstd_window_log: u32,
}

impl Default for DecodeCfg {
    fn default() -> DecodeCfg {
        DecodeCfg {
            lzma_dict: LZMA_MAX_DICT_SIZE,
            zstd_window_log: 20,
        }
    }
}

/// Decodes algorithm `alg`'s stream `src` (zero padding already skipped) until `dst` is
/// full or the stream ends. Returns the bytes written, or `None` if the input is
/// malformed (or the algorithm unknown).
pub fn decompress_partial(alg: u8, cfg: &DecodeCfg, src: &[u8], dst: &mut [u8]) -> Option<usize> {
    match alg {
        ALG_LZ4 => lz4::decompress_partial(src, dst),
        ALG_LZMA => lzma::decompress(src, dst, cfg.lzma_dict, false),
        ALG_DEFLATE => deflate::decompress_partial(src, dst),
        ALG_ZSTD => zstd::decompress(src, dst, cfg.zstd_window_log, false),
        _ => None,
    }
}

/// Decodes algorithm `alg`'s whole stream `src`, which must give exactly `dst.len()`
/// bytes and end where `src` ends (what fsck.erofs checks of a full extent). Returns the
/// bytes written, or `None` if the input is malformed.
pub fn decompress_exact(alg: u8, cfg: &DecodeCfg, src: &[u8], dst: &mut [u8]) -> Option<usize> {
    match alg {
        ALG_LZ4 => lz4::decompress_exact(src, dst),
        ALG_LZMA => lzma::decompress(src, dst, cfg.lzma_dict, true),
        ALG_DEFLATE => deflate::decompress_exact(src, dst),
        ALG_ZSTD => zstd::decompress(src, dst, cfg.zstd_window_log, true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|i| format!("line {} of {}\n", i % 977, i % 13).into_bytes())
            .collect()
    }

    /// Every algorithm fills a 4 KiB and a 64 KiB pcluster, and its output decodes back,
    /// whole and as a prefix; garbage is refused, never a panic.
    #[test]
    fn every_algorithm_fills_and_roundtrips() {
        let text = text();
        let cfg = DecodeCfg::default();
        for alg in [
            Algorithm::Lz4,
            Algorithm::Lz4Hc(9),
            Algorithm::Lzma(6),
            Algorithm::Lzma(109),
            Algorithm::Deflate(1),
            Algorithm::Deflate(6),
            Algorithm::Zstd(3),
            Algorithm::Zstd(19),
        ] {
            for pc in [4096usize, 65536] {
                let mut c = Compressor::new(alg, pc as u32);
                let mut dst = vec![0u8; pc];
                let (used, out) = c.compress_dest_size(&text, &mut dst).unwrap();
                // Full, unless all the input fit.
                assert!(
                    out <= pc && (out > pc - pc / 8 || used == text.len()),
                    "{alg:?} {pc}: {out}"
                );
                assert!(used > pc, "{alg:?}: {used}");
                assert_ne!(
                    dst[0], 0,
                    "{alg:?}: a leading zero would be taken for padding"
                );
                let mut back = vec![0u8; used];
                assert_eq!(
                    decompress_exact(alg.id(), &cfg, &dst[..out], &mut back),
                    Some(used),
                    "{alg:?}"
                );
                assert_eq!(&back[..], &text[..used]);
                let mut pre = vec![0u8; 1000];
                assert_eq!(
                    decompress_partial(alg.id(), &cfg, &dst[..out], &mut pre),
                    Some(1000),
                    "{alg:?}"
                );
                assert_eq!(&pre[..], &text[..1000]);
                // Damage: never a panic; either refused or (rarely) other bytes.
                let mut bad = dst[..out].to_vec();
                for k in (0..bad.len()).step_by(97) {
                    bad[k] ^= 0x5a;
                }
                let mut sink = vec![0u8; used];
                let _ = decompress_exact(alg.id(), &cfg, &bad, &mut sink);
                let _ = decompress_partial(alg.id(), &cfg, &bad, &mut sink);
                let _ = decompress_partial(alg.id(), &cfg, &bad[..bad.len() / 2], &mut sink);
            }
        }
    }

    /// Incompressible input: whatever is reported fits and decodes.
    #[test]
    fn random_input_fits() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let rnd: Vec<u8> = (0..100_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for alg in [
            Algorithm::Lzma(6),
            Algorithm::Deflate(6),
            Algorithm::Zstd(3),
        ] {
            let mut c = Compressor::new(alg, 4096);
            let mut dst = vec![0u8; 4096];
            if let Some((used, out)) = c.compress_dest_size(&rnd, &mut dst) {
                let mut back = vec![0u8; used];
                assert_eq!(
                    decompress_exact(alg.id(), &DecodeCfg::default(), &dst[..out], &mut back),
                    Some(used)
                );
                assert_eq!(&back[..], &rnd[..used]);
            }
        }
    }
}
