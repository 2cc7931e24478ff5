//! Unit tests of [`BlockMap`] on [`MemMeta`]: random insert/remove/convert sequences
//! checked block by block against a plain map from logical to physical blocks, with
//! every tree invariant (checksums, sorted keys, index keys equal to the first key of
//! their child, block counts) checked after each step; depth growth to three levels and
//! shrinking back; indirect maps up to triple indirect; corrupt trees.

use super::blockmap::{BlockMap, Run};
use super::meta::{Freed, MemMeta, Meta};
use crate::format::extent::{ExtentHeader, ExtentIndex, ENTRY_SIZE};
use crate::format::features::Features;
use crate::format::geometry::Geometry;
use crate::walk::extent::{entry, key, read_node};
use crate::walk::indirect::{per_block, ptr};
use crate::walk::MapCtx;
use std::collections::{BTreeMap, HashSet};
use usfs_fs::{Error, Structure};

/// Data blocks of "mergeable" inserts sit at DATA + lblk; others bump from FRAG.
const DATA: u64 = 1 << 30;
const FRAG: u64 = 1 << 31;
const INO: u32 = 12;
const GEN: u32 = 0x1234_5678;

fn geo(block_size: u32) -> Geometry {
    Geometry {
        block_size,
        block_size_log: block_size.trailing_zeros(),
        blocks_count: 1 << 33,
        first_data_block: (block_size == 1024) as u64,
        blocks_per_group: block_size * 8,
        cluster_shift: 0,
        inodes_per_group: 1024,
        inodes_count: 1 << 20,
        inode_size: 256,
        first_ino: 11,
        group_count: 1 << 18,
        desc_size: 64,
        features: Features {
            compat: 0,
            incompat: 0,
            ro_compat: 0,
        },
        first_meta_bg: 0,
        backup_bgs: [0, 0],
    }
}

fn mem(block_size: u32, seed: Option<u32>) -> MemMeta {
    MemMeta::new(geo(block_size), seed, 100, 1 << 28)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The expected map: lblk -> (pblk, unwritten).
type Model = BTreeMap<u64, (u64, bool)>;

/// A file under test: its `i_block`, flags and the model.
struct File {
    i_block: [u8; 60],
    extents: bool,
    meta_blocks: i64,
    model: Model,
    frag_next: u64,
    data_freed: u64,
}

impl File {
    fn new(extents: bool) -> File {
        let mut i_block = [0u8; 60];
        if extents {
            BlockMap::init_extent_root(&mut i_block);
        }
        File {
            i_block,
            extents,
            meta_blocks: 0,
            model: Model::new(),
            frag_next: FRAG,
            data_freed: 0,
        }
    }

    fn with<T>(&mut self, f: impl FnOnce(&mut BlockMap) -> T) -> T {
        let mut bm = BlockMap::new(INO, GEN, &mut self.i_block, self.extents);
        bm.meta_blocks = self.meta_blocks;
        let r = f(&mut bm);
        self.meta_blocks = bm.meta_blocks;
        r
    }

    fn insert(&mut self, m: &mut MemMeta, lblk: u64, pblk: u64, len: u64, unw: bool) {
        self.with(|b| b.insert(m, lblk, pblk, len, unw))
            .unwrap_or_else(|e| panic!("insert ({lblk}, {pblk}, {len}, {unw}): {e}"));
        for k in 0..len {
            assert!(self.model.insert(lblk + k, (pblk + k, unw)).is_none());
        }
    }

    fn remove(&mut self, m: &mut MemMeta, from: u64, to: u64) {
        let freed = self
            .with(|b| b.remove(m, from, to))
            .unwrap_or_else(|e| panic!("remove {from}..{to}: {e}"));
        let gone: Vec<u64> = self.model.range(from..to).map(|(&l, _)| l).collect();
        for l in &gone {
            self.model.remove(l);
        }
        assert_eq!(
            freed,
            gone.len() as u64,
            "data blocks freed by {from}..{to}"
        );
        self.data_freed += freed;
    }

    fn convert(&mut self, m: &mut MemMeta, lblk: u64, len: u64, unw: bool) {
        self.with(|b| {
            if unw {
                b.mark_unwritten(m, lblk, len)
            } else {
                b.mark_written(m, lblk, len)
            }
        })
        .unwrap_or_else(|e| panic!("convert {lblk}+{len} to unwritten={unw}: {e}"));
        for (_, v) in self.model.range_mut(lblk..lblk + len) {
            v.1 = unw;
        }
    }

    fn lookup(&mut self, m: &MemMeta, lblk: u64) -> Run {
        self.with(|b| b.lookup(m, lblk)).expect("lookup")
    }

    /// Every block below `upto` maps as the model says; runs are honest.
    fn check_map(&mut self, m: &MemMeta, upto: u64) {
        let mut l = 0;
        while l < upto {
            let r = self.lookup(m, l);
            assert_eq!(r.lblk, l);
            assert!(r.len >= 1);
            let end = (l + r.len).min(upto);
            for k in l..end {
                let want = self.model.get(&k).copied();
                let got = r.pblk.map(|p| (p + (k - l), r.unwritten));
                assert_eq!(got, want, "block {k} in run {r:?}");
            }
            l = end;
        }
    }

    /// Tree invariants; returns the tree/indirect blocks in use.
    fn check_tree(&self, m: &MemMeta) -> HashSet<u64> {
        let cx = MapCtx {
            ino: INO,
            generation: GEN,
            seed: m.seed,
            block_size: m.geo.block_size,
            blocks_count: m.geo.blocks_count,
            first_data_block: m.geo.first_data_block,
        };
        let mut blocks = HashSet::new();
        if self.extents {
            let h = ExtentHeader::new(&self.i_block[..12]).unwrap();
            check_node(m, &cx, &self.i_block, h.eh_depth(), None, &mut blocks);
        } else {
            for (i, lvl) in [(12, 1), (13, 2), (14, 3)] {
                check_ind(m, ptr(&self.i_block, i), lvl, &mut blocks);
            }
        }
        assert_eq!(blocks.len() as i64, self.meta_blocks, "tree blocks counted");
        blocks
    }
}

/// Checks a node and its subtree; `range` is (key in parent, end) for non-root nodes.
fn check_node(
    m: &MemMeta,
    cx: &MapCtx,
    buf: &[u8],
    depth: u16,
    range: Option<(u64, u64)>,
    blocks: &mut HashSet<u64>,
) {
    let h = ExtentHeader::new(&buf[..12]).unwrap();
    let n = h.eh_entries() as usize;
    assert_eq!(h.eh_depth(), depth);
    if let Some((k, _)) = range {
        assert!(n > 0, "empty non-root node");
        assert_eq!(key(buf, 0), k, "index key equals first key of child");
    }
    let end = range.map_or(1 << 32, |r| r.1);
    let mut prev_end = 0;
    for i in 0..n {
        let k = key(buf, i);
        assert!(k >= prev_end, "entries sorted");
        if depth == 0 {
            let e = crate::format::extent::Extent::new(entry(buf, i)).unwrap();
            assert!(!e.is_empty());
            prev_end = k + e.len() as u64;
            assert!(prev_end <= end, "extent inside the node's range");
        } else {
            let child = ExtentIndex::new(entry(buf, i)).unwrap().leaf();
            assert!(blocks.insert(child), "tree block {child} used twice");
            let cend = if i + 1 < n { key(buf, i + 1) } else { end };
            let cbuf = read_node(&MemSrc(m), cx, child, depth - 1).expect("child reads");
            check_node(m, cx, &cbuf, depth - 1, Some((k, cend)), blocks);
            prev_end = k + 1;
        }
    }
}

fn check_ind(m: &MemMeta, p: u64, level: u32, blocks: &mut HashSet<u64>) {
    if p == 0 {
        return;
    }
    assert!(blocks.insert(p), "indirect block {p} used twice");
    let buf = m.read_meta(p).unwrap();
    assert!(buf.iter().any(|&b| b != 0), "empty indirect block {p} kept");
    if level > 1 {
        for i in 0..per_block(m.geo.block_size) as usize {
            check_ind(m, ptr(&buf, i), level - 1, blocks);
        }
    }
}

struct MemSrc<'a>(&'a MemMeta);
impl crate::walk::BlockSource for MemSrc<'_> {
    fn read_block(&self, blk: u64) -> usfs_fs::Result<Vec<u8>> {
        self.0.read_meta(blk)
    }
}

fn depth(f: &File) -> u16 {
    ExtentHeader::new(&f.i_block[..12]).unwrap().eh_depth()
}

/// Tree blocks freed as metadata, all distinct, none still in the tree.
fn check_frees(m: &MemMeta, f: &File, live: &HashSet<u64>) {
    let mut seen = HashSet::new();
    let mut data = 0;
    for &(owner, s, l, how) in &m.freed {
        assert_eq!(owner, INO);
        match how {
            Freed::Metadata => {
                assert_eq!(l, 1);
                assert!(seen.insert(s), "tree block {s} freed twice");
                assert!(!live.contains(&s), "freed tree block {s} still in the tree");
            }
            Freed::Data => {
                if s < DATA {
                    continue; // an allocation undone (none expected here)
                }
                data += l;
            }
        }
    }
    assert_eq!(data, f.data_freed);
}

/// A random hole in the model below `upto`: (lblk, len of the hole up to `max`).
fn random_hole(r: &mut Rng, model: &Model, upto: u64, max: u64) -> Option<(u64, u64)> {
    for _ in 0..20 {
        let l = r.below(upto);
        if model.contains_key(&l) {
            continue;
        }
        let next = model.range(l..).next().map_or(upto, |(&k, _)| k.min(upto));
        return Some((l, (next - l).min(1 + r.below(max))));
    }
    None
}

fn random_run(seed: u64, block_size: u32, csum: bool, extents: bool, steps: usize, upto: u64) {
    let mut r = Rng(seed | 1);
    let mut m = mem(block_size, csum.then_some(0xdead_beef));
    let mut f = File::new(extents);
    for step in 0..steps {
        match r.below(10) {
            0..=5 => {
                let Some((l, len)) = random_hole(&mut r, &f.model, upto, 40) else {
                    continue;
                };
                let unw = extents && r.below(3) == 0;
                let p = if r.below(2) == 0 {
                    DATA + l
                } else {
                    let p = f.frag_next;
                    f.frag_next += len + 1;
                    p
                };
                f.insert(&mut m, l, p, len, unw);
            }
            6..=7 => {
                let l = r.below(upto);
                let span = if r.below(4) == 0 { upto } else { 30 };
                let len = 1 + r.below(span);
                f.remove(&mut m, l, l + len);
            }
            _ if extents => {
                let l = r.below(upto);
                let len = 1 + r.below(60);
                f.convert(&mut m, l, len, r.below(2) == 0);
            }
            _ => {}
        }
        if step % 50 == 0 || step + 1 == steps {
            f.check_map(&m, upto + 10);
            let live = f.check_tree(&m);
            check_frees(&m, &f, &live);
        }
    }
    // Truncate to 0: everything back in the inode, every block freed.
    f.remove(&mut m, 0, u64::MAX);
    assert!(f.model.is_empty());
    let live = f.check_tree(&m);
    assert!(live.is_empty());
    assert_eq!(f.meta_blocks, 0);
    check_frees(&m, &f, &live);
    if extents {
        assert_eq!(depth(&f), 0);
    } else {
        assert!(f.i_block.iter().all(|&b| b == 0));
    }
}

#[test]
fn random_extents_1k_csum() {
    for seed in 1..=6 {
        random_run(seed * 7919, 1024, true, true, 1500, 3000);
    }
}

#[test]
fn random_extents_4k_no_csum() {
    for seed in 1..=3 {
        random_run(seed * 104_729, 4096, false, true, 1500, 20_000);
    }
}

#[test]
fn random_indirect_1k() {
    for seed in 1..=4 {
        random_run(seed * 31, 1024, false, false, 800, 2000);
    }
    // Sparse over double and triple indirect ranges.
    random_run(77, 1024, false, false, 400, 12 + 256 + 65536 + 3 * 65536);
}

#[test]
fn random_indirect_4k() {
    random_run(5, 4096, false, false, 600, 12 + 1024 + 3000);
}

/// Appending single unmergeable blocks grows the tree to depth 3 with 1 KiB blocks;
/// removing from the end shrinks it back level by level.
#[test]
fn depth_grows_to_three_and_shrinks() {
    let mut m = mem(1024, Some(7));
    let mut f = File::new(true);
    let n = 4 * 84 * 84 + 10;
    let mut seen_depth = 0;
    for i in 0..n {
        f.insert(&mut m, 2 * i, FRAG + 2 * i, 1, false);
        let d = depth(&f);
        assert!(d >= seen_depth, "depth never shrinks on insert");
        seen_depth = d;
    }
    assert_eq!(depth(&f), 3);
    f.check_map(&m, 2 * n + 5);
    f.check_tree(&m);
    // Appends split by moving nothing: leaves stay full.
    assert!(f.meta_blocks < (n / 84 + n / 84 / 84 + 8) as i64);
    // Remove the tail in chunks: depth goes down as the tree fits again.
    let mut hi = 2 * n;
    while hi > 0 {
        let lo = hi.saturating_sub(2 * 3000);
        f.remove(&mut m, lo, hi);
        hi = lo;
        let live = f.check_tree(&m);
        check_frees(&m, &f, &live);
        if f.model.len() <= 4 {
            assert_eq!(depth(&f), 0);
        }
    }
    assert_eq!(f.meta_blocks, 0);
    assert_eq!(depth(&f), 0);
}

/// Random-order inserts (half-full nodes after splits in the middle) to depth 2+.
#[test]
fn random_order_inserts_split_in_the_middle() {
    let mut m = mem(1024, Some(99));
    let mut f = File::new(true);
    let mut r = Rng(12345);
    let n = 3000u64;
    let mut order: Vec<u64> = (0..n).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, r.below(i as u64 + 1) as usize);
    }
    for (k, &i) in order.iter().enumerate() {
        f.insert(&mut m, 3 * i, FRAG + 3 * i, 2, i % 5 == 0);
        if k % 500 == 0 {
            f.check_tree(&m);
        }
    }
    assert!(depth(&f) >= 2);
    f.check_map(&m, 3 * n);
    f.check_tree(&m);
    // Punch the middle of every other extent: each splits in two.
    for i in (0..n).step_by(2) {
        f.remove(&mut m, 3 * i + 1, 3 * i + 2);
    }
    f.check_map(&m, 3 * n);
    let live = f.check_tree(&m);
    check_frees(&m, &f, &live);
}

/// Contiguous inserts merge up to the extent length limits.
#[test]
fn merges_respect_length_limits() {
    let mut m = mem(4096, None);
    let mut f = File::new(true);
    // 40960 written blocks inserted in pieces of 1024: two extents (32768 + 8192); a
    // piece that would overflow an extent starts a new one (no partial merge).
    for i in 0..40 {
        f.insert(&mut m, i * 1024, DATA + i * 1024, 1024, false);
    }
    let h = ExtentHeader::new(&f.i_block[..12]).unwrap();
    assert_eq!((h.eh_depth(), h.eh_entries()), (0, 2));
    assert_eq!(f.lookup(&m, 0).len, 32768);
    // Unwritten: 32767 at most.
    let mut g = File::new(true);
    g.insert(&mut m, 0, DATA, 40000, true);
    assert_eq!(g.lookup(&m, 0).len, 32767);
    // Inserting in front merges too (the key moves).
    g.insert(&mut m, 100_000, DATA + 100_000, 10, false);
    g.insert(&mut m, 99_990, DATA + 99_990, 10, false);
    assert_eq!(g.lookup(&m, 99_990).len, 20);
    g.check_map(&m, 110_000);
    // Converting all of a 32768 written extent to unwritten needs two extents.
    f.convert(&mut m, 0, 32768, true);
    assert_eq!(f.lookup(&m, 0).len, 32767);
    f.check_map(&m, 41_000);
    // And back: the pieces join again.
    f.convert(&mut m, 0, 40000, false);
    assert_eq!(f.lookup(&m, 0).len, 32768);
    f.check_map(&m, 41_000);
}

/// mark_written splits an unwritten extent into three, and joins written neighbours.
#[test]
fn mark_written_splits_in_three() {
    let mut m = mem(1024, Some(1));
    let mut f = File::new(true);
    f.insert(&mut m, 0, DATA, 100, true);
    f.convert(&mut m, 40, 10, false);
    let r = f.lookup(&m, 40);
    assert_eq!((r.len, r.unwritten, r.pblk), (10, false, Some(DATA + 40)));
    assert!(f.lookup(&m, 39).unwritten && f.lookup(&m, 50).unwritten);
    f.convert(&mut m, 50, 10, false);
    assert_eq!(
        f.lookup(&m, 40).len,
        20,
        "joined with the written extent before it"
    );
    f.check_map(&m, 120);
    f.check_tree(&m);
}

#[test]
fn insert_over_mapped_blocks_is_refused() {
    for extents in [true, false] {
        let mut m = mem(1024, None);
        let mut f = File::new(extents);
        f.insert(&mut m, 10, DATA + 10, 20, false);
        for (l, len) in [(5, 6), (29, 5), (15, 1), (0, 100)] {
            let e = f.with(|b| b.insert(&mut m, l, FRAG, len, false));
            let want = if extents {
                Structure::ExtentTree
            } else {
                Structure::BlockMap
            };
            assert!(
                matches!(&e, Err(Error::Corrupt(c)) if c.structure == want),
                "{extents} {l}+{len}: {e:?}"
            );
        }
    }
}

#[test]
fn bad_checksum_is_refused_not_changed() {
    let mut m = mem(1024, Some(42));
    let mut f = File::new(true);
    for i in 0..10 {
        f.insert(&mut m, 2 * i, FRAG + 2 * i, 1, false);
    }
    assert_eq!(depth(&f), 1);
    let leaf = ExtentIndex::new(entry(&f.i_block, 0)).unwrap().leaf();
    let mut b = m.read_meta(leaf).unwrap();
    b[ENTRY_SIZE + 4] ^= 1; // a length, checksum now stale
    m.write_meta(leaf, b.clone()).unwrap();
    let before = f.i_block;
    let e = f.with(|bm| bm.insert(&mut m, 100, FRAG + 100, 1, false));
    let msg = format!("{}", e.unwrap_err());
    assert!(
        msg.contains("inode 12") && msg.contains(&format!("extent block {leaf}")),
        "{msg}"
    );
    assert!(f.with(|bm| bm.remove(&mut m, 0, 5)).is_err());
    assert!(f.with(|bm| bm.lookup(&m, 0)).is_err());
    assert_eq!(f.i_block, before);
    assert_eq!(m.read_meta(leaf).unwrap(), b);
}

/// Random damage to tree blocks and the root: every call returns, none panics.
#[test]
fn damaged_trees_give_errors_not_panics() {
    for (extents, bs) in [(true, 1024), (false, 1024)] {
        let mut r = Rng(4242);
        for round in 0..150 {
            let mut m = mem(bs, None);
            let mut f = File::new(extents);
            for i in 0..200 {
                let l = if extents { 3 * i } else { 12 + 300 * i };
                f.insert(&mut m, l, FRAG + 3 * i, 2, false);
            }
            let blks: Vec<u64> = m.blocks.keys().copied().collect();
            for _ in 0..1 + round % 4 {
                if r.below(4) == 0 {
                    let o = r.below(60) as usize;
                    f.i_block[o] ^= 1 << r.below(8);
                } else {
                    let b = blks[r.below(blks.len() as u64) as usize];
                    let buf = m.blocks.get_mut(&b).unwrap();
                    let span = if r.below(2) == 0 { 64 } else { bs as u64 };
                    let o = r.below(span) as usize;
                    buf[o] ^= 1 << r.below(8);
                }
            }
            let l = r.below(800);
            let _ = f.with(|b| b.lookup(&m, l));
            let _ = f.with(|b| b.insert(&mut m, l, DATA + l, 3, false));
            let _ = f.with(|b| b.remove(&mut m, l / 2, l + 50));
            let _ = f.with(|b| b.mark_written(&mut m, 0, 700));
            let _ = f.with(|b| b.remove(&mut m, 0, u64::MAX));
        }
    }
}

/// A full file system: the insert fails with ENOSPC and keeps nothing allocated.
#[test]
fn enospc_leaves_no_allocation() {
    let mut m = MemMeta::new(geo(1024), None, 100, 0);
    let mut f = File::new(true);
    for i in 0..4 {
        f.insert(&mut m, 2 * i, FRAG + 2 * i, 1, false);
    }
    let e = f.with(|b| b.insert(&mut m, 100, FRAG + 100, 1, false));
    assert!(matches!(e, Err(Error::Io(_))), "{e:?}");
    assert_eq!(f.meta_blocks, 0);
    f.model.clear();
    for i in 0..4 {
        f.model.insert(2 * i, (FRAG + 2 * i, false));
    }
    f.check_map(&m, 20);
}

#[test]
fn unwritten_needs_extents() {
    let mut m = mem(1024, None);
    let mut f = File::new(false);
    let e = f.with(|b| b.insert(&mut m, 0, DATA, 1, true));
    assert!(matches!(e, Err(Error::Incompatible(_))));
    let e = f.with(|b| b.insert(&mut m, 0, DATA, 0, false));
    assert!(matches!(e, Err(Error::Invalid)));
    let e = f.with(|b| b.insert(&mut m, (1 << 32) - 1, DATA, 2, false));
    assert!(matches!(e, Err(Error::Invalid)));
}
