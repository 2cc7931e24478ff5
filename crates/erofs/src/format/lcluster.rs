//! Logical cluster (lcluster) indexes of compressed files: one entry per logical block,
//! either full (8 bytes each, `COMPRESSED_FULL`) or compact (packs of 2 entries in 8 bytes
//! or 16 entries in 32 bytes, each pack ending with a le32 block address base,
//! `COMPRESSED_COMPACT`).

/// Lcluster types.
pub mod ty {
    /// Head of an uncompressed (plain) pcluster.
    pub const PLAIN: u8 = 0;
    /// Head of a pcluster compressed with algorithm HEAD1.
    pub const HEAD1: u8 = 1;
    /// Not a head: `delta[0]` back to the head, `delta[1]` on to the next head.
    pub const NONHEAD: u8 = 2;
    /// Head of a pcluster compressed with algorithm HEAD2.
    pub const HEAD2: u8 = 3;
}

/// In the first NONHEAD after a head, `delta[0]` with this bit holds the pcluster's block
/// count instead of a distance (big pclusters).
pub const D0_CBLKCNT: u16 = 1 << 11;
/// `di_advise` bit of a pcluster shared with an earlier extent (dedupe: partial ref).
pub const PARTIAL_REF: u16 = 1 << 15;

usfs_fs::layout! {
    /// `struct z_erofs_lcluster_index` (full index, 8 bytes).
    pub struct FullIndex[8] {
        /// Bits 0..1: lcluster type ([`ty`]).
        di_advise / set_di_advise: u16 @ 0,
        /// Head: where the extent starts in this lcluster; nonhead: unused.
        di_clusterofs / set_di_clusterofs: u16 @ 2,
        /// Head: the pcluster's first block.
        di_blkaddr / set_di_blkaddr: u32 @ 4,
        /// Nonhead: distance back to the head lcluster (or block count with `D0_CBLKCNT`).
        di_delta0 / set_di_delta0: u16 @ 4,
        /// Nonhead: distance on to the next head lcluster.
        di_delta1 / set_di_delta1: u16 @ 6,
    }
}

/// Position of the full index of lcluster `lcn`, from the map header position: the map
/// header, 8 bytes of padding, then one index per lcluster.
pub fn full_index_pos(map_header_pos: u64, lcn: u64) -> u64 {
    map_header_pos + 16 + lcn * 8
}

/// The layout of compact indexes of one inode: where each lcluster's entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompactLayout {
    /// First byte of the indexes (map header + 8).
    pub ebase: u64,
    /// 4-byte entries before the 2-byte packs (to reach 32-byte alignment).
    pub initial_4b: u64,
    /// Entries in 2-byte packs (a multiple of 16).
    pub count_2b: u64,
    /// All lclusters.
    pub total: u64,
}

impl CompactLayout {
    /// The layout for `total` lclusters with indexes starting at `ebase`.
    pub fn new(ebase: u64, total: u64, compacted_2b: bool) -> CompactLayout {
        let initial_4b = ((32 - ebase % 32) / 4) & 7;
        let count_2b = if compacted_2b && initial_4b < total {
            (total - initial_4b) / 16 * 16
        } else {
            0
        };
        CompactLayout {
            ebase,
            initial_4b,
            count_2b,
            total,
        }
    }

    /// (entry position, entry bytes 4 or 2) of lcluster `lcn`.
    pub fn entry(&self, lcn: u64) -> (u64, u64) {
        let mut pos = self.ebase;
        let mut l = lcn;
        if l < self.initial_4b {
            return (pos + l * 4, 4);
        }
        pos += self.initial_4b * 4;
        l -= self.initial_4b;
        if l < self.count_2b {
            return (pos + l * 2, 2);
        }
        pos += self.count_2b * 2;
        l -= self.count_2b;
        (pos + l * 4, 4)
    }

    /// The byte just past the pack holding the entry of the last lcluster.
    pub fn end(&self) -> u64 {
        if self.total == 0 {
            return self.ebase;
        }
        let (pos, unit) = self.entry(self.total - 1);
        let pack = if unit == 4 { 8 } else { 32 };
        pos - pos % pack + pack
    }
}

/// Entries per pack for an entry size.
pub fn pack_entries(unit: u64) -> usize {
    if unit == 4 {
        2
    } else {
        16
    }
}

/// Bits per entry in a pack (the rest of the pack is the le32 base block address).
pub fn encode_bits(unit: u64) -> usize {
    let n = pack_entries(unit);
    ((n * unit as usize) - 4) * 8 / n
}

/// Bits of the value part of a compact entry (for 4 KiB lclusters: 12).
pub const LO_BITS: usize = 12;

/// Decodes entry `i` of a pack: (type, value).
pub fn decode_compact(pack: &[u8], unit: u64, i: usize) -> (u8, u16) {
    let bit = encode_bits(unit) * i;
    let b = bit / 8;
    let mut v = 0u32;
    for k in 0..3 {
        v |= u32::from(pack.get(b + k).copied().unwrap_or(0)) << (8 * k);
    }
    let v = v >> (bit % 8);
    ((v >> LO_BITS & 3) as u8, (v & ((1 << LO_BITS) - 1)) as u16)
}

/// Encodes entry `i` of a pack.
pub fn encode_compact(pack: &mut [u8], unit: u64, i: usize, ty: u8, value: u16) {
    let bit = encode_bits(unit) * i;
    let v = ((u32::from(ty) << LO_BITS) | u32::from(value & 0xfff)) << (bit % 8);
    let b = bit / 8;
    for k in 0..3 {
        if let Some(byte) = pack.get_mut(b + k) {
            *byte |= (v >> (8 * k)) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_roundtrip() {
        for unit in [2u64, 4] {
            let n = pack_entries(unit);
            let mut pack = vec![0u8; n * unit as usize];
            for i in 0..n {
                encode_compact(&mut pack, unit, i, (i % 4) as u8, (i * 257 % 4096) as u16);
            }
            for i in 0..n {
                assert_eq!(
                    decode_compact(&pack, unit, i),
                    ((i % 4) as u8, (i * 257 % 4096) as u16)
                );
            }
            assert!(pack[pack.len() - 4..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn layout_positions() {
        // ebase 8 mod 32 -> 6 initial 4-byte entries.
        let l = CompactLayout::new(72, 100, true);
        assert_eq!(l.initial_4b, 6);
        assert_eq!(l.count_2b, 80);
        assert_eq!(l.entry(6), (72 + 24, 2));
        assert_eq!((72 + 24) % 32, 0);
        assert_eq!(l.entry(86), (72 + 24 + 160, 4));
    }
}
