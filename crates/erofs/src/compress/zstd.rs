//! Zstandard frames through libzstd (zstd-safe). libzstd has no fixed-size output mode,
//! so the input that fills a pcluster is searched for (`search.rs`), starting from the
//! last pcluster's input (or 4x the output).
//! Decoding streams into the caller's buffer and stops when it is full.

use std::cell::RefCell;
use zstd_safe::{CCtx, CParameter, DCtx, DParameter, InBuffer, OutBuffer};

/// A Zstandard encoder with its context.
pub(super) struct Encoder {
    c: CCtx<'static>,
    /// Scratch output, room for the worst case (see `search.rs`).
    buf: Vec<u8>,
    /// Input taken by the previous pcluster: the first guess for the next one.
    last: usize,
}

impl Encoder {
    /// An encoder at `level` with a `dict`-byte window (a power of two).
    pub(super) fn new(level: i32, dict: u32) -> Encoder {
        let mut c = CCtx::create();
        let _ = c.set_parameter(CParameter::CompressionLevel(level));
        let _ = c.set_parameter(CParameter::WindowLog(31 - dict.leading_zeros()));
        Encoder {
            c,
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
        let close = (dsize / 512).max(1);
        let (c, buf) = (&mut self.c, &mut self.buf);
        let (l, n) = super::search::fill(src.len(), dsize, guess, close, |m| {
            let need = zstd_safe::compress_bound(m);
            if buf.len() < need {
                buf.resize(need, 0);
            }
            let n = c.compress2(&mut buf[..], &src[..m]).ok()?;
            if n <= dsize {
                dst[..n].copy_from_slice(&buf[..n]);
            }
            Some(n)
        })?;
        self.last = l;
        Some((l, n))
    }
}

thread_local! {
    /// Per-thread decoder context.
    static DECODER: RefCell<DCtx<'static>> = RefCell::new(DCtx::create());
}

/// Decodes the Zstandard frame `src` into `dst` until `dst` is full; `exact`: the frame
/// must end there, and with the input.
pub(super) fn decompress(
    src: &[u8],
    dst: &mut [u8],
    window_log: u32,
    exact: bool,
) -> Option<usize> {
    DECODER.with(|d| {
        let mut d = d.borrow_mut();
        d.reset(zstd_safe::ResetDirective::SessionOnly).ok()?;
        d.set_parameter(DParameter::WindowLogMax(window_log.clamp(10, 31)))
            .ok()?;
        let mut input = InBuffer::around(src);
        let mut output = OutBuffer::around(dst);
        loop {
            let before = (input.pos, output.pos());
            let r = d.decompress_stream(&mut output, &mut input).ok()?;
            let full = output.pos() == output.capacity();
            if r == 0 {
                // The frame ended.
                let ok = full && (!exact || input.pos == src.len());
                return ok.then_some(output.pos());
            }
            if full && !exact {
                // More to come than wanted: fine for a prefix.
                return Some(output.pos());
            }
            if (input.pos, output.pos()) == before {
                // No progress: input exhausted, or (exact) more output than room.
                return None;
            }
        }
    })
}
