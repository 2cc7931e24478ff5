//! LZ4 through the liblz4 that lz4-sys bundles. lz4-sys exports the destSize and partial
//! decoding entry points but does not declare them, so they are declared here.

use super::Algorithm;
use std::os::raw::{c_char, c_int, c_void};

// Linking: the symbols come from the liblz4 that lz4-sys builds; naming one of its items
// keeps the crate (and its static library) in the link.
extern crate lz4_sys;

extern "C" {
    fn LZ4_compress_destSize(
        src: *const c_char,
        dst: *mut c_char,
        src_size_ptr: *mut c_int,
        target_dst_size: c_int,
    ) -> c_int;
    fn LZ4_sizeofStateHC() -> c_int;
    fn LZ4_initStreamHC(state: *mut c_void, size: usize) -> *mut c_void;
    fn LZ4_resetStreamHC_fast(state: *mut c_void, level: c_int);
    fn LZ4_compress_HC_continue_destSize(
        state: *mut c_void,
        src: *const c_char,
        dst: *mut c_char,
        src_size_ptr: *mut c_int,
        target_dst_size: c_int,
    ) -> c_int;
    fn LZ4_decompress_safe_partial(
        src: *const c_char,
        dst: *mut c_char,
        src_size: c_int,
        target_output_size: c_int,
        dst_capacity: c_int,
    ) -> c_int;
}

/// An LZ4 / LZ4HC compressor with its own state (one per worker thread).
pub(super) struct Lz4 {
    alg: Algorithm,
    /// LZ4HC state, 8-byte aligned (u64 storage).
    hc_state: Vec<u64>,
}

impl Lz4 {
    /// A compressor for `alg` (LZ4 or LZ4HC).
    pub(super) fn new(alg: Algorithm) -> Lz4 {
        let hc_state = match alg {
            Algorithm::Lz4Hc(_) => {
                // SAFETY: a pure function of the library build.
                let size = unsafe { LZ4_sizeofStateHC() } as usize;
                let mut st = vec![0u64; size.div_ceil(8)];
                // SAFETY: `st` holds `size` bytes, 8-byte aligned (LZ4_streamHC_t's
                // alignment); initialising it once lets every later compression start
                // with the cheap LZ4_resetStreamHC_fast.
                let p = unsafe { LZ4_initStreamHC(st.as_mut_ptr().cast(), size) };
                assert!(!p.is_null(), "LZ4_initStreamHC refused the state");
                st
            }
            _ => Vec::new(),
        };
        Lz4 { alg, hc_state }
    }

    /// Compresses a prefix of `src` into exactly at most `dst.len()` bytes, taking as much
    /// input as fits. Returns (input bytes consumed, output bytes), or `None` when LZ4
    /// fails (it does not for valid sizes).
    pub(super) fn compress_dest_size(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<(usize, usize)> {
        let mut src_len: c_int = src.len().min(i32::MAX as usize >> 1) as c_int;
        let dst_len = dst.len().min(i32::MAX as usize) as c_int;
        let out = match self.alg {
            // SAFETY: as below; `hc_state` is an LZ4_streamHC_t initialised in `new`. The
            // fast reset starts an independent stream (no dictionary) without clearing the
            // 256 KiB of tables that LZ4_compress_HC_destSize clears on every call; the
            // output is the same.
            Algorithm::Lz4Hc(level) => unsafe {
                let st = self.hc_state.as_mut_ptr().cast();
                LZ4_resetStreamHC_fast(st, level);
                LZ4_compress_HC_continue_destSize(
                    st,
                    src.as_ptr().cast(),
                    dst.as_mut_ptr().cast(),
                    &mut src_len,
                    dst_len,
                )
            },
            // SAFETY: src/dst are valid for the lengths passed; LZ4 reads at most
            // `src_len` bytes and writes at most `dst_len` bytes, and updates `src_len`.
            _ => unsafe {
                LZ4_compress_destSize(
                    src.as_ptr().cast(),
                    dst.as_mut_ptr().cast(),
                    &mut src_len,
                    dst_len,
                )
            },
        };
        if out <= 0 || src_len < 0 {
            return None;
        }
        Some((src_len as usize, out as usize))
    }
}

/// Decodes an LZ4 block from `src` until `dst` is full (or the input ends). Returns the
/// bytes written, or `None` if the input is malformed.
pub(super) fn decompress_partial(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    if src.len() > i32::MAX as usize || dst.len() > i32::MAX as usize {
        return None;
    }
    // SAFETY: the safe decoder never reads past `src.len()` nor writes past `dst.len()`.
    let n = unsafe {
        LZ4_decompress_safe_partial(
            src.as_ptr().cast(),
            dst.as_mut_ptr().cast(),
            src.len() as c_int,
            dst.len() as c_int,
            dst.len() as c_int,
        )
    };
    (n >= 0).then_some(n as usize)
}

/// Decodes a whole LZ4 block: all of `src` must be one stream that fits in `dst`.
/// Returns the bytes written, or `None` if the input is malformed (or does not end
/// where `src` ends, or needs more room than `dst`).
pub(super) fn decompress_exact(src: &[u8], dst: &mut [u8]) -> Option<usize> {
    if src.len() > i32::MAX as usize || dst.len() > i32::MAX as usize {
        return None;
    }
    // SAFETY: the safe decoder never reads past `src.len()` nor writes past `dst.len()`.
    let n = unsafe {
        lz4_sys::LZ4_decompress_safe(
            src.as_ptr().cast(),
            dst.as_mut_ptr().cast(),
            src.len() as c_int,
            dst.len() as c_int,
        )
    };
    (n >= 0).then_some(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_and_roundtrips() {
        let text: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("line {} of {}\n", i % 977, i % 13).into_bytes())
            .collect();
        for alg in [Algorithm::Lz4, Algorithm::Lz4Hc(9)] {
            let mut c = Lz4::new(alg);
            let mut dst = vec![0u8; 4096];
            let (used, out) = c.compress_dest_size(&text, &mut dst).unwrap();
            assert!(out <= 4096 && out > 4000, "{out}");
            assert!(used > 4096);
            let mut back = vec![0u8; used];
            assert_eq!(decompress_partial(&dst[..out], &mut back), Some(used));
            assert_eq!(&back[..], &text[..used]);
            // A prefix decodes too.
            let mut pre = vec![0u8; 1000];
            assert_eq!(decompress_partial(&dst[..out], &mut pre), Some(1000));
            assert_eq!(&pre[..], &text[..1000]);
        }
        assert_eq!(
            decompress_partial(&[0xff, 0xff, 0xff], &mut [0u8; 10]),
            None
        );
    }
}
