//! Pass 1's checks of a directory's map that e2fsck makes before pass 2 reads it: a
//! directory without a block is cleared ("zero-length directory"); blocks past the size
//! a directory may have without large_dir are cleared ("causes directory to be too
//! big"); an uninitialized extent in a directory is marked initialized.

use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use usfs_ext4::format::extent;
use usfs_ext4::format::features::incompat;
use usfs_ext4::format::inode::{flags, Inode};

/// The first logical block a directory (`is_dir`; record `inode`) may not map: e2fsck's
/// limit of 2^31 bytes (2^21 blocks of 1 KiB) without large_dir and with i_size_high
/// clear; `u64::MAX` otherwise. (e2fsck compares a block map's block number with
/// `>` and an extent's end with `>`: the first block too far is one past the limit for
/// a block map, the limit itself for extents.)
pub(crate) fn end(ctx: &Ctx, inode: &Inode<Vec<u8>>, is_dir: bool) -> u64 {
    if !is_dir || ctx.geo.features.has_incompat(incompat::LARGEDIR) || inode.i_size_high() != 0 {
        return u64::MAX;
    }
    let limit = 1u64 << (31 - ctx.geo.block_size.trailing_zeros());
    if inode.i_flags() & flags::EXTENTS != 0 {
        limit
    } else {
        limit + 1
    }
}

/// Reports what a walk of directory `ino` found at or past `end` (its limit, [`end`]):
/// `too_big`, the first such block; and in uninitialized extents: `uninit`, the first
/// such block.
pub(crate) fn report(
    w: &mut Worker,
    ino: u32,
    end: u64,
    too_big: Option<u64>,
    uninit: Option<u64>,
) {
    if let Some(lblk) = too_big {
        w.report(
            Problem::new(Code::TooBigDir, format!("{ino} (block #{lblk})"))
                .with_ino(ino)
                .values(lblk, end),
        );
    }
    if let Some(lblk) = uninit {
        w.report(
            Problem::new(Code::DirUninitExtent, format!("{ino} at block {lblk}"))
                .with_ino(ino)
                .values(lblk, lblk),
        );
    }
}

/// Does directory record `inode` map no block at all (no inline data, no xattr block, an
/// empty block map or extent root)? e2fsck clears such a directory in pass 1.
pub(crate) fn zero_length(ctx: &Ctx, inode: &Inode<Vec<u8>>) -> bool {
    let ib = inode.i_block();
    let empty = if inode.i_flags() & flags::EXTENTS != 0 {
        // A sound extent header with no entries.
        extent::header_ok(ib) && ib[2..4] == [0, 0]
    } else {
        ib.iter().all(|&b| b == 0)
    };
    empty
        && inode.i_flags() & flags::INLINE_DATA == 0
        && (inode.file_acl() == 0
            || !ctx
                .geo
                .features
                .has_compat(usfs_ext4::format::features::compat::EXT_ATTR))
}
