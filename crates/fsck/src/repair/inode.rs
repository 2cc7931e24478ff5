//! Fixes of single inode fields, set from the values the problem carries (the group
//! summaries need nothing here: the volume writes them from the check's findings).

use crate::problem::{Code, Problem};
use usfs_ext4::rw::Volume;
use usfs_fs::{Error, Result};

/// Applies `p`'s fix if it is an inode field's.
pub(super) fn apply(v: &mut Volume, p: &Problem) -> Result<()> {
    let (Some(ino), want) = (p.ino, p.expected) else {
        return Ok(());
    };
    // Every problem of these codes carries the value its check computed.
    let needs_value = || want.ok_or(Error::Invalid);
    let now = v.now().sec as u32;
    match p.code {
        Code::BadRefCount => {
            let n = needs_value()? as u16;
            v.repair_inode(ino, |r| r.set_i_links_count(n))
        }
        Code::BadISize => {
            let n = needs_value()?;
            v.repair_inode(ino, |r| r.set_size(n))
        }
        Code::BadIBlocks => {
            let n = needs_value()?;
            v.repair_inode(ino, |r| r.set_blocks_512(n))
        }
        Code::InodeDtimeSet => v.repair_inode(ino, |r| r.set_i_dtime(0)),
        Code::InodeZeroDtime => v.repair_inode(ino, |r| r.set_i_dtime(now)),
        // Rewritten as it is: its checksum is set on the way.
        Code::InodeChecksum => v.repair_inode(ino, |_| {}),
        _ => Ok(()),
    }
}
