//! Pass 1B: when pass 1 saw a block claimed twice, find every inode owning a shared
//! block and name the blocks (serial: it runs only on damaged file systems).

use crate::blocks::{walk_extents, walk_indirect, BlockKind, Visit};
use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use crate::state::InodeKind;
use usfs_ext4::format::inode::flags;
use usfs_fs::FileType;

struct Shared<'a> {
    ctx: &'a Ctx<'a>,
    found: Vec<u64>,
}

impl Visit for Shared<'_> {
    fn block(&mut self, pblk: u64, _kind: BlockKind) {
        if self.ctx.shared.dup_blocks.get(pblk) {
            self.found.push(pblk);
        }
    }
}

/// Reports every inode with multiply-claimed blocks.
pub(crate) fn run(ctx: &Ctx, w: &mut Worker) {
    let geo = ctx.geo;
    for ino in 1..=geo.inodes_count {
        let InodeKind::Used(ft) = ctx.shared.kind(ino) else {
            continue;
        };
        if !matches!(
            ft,
            FileType::Regular | FileType::Directory | FileType::Symlink
        ) || ino == 7
        {
            continue;
        }
        let Ok(raw) = ctx.fs.read_inode_raw(ino) else {
            continue;
        };
        if raw.has_flag(flags::INLINE_DATA) {
            continue;
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
        if raw.file_acl() != 0 && ctx.shared.dup_blocks.get(raw.file_acl()) {
            v.found.push(raw.file_acl());
        }
        if !v.found.is_empty() {
            v.found.dedup();
            let list: Vec<String> = v.found.iter().take(32).map(u64::to_string).collect();
            w.report(
                Problem::new(Code::MultiplyClaimed, format!("{ino}: {}", list.join(" "))).ino(ino),
            );
        }
    }
}
