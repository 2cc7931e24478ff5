//! The namespace fixes of passes 3 and 4: `/lost+found` made when missing, directories
//! and inodes no entry reaches connected to it (or, for an empty file or directory,
//! cleared, as e2fsck offers), `..` set to the directory that names it, and dir_nlink
//! turned on for directories past 65000 links.

use crate::problem::{Code, Problem};
use usfs_ext4::format::features::ro_compat;
use usfs_ext4::format::inode::Inode;
use usfs_ext4::rw::Volume;
use usfs_fs::{Error, Result};

/// The magic of in-inode extended attributes (after i_extra_isize).
const XATTR_MAGIC: u32 = 0xEA02_0000;

/// Applies `p`'s fix if it is one of these.
pub(super) fn apply(v: &mut Volume, p: &Problem) -> Result<()> {
    match (p.code, p.ino()) {
        (Code::NoLostFound, _) => v.lost_found_or_root().map(|_| ()),
        (Code::NoRoot, _) => v.make_root(),
        (Code::LostFoundNotDir, _) => v.replace_lost_found().map(|_| ()),
        (Code::DirNlinkFeature, _) => {
            v.add_ro_compat(ro_compat::DIR_NLINK);
            Ok(())
        }
        (Code::LargeFileFeature, _) => {
            v.add_ro_compat(ro_compat::LARGE_FILE);
            Ok(())
        }
        (Code::UnconnectedDir, Some(ino)) => v.reconnect(ino),
        (Code::UnattachedInode, Some(ino)) => {
            if zero_length(
                &v.reader().read_inode_raw(ino)?,
                v.reader().geometry().inode_size,
            ) {
                v.clear_inode(ino)
            } else {
                v.reconnect(ino)
            }
        }
        (Code::BadDotDot, Some(ino)) => {
            let parent = p.expected().ok_or(Error::Invalid)? as u32;
            v.set_dotdot(ino, parent)
        }
        _ => Ok(()),
    }
}

/// Is `raw` a file or directory with no blocks and no in-inode extended attributes
/// (which e2fsck clears rather than reconnects: nothing in it to save)?
fn zero_length(raw: &Inode<Vec<u8>>, inode_size: u32) -> bool {
    const S_IFMT: u16 = 0o170000;
    let fmt = raw.i_mode() & S_IFMT;
    let extra = if inode_size > 128 {
        raw.i_extra_isize() as usize
    } else {
        0
    };
    let at = 128 + extra;
    let b = raw.bytes();
    let magic = (inode_size as usize >= at + 4)
        .then(|| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")));
    raw.i_blocks_lo() == 0 && magic != Some(XATTR_MAGIC) && (fmt == 0o100000 || fmt == 0o040000)
}
