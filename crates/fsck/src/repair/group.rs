//! Fixes of group descriptors found in pass 0, as e2fsck's check_super_block makes them:
//! an unused-inodes count past the group's free inodes (or its size) becomes 0, and the
//! uninit flags and unused-inodes count of a file system without descriptor checksums
//! go (the rest of the
//! descriptor is written from the allocators at the commit).

use crate::problem::{Code, Problem};
use usfs_ext4::format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use usfs_ext4::rw::Volume;

/// Applies `p`'s fix if it is a group descriptor's. A relocation with no room fails
/// (e2fsck's "Error allocating N contiguous block(s)", after which it aborts).
pub(super) fn apply(v: &mut Volume, p: &Problem) -> usfs_fs::Result<()> {
    let Some(g) = p.group() else {
        return Ok(());
    };
    match p.code {
        Code::GroupUnusedInodes => {}
        Code::GroupMetadataMissing => {
            // (No free block where e2fsck looks: its relocation fails, and so does this.)
            let no_room = || usfs_fs::Error::Io(std::io::Error::from_raw_os_error(libc::ENOSPC));
            let b = p.expected().filter(|&b| b != 0).ok_or_else(no_room)?;
            v.place_bitmap(g, p.found() == Some(2), b)?;
            return Ok(());
        }
        Code::GroupMetadataLocation => {
            match p.found() {
                Some(3) => v.relocate_inode_table(g, p.expected().filter(|&b| b != 0))?,
                Some(kind) => v.relocate_bitmap(g, kind == 2)?,
                None => 0,
            };
            return Ok(());
        }
        // e2fsck's pass 2 fixes: the descriptor stops hiding the inodes an entry names.
        Code::DirInodeInUnusedArea => {
            v.repair_group(g, |d| d.set_itable_unused(0));
            return Ok(());
        }
        Code::LastGroupBlockUninit => {
            v.repair_group(g, |d| d.set_bg_flags(d.bg_flags() & !BG_BLOCK_UNINIT));
            return Ok(());
        }
        Code::DirInodeUninitGroup => {
            v.repair_group(g, |d| d.set_bg_flags(d.bg_flags() & !BG_INODE_UNINIT));
            return Ok(());
        }
        _ => return Ok(()),
    }
    let f = &v.geometry().features;
    let csums = f.has_ro_compat(usfs_ext4::format::features::ro_compat::GDT_CSUM)
        || f.has_ro_compat(usfs_ext4::format::features::ro_compat::METADATA_CSUM);
    v.repair_group(g, |d| {
        if !csums {
            d.set_bg_flags(d.bg_flags() & !(BG_INODE_UNINIT | BG_BLOCK_UNINIT));
        }
        d.set_itable_unused(0);
    });
    Ok(())
}
