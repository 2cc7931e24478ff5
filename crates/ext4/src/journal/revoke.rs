//! Revoke blocks: file-system blocks that earlier transactions logged and that must not
//! be replayed from any transaction up to this one (the block was freed, and may hold
//! data now). A header, `r_count` (bytes used, header included), then 32-bit records, or
//! 64-bit ones with journal 64bit; csum v2/v3 adds the tail checksum.

use super::{blocktype, descriptor, feature, put_header, JournalInfo};

usfs_fs::layout! {
    /// The header of a revoke block (jbd2_journal_revoke_header_t).
    pub struct RevokeHeader[16] {
        /// Magic, 0xC03B3998.
        h_magic / set_h_magic: be32 @ 0x0,
        /// Block type: 5.
        h_blocktype / set_h_blocktype: be32 @ 0x4,
        /// Transaction id.
        h_sequence / set_h_sequence: be32 @ 0x8,
        /// Bytes of the block in use, the 16-byte header included.
        r_count / set_r_count: be32 @ 0xC,
    }
}

/// Bytes of one revoke record.
pub fn record_len(j: &JournalInfo) -> usize {
    if j.has_incompat(feature::BIT64) {
        8
    } else {
        4
    }
}

/// The records of revoke block `buf`, or `None` when `r_count` is larger than the block
/// (less its tail) allows (jbd2's -EINVAL, which fails the recovery).
pub fn records(j: &JournalInfo, buf: &[u8]) -> Option<Vec<u64>> {
    let rcount = RevokeHeader::new(buf).expect("a block").r_count() as usize;
    if rcount > buf.len() - j.tail_bytes() {
        return None;
    }
    let rl = record_len(j);
    let mut out = Vec::new();
    let mut off = 16;
    while off + rl <= rcount {
        let r = &buf[off..off + rl];
        out.push(if rl == 4 {
            u32::from_be_bytes(r.try_into().expect("4 bytes")) as u64
        } else {
            u64::from_be_bytes(r.try_into().expect("8 bytes"))
        });
        off += rl;
    }
    Some(out)
}

/// Records that fit in one revoke block.
pub fn per_block(j: &JournalInfo) -> usize {
    (j.block_size as usize - 16 - j.tail_bytes()) / record_len(j)
}

/// Builds a revoke block of `tid` holding `blocks` (at most [`per_block`]).
pub fn build(j: &JournalInfo, tid: u32, blocks: &[u64]) -> Vec<u8> {
    let mut buf = vec![0u8; j.block_size as usize];
    put_header(&mut buf, blocktype::REVOKE, tid);
    let rl = record_len(j);
    let mut off = 16;
    for &b in blocks {
        if rl == 4 {
            buf[off..off + 4].copy_from_slice(&(b as u32).to_be_bytes());
        } else {
            buf[off..off + 8].copy_from_slice(&b.to_be_bytes());
        }
        off += rl;
    }
    RevokeHeader::new(&mut buf[..])
        .expect("a block")
        .set_r_count(off as u32);
    descriptor::set_tail(j, &mut buf);
    buf
}
