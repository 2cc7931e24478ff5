//! Changes to an extent tree (fs/ext4/extents.c is the model): insert into a hole with
//! merging, splitting full nodes bottom-up and growing the tree in depth when the root
//! is full; remove (punch/truncate) with trimming and splitting of extents, freeing of
//! emptied tree blocks and shrinking back into the inode; conversion between written
//! and unwritten. Paths come from the one walker ([`crate::walk::extent::find_path`]),
//! which has checked every node it returns, checksums included; every tree block written
//! gets its checksum. Index keys are kept equal to the first key of their child.

use super::blockmap::{max_extent_len, BlockMap, MetaSource};
use super::meta::{Freed, Meta};
use crate::format::extent::{
    block_checksum, tail_offset, Extent, ExtentHeader, ExtentIndex, ENTRY_SIZE, EXTENT_MAGIC,
    MAX_DEPTH,
};
use crate::walk::extent::{block_capacity, entry, find_path, read_node, PathNode, ROOT_ENTRIES};
use usfs_fs::{Error, Result, Structure};

/// One extent, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ext {
    /// First logical block.
    pub lblk: u64,
    /// Blocks (1..=32768, 32767 when unwritten).
    pub len: u64,
    /// First physical block.
    pub pblk: u64,
    /// Preallocated: reads as zeros.
    pub unwritten: bool,
}

impl Ext {
    fn end(&self) -> u64 {
        self.lblk + self.len
    }
    fn read(buf: &[u8], i: usize) -> Ext {
        let e = Extent::new(entry(buf, i)).expect("12 bytes");
        Ext {
            lblk: e.ee_block() as u64,
            len: e.len() as u64,
            pblk: e.start(),
            unwritten: e.is_unwritten(),
        }
    }
    fn bytes(&self) -> [u8; 12] {
        let mut e = Extent::new([0u8; 12]).expect("12 bytes");
        e.set_ee_block(self.lblk as u32);
        e.set_ee_len(self.len as u16 + if self.unwritten { 32768 } else { 0 });
        e.set_ee_start_hi((self.pblk >> 32) as u16);
        e.set_ee_start_lo(self.pblk as u32);
        e.into_inner()
    }
    /// Can `b` (right after `self`) join it in one extent?
    fn joins(&self, b: &Ext) -> bool {
        self.end() == b.lblk
            && self.pblk + self.len == b.pblk
            && self.unwritten == b.unwritten
            && self.len + b.len <= max_extent_len(self.unwritten)
    }
    /// The part of the extent from logical block `from` on.
    fn from(&self, from: u64) -> Ext {
        Ext {
            lblk: from,
            len: self.end() - from,
            pblk: self.pblk + (from - self.lblk),
            unwritten: self.unwritten,
        }
    }
}

fn index_bytes(key: u64, child: u64) -> [u8; 12] {
    let mut e = ExtentIndex::new([0u8; 12]).expect("12 bytes");
    e.set_ei_block(key as u32);
    e.set_ei_leaf_hi((child >> 32) as u16);
    e.set_ei_leaf_lo(child as u32);
    e.into_inner()
}

fn hdr(buf: &mut [u8]) -> ExtentHeader<&mut [u8]> {
    ExtentHeader::new(&mut buf[..ENTRY_SIZE]).expect("12 bytes")
}

fn put(buf: &mut [u8], i: usize, e: &[u8]) {
    buf[ENTRY_SIZE * (i + 1)..ENTRY_SIZE * (i + 2)].copy_from_slice(e);
}

fn set_entries(buf: &mut [u8], n: usize) {
    hdr(buf).set_eh_entries(n as u16);
}

fn set_key(buf: &mut [u8], i: usize, key: u64) {
    let o = ENTRY_SIZE * (i + 1);
    buf[o..o + 4].copy_from_slice(&(key as u32).to_le_bytes());
}

/// Inserts entry `e` at `i` in a node with room, shifting the later ones.
fn insert_at(buf: &mut [u8], n: usize, i: usize, e: &[u8]) {
    buf.copy_within(
        ENTRY_SIZE * (i + 1)..ENTRY_SIZE * (n + 1),
        ENTRY_SIZE * (i + 2),
    );
    put(buf, i, e);
    set_entries(buf, n + 1);
}

/// Removes entry `i` of a node of `n` entries.
fn remove_at(buf: &mut [u8], n: usize, i: usize) {
    buf.copy_within(
        ENTRY_SIZE * (i + 2)..ENTRY_SIZE * (n + 1),
        ENTRY_SIZE * (i + 1),
    );
    buf[ENTRY_SIZE * n..ENTRY_SIZE * (n + 1)].fill(0);
    set_entries(buf, n - 1);
}

/// A new empty tree block.
fn new_block(block_size: u32, depth: u16) -> Vec<u8> {
    let mut buf = vec![0u8; block_size as usize];
    let mut h = hdr(&mut buf);
    h.set_eh_magic(EXTENT_MAGIC);
    h.set_eh_max(block_capacity(block_size) as u16);
    h.set_eh_depth(depth);
    buf
}

/// Joins extent `i` of a leaf with its neighbours where they are contiguous; returns
/// the index the merged extent ends at. Keys of the leaf's first entry do not change.
fn merge_around(buf: &mut [u8], mut i: usize) -> usize {
    let n = buf_entries(buf);
    if i > 0 {
        let (a, b) = (Ext::read(buf, i - 1), Ext::read(buf, i));
        if a.joins(&b) {
            put(
                buf,
                i - 1,
                &Ext {
                    len: a.len + b.len,
                    ..a
                }
                .bytes(),
            );
            remove_at(buf, n, i);
            i -= 1;
        }
    }
    let n = buf_entries(buf);
    if i + 1 < n {
        let (a, b) = (Ext::read(buf, i), Ext::read(buf, i + 1));
        if a.joins(&b) {
            put(
                buf,
                i,
                &Ext {
                    len: a.len + b.len,
                    ..a
                }
                .bytes(),
            );
            remove_at(buf, n, i + 1);
        }
    }
    i
}

fn buf_entries(buf: &[u8]) -> usize {
    ExtentHeader::new(&buf[..ENTRY_SIZE])
        .expect("12 bytes")
        .eh_entries() as usize
}

impl BlockMap<'_> {
    fn ext_path(&self, m: &dyn Meta, lblk: u64) -> Result<Vec<PathNode>> {
        find_path(&MetaSource(m), &self.cx(m), &self.i_block[..], lblk)
    }

    fn corrupt(&self, what: String) -> Error {
        let msg = format!("inode {}: extent tree: {what}", self.ino);
        Error::corrupt(Structure::ExtentTree, msg).with_ino(self.ino)
    }

    /// Writes `node` back: the root into `i_block`, a block with its checksum.
    fn store(&mut self, m: &mut dyn Meta, node: &PathNode) -> Result<()> {
        if node.blk == 0 {
            self.i_block.copy_from_slice(&node.buf[..60]);
            return Ok(());
        }
        let mut buf = node.buf.clone();
        if let Some(seed) = m.csum_seed() {
            let max = node.max() as u16;
            let t = tail_offset(max);
            let c = block_checksum(seed, self.ino, self.generation, &buf, max);
            buf[t..t + 4].copy_from_slice(&c.to_le_bytes());
        }
        m.write_meta(node.blk, buf)
    }

    /// The path's last node, which must be a leaf; an empty root index turns back into an
    /// empty leaf. `None` when the path had to be fixed and must be walked again.
    fn leaf_of(&mut self, path: &[PathNode]) -> Result<Option<usize>> {
        let li = path.len() - 1;
        if path[li].depth() == 0 {
            return Ok(Some(li));
        }
        if li == 0 {
            hdr(&mut self.i_block[..]).set_eh_depth(0);
            return Ok(None);
        }
        let blk = path[li].blk;
        Err(self
            .corrupt(format!("index block {blk} has no entries"))
            .with_block(blk))
    }

    /// Sets the keys above level `l` to the first key of the node at `l`, as far up as
    /// the node is its parent's first child.
    fn fix_keys(&mut self, m: &mut dyn Meta, path: &mut [PathNode], mut l: usize) -> Result<()> {
        while l > 0 && path[l].entries() > 0 {
            let k = path[l].key(0);
            let p = &mut path[l - 1];
            let pi = p.pos.expect("an index node on a path has a chosen entry");
            if p.key(pi) == k {
                break;
            }
            set_key(&mut p.buf, pi, k);
            let p = p.clone();
            self.store(m, &p)?;
            if pi != 0 {
                break;
            }
            l -= 1;
        }
        Ok(())
    }

    /// Inserts `ex` (any length) into a hole, in extents of at most the maximum length.
    pub(super) fn ext_insert_run(&mut self, m: &mut dyn Meta, ex: Ext) -> Result<()> {
        let max = max_extent_len(ex.unwritten);
        let mut done = 0;
        while done < ex.len {
            let len = max.min(ex.len - done);
            let part = Ext {
                lblk: ex.lblk + done,
                len,
                pblk: ex.pblk + done,
                ..ex
            };
            self.ext_insert_one(m, part)?;
            done += len;
        }
        Ok(())
    }

    /// Inserts one extent into a hole: merged with a neighbour, or as a new entry after
    /// making room.
    fn ext_insert_one(&mut self, m: &mut dyn Meta, ex: Ext) -> Result<()> {
        // Each round inserts, or grows the tree or splits nodes so the next one can.
        for _ in 0..2 * MAX_DEPTH + 4 {
            let mut path = self.ext_path(m, ex.lblk)?;
            let Some(li) = self.leaf_of(&path)? else {
                continue;
            };
            let leaf = &mut path[li];
            let n = leaf.entries();
            let next = leaf.pos.map_or(0, |i| i + 1);
            let prev = leaf.pos.map(|i| Ext::read(&leaf.buf, i));
            let right = (next < n).then(|| Ext::read(&leaf.buf, next));
            if prev.is_some_and(|p| p.end() > ex.lblk) || right.is_some_and(|r| r.lblk < ex.end()) {
                return Err(self.corrupt(format!(
                    "insert of ({}, {}) over mapped blocks",
                    ex.lblk, ex.len
                )));
            }
            let mut first_changed = false;
            if let Some(p) = prev.filter(|p| p.joins(&ex)) {
                let i = next - 1;
                put(
                    &mut leaf.buf,
                    i,
                    &Ext {
                        len: p.len + ex.len,
                        ..p
                    }
                    .bytes(),
                );
                merge_around(&mut leaf.buf, i);
            } else if let Some(r) = right.filter(|r| ex.joins(r)) {
                put(
                    &mut leaf.buf,
                    next,
                    &Ext {
                        len: ex.len + r.len,
                        ..ex
                    }
                    .bytes(),
                );
                first_changed = next == 0;
            } else if n < leaf.max() {
                insert_at(&mut leaf.buf, n, next, &ex.bytes());
                first_changed = next == 0;
            } else {
                self.make_room(m, &mut path, ex)?;
                continue;
            }
            let leaf = path[li].clone();
            self.store(m, &leaf)?;
            if first_changed {
                self.fix_keys(m, &mut path, li)?;
            }
            return Ok(());
        }
        Err(self.corrupt(format!(
            "no room for ({}, {}) after splitting",
            ex.lblk, ex.len
        )))
    }

    /// The leaf on `path` is full: splits nodes from the lowest level with room down to
    /// the leaf, or, when every level is full, moves the root into a new block.
    fn make_room(&mut self, m: &mut dyn Meta, path: &mut [PathNode], ex: Ext) -> Result<()> {
        let li = path.len() - 1;
        match (0..li).rev().find(|&l| path[l].entries() < path[l].max()) {
            Some(k) => self.split(m, path, k, ex),
            None => self.grow(m, &mut path[0], ex.pblk),
        }
    }

    /// Moves the root's entries into a new block and makes the root one index entry
    /// pointing at it (ext4_ext_grow_indepth).
    fn grow(&mut self, m: &mut dyn Meta, root: &mut PathNode, goal: u64) -> Result<()> {
        let depth = root.depth();
        if depth >= MAX_DEPTH {
            return Err(Error::incompatible(format!(
                "inode {}: extent tree deeper than {MAX_DEPTH}",
                self.ino
            )));
        }
        let blk = self.alloc_meta_blocks(m, goal, 1)?[0];
        let n = root.entries();
        let mut buf = new_block(m.geo().block_size, depth);
        buf[ENTRY_SIZE..ENTRY_SIZE * (n + 1)]
            .copy_from_slice(&root.buf[ENTRY_SIZE..ENTRY_SIZE * (n + 1)]);
        set_entries(&mut buf, n);
        let key = root.key(0);
        self.store(
            m,
            &PathNode {
                blk,
                buf,
                pos: None,
                end: 0,
            },
        )?;
        root.buf[ENTRY_SIZE..].fill(0);
        put(&mut root.buf, 0, &index_bytes(key, blk));
        let mut h = hdr(&mut root.buf);
        h.set_eh_entries(1);
        h.set_eh_depth(depth + 1);
        let root = root.clone();
        self.store(m, &root)
    }

    /// Splits the full nodes below level `k` (which has room) at the insertion point
    /// (ext4_ext_split): the entries after it move to a chain of new nodes whose top is
    /// indexed in level `k` from `border`, the first moved key (or the new extent's
    /// block when nothing moves, as when appending).
    fn split(&mut self, m: &mut dyn Meta, path: &mut [PathNode], k: usize, ex: Ext) -> Result<()> {
        let li = path.len() - 1;
        let s_leaf = path[li].pos.map_or(0, |i| i + 1);
        let border = if s_leaf < path[li].entries() {
            path[li].key(s_leaf)
        } else {
            ex.lblk
        };
        let blks = self.alloc_meta_blocks(m, ex.pblk, li - k)?;
        let bs = m.geo().block_size;
        for j in (k + 1..=li).rev() {
            let node = &mut path[j];
            let s = if j == li {
                s_leaf
            } else {
                node.pos.expect("index node on a path") + 1
            };
            let n = node.entries();
            let mut nb = new_block(bs, node.depth());
            let mut cnt = 0;
            if j < li {
                put(&mut nb, 0, &index_bytes(border, blks[j - k]));
                cnt = 1;
            }
            for i in s..n {
                put(&mut nb, cnt, entry(&node.buf, i));
                cnt += 1;
            }
            set_entries(&mut nb, cnt);
            node.buf[ENTRY_SIZE * (s + 1)..ENTRY_SIZE * (n + 1)].fill(0);
            set_entries(&mut node.buf, s);
            let node = node.clone();
            self.store(m, &node)?;
            let new = PathNode {
                blk: blks[j - k - 1],
                buf: nb,
                pos: None,
                end: 0,
            };
            self.store(m, &new)?;
        }
        let p = &mut path[k];
        let at = p.pos.expect("index node on a path") + 1;
        let n = p.entries();
        insert_at(&mut p.buf, n, at, &index_bytes(border, blks[0]));
        let p = p.clone();
        self.store(m, &p)
    }

    /// Unmaps `from..to` (to <= 2^32), leaf by leaf from the left.
    pub(super) fn ext_remove(&mut self, m: &mut dyn Meta, from: u64, to: u64) -> Result<u64> {
        let mut freed = 0;
        let mut cur = from;
        while cur < to {
            let mut path = self.ext_path(m, cur)?;
            let Some(li) = self.leaf_of(&path)? else {
                break;
            };
            let leaf_end = path[li].end;
            let (keep, right, f) = self.trim_leaf(m, &path[li], from, to)?;
            freed += f;
            let leaf = &mut path[li];
            let n = leaf.entries();
            let old_first = (n > 0).then(|| leaf.key(0));
            leaf.buf[ENTRY_SIZE..ENTRY_SIZE * (n + 1)].fill(0);
            for (i, e) in keep.iter().enumerate() {
                put(&mut leaf.buf, i, &e.bytes());
            }
            set_entries(&mut leaf.buf, keep.len());
            if keep.is_empty() && li > 0 {
                self.delete_node(m, &mut path, li)?;
            } else {
                let leaf = path[li].clone();
                self.store(m, &leaf)?;
                if keep.first().map(|e| e.lblk) != old_first {
                    self.fix_keys(m, &mut path, li)?;
                }
            }
            if let Some(r) = right {
                // The extent went on past `to`: its tail is the last thing to put back.
                self.ext_insert_one(m, r)?;
                break;
            }
            if leaf_end <= cur {
                let blk = path[li].blk;
                return Err(self
                    .corrupt(format!("leaf {blk} ends before block {cur}"))
                    .with_block(blk));
            }
            cur = leaf_end;
        }
        self.shrink(m)?;
        Ok(freed)
    }

    /// The extents of `leaf` left after unmapping `from..to`, and the tail of an extent
    /// split in two (to insert after); frees the unmapped data blocks and returns how
    /// many.
    fn trim_leaf(
        &mut self,
        m: &mut dyn Meta,
        leaf: &PathNode,
        from: u64,
        to: u64,
    ) -> Result<(Vec<Ext>, Option<Ext>, u64)> {
        let cx = self.cx(m);
        let mut keep = Vec::with_capacity(leaf.entries());
        let mut right = None;
        let mut freed = 0;
        let mut prev_end = 0;
        for i in 0..leaf.entries() {
            let e = Ext::read(&leaf.buf, i);
            if e.len == 0 || e.lblk < prev_end {
                return Err(self
                    .corrupt(format!(
                        "block {}: extent {i} ({}, {}) is empty or out of order",
                        leaf.blk, e.lblk, e.len
                    ))
                    .with_block(leaf.blk));
            }
            prev_end = e.end();
            if e.end() <= from || e.lblk >= to {
                keep.push(e);
                continue;
            }
            cx.check_data(e.lblk, e.pblk, e.len)?;
            let (a, b) = (e.lblk.max(from), e.end().min(to));
            m.free_blocks(self.ino, e.pblk + (a - e.lblk), b - a, Freed::Data)?;
            freed += b - a;
            if a > e.lblk {
                keep.push(Ext {
                    len: a - e.lblk,
                    ..e
                });
            }
            if b < e.end() {
                if a > e.lblk {
                    right = Some(e.from(b));
                } else {
                    keep.push(e.from(b));
                }
            }
        }
        Ok((keep, right, freed))
    }

    /// Frees the empty node at level `l` of `path` and drops its index entry, and so on
    /// upwards for index blocks left empty (the root stays).
    fn delete_node(&mut self, m: &mut dyn Meta, path: &mut [PathNode], mut l: usize) -> Result<()> {
        loop {
            self.free_meta_block(m, path[l].blk)?;
            let p = &mut path[l - 1];
            let pi = p.pos.expect("index node on a path");
            let n = p.entries();
            remove_at(&mut p.buf, n, pi);
            if n == 1 && l - 1 > 0 {
                l -= 1;
                continue;
            }
            let p = p.clone();
            self.store(m, &p)?;
            if pi == 0 && n > 1 {
                self.fix_keys(m, path, l - 1)?;
            }
            return Ok(());
        }
    }

    /// Moves the tree back into the root while the root has one child whose entries fit
    /// there; an empty root index becomes an empty leaf.
    fn shrink(&mut self, m: &mut dyn Meta) -> Result<()> {
        loop {
            let h = ExtentHeader::new(&self.i_block[..ENTRY_SIZE]).expect("12 bytes");
            let (depth, n) = (h.eh_depth(), h.eh_entries() as usize);
            if depth == 0 || n > 1 {
                return Ok(());
            }
            if n == 0 {
                hdr(&mut self.i_block[..]).set_eh_depth(0);
                return Ok(());
            }
            let child = ExtentIndex::new(entry(&self.i_block[..], 0))
                .expect("12 bytes")
                .leaf();
            let cx = self.cx(m);
            let buf = read_node(&MetaSource(m), &cx, child, depth - 1)?;
            let cn = buf_entries(&buf);
            if cn > ROOT_ENTRIES {
                return Ok(());
            }
            self.i_block[ENTRY_SIZE..].fill(0);
            self.i_block[ENTRY_SIZE..ENTRY_SIZE * (cn + 1)]
                .copy_from_slice(&buf[ENTRY_SIZE..ENTRY_SIZE * (cn + 1)]);
            let mut h = hdr(&mut self.i_block[..]);
            h.set_eh_entries(cn as u16);
            h.set_eh_depth(depth - 1);
            self.free_meta_block(m, child)?;
        }
    }

    /// Converts the extents among `lblk..lblk+len` to unwritten (`to_unwritten`) or
    /// written, splitting an extent into up to three where the range cuts it.
    pub(super) fn ext_convert(
        &mut self,
        m: &mut dyn Meta,
        lblk: u64,
        len: u64,
        to_unwritten: bool,
    ) -> Result<()> {
        let end = lblk.saturating_add(len).min(crate::walk::MAX_LBLK);
        let mut cur = lblk;
        while cur < end {
            let mut path = self.ext_path(m, cur)?;
            let Some(li) = self.leaf_of(&path)? else {
                return Ok(());
            };
            let leaf = &mut path[li];
            let n = leaf.entries();
            let (i, e) = match leaf.pos.map(|i| (i, Ext::read(&leaf.buf, i))) {
                Some((i, e)) if e.end() > cur => (i, e),
                other => {
                    // A hole: on to the next extent.
                    let next = other.map_or(0, |(i, _)| i + 1);
                    cur = if next < n { leaf.key(next) } else { leaf.end };
                    continue;
                }
            };
            if e.unwritten == to_unwritten {
                cur = e.end();
                continue;
            }
            self.cx(m).check_data(e.lblk, e.pblk, e.len)?;
            let b = end.min(e.end());
            let mut mid = e.from(cur);
            mid.len = b - cur;
            mid.unwritten = to_unwritten;
            let mut rest = Vec::with_capacity(3);
            if cur > e.lblk {
                put(
                    &mut leaf.buf,
                    i,
                    &Ext {
                        len: cur - e.lblk,
                        ..e
                    }
                    .bytes(),
                );
                rest.push(mid);
            } else {
                let first_len = mid.len.min(max_extent_len(to_unwritten));
                put(
                    &mut leaf.buf,
                    i,
                    &Ext {
                        len: first_len,
                        ..mid
                    }
                    .bytes(),
                );
                if first_len < mid.len {
                    rest.push(mid.from(cur + first_len));
                }
                merge_around(&mut leaf.buf, i);
            }
            if b < e.end() {
                rest.push(e.from(b));
            }
            let leaf = path[li].clone();
            self.store(m, &leaf)?;
            for x in rest {
                self.ext_insert_run(m, x)?;
            }
            cur = b;
        }
        Ok(())
    }
}
