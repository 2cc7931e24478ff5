//! The namespace fixes of passes 3 and 4: `/lost+found` made when missing, directories
//! and inodes no entry reaches connected to it (or, for an empty file or directory,
//! cleared, as e2fsck offers), `..` set to the directory that names it, and dir_nlink
//! turned on for directories past 65000 links.

use crate::problem::{Code, Problem};
use usfs_ext4::format::features::ro_compat;
use usfs_ext4::rw::Volume;
use usfs_fs::{Error, Result};

/// Applies `p`'s fix if it is one of these.
pub(super) fn apply(v: &mut Volume, p: &Problem) -> Result<()> {
    match (p.code, p.ino()) {
        (Code::NoLostFound, _) => v.lost_found_or_root().map(|_| ()),
        (Code::NoRoot, _) => v.make_root(),
        (Code::LostFoundNotDir | Code::LostFoundEncrypted, _) => v.replace_lost_found().map(|_| ()),
        (Code::DirNlinkFeature, _) => {
            v.add_ro_compat(ro_compat::DIR_NLINK);
            Ok(())
        }
        (Code::LargeFileFeature, _) => {
            v.add_ro_compat(ro_compat::LARGE_FILE);
            Ok(())
        }
        (Code::UnconnectedDir, Some(ino)) => v.reconnect(ino),
        (Code::UnattachedInode, Some(ino)) => v.reconnect(ino),
        (Code::UnattachedZeroLen, Some(ino)) => v.clear_inode(ino),
        (Code::BadDotDot, Some(ino)) => {
            let parent = p.expected().ok_or(Error::Invalid)? as u32;
            v.set_dotdot(ino, parent)
        }
        _ => Ok(()),
    }
}
