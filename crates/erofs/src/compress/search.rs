//! Fixed-size output for codecs without it (DEFLATE, Zstandard): the longest input prefix
//! whose compressed size fits the pcluster, searched for with whole compressions.
//! erofs-utils' libdeflate and libzstd compressors bisect after a failed try (their
//! output buffer is barely larger than the pcluster, so a failure says nothing of the
//! size) and creep up a byte at a time near the end. Here every try is compressed into
//! room for the worst case, so each try, fitting or not, gives its compressed size, and the
//! next guess is the secant through it (compressed size is close to proportional to the
//! input over a short range); the search stops once the output is within `close` bytes of
//! the pcluster or no guess can do better. A few tries per pcluster instead of a dozen.

/// Finds the longest prefix of `src_len` input bytes that `attempt` compresses into at
/// most `dsize` bytes. `attempt(m)` compresses the first `m` bytes and returns the
/// compressed size (keeping the output when it is at most `dsize`), or `None` on a codec
/// error. `guess`: where to start (the previous pcluster's input is a good one). Returns
/// (input taken, output bytes) of the last try that fit, or `None` if none did.
pub(super) fn fill(
    src_len: usize,
    dsize: usize,
    guess: usize,
    close: usize,
    mut attempt: impl FnMut(usize) -> Option<usize>,
) -> Option<(usize, usize)> {
    if src_len == 0 || dsize == 0 {
        return None;
    }
    let (mut l, mut l_out) = (0usize, 0usize);
    let mut r = src_len + 1;
    let mut m = guess.max(1);
    // Enough for any realistic search; each round either fits (l grows) or not (r shrinks).
    for _ in 0..40 {
        m = m.clamp(l + 1, r - 1);
        match attempt(m) {
            Some(n) if n <= dsize => {
                l = m;
                l_out = n;
                if r <= l + 1 || n + close >= dsize {
                    break;
                }
                let est = secant(m, n, dsize);
                if est <= l {
                    // The ratio says no longer prefix fits.
                    break;
                }
                m = est;
            }
            n => {
                r = m;
                if r <= l + 1 {
                    break;
                }
                let est = n.map_or(0, |n| secant(m, n, dsize));
                m = if est > l && est < r { est } else { (l + r) / 2 };
            }
        }
    }
    (l_out > 0).then_some((l, l_out))
}

/// The input that would compress to `dsize` bytes if `m` bytes give `n`.
fn secant(m: usize, n: usize, dsize: usize) -> usize {
    (m as u128 * dsize as u128 / n.max(1) as u128).min(usize::MAX as u128) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model codec: ratio 3 with a 10-byte header; the search lands within `close`.
    #[test]
    fn converges_in_few_tries() {
        let mut tries = 0;
        let r = fill(1 << 20, 4096, 16384, 8, |m| {
            tries += 1;
            Some(m / 3 + 10)
        });
        let (used, n) = r.unwrap();
        assert!(n <= 4096 && n + 8 >= 4096, "{n}");
        assert_eq!(used / 3 + 10, n);
        assert!(tries <= 4, "{tries} tries");
        // Incompressible: output = input + 9.
        let r = fill(1 << 20, 4096, 16384, 8, |m| Some(m + 9)).unwrap();
        assert!(r.1 <= 4096 && r.1 + 8 >= 4096, "{r:?}");
        // All the input fits.
        assert_eq!(
            fill(100, 4096, 16384, 8, |m| Some(m / 2 + 1)),
            Some((100, 51))
        );
        // Nothing fits; a codec error bisects.
        assert_eq!(fill(100, 4, 50, 1, |m| Some(m + 9)), None);
        assert_eq!(fill(100, 4096, 50, 1, |_| None), None);
    }
}
