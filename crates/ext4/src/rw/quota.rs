//! A quota file written anew (e2fsck's `quota_write_inode`, once it has counted the
//! usage): the hidden inode's data replaced by a file built from the entries given; and
//! the usage of released inodes taken off the quota files (the orphan cleanup's, as the
//! kernel's and e2fsck's release of orphans does).

use super::Volume;
use crate::format::features::ro_compat;
use crate::format::inode::flags;
use crate::format::quota::{self, Dquot};
use usfs_fs::{FileType, Result};

/// What a released inode held: its quota ids (user, group, project), the bytes of its
/// blocks freed and the inodes freed (1, or 0 for a truncation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Uncharge {
    pub ids: [u32; 3],
    pub space: u64,
    pub inodes: u64,
}

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

    /// Takes `freed` off each quota file the superblock names (on a file system with
    /// the quota feature), as the kernel's orphan cleanup and e2fsck's release of
    /// orphans do; a file it cannot read is left for the checker, and one no entry of
    /// `freed` concerns is not rewritten.
    pub(crate) fn uncharge_quota(&mut self, freed: &[Uncharge]) -> Result<()> {
        let sb = &self.fs.core.sb;
        if freed.is_empty() || sb.s_feature_ro_compat() & ro_compat::QUOTA == 0 {
            return Ok(());
        }
        let inos = [
            sb.s_usr_quota_inum(),
            sb.s_grp_quota_inum(),
            sb.s_prj_quota_inum(),
        ];
        for (t, ino) in inos.into_iter().enumerate() {
            if ino == 0 {
                continue;
            }
            let Ok(mut file) = self.reader().read_quota_file(ino, t) else {
                continue;
            };
            let mut changed = false;
            for f in freed {
                if let Some(q) = file.dquots.iter_mut().find(|q| q.id == f.ids[t]) {
                    q.curspace = q.curspace.saturating_sub(f.space);
                    q.curinodes = q.curinodes.saturating_sub(f.inodes);
                    changed = true;
                }
            }
            if changed {
                self.write_quota_file(ino, t, (file.bgrace, file.igrace), &file.dquots)?;
            }
        }
        Ok(())
    }
}
