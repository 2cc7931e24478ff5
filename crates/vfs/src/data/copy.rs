//! Copying file bytes out of a mapping into the caller's buffer.
//!
//! In steps of at most [`STEP`] bytes: glibc's memmove copies with `rep movsb` only below
//! a size threshold (on AMD CPUs the L2 cache size, 1 MiB here) and with a vector loop
//! above it, which is slower from a huge-page mapping. Measured on this machine (AMD
//! EPYC, glibc 2.36), 1 MiB reads of a warm 256 MiB file mapped with 2 MiB pages: one
//! memcpy per read 17-23 GB/s, 64 KiB steps 25-28 GB/s (pread from the file 24-27; the
//! kernel mount about 21). A copy of at most [`STEP`] bytes is one plain memcpy, except
//! copies of [`VEC_MIN`]..=[`PREFETCH_MAX`] bytes, which use our own vector loop.

/// Largest single memcpy.
pub(crate) const STEP: usize = 64 << 10;

/// Copies up to this size first ask for every cache line of the source at once
/// (prefetch), so the memory system fetches them in parallel instead of as the copy
/// reaches them: a small read of data not in the CPU caches is mostly waiting for
/// memory. A small gain, measured with `usfs run` random preads of a 256 MiB file in
/// an ext4 image, 1 thread, builds with and without it alternating: 4 KiB 6.9-8.3 vs
/// 6.6-7.9 GB/s, 1 KiB 2.7-3.1 vs 2.3-3.1 GB/s (the copy itself, waiting for memory,
/// is most of the time). Past 8 KiB the hardware prefetcher does as well (16 KiB was
/// slower with it in a C test).
const PREFETCH_MAX: usize = 8 << 10;

/// Copies of this size up to [`PREFETCH_MAX`] use a 32-byte vector loop (AVX2, when the
/// CPU has it) instead of glibc's memcpy. Behind the preload library's pread, glibc's
/// copy of these sizes ran at about half the speed it reaches in a plain C loop over the
/// same mapping (sequential 4 KiB preads of a 256 MiB file in an ext4 image: 14-16 GB/s
/// against 25-27 for the C loop and for a C LD_PRELOAD shim doing the same copy; the
/// profile put 98% of it on glibc's `rep movsb`); the vector loop reaches 23-24 GB/s
/// there (2 KiB 17 -> 23, 8 KiB 17 -> 28-29 GB/s), and random reads of these sizes are
/// unchanged (they wait for memory either way). Below 2 KiB glibc's copy (vector
/// registers, no `rep movsb`) was faster for random reads (1 KiB: 5.5 vs 4.6 GB/s).
const VEC_MIN: usize = 2 << 10;

/// Copies `src` into `dst` (of the same length).
#[inline]
pub(crate) fn copy(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if src.len() <= PREFETCH_MAX {
        for off in (0..src.len()).step_by(64) {
            // SAFETY: prefetch is a hint; the address is inside src.
            unsafe {
                std::arch::x86_64::_mm_prefetch(
                    src.as_ptr().add(off) as *const i8,
                    std::arch::x86_64::_MM_HINT_T0,
                )
            };
        }
    }
    #[cfg(target_arch = "x86_64")]
    if (VEC_MIN..=PREFETCH_MAX).contains(&src.len()) && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked above).
        unsafe { copy_avx2(dst, src) };
        return;
    }
    if src.len() <= STEP {
        dst.copy_from_slice(src);
        return;
    }
    for (d, s) in dst.chunks_mut(STEP).zip(src.chunks(STEP)) {
        d.copy_from_slice(s);
    }
}

/// Copies `src` into `dst` (of the same length) 128 bytes per round: four 32-byte loads,
/// then four stores; the tail (under 128 bytes) by memcpy.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn copy_avx2(dst: &mut [u8], src: &[u8]) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    let n = src.len().min(dst.len());
    let (s, d) = (src.as_ptr(), dst.as_mut_ptr());
    let mut i = 0;
    while i + 128 <= n {
        // SAFETY: `i + 128 <= n`, so every 32-byte access lies inside both slices
        // (unaligned loads and stores).
        unsafe {
            let a = _mm256_loadu_si256(s.add(i) as *const __m256i);
            let b = _mm256_loadu_si256(s.add(i + 32) as *const __m256i);
            let c = _mm256_loadu_si256(s.add(i + 64) as *const __m256i);
            let e = _mm256_loadu_si256(s.add(i + 96) as *const __m256i);
            _mm256_storeu_si256(d.add(i) as *mut __m256i, a);
            _mm256_storeu_si256(d.add(i + 32) as *mut __m256i, b);
            _mm256_storeu_si256(d.add(i + 64) as *mut __m256i, c);
            _mm256_storeu_si256(d.add(i + 96) as *mut __m256i, e);
        }
        i += 128;
    }
    dst[i..n].copy_from_slice(&src[i..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_byte_at_any_length() {
        let src: Vec<u8> = (0..3 * STEP + 17 + 64)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        for len in [
            0,
            1,
            VEC_MIN - 1,
            VEC_MIN,
            VEC_MIN + 1,
            4096,
            4096 + 127,
            PREFETCH_MAX,
            PREFETCH_MAX + 1,
            STEP - 1,
            STEP,
            STEP + 1,
            2 * STEP,
            3 * STEP + 17,
        ] {
            // Source and destination at assorted alignments.
            for (from, at) in [(0, 0), (1, 0), (33, 5), (64, 31)] {
                let mut dst = vec![0u8; len + at + 1];
                copy(&mut dst[at..at + len], &src[from..from + len]);
                assert_eq!(&dst[at..at + len], &src[from..from + len], "len {len}");
                assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0));
            }
        }
    }
}
