//! The superblock's "in use" marks, set when the volume opens for writing and cleared
//! when it closes cleanly, as the kernel's mount and unmount set them: with a journal,
//! INCOMPAT_RECOVER (a crash leaves the journal to replay); without, the VALID_FS bit of
//! s_state is cleared (a crash leaves an image e2fsck checks in full).

use super::volume::Volume;
use crate::format::features::{compat, incompat};
use crate::format::superblock::SUPERBLOCK_OFFSET;
use usfs_dev::Device;
use usfs_fs::Result;

use crate::format::superblock::STATE_VALID_FS as VALID_FS;

impl Volume {
    /// Does the file system have an (internal) journal?
    pub(crate) fn journaled(&self) -> bool {
        self.fs.core.geo.features.has_compat(compat::HAS_JOURNAL)
    }

    /// Marks the file system in use, durably, before the first change.
    pub(crate) fn mark_in_use(&mut self) -> Result<()> {
        if self.journaled() {
            let f = self.fs.core.sb.s_feature_incompat();
            self.fs
                .core
                .sb
                .set_s_feature_incompat(f | incompat::RECOVER);
        } else {
            let s = self.fs.core.sb.s_state();
            self.fs.core.sb.set_s_state(s & !VALID_FS);
        }
        self.write_sb_home()
    }

    /// Marks the file system cleanly closed (after the last commit).
    pub(crate) fn mark_clean(&mut self) -> Result<()> {
        if self.journaled() {
            let f = self.fs.core.sb.s_feature_incompat();
            self.fs
                .core
                .sb
                .set_s_feature_incompat(f & !incompat::RECOVER);
        } else {
            let s = self.fs.core.sb.s_state();
            self.fs.core.sb.set_s_state(s | VALID_FS);
        }
        self.write_sb_home()
    }

    /// Writes the in-memory superblock to its home (outside any transaction) and
    /// flushes; any copy of its block in the overlay is updated with it.
    fn write_sb_home(&mut self) -> Result<()> {
        self.fs.core.sb.update_checksum();
        self.overlay
            .write_at(self.fs.core.sb.bytes(), SUPERBLOCK_OFFSET)?;
        self.overlay.flush()?;
        Ok(())
    }
}
