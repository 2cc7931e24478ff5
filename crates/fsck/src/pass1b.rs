//! Pass 1B: when pass 1 saw a block claimed twice, find every inode owning a shared
//! block and name the blocks (serial: it runs only on damaged file systems).

use crate::blocks::{walk_extents, walk_indirect, BlockKind, Visit};
use crate::ctx::{Ctx, Worker};
use crate::problem::{Claims, Code, Problem};
use crate::state::InodeKind;
use std::collections::HashSet;
use usfs_ext4::format::inode::flags;
use usfs_fs::FileType;

struct Shared<'a> {
    ctx: &'a Ctx<'a>,
    found: Vec<u64>,
}

impl Visit for Shared<'_> {
    fn block(&mut self, pblk: u64, _kind: BlockKind) {
        if self.ctx.shared.block_dup(pblk) {
            self.found.push(pblk);
        }
    }
}

/// The multiply-claimed blocks that group metadata occupies (superblock and descriptor
/// copies, reserved descriptor blocks, bitmaps, inode tables): their other claimants are
/// inodes, which must all give them up.
fn shared_with_metadata(ctx: &Ctx) -> HashSet<u64> {
    let geo = ctx.geo;
    let itable_blocks =
        (geo.inodes_per_group as u64 * geo.inode_size as u64).div_ceil(geo.block_size as u64);
    let dup = |b: &u64| ctx.valid_block(*b) && ctx.shared.block_dup(*b);
    let mut out = HashSet::new();
    for g in 0..geo.group_count {
        let d = ctx.fs.group(g);
        out.extend(
            crate::pass0::metadata_blocks_of_group(ctx, g)
                .iter()
                .filter(|b| dup(b)),
        );
        let runs = [
            (d.block_bitmap(), 1),
            (d.inode_bitmap(), 1),
            (d.inode_table(), itable_blocks),
        ];
        for (b, n) in runs {
            out.extend((b..b.saturating_add(n)).filter(dup));
        }
    }
    out
}

/// The resize inode.
const RESIZE_INO: u32 = 7;
/// The bad-blocks inode.
const BAD_BLOCKS_INO: u32 = 1;

/// The raw inode `ino` and its multiply-claimed blocks in map order, once per claim (None
/// for an inode without a block map: unused, a device, inline data).
fn walk_inode(
    ctx: &Ctx,
    w: &mut Worker,
    ino: u32,
) -> Option<(usfs_ext4::format::inode::Inode<Vec<u8>>, Vec<u64>)> {
    let InodeKind::Used(ft) = ctx.shared.kind(ino) else {
        return None;
    };
    if !matches!(
        ft,
        FileType::Regular | FileType::Directory | FileType::Symlink
    ) {
        return None;
    }
    let raw = ctx.fs.read_inode_raw(ino).ok()?;
    if raw.has_flag(flags::INLINE_DATA) {
        return None;
    }
    let mut v = Shared {
        ctx,
        found: Vec::new(),
    };
    let i_block = *raw.i_block();
    if raw.has_flag(flags::EXTENTS) {
        walk_extents(ctx, w, ino, raw.i_generation(), &i_block, false, &mut v);
    } else if ft != FileType::Symlink || raw.i_blocks_lo() != 0 {
        walk_indirect(ctx, w, ino, &i_block, false, &mut v);
    }
    Some((raw, v.found))
}

/// Reports every inode with multiply-claimed blocks.
pub(crate) fn run(ctx: &Ctx, w: &mut Worker) {
    let geo = ctx.geo;
    let mut metadata = shared_with_metadata(ctx);
    // The resize inode's blocks (reserved descriptor blocks) stay where they are: a file
    // sharing one gives it up, as with metadata (e2fsck's pass 1D never clones inode 7).
    if let Some((_, found)) = walk_inode(ctx, w, RESIZE_INO) {
        metadata.extend(found);
    }
    // So do the bad-blocks inode's (e2fsck's pass 1D never clones inode 1): a file
    // sharing a listed block gets a copy of it.
    if let Ok(raw) = ctx.fs.read_inode_raw(BAD_BLOCKS_INO) {
        let mut v = Shared {
            ctx,
            found: Vec::new(),
        };
        walk_indirect(ctx, w, BAD_BLOCKS_INO, raw.i_block(), false, &mut v);
        metadata.extend(v.found);
    }
    for ino in 1..=geo.inodes_count {
        if ino == RESIZE_INO || ino == BAD_BLOCKS_INO {
            continue;
        }
        let Some((raw, mut found)) = walk_inode(ctx, w, ino) else {
            continue;
        };
        let xattr_block = Some(raw.file_acl()).filter(|&b| b != 0 && ctx.shared.block_dup(b));
        found.extend(xattr_block);
        if !found.is_empty() {
            let mut listed = found.clone();
            listed.dedup();
            let list: Vec<String> = listed.iter().take(32).map(u64::to_string).collect();
            listed.sort_unstable();
            listed.dedup();
            let claims = Claims {
                metadata: listed
                    .into_iter()
                    .filter(|b| metadata.contains(b))
                    .collect(),
                blocks: found,
                xattr_block,
            };
            w.report(
                Problem::new(Code::MultiplyClaimed, format!("{ino}: {}", list.join(" ")))
                    .with_ino(ino)
                    .with_claims(claims),
            );
        }
    }
}
