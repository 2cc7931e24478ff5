//! The extent tree walker: from the root in `i_block` down to the leaf that holds (or
//! would hold) a logical block, as the kernel's ext4_find_extent does. Every node on the
//! way is checked (magic, capacity, entry count, depth) and every tree block's checksum
//! verified, so a mutator that edits the returned nodes never edits a node it could not
//! trust. [`scan`] walks a whole tree, every node checked by the same rules, and hands
//! each extent, node and issue to a [`MapVisitor`](super::MapVisitor).

use super::{
    BlockSource, HeaderIssue, MapCtx, MapIssue, MapVisitor, Mapped, Mode, Scratch, MAX_LBLK,
};
use crate::format::extent::{
    self, Extent, ExtentHeader, ExtentIndex, ENTRY_SIZE, EXTENT_MAGIC, MAX_DEPTH,
};
use std::ops::ControlFlow;
use usfs_fs::{Error, Result, Structure};

/// Entries the root in `i_block` holds.
pub const ROOT_ENTRIES: usize = 4;

/// One node on the path from the root to a leaf.
#[derive(Clone, Debug)]
pub struct PathNode {
    /// The node's block; 0 for the root (in `i_block`).
    pub blk: u64,
    /// The node's bytes: 60 for the root, one block otherwise.
    pub buf: Vec<u8>,
    /// The entry the walk chose: the last one starting at or before the target. In an
    /// index node whose first entry starts after the target, the first (the walk goes
    /// down it, as the kernel does). `None` in a leaf with no extent at or before the
    /// target, and in a node without entries.
    pub pos: Option<usize>,
    /// End (exclusive) of the logical range this node covers: the next key of an
    /// ancestor, or 2^32.
    pub end: u64,
}

impl PathNode {
    /// Entries in use.
    pub fn entries(&self) -> usize {
        entries(&self.buf)
    }
    /// Depth (0 for a leaf).
    pub fn depth(&self) -> u16 {
        header(&self.buf).eh_depth()
    }
    /// Capacity in entries.
    pub fn max(&self) -> usize {
        header(&self.buf).eh_max() as usize
    }
    /// First logical block of entry `i` (ee_block or ei_block: both at offset 0).
    pub fn key(&self, i: usize) -> u64 {
        key(&self.buf, i)
    }
}

fn header(buf: &[u8]) -> ExtentHeader<&[u8]> {
    ExtentHeader::new(&buf[..ENTRY_SIZE]).expect("node >= 12 bytes")
}

fn entries(buf: &[u8]) -> usize {
    header(buf).eh_entries() as usize
}

/// Bytes of entry `i` of a node.
pub fn entry(buf: &[u8], i: usize) -> &[u8] {
    &buf[ENTRY_SIZE * (i + 1)..ENTRY_SIZE * (i + 2)]
}

/// First logical block of entry `i` of a node.
pub fn key(buf: &[u8], i: usize) -> u64 {
    u32::from_le_bytes(entry(buf, i)[..4].try_into().expect("4 bytes")) as u64
}

/// Entries a tree block of `block_size` bytes holds.
pub fn block_capacity(block_size: u32) -> usize {
    (block_size as usize - ENTRY_SIZE) / ENTRY_SIZE
}

/// Root depths a [`Mode::Lenient`] walk still walks (deeper roots are a bad header).
pub const LENIENT_MAX_DEPTH: u16 = 4 * MAX_DEPTH;

/// What is wrong with the header of a node holding at most `cap` entries, `depth` the
/// depth its parent implies (`None` at the root), judged by `mode`.
pub fn header_issue(buf: &[u8], cap: usize, depth: Option<u16>, mode: Mode) -> Option<HeaderIssue> {
    let h = header(buf);
    let capacity = cap as u16;
    let (max, found) = (h.eh_max(), h.eh_entries());
    let max_depth = match mode {
        Mode::Strict => MAX_DEPTH,
        Mode::Lenient => LENIENT_MAX_DEPTH,
    };
    if h.eh_magic() != EXTENT_MAGIC {
        Some(HeaderIssue::Magic {
            found: h.eh_magic(),
        })
    } else if max as usize > cap || max == 0 {
        Some(HeaderIssue::Max {
            found: max,
            capacity,
        })
    } else if mode == Mode::Lenient && max as usize + 2 < cap {
        Some(HeaderIssue::ShortMax {
            found: max,
            capacity,
        })
    } else if found > max {
        Some(HeaderIssue::Entries { found, max })
    } else if h.eh_depth() > max_depth || depth.is_some_and(|d| d != h.eh_depth()) {
        Some(HeaderIssue::Depth {
            found: h.eh_depth(),
            expected: depth,
        })
    } else {
        None
    }
}

/// Checks the root in `i_block` (60 bytes).
pub fn check_root(cx: &MapCtx, root: &[u8]) -> Result<()> {
    match header_issue(root, ROOT_ENTRIES, None, Mode::Strict) {
        Some(issue) => Err(MapIssue::Header { blk: 0, issue }.into_error(cx.ino)),
        None => Ok(()),
    }
}

/// Does the checksum in the tail of tree block `block` (header already checked) match?
/// True without metadata_csum.
pub fn checksum_ok(cx: &MapCtx, block: &[u8]) -> bool {
    let Some(seed) = cx.seed else {
        return true;
    };
    let max = header(block).eh_max();
    let off = extent::tail_offset(max);
    off + 4 <= block.len()
        && u32::from_le_bytes(block[off..off + 4].try_into().expect("4 bytes"))
            == extent::block_checksum(seed, cx.ino, cx.generation, block, max)
}

/// Reads tree block `blk` expected at `depth`: header and (with metadata_csum) checksum
/// checked.
pub fn read_node(src: &dyn BlockSource, cx: &MapCtx, blk: u64, depth: u16) -> Result<Vec<u8>> {
    let block = cx.read(src, blk, Structure::ExtentTree, "extent tree node")?;
    let cap = block_capacity(cx.block_size);
    if let Some(issue) = header_issue(&block, cap, Some(depth), Mode::Strict) {
        return Err(MapIssue::Header { blk, issue }.into_error(cx.ino));
    }
    if !checksum_ok(cx, &block) {
        return Err(MapIssue::Checksum { blk }.into_error(cx.ino));
    }
    Ok(block)
}

/// The entry of a node the walk for `lblk` chooses (see [`PathNode::pos`]).
fn choose(buf: &[u8], lblk: u64) -> Option<usize> {
    let n = entries(buf);
    // Entries are sorted: the last starting at or before lblk.
    let after = (0..n).find(|&i| key(buf, i) > lblk).unwrap_or(n);
    match after {
        0 if n > 0 && header(buf).eh_depth() > 0 => Some(0),
        0 => None,
        i => Some(i - 1),
    }
}

/// The nodes from the root (`root`, the 60 bytes of `i_block`) down to the leaf whose
/// range holds `lblk`, each with the entry chosen. The last node is a leaf, or an index
/// node without entries (an empty tree whose root kept its depth).
pub fn find_path(
    src: &dyn BlockSource,
    cx: &MapCtx,
    root: &[u8],
    lblk: u64,
) -> Result<Vec<PathNode>> {
    check_root(cx, root)?;
    let mut path = Vec::with_capacity(header(root).eh_depth() as usize + 1);
    let mut node = PathNode {
        blk: 0,
        buf: root[..ENTRY_SIZE * (ROOT_ENTRIES + 1)].to_vec(),
        pos: choose(root, lblk),
        end: MAX_LBLK,
    };
    loop {
        let depth = node.depth();
        let Some(pos) = node.pos.filter(|_| depth > 0) else {
            path.push(node);
            return Ok(path);
        };
        let child_end = if pos + 1 < node.entries() {
            node.end.min(node.key(pos + 1))
        } else {
            node.end
        };
        let ix = ExtentIndex::new(entry(&node.buf, pos)).expect("12 bytes");
        let child = ix.leaf();
        if child_end <= lblk {
            return Err(Error::corrupt(
                Structure::ExtentTree,
                format!(
                    "inode {}: extent tree: index entries out of order in {}",
                    cx.ino,
                    if node.blk == 0 {
                        "the inode".to_string()
                    } else {
                        format!("block {}", node.blk)
                    }
                ),
            )
            .with_ino(cx.ino));
        }
        path.push(node);
        let buf = read_node(src, cx, child, depth - 1)?;
        node = PathNode {
            blk: child,
            pos: choose(&buf, lblk),
            buf,
            end: child_end,
        };
    }
}

/// Maps `lblk` (< 2^32) through the extent tree rooted in `root`.
pub fn map(src: &dyn BlockSource, cx: &MapCtx, root: &[u8], lblk: u64) -> Result<Mapped> {
    let path = find_path(src, cx, root, lblk)?;
    let last = path.last().expect("at least the root");
    if last.depth() > 0 {
        // An index node without entries.
        return Ok(Mapped::hole(lblk, last.end.saturating_sub(lblk)));
    }
    let buf = &last.buf;
    let next = match last.pos {
        Some(i) => {
            let e = Extent::new(entry(buf, i)).expect("12 bytes");
            let start = e.ee_block() as u64;
            let len = e.len() as u64;
            if lblk < start + len {
                let pstart = e.start();
                cx.check_data(start, pstart, len)?;
                let off = lblk - start;
                return Ok(Mapped {
                    lblk,
                    len: len - off,
                    pblk: Some(pstart + off),
                    unwritten: e.is_unwritten(),
                });
            }
            i + 1
        }
        None => 0,
    };
    let hole_end = if next < last.entries() {
        last.end.min(key(buf, next))
    } else {
        last.end
    };
    Ok(Mapped::hole(lblk, hole_end.saturating_sub(lblk)))
}

/// Walks the whole tree rooted in `root` (the 60 bytes of `i_block`) depth first, in
/// key order: each index block goes to `v.node` before its subtree, each leaf extent to
/// `v.data`, each thing wrong to `v.issue` (judged by `mode`). A bad node or entry is
/// skipped, and so is an extent that starts before the end of the one before it
/// (reported as out of order); a bad checksum and an index key that differs from its
/// child's first key are reported and walked. Node buffers come from `scratch`.
pub fn scan(
    src: &dyn BlockSource,
    cx: &MapCtx,
    root: &[u8],
    mode: Mode,
    scratch: &mut Scratch,
    v: &mut dyn MapVisitor,
) -> ControlFlow<()> {
    if let Some(issue) = header_issue(root, ROOT_ENTRIES, None, mode) {
        return v.issue(MapIssue::Header { blk: 0, issue });
    }
    let mut walk = Scan {
        src,
        cx,
        mode,
        scratch,
        last_end: None,
    };
    walk.node(root, header(root).eh_depth(), 0, v)
}

/// The state of one [`scan`].
struct Scan<'a> {
    src: &'a dyn BlockSource,
    cx: &'a MapCtx,
    mode: Mode,
    scratch: &'a mut Scratch,
    /// End (exclusive) of the last leaf extent visited, to check their order.
    last_end: Option<u64>,
}

impl Scan<'_> {
    fn node(
        &mut self,
        buf: &[u8],
        depth: u16,
        level: usize,
        v: &mut dyn MapVisitor,
    ) -> ControlFlow<()> {
        let h = header(buf);
        v.extent_node(level, depth, h.eh_entries(), h.eh_max());
        for i in 0..entries(buf) {
            if depth == 0 {
                self.extent(entry(buf, i), v)?;
                continue;
            }
            let ix = ExtentIndex::new(entry(buf, i)).expect("12 bytes");
            let child = ix.leaf();
            if !self.cx.valid(child) {
                v.issue(MapIssue::IndexOutOfRange { child })?;
                continue;
            }
            v.node(child);
            let mut b = self.scratch.take(level, self.cx.block_size as usize);
            let flow = self.child(&mut b, child, ix.ei_block(), depth - 1, level, v);
            self.scratch.put(level, b);
            flow?;
        }
        ControlFlow::Continue(())
    }

    /// Reads, checks and walks the child `blk` of an index entry starting at `ei_block`.
    fn child(
        &mut self,
        b: &mut [u8],
        blk: u64,
        ei_block: u32,
        depth: u16,
        level: usize,
        v: &mut dyn MapVisitor,
    ) -> ControlFlow<()> {
        if self.src.read_into(blk, b).is_err() {
            return v.issue(MapIssue::Unreadable { blk });
        }
        let h = header(b);
        if h.eh_magic() == EXTENT_MAGIC && h.eh_entries() > 0 {
            let first = key(b, 0) as u32;
            if first != ei_block {
                v.issue(MapIssue::IndexKey {
                    child: blk,
                    index: ei_block,
                    first,
                })?;
            }
        }
        let cap = block_capacity(self.cx.block_size);
        if let Some(issue) = header_issue(b, cap, Some(depth), self.mode) {
            return v.issue(MapIssue::Header { blk, issue });
        }
        if !checksum_ok(self.cx, b) {
            v.issue(MapIssue::Checksum { blk })?;
        }
        self.node(b, depth, level + 1, v)
    }

    /// Checks and visits one leaf extent.
    fn extent(&mut self, e: &[u8], v: &mut dyn MapVisitor) -> ControlFlow<()> {
        let x = Extent::new(e).expect("12 bytes");
        let (lblk, len, pblk) = (x.ee_block() as u64, x.len() as u64, x.start());
        if !self.cx.valid_run(pblk, len) {
            return v.issue(MapIssue::ExtentOutOfRange { lblk, len, pblk });
        }
        if self.last_end.is_some_and(|end| lblk < end) {
            // e2fsck clears it: neither its blocks nor its end count.
            return v.issue(MapIssue::ExtentOrder { lblk, len });
        }
        self.last_end = Some(lblk + len);
        v.data(lblk, pblk, len, x.is_unwritten());
        ControlFlow::Continue(())
    }
}
