//! The jbd2 journal of an ext4 file system (inode `s_journal_inum`, big-endian on disk):
//! replaying it as the kernel and e2fsck do, and writing transactions into it.
//!
//! One file per journal block type — [`superblock`], [`descriptor`] (with its tags),
//! [`commit`], [`revoke`], [`fast_commit`] — each with its checksum; [`replay`] (the
//! three passes of e2fsprogs' `recovery.c`: scan, revoke, replay) and [`writer`] (the
//! commit side) stand on them side by side.
//!
//! The journal is addressed in journal blocks (0 = the journal superblock); a
//! [`JournalMap`] turns them into file-system blocks. Build it from the journal inode
//! with [`crate::Ext4::journal_map`]; external journal devices are refused by name.

pub mod commit;
pub mod descriptor;
pub mod fast_commit;
pub mod replay;
pub mod revoke;
pub mod superblock;
pub mod writer;

#[cfg(test)]
mod tests;

pub use replay::{plan_replay, replay_onto, LoggedBlock, ReplayPlan};
pub use superblock::{JournalInfo, JournalSuperblock};
pub use writer::JournalWriter;

use usfs_dev::Device;
use usfs_fs::{Error, Result, Structure};

/// `h_magic` of every jbd2 block but fast-commit blocks.
pub const JBD2_MAGIC: u32 = 0xC03B_3998;

/// `h_blocktype` values.
pub mod blocktype {
    /// A descriptor block: tags naming the file-system blocks whose copies follow.
    pub const DESCRIPTOR: u32 = 1;
    /// A commit block: the transaction is complete.
    pub const COMMIT: u32 = 2;
    /// A version-1 journal superblock.
    pub const SUPERBLOCK_V1: u32 = 3;
    /// A version-2 journal superblock.
    pub const SUPERBLOCK_V2: u32 = 4;
    /// A revoke block: blocks earlier transactions logged that must not be replayed.
    pub const REVOKE: u32 = 5;
}

/// Journal feature bits (`s_feature_compat` / `s_feature_incompat`).
pub mod feature {
    /// compat: commit blocks carry a crc32_be of the transaction (csum v1).
    pub const COMPAT_CHECKSUM: u32 = 0x1;
    /// incompat: the log has revoke blocks.
    pub const REVOKE: u32 = 0x1;
    /// incompat: tags and revoke records hold 64-bit block numbers.
    pub const BIT64: u32 = 0x2;
    /// incompat: the commit block is written without waiting for the blocks before it.
    pub const ASYNC_COMMIT: u32 = 0x4;
    /// incompat: csum v2 (16-bit tag checksums, block tails, commit checksums).
    pub const CSUM_V2: u32 = 0x8;
    /// incompat: csum v3 (32-bit tag checksums, block tails, commit checksums).
    pub const CSUM_V3: u32 = 0x10;
    /// incompat: a fast-commit area follows the log.
    pub const FAST_COMMIT: u32 = 0x20;
    /// Every incompat bit e2fsprogs 1.47 knows.
    pub const KNOWN_INCOMPAT: u32 = 0x3F;

    /// The names `dumpe2fs` prints ("Journal features:"), FEATURE_C0-style for unknown bits.
    pub fn names(compat: u32, incompat: u32, ro_compat: u32) -> Vec<String> {
        let mut out = Vec::new();
        for (set, mask, c) in [(0, compat, 'C'), (1, incompat, 'I'), (2, ro_compat, 'R')] {
            for bit in 0..32 {
                if mask & (1 << bit) == 0 {
                    continue;
                }
                let name = match (set, 1u32 << bit) {
                    (0, COMPAT_CHECKSUM) => "journal_checksum",
                    (1, REVOKE) => "journal_incompat_revoke",
                    (1, BIT64) => "journal_64bit",
                    (1, ASYNC_COMMIT) => "journal_async_commit",
                    (1, CSUM_V2) => "journal_checksum_v2",
                    (1, CSUM_V3) => "journal_checksum_v3",
                    _ => "",
                };
                out.push(if name.is_empty() {
                    format!("FEATURE_{c}{bit}")
                } else {
                    name.to_string()
                });
            }
        }
        out
    }
}

usfs_fs::layout! {
    /// The header of every log block but fast-commit blocks (journal_header_t), at the
    /// start of the block.
    pub struct BlockHeader[12] {
        /// Magic, 0xC03B3998.
        h_magic / set_h_magic: be32 @ 0x0,
        /// Block type ([`blocktype`]).
        h_blocktype / set_h_blocktype: be32 @ 0x4,
        /// Transaction id the block belongs to.
        h_sequence / set_h_sequence: be32 @ 0x8,
    }
}

/// Writes a block header at the start of `block`.
pub(crate) fn put_header(block: &mut [u8], btype: u32, tid: u32) {
    let mut h = BlockHeader::new(&mut block[..12]).expect("12 bytes");
    h.set_h_magic(JBD2_MAGIC);
    h.set_h_blocktype(btype);
    h.set_h_sequence(tid);
}

/// Where the journal's blocks are on the file system: journal block -> file-system block,
/// as runs (from the journal inode's extents or block map).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JournalMap {
    /// (first journal block, first file-system block, length), sorted, contiguous from 0.
    runs: Vec<(u32, u64, u32)>,
    len: u32,
}

impl JournalMap {
    /// An empty map.
    pub fn new() -> JournalMap {
        JournalMap::default()
    }

    /// Appends `len` journal blocks stored at file-system blocks `fs_block..`; runs must
    /// come in order, without holes.
    pub fn push(&mut self, fs_block: u64, len: u32) {
        if len == 0 {
            return;
        }
        if let Some(last) = self.runs.last_mut() {
            if last.1 + last.2 as u64 == fs_block && last.2.checked_add(len).is_some() {
                last.2 += len;
                self.len += len;
                return;
            }
        }
        self.runs.push((self.len, fs_block, len));
        self.len = self.len.saturating_add(len);
    }

    /// Journal blocks mapped.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// True when nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file-system block of journal block `jblk`.
    pub fn fs_block(&self, jblk: u32) -> Option<u64> {
        let i = self.runs.partition_point(|r| r.0 <= jblk).checked_sub(1)?;
        let (j0, f0, l) = self.runs[i];
        (jblk - j0 < l).then(|| f0 + (jblk - j0) as u64)
    }

    /// The runs (first journal block, first file-system block, length).
    pub fn runs(&self) -> &[(u32, u64, u32)] {
        &self.runs
    }
}

/// Reads and writes journal blocks through a [`JournalMap`].
pub(crate) struct Log<'a> {
    pub dev: &'a dyn Device,
    pub map: &'a JournalMap,
    pub bs: usize,
    /// Journal blocks that may be read (`s_maxlen`, e2fsck's j_total_len).
    pub total_len: u32,
}

impl Log<'_> {
    /// The byte offset on the device of journal block `jblk`.
    pub(crate) fn offset(&self, jblk: u32) -> Result<u64> {
        if jblk >= self.total_len {
            return Err(Error::corrupt(
                Structure::Journal,
                format!(
                    "journal: log block {jblk} past the journal's end ({})",
                    self.total_len
                ),
            ));
        }
        let fs = self.map.fs_block(jblk).ok_or_else(|| {
            Error::corrupt(
                Structure::Journal,
                format!("journal: log block {jblk} is not mapped"),
            )
        })?;
        fs.checked_mul(self.bs as u64)
            .ok_or_else(|| Error::corrupt(Structure::Journal, "journal: block number overflows"))
    }

    /// Reads journal block `jblk` into `buf` (one block).
    pub(crate) fn read(&self, jblk: u32, buf: &mut [u8]) -> Result<()> {
        let off = self.offset(jblk)?;
        self.dev.read_at(buf, off)?;
        Ok(())
    }

    /// Writes `buf` (one block) at journal block `jblk`.
    pub(crate) fn write(&self, jblk: u32, buf: &[u8]) -> Result<()> {
        let off = self.offset(jblk)?;
        self.dev.write_at(buf, off)?;
        Ok(())
    }
}

/// Reads the journal superblock (journal block 0) and checks it ([`JournalInfo::load`]).
pub fn load_info(dev: &dyn Device, map: &JournalMap, fs_block_size: u32) -> Result<JournalInfo> {
    let mut raw = vec![0u8; fs_block_size as usize];
    let log = Log {
        dev,
        map,
        bs: fs_block_size as usize,
        total_len: map.len(),
    };
    log.read(0, &mut raw)?;
    JournalInfo::load(&raw, fs_block_size, map.len())
}

/// tid_gt of jbd2: is `x` after `y` in the wrapping 32-bit transaction space?
pub(crate) fn tid_gt(x: u32, y: u32) -> bool {
    (x.wrapping_sub(y) as i32) > 0
}

/// tid_geq of jbd2.
pub(crate) fn tid_geq(x: u32, y: u32) -> bool {
    (x.wrapping_sub(y) as i32) >= 0
}
