//! The fast-commit area (journal incompat `fast_commit`): the last `s_num_fc_blks` blocks
//! of the journal, holding ext4's logical records (tag-length-value, little-endian) of
//! the changes made since the last full commit: inodes, ranges of blocks added to or
//! removed from a file, directory entries created, linked and unlinked.
//!
//! As fs/ext4/fast_commit.h of Linux and e2fsck/journal.c of e2fsprogs 1.47 lay it out:
//! the area's first block starts with a HEAD record naming the transaction the fast
//! commits follow; each fast commit ends with a TAIL record whose crc32c covers every
//! record since the previous TAIL. [`parse`] scans the area (the kernel's
//! `ext4_fc_replay_scan`); `crate::rw` applies the records (`ext4_fc_replay`).

pub mod parse;

pub use parse::{scan, FastCommits, Record};

usfs_fs::layout! {
    /// A record header (struct ext4_fc_tl), at the start of every record.
    pub struct FcTagLen[4] {
        /// Record type ([`tag`]).
        fc_tag / set_fc_tag: u16 @ 0x0,
        /// Length of the value that follows.
        fc_len / set_fc_len: u16 @ 0x2,
    }
}

usfs_fs::layout! {
    /// The value of a HEAD record (struct ext4_fc_head).
    pub struct FcHead[8] {
        /// Fast-commit features (none defined: any bit set is refused).
        fc_features / set_fc_features: u32 @ 0x0,
        /// The transaction the fast commits follow (the one after the last full commit).
        fc_tid / set_fc_tid: u32 @ 0x4,
    }
}

usfs_fs::layout! {
    /// The value of an ADD_RANGE record (struct ext4_fc_add_range): blocks mapped into
    /// a file.
    pub struct FcAddRange[16] {
        /// The file's inode number.
        fc_ino / set_fc_ino: u32 @ 0x0,
        /// ee_block of the extent: first logical block.
        ee_block / set_ee_block: u32 @ 0x4,
        /// ee_len: length; above 32768 an unwritten extent of `ee_len - 32768` blocks.
        ee_len / set_ee_len: u16 @ 0x8,
        /// ee_start_hi: high 16 bits of the first physical block.
        ee_start_hi / set_ee_start_hi: u16 @ 0xA,
        /// ee_start_lo: low 32 bits of the first physical block.
        ee_start_lo / set_ee_start_lo: u32 @ 0xC,
    }
}

usfs_fs::layout! {
    /// The value of a DEL_RANGE record (struct ext4_fc_del_range): logical blocks
    /// unmapped from a file.
    pub struct FcDelRange[12] {
        /// The file's inode number.
        fc_ino / set_fc_ino: u32 @ 0x0,
        /// First logical block removed.
        fc_lblk / set_fc_lblk: u32 @ 0x4,
        /// Blocks removed.
        fc_len / set_fc_len: u32 @ 0x8,
    }
}

usfs_fs::layout! {
    /// The head of a CREAT, LINK or UNLINK value (struct ext4_fc_dentry_info); the name
    /// (1 to 255 bytes, the rest of the value) follows.
    pub struct FcDentryInfo[8] {
        /// The directory holding the entry.
        fc_parent_ino / set_fc_parent_ino: u32 @ 0x0,
        /// The inode the entry names.
        fc_ino / set_fc_ino: u32 @ 0x4,
    }
}

usfs_fs::layout! {
    /// The value of a TAIL record (struct ext4_fc_tail); padding to the end of the
    /// block follows.
    pub struct FcTail[8] {
        /// The transaction the fast commit belongs to.
        fc_tid / set_fc_tid: u32 @ 0x0,
        /// crc32c (seed 0, no final xor) of every record since the previous TAIL,
        /// through this record's `fc_tid`.
        fc_crc / set_fc_crc: u32 @ 0x4,
    }
}

/// Record types (`EXT4_FC_TAG_*`).
pub mod tag {
    /// Blocks mapped into a file ([`super::FcAddRange`]).
    pub const ADD_RANGE: u16 = 1;
    /// Logical blocks unmapped from a file ([`super::FcDelRange`]).
    pub const DEL_RANGE: u16 = 2;
    /// A directory entry for a new inode ([`super::FcDentryInfo`] + name).
    pub const CREAT: u16 = 3;
    /// A directory entry for an existing inode.
    pub const LINK: u16 = 4;
    /// A directory entry removed.
    pub const UNLINK: u16 = 5;
    /// An inode's record: le32 inode number, then the raw on-disk inode.
    pub const INODE: u16 = 6;
    /// Padding (any length).
    pub const PAD: u16 = 7;
    /// The end of one fast commit ([`super::FcTail`]).
    pub const TAIL: u16 = 8;
    /// The first record of the area ([`super::FcHead`]).
    pub const HEAD: u16 = 9;
}
