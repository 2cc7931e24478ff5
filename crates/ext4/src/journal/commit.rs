//! Commit blocks: the last block of a transaction. Without one the transaction never
//! happened. Checksums: csum v1 (compat `journal_checksum`) stores a crc32_be of the
//! transaction's descriptor and logged blocks; csum v2/v3 a crc32c of the commit block
//! itself.

use super::{blocktype, put_header, JournalInfo};
use crate::format::checksum::crc32c_raw;

/// `h_chksum_type` of a csum v1 commit block (crc32).
pub const CHKSUM_CRC32: u8 = 1;
/// `h_chksum_size` of a csum v1 commit block.
pub const CHKSUM_CRC32_SIZE: u8 = 4;

usfs_fs::layout! {
    /// A commit block (struct commit_header), at the start of the block; the rest is 0.
    pub struct CommitHeader[0x3C] {
        /// Magic, 0xC03B3998.
        h_magic / set_h_magic: be32 @ 0x0,
        /// Block type: 2.
        h_blocktype / set_h_blocktype: be32 @ 0x4,
        /// Transaction id.
        h_sequence / set_h_sequence: be32 @ 0x8,
        /// csum v1: 1 (crc32); else 0.
        h_chksum_type / set_h_chksum_type: u8 @ 0xC,
        /// csum v1: 4; else 0.
        h_chksum_size / set_h_chksum_size: u8 @ 0xD,
        /// Padding.
        h_padding / set_h_padding: [2] @ 0xE,
        /// Checksum (first of 8 words): csum v1 crc32_be of the transaction; csum v2/v3
        /// crc32c(seed, commit block with this word zeroed).
        h_chksum0 / set_h_chksum0: be32 @ 0x10,
        /// The other 7 checksum words (unused, 0).
        h_chksum_rest / set_h_chksum_rest: [28] @ 0x14,
        /// Commit time, seconds.
        h_commit_sec / set_h_commit_sec: be64 @ 0x30,
        /// Commit time, nanoseconds.
        h_commit_nsec / set_h_commit_nsec: be32 @ 0x38,
    }
}

/// The csum v2/v3 checksum of commit block `buf`.
pub fn checksum(seed: u32, buf: &[u8]) -> u32 {
    let c = crc32c_raw(seed, &buf[..0x10]);
    let c = crc32c_raw(c, &[0; 4]);
    crc32c_raw(c, &buf[0x14..])
}

/// Does the csum v2/v3 checksum of commit block `buf` match (true without csum v2/v3)?
pub fn csum_ok(j: &JournalInfo, buf: &[u8]) -> bool {
    match j.csum_seed {
        None => true,
        Some(seed) => CommitHeader::new(buf).expect("a block").h_chksum0() == checksum(seed, buf),
    }
}

/// Is the csum v1 checksum of commit block `buf` right for a transaction summing to
/// `crc32_sum`, or unused (type, size and value all 0)?
pub fn v1_ok(buf: &[u8], crc32_sum: u32) -> bool {
    let h = CommitHeader::new(buf).expect("a block");
    let found = h.h_chksum0();
    (found == crc32_sum
        && h.h_chksum_type() == CHKSUM_CRC32
        && h.h_chksum_size() == CHKSUM_CRC32_SIZE)
        || (h.h_chksum_type() == 0 && h.h_chksum_size() == 0 && found == 0)
}

/// The commit time (seconds) recovery compares between transactions.
pub fn commit_sec(buf: &[u8]) -> u64 {
    CommitHeader::new(buf).expect("a block").h_commit_sec()
}

/// Builds the commit block of `tid`: `crc32_sum` is the csum v1 sum (used only with
/// compat `journal_checksum`), `(sec, nsec)` the commit time.
pub fn build(j: &JournalInfo, tid: u32, crc32_sum: u32, sec: u64, nsec: u32) -> Vec<u8> {
    let mut buf = vec![0u8; j.block_size as usize];
    put_header(&mut buf, blocktype::COMMIT, tid);
    let mut h = CommitHeader::new(&mut buf[..]).expect("a block");
    h.set_h_commit_sec(sec);
    h.set_h_commit_nsec(nsec);
    if j.compat & super::feature::COMPAT_CHECKSUM != 0 {
        h.set_h_chksum_type(CHKSUM_CRC32);
        h.set_h_chksum_size(CHKSUM_CRC32_SIZE);
        h.set_h_chksum0(crc32_sum);
    }
    if let Some(seed) = j.csum_seed {
        let c = checksum(seed, &buf);
        CommitHeader::new(&mut buf[..])
            .expect("a block")
            .set_h_chksum0(c);
    }
    buf
}
