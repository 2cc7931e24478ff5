//! Fixes of single inode fields, set from the values the problem carries (the group
//! summaries need nothing here: the volume writes them from the check's findings).

use crate::problem::{Code, Problem};
use std::collections::{HashMap, HashSet};
use usfs_ext4::format::features::incompat;
use usfs_ext4::format::inode::flags;
use usfs_ext4::rw::Volume;
use usfs_fs::{Error, Result};

/// Illegal block pointers in one block-mapped inode from which e2fsck gives up on the
/// inode ("Too many illegal blocks in inode. Clear inode?") instead of clearing them.
const TOO_MANY_ILLEGAL: usize = 12;

/// The inodes of a round with too many illegal blocks to keep ([`TOO_MANY_ILLEGAL`]).
pub(super) fn too_many_illegal(problems: &[Problem]) -> HashSet<u32> {
    let mut n: HashMap<u32, usize> = HashMap::new();
    for p in problems.iter().filter(|p| p.code == Code::IllegalBlock) {
        *n.entry(p.ino().unwrap_or(0)).or_default() += 1;
    }
    n.into_iter()
        .filter(|&(_, k)| k >= TOO_MANY_ILLEGAL)
        .map(|(ino, _)| ino)
        .collect()
}

/// Applies `p`'s fix if it is an inode field's; the inodes in `give_up` are cleared
/// rather than rebuilt for their illegal blocks.
pub(super) fn apply(v: &mut Volume, p: &Problem, give_up: &HashSet<u32>) -> Result<()> {
    if p.code == Code::XattrRefcount {
        let (b, n) = p.block().zip(p.expected()).ok_or(Error::Invalid)?;
        return v.set_xattr_refcount(b, n as u32);
    }
    let (Some(ino), want) = (p.ino(), p.expected()) else {
        return Ok(());
    };
    let inode_size = v.reader().geometry().inode_size;
    let want_extra = v.reader().superblock().s_want_extra_isize();
    // Every problem of these codes carries the value its check computed.
    let needs_value = || want.ok_or(Error::Invalid);
    let now = v.now().sec as u32;
    if let Some(e) = super::fields::Edit::of(p, now)? {
        return v.repair_inode(ino, |r| e.apply(r));
    }
    match p.code {
        // e2fsck's check_ea_in_inode "Clear": every in-inode attribute goes, by zeroing
        // the area's magic (what named EA inodes or held inline data, the next check
        // sees).
        // An inode 8 that is no journal, zeroed whole (e2fsck zeroes the record's
        // in-memory copy and writes it).
        Code::JournalInodeNotClear => v.repair_inode(ino, |r| r.bytes_mut().fill(0)),
        Code::EaInodeValue | Code::EaInodeHash if p.block().is_some() => {
            v.repair_inode(ino, |r| r.set_file_acl(0))
        }
        Code::BadXattrInInode | Code::EaInodeValue | Code::EaInodeHash => {
            v.repair_inode(ino, |r| {
                let at = 128 + r.i_extra_isize() as usize;
                if at + 4 <= inode_size as usize {
                    r.bytes_mut()[at..at + 4].fill(0);
                }
            })
        }
        // e2fsck's clear of an inode it cannot use: no links, deleted now (its blocks
        // and bitmap bit are free in what the check found; entries naming it go in the
        // next round).
        Code::DirCollapse => v.collapse_dir_holes(ino),
        Code::DirHole => v.fix_dir_hole(ino, p.found().ok_or(Error::Invalid)?, needs_value()?),
        // e2fsck's check_is_really_dir: the file type bits become a directory's.
        Code::TreatAsDirectory => {
            let mode = needs_value()? as u16;
            v.repair_inode(ino, |r| r.set_i_mode(mode))
        }
        Code::SpecialFlags => v.repair_inode(ino, |r| {
            r.set_i_flags(r.i_flags() & !(flags::EXTENTS | flags::INLINE_DATA))
        }),
        // The flags the check names (expected: the mask) go.
        Code::BadFlags => match needs_value()? as u32 {
            0 => v.repair_inode(ino, |r| r.set_i_flags(r.i_flags() | flags::EXTENTS)),
            mask => v.repair_inode(ino, |r| r.set_i_flags(r.i_flags() & !mask)),
        },
        Code::ExtentFeature => {
            v.edit_superblock(|sb| {
                sb.set_s_feature_incompat(sb.s_feature_incompat() | incompat::EXTENTS)
            });
            Ok(())
        }
        // e2fsck's truncation of an inline inode without its attribute.
        Code::BadInlineData => v.repair_inode(ino, |r| {
            r.set_size(0);
            r.set_i_flags(r.i_flags() & !flags::INLINE_DATA);
            r.set_i_block(&[0u8; 60]);
        }),
        Code::InlineFeature => {
            v.edit_superblock(|sb| {
                sb.set_s_feature_incompat(sb.s_feature_incompat() | incompat::INLINE_DATA)
            });
            Ok(())
        }
        Code::FastSymlinkExtents => {
            v.repair_inode(ino, |r| r.set_i_flags(r.i_flags() & !flags::EXTENTS))
        }
        Code::SpecialImmutable => v.repair_inode(ino, |r| {
            r.set_i_flags(r.i_flags() & !(flags::IMMUTABLE | flags::APPEND))
        }),
        Code::SpecialSize => v.repair_inode(ino, |r| r.set_size(0)),
        Code::EncryptNoContext => {
            v.repair_inode(ino, |r| r.set_i_flags(r.i_flags() & !flags::ENCRYPT))
        }
        // The root is not a directory: cleared (its blocks and bit freed), for pass 3's
        // fix to make a new one.
        Code::ReservedInode if ino == usfs_ext4::format::inode::ROOT_INO => v.clear_inode(ino),
        Code::TooBigDir => v.rebuild_dir_map(ino, needs_value()?, false),
        // e2fsck's pass 1E: the map built again from its runs, compactly.
        Code::ExtentOptimize => v.rebuild_map(ino, &mut |_| false),
        Code::DirUninitExtent => v.rebuild_dir_map(ino, u64::MAX, true),
        Code::InodeBadMode
        | Code::EncryptBadContext
        | Code::BadSpecial
        | Code::BadSymlink
        | Code::ZeroLengthDir
        | Code::InlineJunk
        | Code::InlineNoFeature
        | Code::ExtentsNoFeature => v.repair_inode(ino, |r| {
            r.set_i_links_count(0);
            r.set_i_dtime(now);
        }),
        // As e2fsck clears a bad xattr block: the inode lets go of it (i_blocks and the
        // block's bit follow in the next round).
        Code::BadXattrBlock => v.repair_inode(ino, |r| r.set_file_acl(0)),
        Code::XattrBlockChecksum => v.fix_xattr_checksum(p.block().ok_or(Error::Invalid)?),
        Code::ExtentChecksum => v.fix_extent_checksum(ino, p.block().ok_or(Error::Invalid)?),
        Code::DirBlockChecksum => v.fix_dir_checksum(ino, p.block().ok_or(Error::Invalid)?),
        // (e2fsck clears the index and rebuilds it; the node is sound but for its
        // checksum, so usfs keeps it and sets the checksum.)
        Code::HtreeChecksum => {
            let lblk = p.entry().ok_or(Error::Invalid)?.lblk as u64;
            v.fix_dx_checksum(ino, lblk, p.block().ok_or(Error::Invalid)?)
        }
        // Map entries out of range, unreadable or bad tree nodes, out-of-order extents:
        // the map is built again without them (e2fsck clears each); i_size, i_blocks and
        // the bitmaps follow in the next round. A bad header in the inode itself leaves
        // nothing to keep: the inode is cleared, as e2fsck clears it.
        Code::ExtentHeader if p.block().is_none() => v.repair_inode(ino, |r| {
            r.set_i_links_count(0);
            r.set_i_dtime(now);
        }),
        Code::IllegalBlock if give_up.contains(&ino) => v.repair_inode(ino, |r| {
            r.set_i_links_count(0);
            r.set_i_dtime(now);
        }),
        Code::IllegalBlock | Code::ExtentBad | Code::ExtentOrder | Code::ExtentHeader => {
            v.rebuild_map(ino, &mut |_| false)
        }
        Code::BadExtraIsize => v.repair_inode(ino, |r| {
            r.set_i_extra_isize(fixed_extra_isize(r.i_extra_isize(), inode_size, want_extra))
        }),
        _ => Ok(()),
    }
}

/// The i_extra_isize e2fsck gives an inode whose value is invalid: the superblock's wanted
/// size when it lies outside what the inode can hold (at least i_extra_isize and
/// i_checksum_hi), else rounded up to a multiple of 4.
fn fixed_extra_isize(extra: u16, inode_size: u32, want: u16) -> u16 {
    let (min, max) = (4, inode_size.saturating_sub(128) as u16);
    if extra < min || extra > max {
        want
    } else {
        (extra + 3) & !3
    }
}

#[cfg(test)]
mod tests {
    use super::fixed_extra_isize;

    #[test]
    fn extra_isize_as_e2fsck_fixes_it() {
        assert_eq!(fixed_extra_isize(2, 256, 32), 32);
        assert_eq!(fixed_extra_isize(200, 256, 32), 32);
        assert_eq!(fixed_extra_isize(30, 256, 32), 32);
        assert_eq!(fixed_extra_isize(29, 256, 32), 32);
        assert_eq!(fixed_extra_isize(6, 256, 32), 8);
    }
}
