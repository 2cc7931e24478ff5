//! Descriptor blocks: a header, then one tag per logged block (the copies follow the
//! descriptor in the log, in tag order), then with csum v2/v3 a 4-byte tail checksum.
//!
//! A tag's size depends on the journal's features ([`JournalInfo::tag_bytes`]): tag3
//! (csum v3, 16 bytes) or the older tag (8 bytes; 12 with 64bit; +2 with csum v2). A tag
//! without SAME_UUID is followed by a 16-byte UUID; LAST_TAG ends the list.

use super::{blocktype, feature, put_header, JournalInfo};
use crate::format::checksum::crc32c_raw;

/// Tag flags.
pub mod flag {
    /// The logged copy had the jbd2 magic at offset 0, stored as zero: restore it.
    pub const ESCAPE: u32 = 1;
    /// The block has the same UUID as the previous tag (no UUID follows the tag).
    pub const SAME_UUID: u32 = 2;
    /// The block was deleted by this transaction (unused by replay).
    pub const DELETED: u32 = 4;
    /// The last tag of the descriptor block.
    pub const LAST_TAG: u32 = 8;
}

usfs_fs::layout! {
    /// A csum v3 tag (journal_block_tag3_t), 16 bytes.
    pub struct Tag3[16] {
        /// Low 32 bits of the file-system block.
        t_blocknr / set_t_blocknr: be32 @ 0x0,
        /// Flags ([`flag`]).
        t_flags / set_t_flags: be32 @ 0x4,
        /// High 32 bits of the file-system block (with journal 64bit).
        t_blocknr_high / set_t_blocknr_high: be32 @ 0x8,
        /// crc32c(seed, be32 tid || logged block).
        t_checksum / set_t_checksum: be32 @ 0xC,
    }
}

usfs_fs::layout! {
    /// An older tag (journal_block_tag_t): 8 bytes, +4 with 64bit (`t_blocknr_high`), +2
    /// with csum v2 (jbd2 counts the checksum field twice).
    pub struct Tag[8] {
        /// Low 32 bits of the file-system block.
        t_blocknr / set_t_blocknr: be32 @ 0x0,
        /// csum v2: low 16 bits of crc32c(seed, be32 tid || logged block).
        t_checksum / set_t_checksum: be16 @ 0x4,
        /// Flags ([`flag`]).
        t_flags / set_t_flags: be16 @ 0x6,
    }
}

/// One tag as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagInfo {
    /// File-system block the logged copy belongs to.
    pub block: u64,
    /// Flags ([`flag`]).
    pub flags: u32,
    /// Stored checksum (csum v3: 32 bits; v2: 16 bits; else 0).
    pub checksum: u32,
}

/// The tags of descriptor block `buf`, in order, as jbd2's replay loop walks them: up to
/// LAST_TAG or until the next tag would pass the tail (checksum) area.
pub fn tags(j: &JournalInfo, buf: &[u8]) -> Vec<TagInfo> {
    let tb = j.tag_bytes();
    let end = buf.len() - j.tail_bytes();
    let bit64 = j.has_incompat(feature::BIT64);
    let v3 = j.has_incompat(feature::CSUM_V3);
    let mut out = Vec::new();
    let mut p = 12usize;
    while p + tb <= end {
        // jbd2 copies a whole journal_block_tag_t (12 bytes) even when tags are smaller.
        let mut t = [0u8; 16];
        let n = (buf.len() - p).min(16);
        t[..n].copy_from_slice(&buf[p..p + n]);
        let (lo, flags, hi, csum) = if v3 {
            let t = Tag3::new(&t[..]).expect("16 bytes");
            (
                t.t_blocknr(),
                t.t_flags(),
                t.t_blocknr_high(),
                t.t_checksum(),
            )
        } else {
            let tt = Tag::new(&t[..]).expect("16 bytes");
            let hi = u32::from_be_bytes(t[8..12].try_into().expect("4 bytes"));
            (
                tt.t_blocknr(),
                tt.t_flags() as u32,
                hi,
                tt.t_checksum() as u32,
            )
        };
        // The old tag's 16-bit flags are what jbd2 tests, even for tag3 (low half of
        // t_flags, big-endian: the bytes at 6..8).
        let flags = if v3 { flags & 0xFFFF } else { flags };
        let block = if bit64 {
            (hi as u64) << 32 | lo as u64
        } else {
            lo as u64
        };
        out.push(TagInfo {
            block,
            flags,
            checksum: csum,
        });
        p += tb;
        if flags & flag::SAME_UUID == 0 {
            p += 16;
        }
        if flags & flag::LAST_TAG != 0 {
            break;
        }
    }
    out
}

/// The tail checksum of a descriptor or revoke block: crc32c(seed, block with the last
/// 4 bytes zeroed).
pub fn tail_checksum(seed: u32, buf: &[u8]) -> u32 {
    let n = buf.len() - 4;
    crc32c_raw(crc32c_raw(seed, &buf[..n]), &[0; 4])
}

/// Does the tail checksum of descriptor/revoke block `buf` match (true without csum v2/v3)?
pub fn tail_ok(j: &JournalInfo, buf: &[u8]) -> bool {
    match j.csum_seed {
        None => true,
        Some(seed) => {
            let n = buf.len() - 4;
            u32::from_be_bytes(buf[n..].try_into().expect("4 bytes")) == tail_checksum(seed, buf)
        }
    }
}

/// Stores the tail checksum of a descriptor/revoke block (no-op without csum v2/v3).
pub fn set_tail(j: &JournalInfo, buf: &mut [u8]) {
    if let Some(seed) = j.csum_seed {
        let n = buf.len() - 4;
        let c = tail_checksum(seed, buf);
        buf[n..].copy_from_slice(&c.to_be_bytes());
    }
}

/// The tag checksum of a logged copy: crc32c(seed, be32 tid || the block as logged).
pub fn block_checksum(seed: u32, tid: u32, logged: &[u8]) -> u32 {
    crc32c_raw(crc32c_raw(seed, &tid.to_be_bytes()), logged)
}

/// Does tag `t`'s checksum match the logged copy (true without csum v2/v3)?
pub fn tag_ok(j: &JournalInfo, t: &TagInfo, tid: u32, logged: &[u8]) -> bool {
    let Some(seed) = j.csum_seed else {
        return true;
    };
    let c = block_checksum(seed, tid, logged);
    if j.has_incompat(feature::CSUM_V3) {
        t.checksum == c
    } else {
        t.checksum == c & 0xFFFF
    }
}

/// How many tags fit in one descriptor block (the first with its UUID).
pub fn tags_per_block(j: &JournalInfo) -> usize {
    let space = j.block_size as usize - 12 - j.tail_bytes();
    (space - 16) / j.tag_bytes()
}

/// Builds a descriptor block of transaction `tid` for `entries` (file-system block,
/// logged copy as written to the log, escaped flag); at most [`tags_per_block`].
pub fn build(j: &JournalInfo, tid: u32, entries: &[(u64, &[u8], bool)]) -> Vec<u8> {
    let mut buf = vec![0u8; j.block_size as usize];
    put_header(&mut buf, blocktype::DESCRIPTOR, tid);
    let tb = j.tag_bytes();
    let mut p = 12;
    for (i, (blk, logged, escaped)) in entries.iter().enumerate() {
        let mut flags = 0;
        if *escaped {
            flags |= flag::ESCAPE;
        }
        if i > 0 {
            flags |= flag::SAME_UUID;
        }
        if i + 1 == entries.len() {
            flags |= flag::LAST_TAG;
        }
        let csum = j.csum_seed.map_or(0, |s| block_checksum(s, tid, logged));
        let t = &mut buf[p..p + tb];
        t[..4].copy_from_slice(&(*blk as u32).to_be_bytes());
        if j.has_incompat(feature::CSUM_V3) {
            t[4..8].copy_from_slice(&flags.to_be_bytes());
            t[12..16].copy_from_slice(&csum.to_be_bytes());
        } else {
            t[4..6].copy_from_slice(&(csum as u16).to_be_bytes());
            t[6..8].copy_from_slice(&(flags as u16).to_be_bytes());
        }
        if j.has_incompat(feature::BIT64) {
            t[8..12].copy_from_slice(&((*blk >> 32) as u32).to_be_bytes());
        }
        p += tb;
        if i == 0 {
            buf[p..p + 16].copy_from_slice(&j.uuid);
            p += 16;
        }
    }
    set_tail(j, &mut buf);
    buf
}
