//! Walking the blocks of one inode (extent tree or indirect map), validating the mapping
//! structure and reporting every block to a visitor. Pass 1 claims and counts them;
//! pass 1B looks for shared ones with the same walk.

use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use usfs_ext4::format::extent::{
    self, Extent, ExtentHeader, ExtentIndex, ENTRY_SIZE, EXTENT_MAGIC, MAX_DEPTH,
};

/// What a visited block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// File data at a logical block; `init` is false for unwritten extents.
    Data {
        /// Logical block.
        lblk: u64,
        /// Written (not an unwritten extent).
        init: bool,
    },
    /// An extent tree node or an indirect block.
    Meta,
}

/// Receives each block of an inode.
pub trait Visit {
    /// One physical block.
    fn block(&mut self, pblk: u64, kind: BlockKind);
}

/// Walks an extent-mapped inode whose root (i_block) is `root`. Problems go to `w` when
/// `report` is set. Returns false if the tree is unusable (bad root header).
pub fn walk_extents(
    ctx: &Ctx,
    w: &mut Worker,
    ino: u32,
    generation: u32,
    root: &[u8; 60],
    report: bool,
    v: &mut dyn Visit,
) -> bool {
    let h = ExtentHeader::new(&root[..]).expect("60 bytes");
    // eh_max must be the node's capacity, or at most 2 less (as e2fsck requires).
    if h.eh_magic() != EXTENT_MAGIC
        || h.eh_max() as usize > 4
        || (h.eh_max() as usize) < 2
        || h.eh_entries() > h.eh_max()
        || h.eh_depth() > 4 * MAX_DEPTH
    {
        if report {
            w.report(Problem::new(Code::ExtentHeader, ino.to_string()).ino(ino));
        }
        return false;
    }
    let mut node = [0u8; 60];
    node.copy_from_slice(root);
    let mut st = Walk {
        ino,
        generation,
        report,
        last_lblk: None,
    };
    st.node(ctx, w, &node[..], h.eh_depth(), 0, v);
    true
}

struct Walk {
    ino: u32,
    generation: u32,
    report: bool,
    /// End (exclusive) of the last leaf extent, to check ordering.
    last_lblk: Option<u64>,
}

impl Walk {
    fn problem(&self, w: &mut Worker, code: Code, detail: String) {
        if self.report {
            w.report(Problem::new(code, detail).ino(self.ino));
        }
    }

    fn node(
        &mut self,
        ctx: &Ctx,
        w: &mut Worker,
        node: &[u8],
        depth: u16,
        level: usize,
        v: &mut dyn Visit,
    ) {
        let h = ExtentHeader::new(node).expect("node >= 12 bytes");
        let n = h.eh_entries() as usize;
        for i in 0..n {
            let e = &node[ENTRY_SIZE * (i + 1)..ENTRY_SIZE * (i + 2)];
            if depth == 0 {
                let x = Extent::new(e).expect("12 bytes");
                let (lblk, len, pblk) = (x.ee_block() as u64, x.len() as u64, x.start());
                if len == 0
                    || pblk == 0
                    || !ctx.valid_block(pblk)
                    || !ctx.valid_block(pblk + len - 1)
                {
                    self.problem(
                        w,
                        Code::ExtentBad,
                        format!(
                            "{} (logical block {lblk}, physical block {pblk}, len {len})",
                            self.ino
                        ),
                    );
                    continue;
                }
                if self.last_lblk.is_some_and(|end| lblk < end) {
                    self.problem(
                        w,
                        Code::ExtentOrder,
                        format!("{} (logical block {lblk}, len {len})", self.ino),
                    );
                }
                self.last_lblk = Some(lblk + len);
                let init = !x.is_unwritten();
                for k in 0..len {
                    v.block(
                        pblk + k,
                        BlockKind::Data {
                            lblk: lblk + k,
                            init,
                        },
                    );
                }
                continue;
            }
            let ix = ExtentIndex::new(e).expect("12 bytes");
            let child = ix.leaf();
            if !ctx.valid_block(child) {
                self.problem(
                    w,
                    Code::ExtentBad,
                    format!("{} (index to block {child} out of range)", self.ino),
                );
                continue;
            }
            v.block(child, BlockKind::Meta);
            let mut buf = std::mem::take(&mut w.blocks[level]);
            if ctx.read_block(child, &mut buf).is_err() {
                self.problem(
                    w,
                    Code::ExtentBad,
                    format!("{} (cannot read extent block {child})", self.ino),
                );
                w.blocks[level] = buf;
                continue;
            }
            let bs = buf.len();
            let ch = ExtentHeader::new(&buf[..]).expect("block >= 12");
            // The index's logical start must be the child's first entry's.
            if ch.eh_magic() == EXTENT_MAGIC && ch.eh_entries() > 0 {
                let first = u32::from_le_bytes(buf[ENTRY_SIZE..ENTRY_SIZE + 4].try_into().unwrap());
                if first != ix.ei_block() {
                    self.problem(
                        w,
                        Code::ExtentBad,
                        format!("{} (interior node: logical start {} does not match {first} at the next level)", self.ino, ix.ei_block()),
                    );
                }
            }
            let cap = (bs - ENTRY_SIZE) / ENTRY_SIZE;
            let ok = ch.eh_magic() == EXTENT_MAGIC
                && ch.eh_max() as usize <= cap
                && ch.eh_max() as usize + 2 >= cap
                && ch.eh_entries() <= ch.eh_max()
                && ch.eh_depth() == depth - 1;
            if !ok {
                self.problem(
                    w,
                    Code::ExtentHeader,
                    format!("{} (extent block {child})", self.ino),
                );
            } else {
                if let Some(seed) = ctx.fs.csum_seed() {
                    let off = extent::tail_offset(ch.eh_max());
                    let good = off + 4 <= bs
                        && u32::from_le_bytes(buf[off..off + 4].try_into().unwrap())
                            == extent::block_checksum(
                                seed,
                                self.ino,
                                self.generation,
                                &buf,
                                ch.eh_max(),
                            );
                    if !good {
                        self.problem(
                            w,
                            Code::ExtentChecksum,
                            format!("{} (extent block {child})", self.ino),
                        );
                    }
                }
                self.node(ctx, w, &buf, depth - 1, level + 1, v);
            }
            w.blocks[level] = buf;
        }
    }
}

/// Walks a block-mapped (ext2/ext3) inode: direct, then each indirect tree in pre-order
/// (an indirect block before the blocks it maps, as e2fsck's iterator reports them).
pub fn walk_indirect(
    ctx: &Ctx,
    w: &mut Worker,
    ino: u32,
    i_block: &[u8; 60],
    report: bool,
    v: &mut dyn Visit,
) {
    let word = |i: usize| u32::from_le_bytes(i_block[i * 4..i * 4 + 4].try_into().unwrap()) as u64;
    let per = (ctx.geo.block_size / 4) as u64;
    for i in 0..12 {
        let b = word(i);
        if b == 0 {
            continue;
        }
        if !ctx.valid_block(b) {
            if report {
                w.report(
                    Problem::new(
                        Code::IllegalBlock,
                        format!("{ino} (block {b} at logical {i})"),
                    )
                    .ino(ino),
                );
            }
            continue;
        }
        v.block(
            b,
            BlockKind::Data {
                lblk: i as u64,
                init: true,
            },
        );
    }
    let mut base = 12u64;
    let mut span = per;
    for level in 1..=3usize {
        let b = word(11 + level);
        if b != 0 {
            indirect(ctx, w, ino, b, level, base, report, v);
        }
        base += span;
        span *= per;
    }
}

#[allow(clippy::too_many_arguments)]
fn indirect(
    ctx: &Ctx,
    w: &mut Worker,
    ino: u32,
    blk: u64,
    level: usize,
    base: u64,
    report: bool,
    v: &mut dyn Visit,
) {
    if !ctx.valid_block(blk) {
        if report {
            w.report(
                Problem::new(Code::IllegalBlock, format!("{ino} (indirect block {blk})")).ino(ino),
            );
        }
        return;
    }
    v.block(blk, BlockKind::Meta);
    let mut buf = std::mem::take(&mut w.blocks[level]);
    if ctx.read_block(blk, &mut buf).is_err() {
        if report {
            w.report(
                Problem::new(
                    Code::IllegalBlock,
                    format!("{ino} (cannot read indirect block {blk})"),
                )
                .ino(ino),
            );
        }
        w.blocks[level] = buf;
        return;
    }
    let per = buf.len() / 4;
    let sub = (per as u64).pow(level as u32 - 1);
    for i in 0..per {
        let b = u32::from_le_bytes(buf[i * 4..i * 4 + 4].try_into().unwrap()) as u64;
        if b == 0 {
            continue;
        }
        let lblk = base + i as u64 * sub;
        if level == 1 {
            if !ctx.valid_block(b) {
                if report {
                    w.report(
                        Problem::new(
                            Code::IllegalBlock,
                            format!("{ino} (block {b} at logical {lblk})"),
                        )
                        .ino(ino),
                    );
                }
                continue;
            }
            v.block(b, BlockKind::Data { lblk, init: true });
        } else {
            indirect(ctx, w, ino, b, level - 1, lblk, report, v);
        }
    }
    w.blocks[level] = buf;
}
