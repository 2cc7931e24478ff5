//! The htree half of the directory mutator: descend the index by hash, insert into a
//! leaf, split a full leaf at its size median (the new index entry gets the continuation
//! bit when the split falls inside a run of equal hashes), split a full index node, add a
//! level under the root (2 levels, 3 with large_dir; past that ENOSPC, as the kernel's
//! "Directory index full"), and turn a one-block linear directory into an htree (the
//! kernel's make_indexed_dir). Index nodes are checked (limit, count, order, checksum)
//! before use and written back with their dx tail checksums.

use super::dir_edit::{exists, DirEdit, Found};
use super::dir_leaf::Ent;
use crate::format::dirent::{encode_rec_len, entry_size, DirEntryHeader};
use crate::format::dx::{
    node_checksum, DxCountLimit, DxRootInfo, DxTail, DX_ENTRY_SIZE, DX_TAIL_SIZE,
    NODE_COUNT_OFFSET, ROOT_COUNT_OFFSET,
};
use crate::walk::dx::{self, DxCtx, DxKind, ROOT_INFO_OFFSET};
use usfs_fs::Result;

/// Passes of probe / make room / insert before giving up (each pass splits one node or
/// leaf; the deepest tree needs four).
const MAX_PASSES: usize = 8;

/// One dx node on the path from the root to a leaf.
pub(crate) struct Frame {
    lblk: u64,
    pblk: u64,
    buf: Vec<u8>,
    /// Offset of count/limit (root 0x20, node 8).
    co: usize,
    limit: usize,
    /// (hash, logical block); entry 0's hash is 0.
    entries: Vec<(u32, u32)>,
    /// The entry followed.
    idx: usize,
}

impl Frame {
    fn full(&self) -> bool {
        self.entries.len() >= self.limit
    }
    fn child(&self) -> u64 {
        self.entries[self.idx].1 as u64
    }
}

/// What the root says: hash version and depth below it.
struct RootInfo {
    version: u8,
    levels: usize,
}

impl DirEdit<'_> {
    fn dx_tail(&self) -> usize {
        if self.seed.is_some() {
            DX_TAIL_SIZE
        } else {
            0
        }
    }

    fn limit_at(&self, co: usize) -> usize {
        (self.fmt.bs as usize - co - self.dx_tail()) / DX_ENTRY_SIZE
    }

    /// What the dx walker needs to know about this directory.
    fn dx_ctx(&self) -> DxCtx {
        DxCtx {
            ino: self.d.ino(),
            generation: self.d.generation(),
            seed: self.seed,
            large_dir: self.large_dir,
            nblocks: self.d.nblocks(),
        }
    }

    /// Reads the dx node of `kind` in `buf` (logical block `lblk`) through the strict
    /// walker (root info, header, checksum, order and child range checked): the node as
    /// a frame, and the root's info when it is the root.
    fn parse_dx(
        &self,
        lblk: u64,
        pblk: u64,
        buf: Vec<u8>,
        kind: DxKind,
    ) -> Result<(Frame, Option<dx::RootInfo>)> {
        let node = dx::read_node(&buf, lblk, kind, &self.dx_ctx())?;
        let frame = Frame {
            lblk,
            pblk,
            buf,
            co: kind.count_offset(),
            limit: node.limit,
            entries: node.entries,
            idx: 0,
        };
        Ok((frame, node.root))
    }

    /// Reads and checks the root (block 0).
    fn read_root(&mut self) -> Result<(Frame, RootInfo)> {
        let (pblk, buf) = self.read_raw(0)?;
        let (off, rec_len) = self.dotdot_at(0, &buf)?;
        if off != 12 || off + rec_len != buf.len() {
            return Err(self.corrupt_htree(0, "htree root: '..' does not span the block".into()));
        }
        let (root, info) = self.parse_dx(0, pblk, buf, DxKind::Root)?;
        let info = info.expect("a root has its info");
        let ri = RootInfo {
            version: info.hash_version,
            levels: info.levels as usize,
        };
        Ok((root, ri))
    }

    /// Hashes `name` as the root says and returns the path from the root to the leaf
    /// whose range holds the hash, the root's info and the hash.
    fn probe(&mut self, name: &[u8]) -> Result<(Vec<Frame>, RootInfo, u32)> {
        let (root, ri) = self.read_root()?;
        let (hash, _) = self.hp.hash(self.d.ino(), ri.version, name)?;
        let mut path = vec![root];
        loop {
            let f = path.last_mut().expect("non-empty");
            f.idx = f
                .entries
                .partition_point(|&(h, _)| h <= hash)
                .saturating_sub(1);
            let child = f.child();
            if path.len() > ri.levels {
                return Ok((path, ri, hash));
            }
            let (pblk, buf) = self.read_raw(child)?;
            let (node, _) = self.parse_dx(child, pblk, buf, DxKind::Node)?;
            path.push(node);
        }
    }

    /// Moves `path` to the next leaf in hash order; returns that leaf's starting hash.
    fn next_leaf(&mut self, path: &mut Vec<Frame>) -> Result<Option<u32>> {
        let depth = path.len();
        let mut lvl = depth;
        loop {
            if lvl == 0 {
                return Ok(None);
            }
            let f = &mut path[lvl - 1];
            if f.idx + 1 < f.entries.len() {
                f.idx += 1;
                break;
            }
            lvl -= 1;
        }
        path.truncate(lvl);
        let hash = path[lvl - 1].entries[path[lvl - 1].idx].0;
        while path.len() < depth {
            let child = path.last().expect("non-empty").child();
            let (pblk, buf) = self.read_raw(child)?;
            path.push(self.parse_dx(child, pblk, buf, DxKind::Node)?.0);
        }
        Ok(Some(hash))
    }

    /// Finds `name` through the index, following collision chains into later leaves.
    pub(crate) fn htree_find(&mut self, name: &[u8]) -> Result<Option<Found>> {
        let (mut path, _, hash) = self.probe(name)?;
        loop {
            let leaf = path.last().expect("non-empty").child();
            let (pblk, buf) = self.read_leaf(leaf)?;
            if let Some(f) = self.scan(leaf, pblk, buf, name)? {
                return Ok(Some(f));
            }
            match self.next_leaf(&mut path)? {
                Some(h) if h & !1 == hash => continue,
                _ => return Ok(None),
            }
        }
    }

    /// `.` or `..` in the root.
    pub(crate) fn htree_find_dot(&mut self, name: &[u8]) -> Result<Option<Found>> {
        let (root, _) = self.read_root()?;
        let (pblk, buf) = (root.pblk, root.buf);
        let bs = buf.len();
        self.scan_area(0, pblk, buf, bs, name)
    }

    /// Points the root's `..` at `parent`.
    pub(crate) fn htree_set_dotdot(&mut self, parent: u32) -> Result<()> {
        let (mut root, _) = self.read_root()?;
        self.fmt.retarget(&mut root.buf, 12, parent, 2);
        self.write_dx(&mut root)
    }

    /// Is block `lblk` (> 0) of this htree an interior node (one unused entry spanning the
    /// block)?
    pub(crate) fn is_dx_node(&mut self, lblk: u64) -> Result<bool> {
        let (_, buf) = self.read_raw(lblk)?;
        Ok(crate::format::dirent::is_dx_node(&buf))
    }

    /// Adds `e` to this htree directory (the name is known to be absent).
    pub(crate) fn htree_add(&mut self, e: &Ent) -> Result<()> {
        let usable = self.fmt.usable();
        for _ in 0..MAX_PASSES {
            let (mut path, ri, _) = self.probe(&e.name)?;
            let leaf = path.last().expect("non-empty").child();
            let (pblk, mut buf) = self.read_leaf(leaf)?;
            let slot = self.fmt.find_slot(&buf[..usable], e.name.len());
            if let Some(slot) = slot.map_err(|f| self.fault(leaf, f))? {
                self.fmt
                    .insert(&mut buf[..usable], slot, &e.name, e.ino, e.ft);
                return self.write_leaf(pblk, buf);
            }
            if path.last().expect("non-empty").full() {
                self.make_index_room(&mut path, &ri)?;
            } else {
                self.split_leaf(&mut path, &ri, leaf, pblk, &buf)?;
            }
        }
        Err(self.corrupt_htree(0, "htree insert found no room after splitting".into()))
    }

    /// Splits leaf `lblk` (contents `buf`) whose parent is the last frame of `path` (not
    /// full): entries sorted by hash, the upper part by size moves to a new block.
    fn split_leaf(
        &mut self,
        path: &mut [Frame],
        ri: &RootInfo,
        lblk: u64,
        pblk: u64,
        buf: &[u8],
    ) -> Result<()> {
        let mut ents = Vec::new();
        for d in self.live(lblk, buf)? {
            let (h, minor) = self.hp.hash(self.d.ino(), ri.version, d.name)?;
            let ent = Ent {
                name: d.name.to_vec(),
                ino: d.ino,
                ft: d.file_type,
            };
            ents.push((h, minor, ent));
        }
        if ents.len() < 2 {
            return Err(
                self.corrupt_htree(lblk, "full htree leaf with fewer than 2 entries".into())
            );
        }
        ents.sort_by_key(|a| (a.0, a.1));
        let split = split_point(&ents, self.fmt.bs as usize / 2);
        let hash2 = ents[split].0;
        let continued = (hash2 == ents[split - 1].0) as u32;
        let upper: Vec<Ent> = ents.drain(split..).map(|a| a.2).collect();
        let lower: Vec<Ent> = ents.into_iter().map(|a| a.2).collect();
        let new_lblk = self.d.nblocks();
        let new_pblk = self.d.append_block(self.m)?;
        let (lo, up) = (self.fmt.pack(&lower), self.fmt.pack(&upper));
        self.write_leaf(new_pblk, up)?;
        self.write_leaf(pblk, lo)?;
        let parent = path.last_mut().expect("non-empty");
        parent
            .entries
            .insert(parent.idx + 1, (hash2 | continued, new_lblk as u32));
        self.write_dx(parent)
    }

    /// The leaf's parent is full: split the lowest node that has a non-full parent, or add
    /// a level under the root when every node up to the root is full.
    fn make_index_room(&mut self, path: &mut [Frame], ri: &RootInfo) -> Result<()> {
        let mut k = path.len() - 1;
        while k > 0 && path[k - 1].full() {
            k -= 1;
        }
        if k > 0 {
            let (upper, lower) = path.split_at_mut(k);
            return self.split_node(&mut upper[k - 1], &mut lower[0]);
        }
        let max = if self.large_dir { 3 } else { 2 };
        if ri.levels + 1 >= max {
            return Err(crate::write::no_space(
                &format!("directory {}", self.d.ino()),
                format!("htree index full ({max} levels)"),
            ));
        }
        self.add_level(&mut path[0], ri)
    }

    /// Moves the upper half of `node`'s entries to a new node listed in `parent`.
    fn split_node(&mut self, parent: &mut Frame, node: &mut Frame) -> Result<()> {
        let half = node.entries.len() / 2;
        let moved: Vec<(u32, u32)> = node.entries.split_off(half);
        let hash2 = moved[0].0;
        let mut new = self.new_node(moved)?;
        self.write_dx(&mut new)?;
        self.write_dx(node)?;
        parent
            .entries
            .insert(parent.idx + 1, (hash2, new.lblk as u32));
        self.write_dx(parent)
    }

    /// Moves the root's entries into a new node, the root's only child, one level deeper.
    fn add_level(&mut self, root: &mut Frame, ri: &RootInfo) -> Result<()> {
        let entries = std::mem::take(&mut root.entries);
        let mut new = self.new_node(entries)?;
        self.write_dx(&mut new)?;
        root.entries = vec![(0, new.lblk as u32)];
        let mut info = DxRootInfo::new(&mut root.buf[ROOT_INFO_OFFSET..]).expect("in block");
        info.set_indirect_levels(ri.levels as u8 + 1);
        self.write_dx(root)
    }

    /// A new interior node (appended to the directory) holding `entries`.
    fn new_node(&mut self, entries: Vec<(u32, u32)>) -> Result<Frame> {
        let bs = self.fmt.bs as usize;
        let lblk = self.d.nblocks();
        let pblk = self.d.append_block(self.m)?;
        let mut buf = vec![0u8; bs];
        let mut h = DirEntryHeader::new(&mut buf[..8]).expect("8 bytes");
        h.set_rec_len(encode_rec_len(bs as u32, bs as u32));
        Ok(Frame {
            lblk,
            pblk,
            buf,
            co: NODE_COUNT_OFFSET,
            limit: self.limit_at(NODE_COUNT_OFFSET),
            entries,
            idx: 0,
        })
    }

    /// Writes a dx node: count/limit, entries (the rest of the array zeroed), dx tail.
    fn write_dx(&mut self, f: &mut Frame) -> Result<()> {
        let (co, limit, n) = (f.co, f.limit, f.entries.len());
        debug_assert!(
            n >= 1 && n <= limit,
            "dx node of {n} entries, limit {limit}"
        );
        let end = co + limit * DX_ENTRY_SIZE;
        f.buf[co..end].fill(0);
        for (i, &(h, b)) in f.entries.iter().enumerate() {
            let o = co + i * DX_ENTRY_SIZE;
            f.buf[o..o + 4].copy_from_slice(&h.to_le_bytes());
            f.buf[o + 4..o + 8].copy_from_slice(&b.to_le_bytes());
        }
        let mut cl = DxCountLimit::new(&mut f.buf[co..co + 8]).expect("8 bytes");
        cl.set_limit(limit as u16);
        cl.set_count(n as u16);
        if let Some(seed) = self.seed {
            let (ino, gen) = (self.d.ino(), self.d.generation());
            let c = node_checksum(seed, ino, gen, &f.buf, co, n, end);
            let mut t = DxTail::new(&mut f.buf[end..end + DX_TAIL_SIZE]).expect("8 bytes");
            t.set_dt_checksum(c);
        }
        self.m.write_meta(f.pblk, f.buf.clone())
    }

    /// Turns a full one-block linear directory (block 0 = `buf`) into an htree: its
    /// entries move to a new leaf 1, block 0 becomes the root, the leaf is split, then
    /// `e` is added (the kernel's make_indexed_dir).
    pub(crate) fn make_indexed(&mut self, buf: Vec<u8>, e: &Ent) -> Result<()> {
        let bs = self.fmt.bs as usize;
        let usable = self.fmt.usable();
        let (dd_off, _) = self.dotdot_at(0, &buf[..usable])?;
        let live = self.live(0, &buf)?;
        let parent = live[1].ino;
        let moved: Vec<Ent> = live[2..]
            .iter()
            .map(|d| Ent {
                name: d.name.to_vec(),
                ino: d.ino,
                ft: d.file_type,
            })
            .collect();
        debug_assert_eq!(dd_off, live[1].off);
        if moved.iter().any(|m| m.name == e.name) {
            return Err(exists());
        }
        let leaf_pblk = self.d.append_block(self.m)?;
        let leaf = self.fmt.pack(&moved);
        self.write_leaf(leaf_pblk, leaf.clone())?;
        // The root: `.` (12 bytes), `..` spanning the block, the info, one entry.
        let dots = [
            Ent {
                name: b".".to_vec(),
                ino: self.d.ino(),
                ft: 2,
            },
            Ent {
                name: b"..".to_vec(),
                ino: parent,
                ft: 2,
            },
        ];
        let mut root_buf = vec![0u8; bs];
        let (dot, dotdot) = (&dots[0], &dots[1]);
        self.fmt
            .put(&mut root_buf, 0, 12, &dot.name, dot.ino, dot.ft);
        let rest = bs - 12;
        self.fmt
            .put(&mut root_buf, 12, rest, &dotdot.name, dotdot.ino, dotdot.ft);
        let mut info = DxRootInfo::new(&mut root_buf[ROOT_INFO_OFFSET..]).expect("in block");
        info.set_hash_version(self.hp.default_version);
        info.set_info_length(8);
        let ri = RootInfo {
            version: self.hp.default_version,
            levels: 0,
        };
        let (root_pblk, _) = self.read_raw(0)?;
        let mut root = Frame {
            lblk: 0,
            pblk: root_pblk,
            buf: root_buf,
            co: ROOT_COUNT_OFFSET,
            limit: self.limit_at(ROOT_COUNT_OFFSET),
            entries: vec![(0, 1)],
            idx: 0,
        };
        self.write_dx(&mut root)?;
        self.d.set_indexed(true);
        if moved.len() >= 2 {
            self.split_leaf(std::slice::from_mut(&mut root), &ri, 1, leaf_pblk, &leaf)?;
        }
        self.htree_add(e)
    }
}

/// Where to split `ents` (sorted by hash) so that the upper part holds about half a block
/// by packed size (the kernel's do_split: move entries from the end while more than half
/// of the next one would still fit in the half; if that leaves at most one entry below,
/// split by count).
fn split_point(ents: &[(u32, u32, Ent)], half: usize) -> usize {
    let count = ents.len();
    let mut size = 0;
    let mut moved = 0;
    let mut stop = None;
    for i in (0..count).rev() {
        let s = entry_size(ents[i].2.name.len());
        if size + s / 2 > half {
            stop = Some(i);
            break;
        }
        size += s;
        moved += 1;
    }
    let split = match stop {
        Some(i) if i > 0 => count - moved,
        _ => count / 2,
    };
    split.clamp(1, count - 1)
}
