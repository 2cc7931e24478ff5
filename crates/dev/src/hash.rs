//! Maps keyed by block number: a multiplicative hash of the number (Fibonacci hashing)
//! instead of SipHash, which costs more than the map operation itself on hot paths (the
//! overlay's lookups, a transaction's undo records).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hash map from block numbers.
pub type BlockMap<V> = HashMap<u64, V, BuildHasherDefault<BlockHasher>>;

/// Hashes one u64 by multiplying it with 2^64 / phi (the high bits spread every input
/// bit); other input is folded in eight bytes at a time.
#[derive(Default, Clone, Copy)]
pub struct BlockHasher(u64);

impl Hasher for BlockHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        // hashbrown takes its control bits from the top and its index from the bottom:
        // fold the well-mixed high half down.
        self.0 ^ (self.0 >> 32)
    }
}

#[cfg(test)]
mod tests {
    use super::BlockMap;

    #[test]
    fn neighbouring_blocks_spread() {
        let mut m: BlockMap<u64> = BlockMap::default();
        for b in 0..100_000u64 {
            m.insert(b * 4096, b);
        }
        assert!((0..100_000u64).all(|b| m[&(b * 4096)] == b));
    }
}
