//! Pass 0's checks of superblock fields, as e2fsck's check_super_block and
//! e2fsck_check_ext3_journal make them: the extra-isize fields, meta_bg's first group,
//! the Hurd's filetype feature, a journal the superblock names without has_journal,
//! and a journal kept in a visible file (moved by a repair).
//! Their fixes set the fields ([`crate::repair`]'s superblock module).

use crate::ctx::Ctx;
use crate::problem::{Code, Problem};
use usfs_ext4::format::features::{compat, incompat};

/// The inode's fixed part, before i_extra_isize.
const GOOD_OLD_INODE_SIZE: u32 = 128;
/// What e2fsck sets a bad extra-isize field to: sizeof(struct ext2_inode_large) - 128.
pub(crate) const DEFAULT_EXTRA_ISIZE: u16 = 32;
/// s_creator_os of the Hurd.
const OS_HURD: u32 = 1;

/// The problems of the superblock's fields; `repairing`: the Hurd's filetype feature is
/// looked at only by a repair, as e2fsck looks at it only when it may write.
pub(crate) fn check(ctx: &Ctx, repairing: bool) -> Vec<Problem> {
    let sb = ctx.fs.superblock();
    let geo = ctx.geo;
    let mut out = Vec::new();
    if geo.inode_size > GOOD_OLD_INODE_SIZE {
        // (i_extra_isize and i_checksum_hi at least; at most the inode's extra space.)
        let (min, max) = (4, geo.inode_size - GOOD_OLD_INODE_SIZE);
        let bad = |v: u16| v != 0 && (u32::from(v) < min || u32::from(v) > max || v & 3 != 0);
        for (code, v) in [
            (Code::MinExtraIsize, sb.s_min_extra_isize()),
            (Code::WantExtraIsize, sb.s_want_extra_isize()),
        ] {
            if bad(v) {
                out.push(
                    Problem::new(code, v.to_string()).values(v as u64, DEFAULT_EXTRA_ISIZE as u64),
                );
            }
        }
    }
    let desc_blocks = geo.group_count.div_ceil(geo.block_size / geo.desc_size);
    if geo.features.has_incompat(incompat::META_BG) && sb.s_first_meta_bg() > desc_blocks {
        out.push(Problem::new(
            Code::FirstMetaBgTooBig,
            format!("{}, max value {desc_blocks}", sb.s_first_meta_bg()),
        ));
    }
    if repairing && sb.s_creator_os() == OS_HURD && geo.features.has_incompat(incompat::FILETYPE) {
        out.push(Problem::new(Code::HurdFiletype, ""));
    }
    if !geo.features.has_compat(compat::HAS_JOURNAL) && crate::journal::loads(ctx.fs) {
        // (No inode attached: it is asked with the superblock's questions, first.)
        out.push(Problem::new(Code::JournalHasJournal, ""));
    }
    if repairing {
        out.extend(visible_journal(ctx));
    }
    out
}

/// The names e2fsck looks for a visible journal under, in the root, in its order.
const JOURNAL_NAMES: [&str; 4] = [".journal", "journal", ".journal.dat", "journal.dat"];

/// A journal in a visible file of the root that e2fsck_move_ext3_journal would move to
/// inode 8: has_journal, the superblock naming an inode other than 8 with one link, and
/// the root naming it by one of [`JOURNAL_NAMES`].
fn visible_journal(ctx: &Ctx) -> Option<Problem> {
    use usfs_ext4::format::extent::ExtentHeader;
    use usfs_ext4::format::inode::{flags, JOURNAL_INO, ROOT_INO};
    use usfs_fs::FileSystem;
    let ino = ctx.fs.superblock().s_journal_inum();
    if !ctx.geo.features.has_compat(compat::HAS_JOURNAL) || ino == 0 || ino == JOURNAL_INO {
        return None;
    }
    let raw = ctx.fs.read_inode_raw(ino).ok()?;
    if raw.i_links_count() != 1 {
        return None;
    }
    // (Extent blocks outside the inode carry checksums seeded by its number: moved to
    // inode 8 they would need new ones, which the move does not write; such a journal
    // stays where it is.)
    let depth = ExtentHeader::new(&raw.i_block()[..]).map_or(0, |h| h.eh_depth());
    if ctx.fs.csum_seed().is_some() && raw.has_flag(flags::EXTENTS) && depth > 0 {
        return None;
    }
    let name = JOURNAL_NAMES
        .into_iter()
        .find(|n| ctx.fs.lookup(ROOT_INO as u64, n.as_bytes()).ok() == Some(ino as u64))?;
    Some(Problem::new(Code::JournalMove, name).with_ino(ino))
}
