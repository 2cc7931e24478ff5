//! The extent tree walker: from the root in `i_block` down to the leaf that holds (or
//! would hold) a logical block, as the kernel's ext4_find_extent does. Every node on the
//! way is checked (magic, capacity, entry count, depth) and every tree block's checksum
//! verified, so a mutator that edits the returned nodes never edits a node it could not
//! trust.

use super::{BlockSource, MapCtx, Mapped, MAX_LBLK};
use crate::format::extent::{
    self, Extent, ExtentHeader, ExtentIndex, ENTRY_SIZE, EXTENT_MAGIC, MAX_DEPTH,
};
use usfs_fs::{Error, Result};

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

/// Validates a node header; `max_cap` is the most entries the node can hold.
fn check_header(cx: &MapCtx, buf: &[u8], max_cap: usize, depth: Option<u16>) -> Result<()> {
    let h = header(buf);
    let ino = cx.ino;
    let bad = |what: String| Err(Error::corrupt(format!("inode {ino}: extent tree: {what}")));
    if h.eh_magic() != EXTENT_MAGIC {
        return bad(format!("bad magic {:#06x}", h.eh_magic()));
    }
    if h.eh_max() as usize > max_cap || h.eh_max() == 0 {
        return bad(format!("eh_max {} (at most {max_cap})", h.eh_max()));
    }
    if h.eh_entries() > h.eh_max() {
        return bad(format!(
            "{} entries in a node of {}",
            h.eh_entries(),
            h.eh_max()
        ));
    }
    if h.eh_depth() > MAX_DEPTH || depth.is_some_and(|d| d != h.eh_depth()) {
        return bad(format!("depth {} where {depth:?} expected", h.eh_depth()));
    }
    Ok(())
}

/// Checks the root in `i_block` (60 bytes).
pub fn check_root(cx: &MapCtx, root: &[u8]) -> Result<()> {
    check_header(cx, root, ROOT_ENTRIES, None)
}

/// Reads tree block `blk` expected at `depth`: header and (with metadata_csum) checksum
/// checked.
pub fn read_node(src: &dyn BlockSource, cx: &MapCtx, blk: u64, depth: u16) -> Result<Vec<u8>> {
    let ino = cx.ino;
    let block = cx.read(src, blk, "extent tree node")?;
    check_header(cx, &block, block_capacity(cx.block_size), Some(depth))?;
    if let Some(seed) = cx.seed {
        let max = header(&block).eh_max();
        let off = extent::tail_offset(max);
        if off + 4 > block.len() {
            return Err(Error::corrupt(format!(
                "inode {ino}: extent block {blk} has no room for its checksum"
            )));
        }
        let stored = u32::from_le_bytes(block[off..off + 4].try_into().expect("4 bytes"));
        if stored != extent::block_checksum(seed, ino, cx.generation, &block, max) {
            return Err(Error::corrupt(format!(
                "inode {ino}: extent block {blk} checksum does not match"
            )));
        }
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
            return Err(Error::corrupt(format!(
                "inode {}: extent tree: index entries out of order in {}",
                cx.ino,
                if node.blk == 0 {
                    "the inode".to_string()
                } else {
                    format!("block {}", node.blk)
                }
            )));
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
