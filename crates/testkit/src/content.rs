//! File contents: deterministic byte streams of several kinds, so images see random
//! (incompressible), text-like and repetitive (compressible) and all-zero data.

use std::io::{self, Write};

use crate::rng::Rng;

/// What a generated file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    /// Random bytes (incompressible).
    Random,
    /// Words, spaces and newlines (compresses well).
    Text,
    /// A short random pattern repeated.
    Pattern,
    /// All zero bytes written out (tools may turn them into holes).
    Zeros,
    /// 4 KiB blocks that are either random or all zero.
    Mixed,
}

impl Content {
    /// Every kind, in a fixed order.
    pub const ALL: [Content; 5] = [
        Content::Random,
        Content::Text,
        Content::Pattern,
        Content::Zeros,
        Content::Mixed,
    ];

    /// A kind chosen by `rng`, mostly random or text.
    pub fn pick(rng: &mut Rng) -> Content {
        match rng.below(10) {
            0..=3 => Content::Random,
            4..=6 => Content::Text,
            7 => Content::Pattern,
            8 => Content::Zeros,
            _ => Content::Mixed,
        }
    }
}

const WORDS: &[&str] = &[
    "the",
    "extent",
    "inode",
    "block",
    "group",
    "journal",
    "erofs",
    "ext4",
    "tree",
    "leaf",
    "superblock",
    "bitmap",
    "directory",
    "hash",
    "sparse",
    "hole",
    "xattr",
    "link",
    "data",
    "checksum",
    "metadata",
    "lz4",
    "cluster",
    "page",
    "zero",
    "file",
    "system",
    "user",
    "space",
];

const CHUNK: usize = 64 * 1024;

/// Writes `len` bytes of kind `kind` to `out`, determined by `rng`. Returns `len`.
pub(crate) fn write(
    out: &mut impl Write,
    kind: Content,
    rng: &mut Rng,
    len: u64,
) -> io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut pattern = vec![0u8; rng.range(1, 64) as usize];
    rng.fill(&mut pattern);
    let mut pat_pos = 0usize;
    let mut left = len;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        let b = &mut buf[..n];
        match kind {
            Content::Random => rng.fill(b),
            Content::Zeros => b.fill(0),
            Content::Pattern => {
                for x in b.iter_mut() {
                    *x = pattern[pat_pos];
                    pat_pos = (pat_pos + 1) % pattern.len();
                }
            }
            Content::Text => fill_text(rng, b),
            Content::Mixed => {
                for block in b.chunks_mut(4096) {
                    if rng.chance(1, 2) {
                        rng.fill(block);
                    } else {
                        block.fill(0);
                    }
                }
            }
        }
        out.write_all(b)?;
        left -= n as u64;
    }
    Ok(len)
}

fn fill_text(rng: &mut Rng, b: &mut [u8]) {
    let mut i = 0;
    while i < b.len() {
        let w = WORDS[rng.index(WORDS.len())].as_bytes();
        let sep: &[u8] = if rng.chance(1, 12) { b".\n" } else { b" " };
        for &c in w.iter().chain(sep) {
            if i == b.len() {
                return;
            }
            b[i] = c;
            i += 1;
        }
    }
}

/// `len` random bytes.
pub(crate) fn random_bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_exact_and_deterministic() {
        for kind in Content::ALL {
            for len in [0u64, 1, 4095, 4097, 70_000] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                write(&mut a, kind, &mut Rng::new(9), len).unwrap();
                write(&mut b, kind, &mut Rng::new(9), len).unwrap();
                assert_eq!(a.len() as u64, len);
                assert_eq!(a, b);
            }
        }
    }
}
