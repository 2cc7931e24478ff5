//! ext4 (and ext2/ext3) for usfs: the on-disk format ([`format`]) and a reader ([`Ext4`])
//! implementing [`usfs_fs::FileSystem`] for images made by mke2fs 1.47 and the kernel.

pub mod alloc;
pub mod backup_sb;
pub mod format;
pub mod journal;
mod read;
pub mod rw;
pub mod undo;
pub mod volume_core;
pub mod walk;
pub mod write;

pub use read::{replay_journal, Ext4, OpenIssue};
pub use volume_core::VolumeCore;

/// Does `dev` hold an ext2/3/4 superblock (magic 0xEF53 at byte 1080)?
pub fn probe(dev: &dyn usfs_dev::Device) -> bool {
    let mut m = [0u8; 2];
    dev.read_at(&mut m, format::superblock::SUPERBLOCK_OFFSET + 0x38)
        .is_ok()
        && u16::from_le_bytes(m) == format::superblock::EXT4_MAGIC
}
