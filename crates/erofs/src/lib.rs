//! EROFS for usfs: the on-disk format ([`format`]), a reader ([`Erofs`]) implementing
//! [`usfs_fs::FileSystem`], a builder ([`mkfs`], `usfs mkfs.erofs`) and fixed-size output
//! LZ4 compression ([`compress`]), and a checker ([`check`], `usfs fsck` on EROFS).

pub mod check;
pub mod compress;
pub mod format;
pub mod mkfs;
mod read;

pub use read::Erofs;

/// Does `dev` hold an EROFS superblock (magic 0xE0F5E1E2 at byte 1024)?
pub fn probe(dev: &dyn usfs_dev::Device) -> bool {
    let mut m = [0u8; 4];
    dev.read_at(&mut m, format::superblock::SUPER_OFFSET)
        .is_ok()
        && u32::from_le_bytes(m) == format::superblock::EROFS_MAGIC
}
