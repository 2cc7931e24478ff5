//! Walking the blocks of one inode (extent tree or indirect map) with the ext4 crate's
//! walkers in lenient mode ([`usfs_ext4::walk`]), turning each issue they report into a
//! problem code and each block into a visit. Pass 1 claims and counts the blocks; pass 1B
//! looks for shared ones with the same walk.

use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use std::ops::ControlFlow;
use usfs_ext4::walk::{self, BlockSource, MapCtx, MapIssue, MapVisitor, Mode};

/// What a visited block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockKind {
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
pub(crate) trait Visit {
    /// One physical block.
    fn block(&mut self, pblk: u64, kind: BlockKind);
    /// A run of data blocks (an extent, or one block of a block map), before its
    /// blocks are visited one by one.
    fn data_run(&mut self, _lblk: u64, _pblk: u64, _len: u64) {}
    /// An extent tree node (see [`MapVisitor::extent_node`]).
    fn extent_node(&mut self, _level: usize, _depth: u16, _entries: u16, _max: u16) {}
}

impl BlockSource for Ctx<'_> {
    fn read_block(&self, blk: u64) -> usfs_fs::Result<Vec<u8>> {
        let mut buf = vec![0; self.geo.block_size as usize];
        self.read_into(blk, &mut buf)?;
        Ok(buf)
    }

    fn read_into(&self, blk: u64, buf: &mut [u8]) -> usfs_fs::Result<()> {
        Ok(Ctx::read_block(self, blk, buf)?)
    }
}

/// Walks an extent-mapped inode whose root (i_block) is `root`. Problems go to `w` when
/// `report` is set.
pub(crate) fn walk_extents(
    ctx: &Ctx,
    w: &mut Worker,
    ino: u32,
    generation: u32,
    root: &[u8; 60],
    report: bool,
    v: &mut dyn Visit,
) {
    let cx = map_ctx(ctx, ino, generation);
    let mut scratch = std::mem::take(&mut w.walk);
    let mut sink = Sink {
        ino,
        extents: true,
        problems: report.then_some(&mut w.problems),
        v,
    };
    let _ = walk::extent::scan(ctx, &cx, root, Mode::Lenient, &mut scratch, &mut sink);
    w.walk = scratch;
}

/// Walks a block-mapped (ext2/ext3) inode: direct, then each indirect tree in pre-order
/// (an indirect block before the blocks it maps, as e2fsck's iterator reports them).
pub(crate) fn walk_indirect(
    ctx: &Ctx,
    w: &mut Worker,
    ino: u32,
    i_block: &[u8; 60],
    report: bool,
    v: &mut dyn Visit,
) {
    let cx = map_ctx(ctx, ino, 0);
    let mut scratch = std::mem::take(&mut w.walk);
    let mut sink = Sink {
        ino,
        extents: false,
        problems: report.then_some(&mut w.problems),
        v,
    };
    let _ = walk::indirect::scan(ctx, &cx, i_block, &mut scratch, &mut sink);
    w.walk = scratch;
}

/// The walkers' view of inode `ino` (generation `generation`) on this file system.
pub(crate) fn map_ctx(ctx: &Ctx, ino: u32, generation: u32) -> MapCtx {
    MapCtx {
        ino,
        generation,
        seed: ctx.fs.csum_seed(),
        block_size: ctx.geo.block_size,
        blocks_count: ctx.geo.blocks_count,
        first_data_block: ctx.geo.first_data_block,
    }
}

/// The checker's [`MapVisitor`]: blocks to a [`Visit`], issues to problems.
struct Sink<'a> {
    ino: u32,
    /// The inode is extent-mapped (an unreadable block is an extent problem).
    extents: bool,
    /// Where problems go; `None` when the walk does not report (pass 1B).
    problems: Option<&'a mut Vec<Problem>>,
    v: &'a mut dyn Visit,
}

impl MapVisitor for Sink<'_> {
    fn data(&mut self, lblk: u64, pblk: u64, len: u64, unwritten: bool) {
        self.v.data_run(lblk, pblk, len);
        for k in 0..len {
            let kind = BlockKind::Data {
                lblk: lblk + k,
                init: !unwritten,
            };
            self.v.block(pblk + k, kind);
        }
    }

    fn node(&mut self, blk: u64) {
        self.v.block(blk, BlockKind::Meta);
    }

    fn extent_node(&mut self, level: usize, depth: u16, entries: u16, max: u16) {
        self.v.extent_node(level, depth, entries, max);
    }

    fn issue(&mut self, issue: MapIssue) -> ControlFlow<()> {
        if let Some(problems) = &mut self.problems {
            problems.push(problem(self.ino, self.extents, issue));
        }
        ControlFlow::Continue(())
    }
}

/// The problem for `issue` in the map of inode `ino` (extent-mapped if `extents`).
fn problem(ino: u32, extents: bool, issue: MapIssue) -> Problem {
    let (code, detail) = match issue {
        MapIssue::Header { blk: 0, .. } => (Code::ExtentHeader, ino.to_string()),
        MapIssue::Header { blk, .. } => (Code::ExtentHeader, format!("{ino} (extent block {blk})")),
        MapIssue::Checksum { blk } => (Code::ExtentChecksum, format!("{ino} (extent block {blk})")),
        MapIssue::IndexOutOfRange { child } => (
            Code::ExtentBad,
            format!("{ino} (index to block {child} out of range)"),
        ),
        MapIssue::IndexKey { index, first, .. } => (
            Code::ExtentBad,
            format!("{ino} (interior node: logical start {index} does not match {first} at the next level)"),
        ),
        MapIssue::ExtentOutOfRange { lblk, len, pblk } => (
            Code::ExtentBad,
            format!("{ino} (logical block {lblk}, physical block {pblk}, len {len})"),
        ),
        MapIssue::ExtentOrder { lblk, len } => (
            Code::ExtentOrder,
            format!("{ino} (logical block {lblk}, len {len})"),
        ),
        MapIssue::Unreadable { blk } if extents => (
            Code::ExtentBad,
            format!("{ino} (cannot read extent block {blk})"),
        ),
        MapIssue::Unreadable { blk } => (
            Code::IllegalBlock,
            format!("{ino} (cannot read indirect block {blk})"),
        ),
        MapIssue::IndirectOutOfRange { blk } => {
            (Code::IllegalBlock, format!("{ino} (indirect block {blk})"))
        }
        MapIssue::PointerOutOfRange { blk, lblk } => (
            Code::IllegalBlock,
            format!("{ino} (block {blk} at logical {lblk})"),
        ),
    };
    let p = Problem::new(code, detail).with_ino(ino);
    match issue {
        MapIssue::Checksum { blk } => p.with_block(blk),
        MapIssue::Header { blk, .. } if blk != 0 => p.with_block(blk),
        _ => p,
    }
}
