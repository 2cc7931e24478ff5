//! Raw DEFLATE: libdeflate (through libdeflater) encodes and decodes whole streams;
//! miniz_oxide decodes a prefix (libdeflate cannot stop early). libdeflate has no
//! fixed-size output mode, so the input that fills a pcluster is searched for
//! (`search.rs`), starting from the last pcluster's input (or 4x the output).

use libdeflater::{CompressionLvl, Compressor, DecompressionError, Decompressor};
use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;
use std::cell::RefCell;

/// A DEFLATE encoder with its search state.
pub(super) struct Encoder {
    c: Compressor,
    level: i32,
    /// Scratch output, room for the worst case, so a try that does not fit still says
    /// how large it is.
    buf: Vec<u8>,
    /// Input taken by the previous pcluster: the first guess for the next one.
    last: usize,
}

impl Encoder {
    /// An encoder at libdeflate `level` (0..=12).
    pub(super) fn new(level: i32) -> Encoder {
        let lvl = CompressionLvl::new(level.clamp(0, 12)).unwrap_or_default();
        Encoder {
            c: Compressor::new(lvl),
            level,
            buf: Vec::new(),
            last: 0,
        }
    }

    /// Compresses the longest prefix of `src` it finds that fits `dst`: (input taken,
    /// output bytes).
    pub(super) fn compress_dest_size(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<(usize, usize)> {
        let dsize = dst.len();
        let guess = if self.last > 0 { self.last } else { dsize * 4 };
        // Stop when the output is this close to full (erofs-utils' margin per level).
        let close = (22 - 2 * self.level.clamp(0, 9)) as usize;
        let (c, buf) = (&mut self.c, &mut self.buf);
        let (l, n) = super::search::fill(src.len(), dsize, guess, close, |m| {
            let need = c.deflate_compress_bound(m);
            if buf.len() < need {
                buf.resize(need, 0);
            }
            let n = c.deflate_compress(&src[..m], buf).ok()?;
            if n <= dsize {
                dst[..n].copy_from_slice(&buf[..n]);
            }
            Some(n)
        })?;
        // A stream that starts with a non-final stored block starts with a zero byte,
        // which a reader would take for padding: set an unused bit of that byte instead
        // (still valid DEFLATE; what erofs-utils does).
        if dst[0] == 0 {
            dst[0] = 1 << 3;
        }
        self.last = l;
        Some((l, n))
    }
}

thread_local! {
    /// Per-thread decoders.
    static DECODERS: RefCell<(Decompressor, Box<DecompressorOxide>)> =
        RefCell::new((Decompressor::new(), Box::default()));
}

/// Decodes the raw DEFLATE stream `src` until `dst` is full or the stream ends.
pub(super) fn decompress_partial(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    DECODERS.with(|d| {
        let mut d = d.borrow_mut();
        // The whole stream fits: libdeflate (fast).
        match d.0.deflate_decompress(src, dst) {
            Ok(n) => return Some(n),
            Err(DecompressionError::BadData) => return None,
            Err(DecompressionError::InsufficientSpace) => {}
        }
        // The stream is longer than wanted: decode a prefix.
        let z = &mut d.1;
        z.init();
        let flags = inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
        let (status, _, out) = decompress(z, src, dst, 0, flags);
        match status {
            TINFLStatus::Done | TINFLStatus::HasMoreOutput => Some(out),
            _ => None,
        }
    })
}

/// Decodes the whole raw DEFLATE stream `src`, which must give exactly `dst.len()` bytes.
pub(super) fn decompress_exact(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    DECODERS.with(|d| match d.borrow_mut().0.deflate_decompress(src, dst) {
        Ok(n) if n == dst.len() => Some(n),
        _ => None,
    })
}
