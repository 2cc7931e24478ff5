//! The fast-commit area (journal incompat `fast_commit`): blocks after the normal log
//! holding ext4's logical records (tag-length-value: inode, add/delete range, link,
//! unlink, create) of the transaction after the last full commit.
//!
//! usfs does not replay fast commits (e2fsck and the kernel do, by editing inodes and
//! extent trees). It detects them: when the area's first block starts with a HEAD record
//! of the transaction that follows the replayed log, recovery is refused by name rather
//! than silently dropping those changes; otherwise the normal log is replayed alone,
//! which is what e2fsck does when the area holds nothing for that transaction.

usfs_fs::layout! {
    /// A fast-commit record header (struct ext4_fc_tl), little-endian.
    pub struct FcTagLen[4] {
        /// Record type ([`TAG_HEAD`], ...).
        fc_tag: u16 @ 0x0,
        /// Length of the value that follows.
        fc_len: u16 @ 0x2,
    }
}

usfs_fs::layout! {
    /// The value of a HEAD record (struct ext4_fc_head), after its [`FcTagLen`].
    pub struct FcHead[8] {
        /// Fast-commit features (none defined).
        fc_features: u32 @ 0x0,
        /// Transaction id the fast commits belong to.
        fc_tid: u32 @ 0x4,
    }
}

/// EXT4_FC_TAG_HEAD: the first record of the area.
pub const TAG_HEAD: u16 = 9;

/// Does fast-commit block `buf` (the area's first) start a fast commit of `tid`?
pub fn holds_transaction(buf: &[u8], tid: u32) -> bool {
    let tl = FcTagLen::new(buf).expect("a block");
    if tl.fc_tag() != TAG_HEAD || buf.len() < 12 {
        return false;
    }
    FcHead::new(&buf[4..]).expect("8 bytes").fc_tid() == tid
}
