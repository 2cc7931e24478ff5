//! Fixes of the bad-blocks inode (inode 1), as e2fsck's pass 1 makes them: a pointer to
//! a block outside the file system, or to the primary superblock or descriptors, is
//! zeroed; a bitmap on the list is relocated; an unusable inode is cleared (its first
//! 128 bytes zeroed, e2fsck's memset of the ext2 inode), and its list with it.

use crate::problem::{Code, Problem};
use usfs_ext4::rw::Volume;

/// The bad-blocks inode.
const BAD_BLOCKS_INO: u32 = 1;

/// Applies `p`'s fix if it is one of the bad-blocks inode's.
pub(super) fn apply(v: &mut Volume, p: &Problem) -> usfs_fs::Result<()> {
    let values = p.found().zip(p.expected()).ok_or(usfs_fs::Error::Invalid);
    match p.code {
        Code::BadBlocksIllegal | Code::BadBlocksPrimary => {
            let (index, names) = values?;
            let map = p.block().unwrap_or(0);
            v.clear_map_pointer(BAD_BLOCKS_INO, map, index as u32, names as u32)
        }
        Code::BadBlocksMetadata => {
            let (kind, _) = values?;
            let g = p.group().ok_or(usfs_fs::Error::Invalid)?;
            v.relocate_bitmap(g, kind == 2).map(|_| ())
        }
        Code::BadBlocksInodeClear => v.repair_inode(BAD_BLOCKS_INO, |r| {
            r.bytes_mut()[..128].fill(0);
        }),
        _ => Ok(()),
    }
}
