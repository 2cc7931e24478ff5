//! The indirect block map walker (ext2/ext3, inodes without the EXTENTS flag): twelve
//! direct pointers in `i_block`, then the single, double and triple indirect trees
//! (`i_block[12..15]`), each indirect block an array of block_size/4 little-endian
//! pointers; 0 is a hole. [`scan`] walks a whole map for a [`MapVisitor`].

use super::{BlockSource, MapCtx, MapIssue, MapVisitor, Mapped, Scratch};
use std::ops::ControlFlow;
use usfs_fs::{Result, Structure};

/// Direct pointers in `i_block`.
pub const DIRECT: u64 = 12;

/// Where a logical block sits in the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// 0 for a direct block, 1..=3 for the single/double/triple indirect tree.
    pub level: usize,
    /// Index into `i_block`'s 15 pointers of the direct block or of the tree's top.
    pub slot: usize,
    /// Offset of the block inside its tree (0 for direct blocks).
    pub rel: u64,
    /// Blocks the tree (or the direct pointer) covers.
    pub span: u64,
}

/// Pointers per indirect block.
pub fn per_block(block_size: u32) -> u64 {
    block_size as u64 / 4
}

/// Where `lblk` sits, or `None` past the triple indirect tree.
pub fn locate(block_size: u32, lblk: u64) -> Option<Slot> {
    if lblk < DIRECT {
        return Some(Slot {
            level: 0,
            slot: lblk as usize,
            rel: 0,
            span: 1,
        });
    }
    let per = per_block(block_size);
    let mut rel = lblk - DIRECT;
    let mut span = per;
    for level in 1..=3 {
        if rel < span {
            return Some(Slot {
                level,
                slot: 11 + level,
                rel,
                span,
            });
        }
        rel -= span;
        span *= per;
    }
    None
}

/// Pointer `i` of an `i_block` or an indirect block.
pub fn ptr(buf: &[u8], i: usize) -> u64 {
    u32::from_le_bytes(buf[i * 4..i * 4 + 4].try_into().expect("4 bytes")) as u64
}

/// Sets pointer `i` of an `i_block` or an indirect block.
pub fn set_ptr(buf: &mut [u8], i: usize, v: u64) {
    buf[i * 4..i * 4 + 4].copy_from_slice(&(v as u32).to_le_bytes());
}

/// The walk to a logical block in an indirect tree.
#[derive(Clone, Debug)]
pub struct IndPath {
    /// Where the block sits.
    pub slot: Slot,
    /// The indirect blocks read, top first: (block, contents, index of the pointer taken).
    pub nodes: Vec<(u64, Vec<u8>, usize)>,
    /// When the walk met a zero pointer above the data: blocks from the target to the
    /// end of the hole that pointer leaves (the rest of its subtree).
    pub hole: Option<u64>,
}

/// Walks to `lblk` (>= 12, inside the triple indirect tree) from `root` (`i_block`).
pub fn find_path(src: &dyn BlockSource, cx: &MapCtx, root: &[u8], slot: Slot) -> Result<IndPath> {
    let per = per_block(cx.block_size);
    let mut out = IndPath {
        slot,
        nodes: Vec::with_capacity(slot.level),
        hole: None,
    };
    let mut p = ptr(root, slot.slot);
    let mut rel = slot.rel;
    // Blocks one pointer at this level covers.
    let mut cover = slot.span;
    for _ in 0..slot.level {
        if p == 0 {
            out.hole = Some(cover - rel % cover);
            return Ok(out);
        }
        let block = cx.read(src, p, Structure::BlockMap, "indirect block")?;
        cover /= per;
        let idx = (rel / cover) as usize;
        rel %= cover;
        let next = ptr(&block, idx);
        out.nodes.push((p, block, idx));
        p = next;
    }
    Ok(out)
}

/// Maps `lblk` (< 2^32) through the indirect map in `root`.
pub fn map(src: &dyn BlockSource, cx: &MapCtx, root: &[u8], lblk: u64) -> Result<Mapped> {
    let Some(slot) = locate(cx.block_size, lblk) else {
        return Ok(Mapped::hole(lblk, u64::MAX - lblk));
    };
    if slot.level == 0 {
        return Ok(extend_run(lblk, DIRECT - lblk, |k| {
            ptr(root, (lblk + k) as usize)
        }));
    }
    let path = find_path(src, cx, root, slot)?;
    if let Some(len) = path.hole {
        return Ok(Mapped::hole(lblk, len));
    }
    let (_, leaf, idx) = path.nodes.last().expect("level >= 1");
    let per = per_block(cx.block_size);
    Ok(extend_run(lblk, per - *idx as u64, |k| {
        ptr(leaf, *idx + k as usize)
    }))
}

/// A run starting at `lblk` over up to `max` pointers read by `ptr(k)`: consecutive
/// physical blocks, or consecutive holes.
fn extend_run(lblk: u64, max: u64, ptr: impl Fn(u64) -> u64) -> Mapped {
    let first = ptr(0);
    let mut len = 1;
    while len < max {
        let p = ptr(len);
        let cont = if first == 0 { p == 0 } else { p == first + len };
        if !cont {
            break;
        }
        len += 1;
    }
    Mapped {
        lblk,
        len,
        pblk: (first != 0).then_some(first),
        unwritten: false,
    }
}

/// Walks the whole map in `root` (`i_block`): the direct blocks, then each indirect tree
/// in pre-order (an indirect block to `v.node` before the blocks it maps, as e2fsck's
/// block iterator reports them), each data block to `v.data` (one at a time), each
/// pointer outside the file system or unreadable block to `v.issue` (then skipped).
/// Block buffers come from `scratch`.
pub fn scan(
    src: &dyn BlockSource,
    cx: &MapCtx,
    root: &[u8],
    scratch: &mut Scratch,
    v: &mut dyn MapVisitor,
) -> ControlFlow<()> {
    for lblk in 0..DIRECT {
        data(cx, ptr(root, lblk as usize), lblk, v)?;
    }
    let per = per_block(cx.block_size);
    let (mut base, mut span) = (DIRECT, per);
    for level in 1..=3usize {
        let blk = ptr(root, 11 + level);
        if blk != 0 {
            scan_tree(src, cx, blk, level, base, scratch, v)?;
        }
        base += span;
        span *= per;
    }
    ControlFlow::Continue(())
}

/// Visits data pointer `blk` (0: a hole) of logical block `lblk`.
fn data(cx: &MapCtx, blk: u64, lblk: u64, v: &mut dyn MapVisitor) -> ControlFlow<()> {
    if blk == 0 {
        return ControlFlow::Continue(());
    }
    if !cx.valid(blk) {
        return v.issue(MapIssue::PointerOutOfRange { blk, lblk });
    }
    v.data(lblk, blk, 1, false);
    ControlFlow::Continue(())
}

/// Walks the indirect block `blk` of `level` (1: it points at data) mapping logical
/// blocks from `base`.
fn scan_tree(
    src: &dyn BlockSource,
    cx: &MapCtx,
    blk: u64,
    level: usize,
    base: u64,
    scratch: &mut Scratch,
    v: &mut dyn MapVisitor,
) -> ControlFlow<()> {
    if !cx.valid(blk) {
        return v.issue(MapIssue::IndirectOutOfRange { blk });
    }
    v.node(blk);
    let mut buf = scratch.take(level, cx.block_size as usize);
    let flow = if src.read_into(blk, &mut buf).is_err() {
        v.issue(MapIssue::Unreadable { blk })
    } else {
        let sub = per_block(cx.block_size).pow(level as u32 - 1);
        (0..buf.len() / 4).try_for_each(|i| {
            let (p, lblk) = (ptr(&buf, i), base + i as u64 * sub);
            match level {
                1 => data(cx, p, lblk, v),
                _ if p == 0 => ControlFlow::Continue(()),
                _ => scan_tree(src, cx, p, level - 1, lblk, scratch, v),
            }
        })
    };
    scratch.put(level, buf);
    flow
}
