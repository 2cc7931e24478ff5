//! Fixes of superblock fields pass 0 finds wrong: resize_inode with meta_bg (turned off,
//! as e2fsck's check_resize_inode does), leftovers of a resize inode without the feature,
//! invalid quota inode numbers (set to 0), the superblock's copy of the journal inode
//! (made where it is missing or stale), bad extra-isize fields (set to 32), meta_bg
//! whose first group is past the descriptors and the Hurd's filetype (turned off), and
//! the journal fields of a superblock without has_journal (cleared).

use crate::problem::{Code, Problem};
use crate::sbfields::DEFAULT_EXTRA_ISIZE;
use usfs_ext4::format::features::{compat, incompat};
use usfs_ext4::rw::Volume;
use usfs_fs::Result;

/// The resize inode.
const RESIZE_INO: u32 = 7;

/// Applies `p`'s fix if it is a superblock field's.
pub(super) fn apply(v: &mut Volume, p: &Problem) -> Result<()> {
    match p.code {
        Code::ResizeInodeMetaBg => {
            v.edit_superblock(|sb| {
                sb.set_s_feature_compat(sb.s_feature_compat() & !compat::RESIZE_INODE);
                sb.set_s_reserved_gdt_blocks(0);
            });
            clear_resize_inode(v)
        }
        Code::ResizeInodeNotClear if p.ino().is_some() => clear_resize_inode(v),
        Code::ResizeInodeNotClear => {
            v.edit_superblock(|sb| sb.set_s_reserved_gdt_blocks(0));
            Ok(())
        }
        Code::JournalBackup => super::journal::backup(v),
        Code::JournalMove => v.hide_journal(p.detail().as_bytes()),
        Code::MinExtraIsize => {
            v.edit_superblock(|sb| sb.set_s_min_extra_isize(DEFAULT_EXTRA_ISIZE));
            Ok(())
        }
        Code::WantExtraIsize => {
            v.edit_superblock(|sb| sb.set_s_want_extra_isize(DEFAULT_EXTRA_ISIZE));
            Ok(())
        }
        Code::FirstMetaBgTooBig => {
            v.edit_superblock(|sb| {
                sb.set_s_feature_incompat(sb.s_feature_incompat() & !incompat::META_BG);
                sb.set_s_first_meta_bg(0);
            });
            Ok(())
        }
        Code::HurdFiletype => {
            v.edit_superblock(|sb| {
                sb.set_s_feature_incompat(sb.s_feature_incompat() & !incompat::FILETYPE)
            });
            Ok(())
        }
        // (As e2fsck clears a journal without has_journal: every journal field, and
        // needs_recovery.)
        Code::JournalHasJournal => {
            v.edit_superblock(|sb| {
                sb.set_s_journal_inum(0);
                sb.set_s_journal_dev(0);
                sb.set_s_journal_uuid(&[0; 16]);
                sb.set_s_feature_incompat(sb.s_feature_incompat() & !incompat::RECOVER);
            });
            Ok(())
        }
        Code::GroupDescBackup => v.restore_descriptors(p.found().ok_or(usfs_fs::Error::Invalid)?),
        Code::QuotaInode => {
            let kind = p.found().ok_or(usfs_fs::Error::Invalid)?;
            v.edit_superblock(|sb| match kind {
                0 => sb.set_s_usr_quota_inum(0),
                1 => sb.set_s_grp_quota_inum(0),
                _ => sb.set_s_prj_quota_inum(0),
            });
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Zeroes the resize inode's first 128 bytes, as e2fsck does (its blocks are free in
/// the next check).
fn clear_resize_inode(v: &mut Volume) -> Result<()> {
    v.repair_inode(RESIZE_INO, |r| r.bytes_mut()[..128].fill(0))
}
