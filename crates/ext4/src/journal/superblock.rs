//! The jbd2 journal superblock: block 0 of the journal (inode 8), big-endian. It says
//! where the log starts (`s_start`, 0 = empty), which transaction id is expected there
//! (`s_sequence`) and which on-disk formats the log blocks use (features). Loading it
//! applies the checks of e2fsck's `e2fsck_journal_load` (e2fsprogs 1.47).

use super::{blocktype, feature, JBD2_MAGIC};
use crate::format::checksum::crc32c_raw;
use usfs_fs::{Error, Result, Structure};

/// `h_blocktype` of a version-2 superblock (re-exported for mkfs).
pub const JBD2_SUPERBLOCK_V2: u32 = blocktype::SUPERBLOCK_V2;

/// `s_checksum_type` of csum v2/v3 journals: crc32c.
pub const CHECKSUM_CRC32C: u8 = 4;

/// Fast-commit blocks when `s_num_fc_blks` is 0 (JBD2_DEFAULT_FAST_COMMIT_BLOCKS).
pub const DEFAULT_FAST_COMMIT_BLOCKS: u32 = 256;

/// The smallest journal jbd2 accepts (JBD2_MIN_JOURNAL_BLOCKS).
pub const MIN_JOURNAL_BLOCKS: u32 = 1024;

usfs_fs::layout! {
    /// The journal superblock (journal_superblock_t), 1024 bytes at the start of the
    /// journal's first block.
    pub struct JournalSuperblock[1024] {
        /// Magic, 0xC03B3998.
        h_magic / set_h_magic: be32 @ 0x0,
        /// Block type: 3 = superblock version 1, 4 = version 2.
        h_blocktype / set_h_blocktype: be32 @ 0x4,
        /// Transaction id of the block (0 for the superblock).
        h_sequence / set_h_sequence: be32 @ 0x8,
        /// Journal block size (the file system's).
        s_blocksize / set_s_blocksize: be32 @ 0xC,
        /// Blocks in the journal.
        s_maxlen / set_s_maxlen: be32 @ 0x10,
        /// First block of log data.
        s_first / set_s_first: be32 @ 0x14,
        /// First transaction expected in the log.
        s_sequence / set_s_sequence: be32 @ 0x18,
        /// Block of the start of the log; 0 = the journal is clean.
        s_start / set_s_start: be32 @ 0x1C,
        /// Error value (set by jbd2_journal_abort; a negative errno).
        s_errno / set_s_errno: be32 @ 0x20,
        /// Compatible features (version 2 only): 0x1 = commit blocks carry a crc32.
        s_feature_compat / set_s_feature_compat: be32 @ 0x24,
        /// Incompatible features (version 2 only): revoke, 64bit, async_commit, csum v2,
        /// csum v3, fast_commit.
        s_feature_incompat / set_s_feature_incompat: be32 @ 0x28,
        /// Read-only compatible features (none defined).
        s_feature_ro_compat / set_s_feature_ro_compat: be32 @ 0x2C,
        /// UUID of the journal (mke2fs uses the file system's); seeds csum v2/v3.
        s_uuid / set_s_uuid: [16] @ 0x30,
        /// File systems sharing the journal (1 for an internal journal).
        s_nr_users / set_s_nr_users: be32 @ 0x40,
        /// Location of a dynamic superblock copy (unused).
        s_dynsuper / set_s_dynsuper: be32 @ 0x44,
        /// Limit of journal blocks per transaction (0: unlimited).
        s_max_transaction / set_s_max_transaction: be32 @ 0x48,
        /// Limit of data blocks per transaction (0: unlimited).
        s_max_trans_data / set_s_max_trans_data: be32 @ 0x4C,
        /// Checksum algorithm (csum v2/v3: 4 = crc32c).
        s_checksum_type / set_s_checksum_type: u8 @ 0x50,
        /// Padding after the checksum type.
        s_padding2 / set_s_padding2: [3] @ 0x51,
        /// Fast-commit blocks at the end of the journal (0: 256 when fast_commit is on).
        s_num_fc_blks / set_s_num_fc_blks: be32 @ 0x54,
        /// Block of the log head (kernel 6.x writes it; unused when clean).
        s_head / set_s_head: be32 @ 0x58,
        /// Checksum of the superblock (csum v2/v3): crc32c(~0, the 1024 bytes with this
        /// field zeroed).
        s_checksum / set_s_checksum: be32 @ 0xFC,
        /// UUIDs of the file systems sharing the journal (external journals only; 48 of
        /// 16 bytes, the first one shown here).
        s_users / set_s_users: [16] @ 0x100,
    }
}

impl<B: AsRef<[u8]>> JournalSuperblock<B> {
    /// The checksum the first 1024 bytes should carry.
    pub fn compute_checksum(&self) -> u32 {
        let b = &self.bytes()[..1024];
        let c = crc32c_raw(!0, &b[..0xFC]);
        let c = crc32c_raw(c, &[0; 4]);
        crc32c_raw(c, &b[0x100..1024])
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> JournalSuperblock<B> {
    /// Stores [`Self::compute_checksum`] when the journal has csum v2/v3.
    pub fn update_checksum(&mut self) {
        if self.s_feature_incompat() & (feature::CSUM_V2 | feature::CSUM_V3) != 0 {
            let c = self.compute_checksum();
            self.set_s_checksum(c);
        }
    }
}

impl JournalSuperblock<Vec<u8>> {
    /// The first block of a new, empty and clean jbd2 journal of `blocks` blocks of
    /// `block_size` for the file system `uuid` (as mke2fs and e2fsck's "Recreate
    /// journal" write it: version 2, no features, sequence 1, nothing to replay).
    pub fn new_empty(block_size: u32, blocks: u32, uuid: &[u8; 16]) -> Self {
        let mut jsb =
            JournalSuperblock::new(vec![0u8; block_size as usize]).expect("block >= 1024");
        jsb.set_h_magic(super::JBD2_MAGIC);
        jsb.set_h_blocktype(JBD2_SUPERBLOCK_V2);
        jsb.set_s_blocksize(block_size);
        jsb.set_s_maxlen(blocks);
        jsb.set_s_first(1);
        jsb.set_s_sequence(1);
        jsb.set_s_uuid(uuid);
        jsb.set_s_nr_users(1);
        jsb
    }
}

impl JournalSuperblock<Vec<u8>> {
    /// A journal superblock written over a corrupt one (e2fsck's
    /// e2fsck_journal_reset_super): [`JournalSuperblock::new_empty`], but for a random
    /// sequence, so that no block the old log left matches the sequence a later replay
    /// looks for.
    pub fn new_reset(block_size: u32, blocks: u32, uuid: &[u8; 16]) -> Self {
        let mut jsb = JournalSuperblock::new_empty(block_size, blocks, uuid);
        let r = crate::write::random_bytes();
        let word = |i: usize| u32::from_le_bytes(r[i * 4..i * 4 + 4].try_into().unwrap());
        jsb.set_s_sequence((word(0) ^ word(1) ^ word(2) ^ word(3)).max(1));
        jsb
    }
}

/// What a loaded journal superblock says, with e2fsck's derived limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalInfo {
    /// 1 or 2 (a version-1 superblock has no features).
    pub version: u8,
    /// Journal block size in bytes.
    pub block_size: u32,
    /// Blocks of the journal in use (`s_maxlen`, at most the journal file's size).
    pub total_len: u32,
    /// First log block (`s_first`).
    pub first: u32,
    /// End (exclusive) of the normal log area: `s_maxlen`, less the fast-commit area.
    pub last: u32,
    /// Where e2fsck 1.47's recovery wraps the log: `s_maxlen` with fast_commit (sic), else
    /// [`Self::last`].
    pub wrap_last: u32,
    /// First fast-commit block (`last + 1`, as jbd2 computes it), when fast_commit is on.
    pub fc_first: Option<u32>,
    /// `s_sequence`.
    pub sequence: u32,
    /// `s_start` (0: nothing to replay).
    pub start: u32,
    /// `s_errno`.
    pub errno: i32,
    /// `s_feature_compat` (0 for version 1).
    pub compat: u32,
    /// `s_feature_incompat` (0 for version 1).
    pub incompat: u32,
    /// `s_uuid`.
    pub uuid: [u8; 16],
    /// crc32c(~0, uuid) when the journal has csum v2/v3.
    pub csum_seed: Option<u32>,
}

impl JournalInfo {
    /// Checks `raw` (the journal's block 0) as e2fsck does before a replay, for a journal
    /// of `file_blocks` blocks on a file system of `fs_block_size`-byte blocks.
    pub fn load(raw: &[u8], fs_block_size: u32, file_blocks: u32) -> Result<JournalInfo> {
        let sb = JournalSuperblock::new(raw).ok_or_else(|| {
            Error::corrupt(
                Structure::Journal,
                "journal superblock: block shorter than 1024 bytes",
            )
        })?;
        let bad = |what: String| {
            Err(Error::corrupt(
                Structure::Journal,
                format!("journal superblock: {what}"),
            ))
        };
        if sb.h_magic() != JBD2_MAGIC {
            return bad(format!("bad magic {:#010x}", sb.h_magic()));
        }
        let version = match sb.h_blocktype() {
            blocktype::SUPERBLOCK_V1 => 1,
            blocktype::SUPERBLOCK_V2 => 2,
            t @ (blocktype::DESCRIPTOR | blocktype::COMMIT | blocktype::REVOKE) => {
                return bad(format!("block type {t} is a log block"))
            }
            t => {
                return Err(Error::incompatible(format!(
                    "journal superblock version (block type {t})"
                )))
            }
        };
        let (compat, incompat, ro) = if version == 2 {
            (
                sb.s_feature_compat(),
                sb.s_feature_incompat(),
                sb.s_feature_ro_compat(),
            )
        } else {
            (0, 0, 0)
        };
        if version == 2 && sb.s_nr_users() > 1 {
            return Err(Error::incompatible(format!(
                "journal shared by {} file systems",
                sb.s_nr_users()
            )));
        }
        let unknown = incompat & !feature::KNOWN_INCOMPAT;
        if unknown != 0 || ro != 0 {
            let mut names = feature::names(0, unknown, ro);
            names.insert(0, "journal feature".into());
            return Err(Error::incompatible(names.join(" ")));
        }
        let v2or3 = incompat & (feature::CSUM_V2 | feature::CSUM_V3) != 0;
        if incompat & feature::CSUM_V2 != 0 && incompat & feature::CSUM_V3 != 0 {
            return bad("both journal_checksum_v2 and journal_checksum_v3".into());
        }
        if v2or3 && compat & feature::COMPAT_CHECKSUM != 0 {
            return bad("journal_checksum with journal_checksum_v2/v3".into());
        }
        if v2or3 && sb.s_checksum_type() != CHECKSUM_CRC32C {
            return bad(format!("checksum type {}", sb.s_checksum_type()));
        }
        if v2or3 && sb.s_checksum() != sb.compute_checksum() {
            return bad(format!(
                "checksum {:#010x} does not match contents ({:#010x})",
                sb.s_checksum(),
                sb.compute_checksum()
            ));
        }
        if sb.s_blocksize() != fs_block_size {
            return bad(format!(
                "block size {} (the file system's is {fs_block_size})",
                sb.s_blocksize()
            ));
        }
        let maxlen = sb.s_maxlen();
        if maxlen > file_blocks {
            return bad(format!(
                "journal too short: s_maxlen {maxlen}, file {file_blocks} blocks"
            ));
        }
        let (last, wrap_last, fc_first) = if incompat & feature::FAST_COMMIT != 0 {
            let fc = match sb.s_num_fc_blks() {
                0 => DEFAULT_FAST_COMMIT_BLOCKS,
                n => n,
            };
            if maxlen.saturating_sub(fc) < MIN_JOURNAL_BLOCKS {
                return bad(format!("incorrect fast commit blocks ({fc} of {maxlen})"));
            }
            (maxlen - fc, maxlen, Some(maxlen - fc + 1))
        } else {
            (maxlen, maxlen, None)
        };
        let first = sb.s_first();
        if first == 0 || first >= last {
            return bad(format!("s_first {first} outside the log (1..{last})"));
        }
        Ok(JournalInfo {
            version,
            block_size: fs_block_size,
            total_len: maxlen,
            first,
            last,
            wrap_last,
            fc_first,
            sequence: sb.s_sequence(),
            start: sb.s_start(),
            errno: sb.s_errno() as i32,
            compat,
            incompat,
            uuid: *sb.s_uuid(),
            csum_seed: v2or3.then(|| crc32c_raw(!0, sb.s_uuid())),
        })
    }

    /// Is incompatible feature `f` set?
    pub fn has_incompat(&self, f: u32) -> bool {
        self.incompat & f != 0
    }

    /// Does the journal carry csum v2 or v3 checksums (tags, descriptor tails, commit)?
    pub fn csum_v2or3(&self) -> bool {
        self.csum_seed.is_some()
    }

    /// Bytes of one descriptor tag (journal_tag_bytes), without the UUID that follows
    /// tags lacking SAME_UUID.
    pub fn tag_bytes(&self) -> usize {
        if self.has_incompat(feature::CSUM_V3) {
            return 16;
        }
        let mut sz = 12;
        if self.has_incompat(feature::CSUM_V2) {
            sz += 2;
        }
        if self.has_incompat(feature::BIT64) {
            sz
        } else {
            sz - 4
        }
    }

    /// Bytes at the end of descriptor and revoke blocks kept for the tail checksum.
    pub fn tail_bytes(&self) -> usize {
        if self.csum_v2or3() {
            4
        } else {
            0
        }
    }

    /// The journal block after `b` in the log, wrapped as e2fsck 1.47's recovery wraps.
    pub fn next_block(&self, b: u32) -> u32 {
        let n = b.saturating_add(1);
        if n >= self.wrap_last {
            n - (self.wrap_last - self.first)
        } else {
            n
        }
    }
}

/// The journal superblock `raw` in the words of `dumpe2fs` (e2p_list_journal_super):
/// `fs_block_size` is the file system's, `fast_commit` whether the file system has the
/// fast_commit feature (then the fast-commit area is counted apart).
pub fn describe(raw: &[u8], fs_block_size: u32, fast_commit: bool) -> Vec<(String, String)> {
    let Some(sb) = JournalSuperblock::new(raw) else {
        return Vec::new();
    };
    let mut v: Vec<(&str, String)> = Vec::new();
    let names = super::feature::names(
        sb.s_feature_compat(),
        sb.s_feature_incompat(),
        sb.s_feature_ro_compat(),
    );
    v.push((
        "Journal features",
        if names.is_empty() {
            "(none)".into()
        } else {
            names.join(" ")
        },
    ));
    let size = (sb.s_blocksize() / 1024).wrapping_mul(sb.s_maxlen());
    v.push((
        "Total journal size",
        if size < 8192 {
            format!("{size}k")
        } else {
            format!("{}M", size >> 10)
        },
    ));
    if sb.s_blocksize() != fs_block_size {
        v.push(("Journal block size", sb.s_blocksize().to_string()));
    }
    let fc = if fast_commit {
        match sb.s_num_fc_blks() {
            0 => DEFAULT_FAST_COMMIT_BLOCKS,
            n => n,
        }
    } else {
        0
    };
    v.push(("Total journal blocks", sb.s_maxlen().to_string()));
    v.push((
        "Max transaction length",
        sb.s_maxlen().wrapping_sub(fc).to_string(),
    ));
    v.push(("Fast commit length", fc.to_string()));
    if sb.s_first() != 1 {
        v.push(("Journal first block", sb.s_first().to_string()));
    }
    v.push(("Journal sequence", format!("{:#010x}", sb.s_sequence())));
    v.push(("Journal start", sb.s_start().to_string()));
    if sb.s_nr_users() != 1 {
        v.push(("Journal number of users", sb.s_nr_users().to_string()));
    }
    if sb.s_feature_compat() & super::feature::COMPAT_CHECKSUM != 0 {
        v.push(("Journal checksum type", "crc32".into()));
    }
    if sb.s_feature_incompat() & (super::feature::CSUM_V2 | super::feature::CSUM_V3) != 0 {
        let t = if sb.s_checksum_type() == CHECKSUM_CRC32C {
            "crc32c"
        } else {
            "unknown"
        };
        v.push(("Journal checksum type", t.into()));
        v.push(("Journal checksum", format!("{:#010x}", sb.s_checksum())));
    }
    if sb.s_nr_users() > 1 || sb.s_users() != &[0; 16] {
        v.push(("Journal users", usfs_fs::format_uuid(sb.s_users())));
    }
    if sb.s_errno() != 0 {
        v.push(("Journal errno", (sb.s_errno() as i32).to_string()));
    }
    v.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}
