//! A quota file written anew (e2fsck's `quota_write_inode`, once it has counted the
//! usage): the hidden inode's data replaced by a file built from the entries given.

use super::Volume;
use crate::format::inode::flags;
use crate::format::quota::{self, Dquot};
use usfs_fs::{FileType, Result};

impl Volume {
    /// Replaces the data of quota inode `ino` (of type `qtype`: 0 user, 1 group, 2
    /// project) with a new quota file holding `dquots` (sorted by id) and grace periods
    /// `grace` (blocks, inodes); each entry's grace deadlines are set for its usage as of
    /// now. The inode gets the fields e2fsck gives a new quota file: a regular file, mode
    /// 0600, owned by root, one link, immutable, extent-mapped where the feature is on.
    pub fn write_quota_file(
        &mut self,
        ino: u32,
        qtype: usize,
        grace: (u32, u32),
        dquots: &[Dquot],
    ) -> Result<()> {
        let now = (self.clock)().sec.max(0) as u64;
        let mut entries = dquots.to_vec();
        for q in &mut entries {
            quota::update_grace(q, now, grace.0, grace.1);
        }
        let bytes = quota::build(qtype, grace.0, grace.1, &entries);
        // The old file goes whole: every block its map names (whatever its size says)
        // and its xattr block. (Anything but a regular file is the check's to fix first.)
        let mut old = self.inode_any(ino)?;
        if old.file_type()? != FileType::Regular {
            return Err(usfs_fs::Error::Invalid);
        }
        if self.has_block_map(&old) {
            self.map_punch(&mut old, 0, u64::MAX)?;
        }
        self.drop_xattr_block(&mut old)?;
        let mut rec = self.blank_record(ino, FileType::Regular, 0o600, 0, 0);
        rec.raw.set_i_flags(flags::IMMUTABLE);
        self.init_map(&mut rec);
        self.write_data(&mut rec, 0, &bytes)?;
        rec.raw.set_size(bytes.len() as u64);
        self.put_inode(&mut rec)?;
        self.flush_pending(ino)
    }
}
