//! Pass 1's checks of the inline-data and extents flags, in e2fsck's order and with its
//! remedies (pass1.c): both flags on one inode (fix_inline_data_extents_file: the one
//! the contents do not bear out goes, or both, or the inode), the inline flag without
//! the feature (the feature is turned on when the inode holds a `system.data`
//! attribute, else the inode is cleared), the inline flag without a `system.data`
//! attribute (the inode is truncated: size 0, no flag, an empty i_block), the extents
//! flag without the feature (turned on when i_block holds an extent header, else the
//! inode is cleared), and an extent header in a file or directory without the flag (the
//! flag is set). Each remedy is
//! applied to the record in `w.inode` as well, so the rest of the check sees the inode
//! as the repair leaves it, as e2fsck goes on with its fixed copy.

use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use std::ops::ControlFlow;
use usfs_ext4::format::extent;
use usfs_ext4::format::features::{compat, incompat};
use usfs_ext4::format::inode::{flags, Inode, GOOD_OLD_INODE_SIZE};
use usfs_ext4::format::xattr;
use usfs_ext4::walk::{
    self,
    xattr::{Entry, Value, XattrCtx, XattrIssue, XattrVisitor},
    Mode,
};
use usfs_fs::FileType;

/// Bytes of i_block.
const I_BLOCK: u64 = 60;

/// Checks the flags of inode `ino` (record in `w.inode`, file type `ft`); returns false
/// when the inode is to be cleared (reported; pass 1 leaves it unused). (An inode whose
/// flags are impossible without a feature is cleared too, but stays in use for the
/// round: [`unmapped`].)
pub(crate) fn check(ctx: &Ctx, w: &mut Worker, ino: u32, ft: FileType) -> bool {
    let f = &ctx.geo.features;
    let (extent_fs, inline_fs) = (
        f.has_incompat(incompat::EXTENTS),
        f.has_incompat(incompat::INLINE_DATA),
    );
    let both = flags::EXTENTS | flags::INLINE_DATA;
    if w.inode.i_flags() & both == both && (extent_fs || inline_fs) {
        match both_flags(ctx, w, ft) {
            Some(0) => {}
            Some(mask) => {
                let what = match mask {
                    flags::INLINE_DATA => "has extent header but inline data flag is set",
                    flags::EXTENTS => "seems to have inline data but extent flag is set",
                    _ if is_special(ft) => {
                        "is a special file with extents or inline-data flags set"
                    }
                    _ => "seems to have block map but inline data and extent flags set",
                };
                clear_flags(w, ino, mask, what);
            }
            None => {
                let what =
                    format!("{ino} has inline data and extent flags set but i_block contains junk");
                w.report(Problem::new(Code::InlineJunk, what).with_ino(ino));
                return false;
            }
        }
    }
    if w.inode.i_flags() & flags::INLINE_DATA == 0 {
        return extents(ctx, w, ino, ft);
    }
    let attr = matches!(system_data(ctx, &w.inode, ino), Some(Some(_)));
    if !inline_fs {
        if attr {
            w.report(Problem::new(Code::InlineFeature, ino.to_string()).with_ino(ino));
            return true;
        }
        w.report(Problem::new(Code::InlineNoFeature, ino.to_string()).with_ino(ino));
        unmapped(w);
        return true;
    }
    if !attr {
        w.report(
            Problem::new(
                Code::BadInlineData,
                format!("{ino} has INLINE_DATA_FL flag but extended attribute not found"),
            )
            .with_ino(ino),
        );
        let i = &mut w.inode;
        i.set_size(0);
        i.set_i_flags(i.i_flags() & !flags::INLINE_DATA);
        i.set_i_block(&[0u8; 60]);
    }
    extents(ctx, w, ino, ft)
}

/// The extents flag against the feature and i_block; false when the inode is to be
/// cleared.
fn extents(ctx: &Ctx, w: &mut Worker, ino: u32, ft: FileType) -> bool {
    let extent_fs = ctx.geo.features.has_incompat(incompat::EXTENTS);
    let has_flag = w.inode.i_flags() & flags::EXTENTS != 0;
    let header = extent::header_ok(w.inode.i_block());
    if has_flag && !extent_fs {
        if header {
            // (e2fsck turns the feature on at the first such inode and takes the
            // others as they are; every one says so here, the fix is the same.)
            let what =
                format!("{ino} is in extent format, but superblock is missing EXTENTS feature");
            w.report(Problem::new(Code::ExtentFeature, what).with_ino(ino));
            return true;
        }
        let what = format!("{ino} has EXTENTS_FL flag set on filesystem without extents support");
        w.report(Problem::new(Code::ExtentsNoFeature, what).with_ino(ino));
        unmapped(w);
    }
    if !has_flag && extent_fs && header && matches!(ft, FileType::Regular | FileType::Directory) {
        let what = format!("{ino} missing EXTENT_FL, but is in extents format");
        w.report(
            Problem::new(Code::BadFlags, what)
                .with_ino(ino)
                .values(u64::from(w.inode.i_flags()), 0),
        );
        let f = w.inode.i_flags() | flags::EXTENTS;
        w.inode.set_i_flags(f);
    }
    true
}

/// The casefold flag of inode `ino` (record in `w.inode`, mode `mode`), e2fsck's first
/// flag check: on anything but a directory, or without the casefold feature (which
/// images usfs reads never have), the flag goes.
pub(crate) fn casefold(ctx: &Ctx, w: &mut Worker, ino: u32, mode: u16) {
    if w.inode.i_flags() & flags::CASEFOLD == 0 {
        return;
    }
    let dir = FileType::from_mode(mode as u32) == Some(FileType::Directory);
    if !dir {
        clear_flags(
            w,
            ino,
            flags::CASEFOLD,
            "has the casefold flag set but is not a directory",
        );
    } else if !ctx.geo.features.has_incompat(incompat::CASEFOLD) {
        let what = "(a directory) has the casefold flag, but the casefold feature is not enabled";
        clear_flags(w, ino, flags::CASEFOLD, what);
    }
}

/// The imagic flag (AFS's inodes, kept without links): without the imagic_inodes
/// feature it goes (e2fsck's PR_1_SET_IMAGIC); with it, pass 4 leaves the inode alone.
pub(crate) fn imagic(ctx: &Ctx, w: &mut Worker, ino: u32) {
    if w.inode.i_flags() & flags::IMAGIC == 0 {
        return;
    }
    if ctx.geo.features.has_compat(compat::IMAGIC_INODES) {
        w.imagic.push(ino);
    } else {
        clear_flags(w, ino, flags::IMAGIC, "has imagic flag set");
    }
}

/// Takes inode `w.inode`, which the fix clears, as mapping nothing for the rest of the
/// check: it stays in use for this round (as e2fsck -n goes on with it), claims no
/// blocks, and the next round finds it cleared and the entries naming it.
fn unmapped(w: &mut Worker) {
    let f = w.inode.i_flags() & !(flags::EXTENTS | flags::INLINE_DATA);
    w.inode.set_i_flags(f);
    w.inode.set_i_block(&[0u8; 60]);
}

/// Reports the flags `mask` of inode `ino` as to be cleared (e2fsck's `what`), and
/// clears them in `w.inode`.
fn clear_flags(w: &mut Worker, ino: u32, mask: u32, what: &str) {
    w.report(
        Problem::new(Code::BadFlags, format!("{ino} {what}"))
            .with_ino(ino)
            .values(u64::from(w.inode.i_flags()), u64::from(mask)),
    );
    let f = w.inode.i_flags() & !mask;
    w.inode.set_i_flags(f);
}

/// A device file, FIFO or socket?
fn is_special(ft: FileType) -> bool {
    !matches!(
        ft,
        FileType::Regular | FileType::Directory | FileType::Symlink
    )
}

/// e2fsck's fix_inline_data_extents_file: the flags to clear (0: none, the special-file
/// check does it), or `None` when the inode is junk and goes.
fn both_flags(ctx: &Ctx, w: &Worker, ft: FileType) -> Option<u32> {
    let both = flags::EXTENTS | flags::INLINE_DATA;
    if is_special(ft) {
        return Some(both);
    }
    let inode = &w.inode;
    let ib = inode.i_block();
    if extent::header_ok(ib) {
        return Some(flags::INLINE_DATA);
    }
    let isz = ctx.geo.inode_size as u64;
    let max_ea = if isz > GOOD_OLD_INODE_SIZE as u64 {
        isz.saturating_sub(GOOD_OLD_INODE_SIZE as u64 + u64::from(inode.i_extra_isize()))
    } else {
        0
    };
    if inode.size() < I_BLOCK + max_ea {
        return Some(flags::EXTENTS);
    }
    let blocks = ctx.geo.blocks_count;
    let block_map = (0..15)
        .all(|i| u64::from(u32::from_le_bytes(ib[i * 4..i * 4 + 4].try_into().unwrap())) < blocks);
    block_map.then_some(both)
}

/// The `system.data` attribute of inode record `inode` (`ino`) as e2fsck's
/// get_inline_data_ea_size reads it from the inode's xattr area: `None` when the area is
/// damaged, else the value's length if the attribute is there.
pub(crate) fn system_data(ctx: &Ctx, inode: &Inode<Vec<u8>>, ino: u32) -> Option<Option<usize>> {
    /// The value's length if seen; the area is damaged.
    struct Seen(Option<usize>, bool);
    impl<'a> XattrVisitor<'a> for Seen {
        fn entry(&mut self, e: Entry<'a>) {
            if e.index == xattr::INDEX_SYSTEM && e.name == b"data" {
                self.0 = Some(match e.value {
                    Value::Here(v) => v.len(),
                    Value::Inode { size, .. } => size as usize,
                    Value::Outside => 0,
                });
            }
        }
        fn issue(&mut self, _: XattrIssue) -> ControlFlow<()> {
            self.1 = true;
            ControlFlow::Break(())
        }
    }
    let isz = ctx.geo.inode_size as usize;
    let mut seen = Seen(None, false);
    if let Some(area) = walk::xattr::ibody(inode.bytes(), isz, inode.i_extra_isize()) {
        let cx = XattrCtx {
            ino,
            ea_inode: ctx.geo.features.has_incompat(incompat::EA_INODE),
            seed: ctx.fs.csum_seed(),
        };
        let _ = walk::xattr::scan_entries(area, 0, &cx, Mode::Lenient, &mut seen);
    }
    (!seen.1).then_some(seen.0)
}
