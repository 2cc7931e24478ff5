//! Unit tests of the directory mutator on [`MemMeta`] with an in-memory directory (a Vec
//! of physical blocks): linear and htree growth, removals, collisions, the index limits,
//! damaged blocks. An independent checker walks every leaf and every index node and
//! checks the htree invariants (hash ranges, continuation bits, counts) that e2fsck checks;
//! the oracle tests on real images are in `dir_oracle_tests`.

use super::dir_edit::{DirEdit, HashParams};
use super::meta::{DirFile, Freed, MemMeta, Meta};
use crate::format::dirent;
use crate::format::dx::{self, DxRootInfo, NODE_COUNT_OFFSET, ROOT_COUNT_OFFSET};
use crate::format::dx_hash::{dx_hash, HashVersion};
use crate::format::features::{compat, incompat, ro_compat, Features};
use crate::format::geometry::Geometry;
use std::collections::BTreeMap;
use usfs_fs::{Error, FileType, Result, Structure};

/// A directory whose blocks are a Vec of physical block numbers.
pub(crate) struct VecDir {
    pub ino: u32,
    pub gen: u32,
    pub blocks: Vec<u64>,
    pub indexed: bool,
}

impl DirFile for VecDir {
    fn ino(&self) -> u32 {
        self.ino
    }
    fn generation(&self) -> u32 {
        self.gen
    }
    fn nblocks(&self) -> u64 {
        self.blocks.len() as u64
    }
    fn pblk(&mut self, _m: &mut dyn Meta, lblk: u64) -> Result<u64> {
        Ok(self.blocks[lblk as usize])
    }
    fn append_block(&mut self, m: &mut dyn Meta) -> Result<u64> {
        let (b, _) = m.alloc_blocks(self.ino, 0, 1)?;
        self.blocks.push(b);
        Ok(b)
    }
    fn truncate_blocks(&mut self, m: &mut dyn Meta, from: u64) -> Result<()> {
        for b in self.blocks.split_off(from as usize) {
            m.free_blocks(self.ino, b, 1, Freed::Metadata)?;
        }
        Ok(())
    }
    fn is_indexed(&self) -> bool {
        self.indexed
    }
    fn set_indexed(&mut self, on: bool) {
        self.indexed = on;
    }
}

/// A test volume: block size, metadata_csum, dir_index, large_dir.
pub(crate) struct Vol {
    pub m: MemMeta,
    pub d: VecDir,
    pub hp: HashParams,
}

pub(crate) fn vol(bs: u32, csum: bool, dir_index: bool, large_dir: bool, hash: u8) -> Vol {
    let features = Features {
        compat: if dir_index { compat::DIR_INDEX } else { 0 },
        incompat: incompat::FILETYPE | if large_dir { incompat::LARGEDIR } else { 0 },
        ro_compat: if csum { ro_compat::METADATA_CSUM } else { 0 },
    };
    let geo = Geometry {
        block_size: bs,
        block_size_log: bs.trailing_zeros(),
        blocks_count: 1 << 30,
        first_data_block: (bs == 1024) as u64,
        blocks_per_group: bs * 8,
        cluster_shift: 0,
        inodes_per_group: 8192,
        inodes_count: 1 << 20,
        inode_size: 256,
        first_ino: 11,
        group_count: 128,
        desc_size: 64,
        features,
        first_meta_bg: 0,
        backup_bgs: [0, 0],
    };
    let seed = csum.then_some(0x1234_5678);
    let mut v = Vol {
        m: MemMeta::new(geo, seed, 1000, 1 << 30),
        d: VecDir {
            ino: 12,
            gen: 0xabcd,
            blocks: Vec::new(),
            indexed: false,
        },
        hp: HashParams {
            default_version: hash,
            unsigned: false,
            seed: [1, 2, 3, 4],
        },
    };
    v.ed().init(2).unwrap();
    v
}

impl Vol {
    pub(super) fn ed(&mut self) -> DirEdit<'_> {
        DirEdit::new(&mut self.m, &mut self.d, &self.hp)
    }
    pub(super) fn add(&mut self, name: &[u8], ino: u32) -> Result<()> {
        self.ed().add(name, ino, FileType::Regular)
    }
}

/// Every live entry (besides `.` and `..`) of the directory, by walking its leaves, and
/// (for an htree) a check of the index: each leaf reached once, hashes in range.
pub(crate) fn contents(v: &mut Vol) -> BTreeMap<Vec<u8>, u32> {
    let mut out = BTreeMap::new();
    let indexed = v.d.indexed;
    let n = v.d.blocks.len() as u64;
    let mut ed = v.ed();
    let mut dx_nodes = 0;
    for lblk in 0..n {
        if indexed && (lblk == 0 || ed.is_dx_node(lblk).unwrap()) {
            dx_nodes += 1;
            continue;
        }
        let (_, buf) = ed.read_leaf(lblk).unwrap();
        for e in ed.live(lblk, &buf).unwrap() {
            if lblk == 0 && (e.name == b"." || e.name == b"..") {
                continue;
            }
            assert!(out.insert(e.name.to_vec(), e.ino).is_none(), "duplicate");
        }
    }
    if indexed {
        let leaves = check_htree(v);
        assert_eq!(
            leaves + dx_nodes,
            n as usize,
            "every block is a leaf or a node"
        );
    }
    out
}

/// Checks the index; returns how many leaves it reaches.
fn check_htree(v: &mut Vol) -> usize {
    let root = v.m.read_meta(v.d.blocks[0]).unwrap();
    let info = DxRootInfo::new(&root[0x18..]).unwrap();
    let levels = info.indirect_levels() as usize;
    let version = HashVersion::from_u8(info.hash_version()).unwrap();
    let mut leaves = Vec::new();
    walk_node(
        v,
        &root,
        ROOT_COUNT_OFFSET,
        levels,
        0,
        u64::MAX,
        &mut leaves,
    );
    let mut seen = std::collections::HashSet::new();
    let bs = v.m.geo.block_size as usize;
    let usable = bs - if v.m.seed.is_some() { 12 } else { 0 };
    for &(lblk, lo, hi) in &leaves {
        assert!(seen.insert(lblk), "leaf {lblk} listed twice");
        let buf = v.m.read_meta(v.d.blocks[lblk as usize]).unwrap();
        let walk = dirent::Dirents::new(&buf[..usable], bs as u32, true, 1 << 20);
        for e in walk {
            let e = e.unwrap();
            if e.ino == 0 {
                continue;
            }
            let (h, _) = dx_hash(e.name, version, &v.hp.seed).unwrap();
            let h = h as u64;
            // A continued range (low bit of the next start) may hold that hash too.
            let ok = h >= lo & !1 && (h < hi || (hi & 1 == 1 && h == hi & !1));
            assert!(ok, "leaf {lblk}: hash {h:#x} outside {lo:#x}..{hi:#x}");
        }
    }
    leaves.len()
}

fn walk_node(
    v: &Vol,
    buf: &[u8],
    co: usize,
    below: usize,
    lo: u64,
    hi: u64,
    leaves: &mut Vec<(u64, u64, u64)>,
) {
    let csum = v.m.seed.is_some();
    let (count, limit) = dx::check_header(buf, co, csum).expect("dx header");
    if let Some(seed) = v.m.seed {
        assert!(dx::tail_checksum_ok(
            seed, v.d.ino, v.d.gen, buf, co, count, limit
        ));
    }
    assert_eq!(dx::first_unordered(buf, co, count), None);
    for i in 0..count {
        let (h, blk) = dx::entry(buf, co, i);
        let start = if i == 0 { lo } else { h as u64 };
        assert!(i == 0 || start >= lo, "child range below its parent's");
        let end = if i + 1 < count {
            dx::entry(buf, co, i + 1).0 as u64
        } else {
            hi
        };
        if below == 0 {
            leaves.push((blk as u64, start, end));
        } else {
            let child = v.m.read_meta(v.d.blocks[blk as usize]).unwrap();
            walk_node(v, &child, NODE_COUNT_OFFSET, below - 1, start, end, leaves);
        }
    }
}

fn name(i: usize) -> Vec<u8> {
    format!("entry-{i:06}").into_bytes()
}

fn fill(v: &mut Vol, names: impl Iterator<Item = Vec<u8>>) -> BTreeMap<Vec<u8>, u32> {
    let mut want = BTreeMap::new();
    for (i, n) in names.enumerate() {
        let ino = 100 + i as u32;
        v.add(&n, ino).unwrap();
        want.insert(n, ino);
    }
    want
}

#[test]
fn linear_add_lookup_remove_reuse() {
    for (bs, csum) in [(1024, true), (1024, false), (4096, true)] {
        let mut v = vol(bs, csum, false, false, 1);
        let want = fill(&mut v, (0..700).map(name));
        assert!(!v.d.indexed, "no dir_index: stays linear");
        assert!(v.d.blocks.len() >= 3);
        assert_eq!(contents(&mut v), want);
        let mut ed = v.ed();
        assert_eq!(
            ed.lookup(b"entry-000123").unwrap(),
            Some((223, Some(FileType::Regular)))
        );
        assert_eq!(
            ed.lookup(b"..").unwrap(),
            Some((2, Some(FileType::Directory)))
        );
        assert_eq!(ed.lookup(b"nope").unwrap(), None);
        assert!(matches!(
            ed.add(b"entry-000007", 5, FileType::Regular),
            Err(Error::Exists)
        ));
        assert_eq!(ed.remove(b"entry-000000").unwrap(), 100);
        assert_eq!(ed.remove(b"entry-000001").unwrap(), 101);
        assert!(matches!(ed.remove(b"entry-000001"), Err(Error::NotFound)));
        // The space of removed entries in block 0 is reused first.
        ed.add(b"again", 7, FileType::Symlink).unwrap();
        let (_, b0) = ed.read_leaf(0).unwrap();
        assert!(ed.live(0, &b0).unwrap().iter().any(|e| e.name == b"again"));
        assert_eq!(ed.replace(b"again", 8, FileType::Fifo).unwrap(), 7);
        assert_eq!(
            ed.lookup(b"again").unwrap(),
            Some((8, Some(FileType::Fifo)))
        );
        assert!(!ed.is_empty().unwrap());
    }
}

#[test]
fn linear_dir_frees_trailing_empty_blocks() {
    let mut v = vol(1024, true, false, false, 1);
    fill(&mut v, (0..200).map(name));
    let n = v.d.blocks.len();
    assert!(n >= 4);
    // Empty the last two blocks, from the middle of the directory backwards.
    let mut ed = v.ed();
    let mut in_block = Vec::new();
    for lblk in (n as u64 - 2)..n as u64 {
        let (_, b) = ed.read_leaf(lblk).unwrap();
        in_block.extend(ed.live(lblk, &b).unwrap().iter().map(|e| e.name.to_vec()));
    }
    for nm in &in_block {
        ed.remove(nm).unwrap();
    }
    assert_eq!(v.d.blocks.len(), n - 2);
    assert_eq!(v.m.freed.len(), 2);
    assert!(v.m.freed.iter().all(|f| f.3 == Freed::Metadata));
    // Removing everything leaves one block, empty.
    let all: Vec<_> = contents(&mut v).into_keys().collect();
    for nm in &all {
        v.ed().remove(nm).unwrap();
    }
    assert_eq!(v.d.blocks.len(), 1);
    assert!(v.ed().is_empty().unwrap());
}

#[test]
fn htree_growth_two_levels_and_removal() {
    for (bs, csum, hash) in [(1024, true, 1), (1024, false, 2), (4096, true, 0)] {
        let mut v = vol(bs, csum, true, false, hash);
        let n = if bs == 1024 { 12_000 } else { 3000 };
        let mut want = fill(&mut v, (0..n).map(name));
        assert!(v.d.indexed);
        let root = v.m.read_meta(v.d.blocks[0]).unwrap();
        let levels = DxRootInfo::new(&root[0x18..]).unwrap().indirect_levels();
        assert_eq!(levels, (bs == 1024) as u8, "bs {bs}");
        assert_eq!(contents(&mut v), want);
        let mut ed = v.ed();
        for i in (0..n).step_by(7) {
            assert_eq!(
                ed.lookup(&name(i)).unwrap(),
                Some((100 + i as u32, Some(FileType::Regular)))
            );
        }
        for i in (0..n).step_by(3) {
            assert_eq!(ed.remove(&name(i)).unwrap(), 100 + i as u32);
            want.remove(&name(i));
        }
        assert_eq!(contents(&mut v), want);
        // Re-add with long names.
        for i in (0..n).step_by(3).take(500) {
            let long = [name(i), vec![b'x'; 240]].concat();
            v.add(&long, 7).unwrap();
            want.insert(long, 7);
        }
        assert_eq!(contents(&mut v), want);
        assert!(v.m.freed.is_empty(), "htrees do not shrink");
    }
}

#[test]
fn conversion_keeps_every_entry_and_sets_the_flag() {
    let mut v = vol(4096, true, true, false, 1);
    let mut i = 0;
    while v.d.blocks.len() == 1 {
        v.add(&name(i), 100 + i as u32).unwrap();
        i += 1;
    }
    assert!(v.d.indexed);
    assert_eq!(
        v.d.blocks.len(),
        3,
        "root and two leaves after make_indexed_dir"
    );
    let got = contents(&mut v);
    assert_eq!(got.len(), i);
    let mut ed = v.ed();
    assert_eq!(
        ed.lookup(b".").unwrap(),
        Some((12, Some(FileType::Directory)))
    );
    ed.set_dotdot(77).unwrap();
    assert_eq!(ed.lookup(b"..").unwrap().unwrap().0, 77);
    contents(&mut v);
}

/// Names of `len` bytes whose legacy hashes collide, found by brute force (birthday).
pub(crate) fn legacy_collision(hp: &HashParams, want: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let v = HashVersion::Legacy.with_unsigned_flag(hp.unsigned);
    let mut seen: std::collections::HashMap<u32, Vec<u8>> = Default::default();
    let mut out = Vec::new();
    for i in 0u64.. {
        let n = format!("c{i:07}").into_bytes();
        let (h, _) = dx_hash(&n, v, &hp.seed).unwrap();
        if let Some(prev) = seen.insert(h, n.clone()) {
            out.push((prev, n));
            if out.len() == want {
                break;
            }
        }
    }
    out
}

/// 8-byte names (16-byte entries) with legacy hashes just below / above `h`.
pub(crate) fn neighbours(hp: &HashParams, h: u32, below: usize, above: usize) -> Vec<Vec<u8>> {
    let v = HashVersion::Legacy.with_unsigned_flag(hp.unsigned);
    let mut all: Vec<(u32, Vec<u8>)> = (0..400_000u32)
        .map(|i| {
            let n = format!("n{i:07}").into_bytes();
            (dx_hash(&n, v, &hp.seed).unwrap().0, n)
        })
        .filter(|(x, _)| *x != h)
        .collect();
    all.sort();
    let at = all.partition_point(|(x, _)| *x < h);
    let mut out: Vec<Vec<u8>> = all[at - below..at].iter().map(|a| a.1.clone()).collect();
    out.extend(all[at..at + above].iter().map(|a| a.1.clone()));
    out
}

/// A colliding pair placed exactly at the split of make_indexed_dir: the new index entry
/// must carry the continuation bit and both names must stay reachable.
#[test]
fn collision_at_the_split_sets_the_continuation_bit() {
    for csum in [true, false] {
        let mut v = vol(1024, csum, true, false, 0);
        let (a, b) = legacy_collision(&v.hp, 1).remove(0);
        let usable = 1024 - if csum { 12 } else { 0 };
        let cap = (usable - 24) / 16; // 16-byte entries in block 0
        let split = cap - 32; // the upper half moves: 32 entries of 16 bytes
        let names = neighbours(
            &v.hp,
            dx_hash(&a, HashVersion::Legacy, &v.hp.seed).unwrap().0,
            split - 1,
            cap - split - 1,
        );
        let mut order: Vec<Vec<u8>> = names.clone();
        order.push(a.clone());
        order.push(b.clone());
        for (i, n) in order.iter().enumerate() {
            v.add(n, 100 + i as u32).unwrap();
        }
        assert!(!v.d.indexed);
        v.add(b"z-trigger", 99).unwrap();
        assert!(v.d.indexed);
        let root = v.m.read_meta(v.d.blocks[0]).unwrap();
        let (h1, _) = dx::entry(&root, ROOT_COUNT_OFFSET, 1);
        assert_eq!(h1 & 1, 1, "continuation bit on the split hash");
        let mut ed = v.ed();
        assert!(ed.lookup(&a).unwrap().is_some());
        assert!(ed.lookup(&b).unwrap().is_some());
        assert_eq!(ed.remove(&b).unwrap(), 100 + order.len() as u32 - 1);
        assert!(ed.lookup(&a).unwrap().is_some());
        assert_eq!(contents(&mut v).len(), order.len());
    }
}

#[test]
fn names_are_checked() {
    let mut v = vol(1024, true, true, false, 1);
    assert!(matches!(v.add(&[b'a'; 256], 5), Err(Error::NameTooLong)));
    assert!(matches!(v.add(b"", 5), Err(Error::Invalid)));
    assert!(matches!(v.add(b"a/b", 5), Err(Error::Invalid)));
    assert!(matches!(v.add(b"a\0b", 5), Err(Error::Invalid)));
    assert!(matches!(v.add(b"..", 5), Err(Error::Invalid)));
    v.add(&[b'a'; 255], 5).unwrap();
    assert_eq!(v.ed().lookup(&[b'a'; 255]).unwrap().unwrap().0, 5);
}

#[test]
fn damaged_blocks_are_refused_not_changed() {
    // A leaf with a wrong checksum.
    let mut v = vol(1024, true, false, false, 1);
    fill(&mut v, (0..10).map(name));
    let b0 = v.d.blocks[0];
    v.m.blocks.get_mut(&b0).unwrap()[40] ^= 0x55;
    let before = v.m.blocks[&b0].clone();
    let e = v.add(b"new", 5).unwrap_err();
    let c = e.corruption().expect("a corrupt directory");
    assert!(c.detail.contains("directory 12 block 0"), "{e}");
    assert_eq!(c.structure, Structure::Directory);
    assert_eq!((c.ino, c.block), (Some(12), Some(0)));
    assert!(matches!(v.ed().remove(&name(3)), Err(Error::Corrupt(_))));
    assert_eq!(v.m.blocks[&b0], before);
    // A broken rec_len without checksums.
    let mut v = vol(1024, false, true, false, 1);
    fill(&mut v, (0..10).map(name));
    let b0 = v.d.blocks[0];
    v.m.blocks.get_mut(&b0).unwrap()[4] = 3;
    assert!(matches!(v.add(b"new", 5), Err(Error::Corrupt(_))));
    assert!(matches!(v.ed().lookup(b"x"), Err(Error::Corrupt(_))));
    // An htree node with a bad count; a root with a bad depth.
    let mut v = vol(1024, true, true, false, 1);
    fill(&mut v, (0..400).map(name));
    let b0 = v.d.blocks[0];
    let mut r = v.m.blocks[&b0].clone();
    r[ROOT_COUNT_OFFSET + 2] = 0xff;
    v.m.blocks.insert(b0, r.clone());
    let e = v.add(b"new", 5).unwrap_err();
    assert_eq!(
        e.corruption().map(|c| c.structure),
        Some(Structure::Htree),
        "{e}"
    );
    r[ROOT_COUNT_OFFSET + 2] = 2;
    r[0x18 + 6] = 7;
    v.m.blocks.insert(b0, r);
    assert!(matches!(v.ed().lookup(b"new"), Err(Error::Corrupt(_))));
}

#[test]
fn allocation_failure_leaves_the_directory_usable() {
    let mut v = vol(1024, true, false, false, 1);
    v.m.free_left = 0;
    let mut n = 0;
    let err = loop {
        match v.add(&name(n), 100 + n as u32) {
            Ok(()) => n += 1,
            Err(e) => break e,
        }
    };
    assert!(matches!(&err, Error::Io(e) if e.kind() == std::io::ErrorKind::StorageFull));
    assert_eq!(contents(&mut v).len(), n);
}
