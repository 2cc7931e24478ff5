//! Which blocks of a file hold data: all-zero blocks become holes (as mke2fs -d makes
//! them), and a sparse file's data ranges (SEEK_DATA) become block runs.

use crate::entry::Runs;

/// Largest block size: the zero pattern blocks are compared with.
static ZEROS: [u8; 65536] = [0; 65536];

/// Block ranges `(lblk, count)` covering byte ranges `(start, end)`.
pub(crate) fn block_ranges(ranges: &[(u64, u64)], bs: u64) -> Runs {
    let mut out = Runs::new();
    for &(s, e) in ranges {
        if e <= s {
            continue;
        }
        let (a, b) = (s / bs, e.div_ceil(bs));
        push_run(&mut out, a, b - a);
    }
    out
}

/// Appends blocks `[a, a+n)` to sorted runs, joining a run it touches or overlaps.
fn push_run(out: &mut Runs, a: u64, n: u64) {
    match out.last_mut() {
        Some(r) if r.0 + r.1 >= a => r.1 = r.1.max(a + n - r.0),
        _ => out.push((a, n)),
    }
}

/// Adds to `out` the blocks of `data` (the file's bytes from block `first`) that are not
/// all zeros; the last block may be short (the end of the file).
pub(crate) fn nonzero_blocks(data: &[u8], first: u64, bs: usize, out: &mut Runs) {
    for (i, b) in data.chunks(bs).enumerate() {
        if b != &ZEROS[..b.len()] {
            push_run(out, first + i as u64, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_blocks_are_left_out() {
        let mut data = vec![0u8; 4096 * 5 + 100];
        data[4096] = 1; // block 1
        data[4096 * 3 + 4095] = 2; // block 3
        let mut out = Runs::new();
        nonzero_blocks(&data, 10, 4096, &mut out);
        assert_eq!(out[..], [(11, 1), (13, 1)]);
        data[4096 * 5 + 99] = 3; // the short last block
        data[4096 * 2] = 4;
        let mut out = Runs::new();
        nonzero_blocks(&data, 0, 4096, &mut out);
        assert_eq!(out[..], [(1, 3), (5, 1)]);
    }

    #[test]
    fn ranges_join() {
        assert_eq!(
            block_ranges(&[(0, 10), (4000, 5000), (9000, 9001)], 4096)[..],
            [(0, 3)]
        );
        assert_eq!(
            block_ranges(&[(0, 1), (8192, 8193)], 4096)[..],
            [(0, 1), (2, 1)]
        );
    }
}
