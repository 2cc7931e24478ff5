//! The jbd2 journal superblock: block 0 of the journal (inode 8), big-endian. Only what
//! an empty, clean journal needs is named here.

/// `h_magic` of every jbd2 block.
pub const JBD2_MAGIC: u32 = 0xC03B_3998;
/// `h_blocktype` of a version-2 superblock.
pub const JBD2_SUPERBLOCK_V2: u32 = 4;

usfs_fs::layout! {
    /// The journal superblock (journal_superblock_t), 1024 bytes at the start of the
    /// journal's first block.
    pub struct JournalSuperblock[1024] {
        /// Magic, 0xC03B3998.
        h_magic: be32 @ 0x0,
        /// Block type: 4 = superblock version 2.
        h_blocktype: be32 @ 0x4,
        /// Transaction id of the block (0 for the superblock).
        h_sequence: be32 @ 0x8,
        /// Journal block size (the file system's).
        s_blocksize: be32 @ 0xC,
        /// Blocks in the journal.
        s_maxlen: be32 @ 0x10,
        /// First block of log data.
        s_first: be32 @ 0x14,
        /// First transaction expected in the log.
        s_sequence: be32 @ 0x18,
        /// Block of the start of the log; 0 = the journal is clean.
        s_start: be32 @ 0x1C,
        /// Error value (set by jbd2_journal_abort).
        s_errno: be32 @ 0x20,
        /// Compatible features.
        s_feature_compat: be32 @ 0x24,
        /// Incompatible features.
        s_feature_incompat: be32 @ 0x28,
        /// Read-only compatible features.
        s_feature_ro_compat: be32 @ 0x2C,
        /// UUID of the journal (mke2fs uses the file system's).
        s_uuid: [16] @ 0x30,
        /// File systems sharing the journal (1 for an internal journal).
        s_nr_users: be32 @ 0x40,
        /// Location of a dynamic superblock copy (unused).
        s_dynsuper: be32 @ 0x44,
        /// Limit of journal blocks per transaction (0: unlimited).
        s_max_transaction: be32 @ 0x48,
        /// Limit of data blocks per transaction (0: unlimited).
        s_max_trans_data: be32 @ 0x4C,
        /// Checksum algorithm (csum v2/v3: 4 = crc32c).
        s_checksum_type: u8 @ 0x50,
        /// Fast-commit blocks after the journal's normal blocks.
        s_num_fc_blks: be32 @ 0x54,
        /// Block of the log head (unused when clean).
        s_head: be32 @ 0x58,
        /// Checksum of the superblock (with csum v2/v3).
        s_checksum: be32 @ 0xFC,
        /// UUIDs of the file systems sharing the journal (external journals only).
        s_users: [16] @ 0x100,
    }
}
