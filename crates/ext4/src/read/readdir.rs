//! Listing a directory in the order the Linux kernel lists it.
//!
//! With the `dir_index` feature the kernel lists an indexed directory, a directory of
//! exactly one block and an inline directory in hash order (fs/ext4/dir.c `is_dx_dir`,
//! `ext4_dx_readdir`): it fills a tree with the entries of one leaf at a time
//! (fs/ext4/namei.c `ext4_htree_fill_tree`), ordered by (major hash, minor hash), and
//! lists it. Entries with an equal pair are chained: the first one collected heads the
//! chain, each later one goes right behind the head (`ext4_htree_store_dirent`). In an
//! indexed directory `.` has the hash 0 and `..` the hash 2; in a one-block or inline
//! directory they are hashed like every other name, with the superblock's default hash
//! version. Every other directory is listed in on-disk order, with byte positions.
//!
//! Positions (readdir cookies, `d_off`) in hash order are the kernel's 64-bit hash
//! positions, `(major >> 1) << 32`, with the index of the entry among those of the same
//! major hash in the low 32 bits instead of the minor hash: a listing resumed at any
//! position, even inside a run of equal hashes, goes on exactly where it stopped, with no
//! state kept between calls. Entries added or removed in between are listed or not as
//! the kernel would list them after a seekdir. The end is the kernel's
//! `EXT4_HTREE_EOF_64BIT`.

use super::dir::RawEntry;
use super::htree::DxRoot;
use super::inode::LoadedInode;
use super::Ext4;
use crate::format::dx_hash::HashVersion;
use crate::format::features::compat;
use crate::format::inode::flags;
use std::collections::HashSet;
use usfs_fs::{Error, Result, Structure};

/// The position after the last entry of a directory listed in hash order.
pub(crate) const HASH_EOF: u64 = 0x7fff_ffff_ffff_ffff;

/// Hashes of `.` and `..` in an indexed directory (their entries in block 0 are not
/// hashed).
const DOT_HASH: u32 = 0;
const DOTDOT_HASH: u32 = 2;

/// Receives the entries a walker yields; returns false to stop it.
type EntrySink<'a> = &'a mut dyn FnMut(&RawEntry) -> bool;

/// How a directory listed in hash order is read.
enum HashedDir {
    /// One block, or inline: every entry, `.` and `..` too, hashed with this version.
    Flat(HashVersion),
    /// An htree, read one leaf (and its collision continuations) per fill.
    Indexed(DxRoot),
}

/// One entry collected for hash order.
struct Hashed {
    major: u32,
    minor: u32,
    /// Order of collection (breaks ties the kernel's way).
    seq: u32,
    ino: u32,
    file_type: u8,
    name: Vec<u8>,
}

/// The entries of one fill in the kernel's order, the hash it started at, and the hash
/// the next fill starts at (None: this was the last).
struct Fill {
    entries: Vec<Hashed>,
    start: u32,
    next: Option<u32>,
}

/// Positions of the entries of one listing, strictly increasing (an entry whose
/// position would not be is dropped: only a corrupt index can list hashes out of order).
struct Positions {
    major: u32,
    /// Index of the next entry with hash `major`.
    index: u32,
    last: Option<u64>,
}

impl Positions {
    /// The position of the next entry, with hash `major`.
    fn next(&mut self, major: u32) -> Option<u64> {
        let index = if major == self.major { self.index } else { 0 };
        let pos = (u64::from(major >> 1) << 32) | u64::from(index);
        if self.last.is_some_and(|l| pos <= l) {
            return None;
        }
        self.major = major;
        self.index = index.checked_add(1)?;
        self.last = Some(pos);
        Some(pos)
    }
}

impl Ext4 {
    /// Does the kernel list `dir` in hash order (fs/ext4/dir.c `is_dx_dir`)?
    fn lists_in_hash_order(&self, dir: &LoadedInode) -> bool {
        self.core.geo.features.has_compat(compat::DIR_INDEX)
            && (dir.has_flag(flags::INDEX)
                || dir.raw.size() >> self.core.geo.block_size_log == 1
                || dir.has_flag(flags::INLINE_DATA))
    }

    /// Calls `f` for every entry of directory `dir` from position `pos` (0: the start),
    /// `.` and `..` included, in the kernel's order; each entry carries its position and
    /// the next one's. `f` returns false to stop.
    pub(crate) fn list_dir(
        &self,
        dir: &LoadedInode,
        pos: u64,
        f: &mut dyn FnMut(&RawEntry) -> bool,
    ) -> Result<()> {
        if dir.file_type()? != usfs_fs::FileType::Directory {
            return Err(Error::NotDir);
        }
        if !self.lists_in_hash_order(dir) {
            return self.for_each_entry(dir, pos, f);
        }
        if pos >= HASH_EOF {
            return Ok(());
        }
        let how = if dir.has_flag(flags::INLINE_DATA) || !dir.has_flag(flags::INDEX) {
            let v = self.core.sb.s_def_hash_version();
            HashedDir::Flat(self.dir_hash_version(dir.ino, v)?)
        } else {
            HashedDir::Indexed(self.dx_root(dir)?)
        };
        self.list_hashed(dir, &how, pos, f)
    }

    /// Lists in hash order from `pos`: fill after fill, each entry handed over once the
    /// next one's position is known.
    fn list_hashed(
        &self,
        dir: &LoadedInode,
        how: &HashedDir,
        pos: u64,
        f: &mut dyn FnMut(&RawEntry) -> bool,
    ) -> Result<()> {
        let start = ((pos >> 32) as u32) << 1;
        let mut fill = self.fill(dir, how, start)?;
        // Entries of hash `start` that were listed before `pos`.
        let listed = fill.entries.iter().take_while(|e| e.major == start);
        let skip = listed.count().min(pos as u32 as usize);
        fill.entries.drain(..skip);
        let mut positions = Positions {
            major: start,
            index: skip as u32,
            last: None,
        };
        let mut held: Option<(Hashed, u64)> = None;
        loop {
            for e in fill.entries.drain(..) {
                let Some(p) = positions.next(e.major) else {
                    continue;
                };
                if let Some((h, hp)) = held.replace((e, p)) {
                    if !hand_over(&h, hp, p, f) {
                        return Ok(());
                    }
                }
            }
            match fill.next {
                // A corrupt index (a node's hashes below its parent's) could lead back.
                Some(next) if next <= fill.start => {
                    return Err(Error::corrupt(
                        Structure::Htree,
                        format!(
                            "directory {}: htree hashes go back from {:#x} to {next:#x}",
                            dir.ino, fill.start
                        ),
                    )
                    .with_ino(dir.ino))
                }
                Some(next) => fill = self.fill(dir, how, next)?,
                None => break,
            }
        }
        if let Some((h, hp)) = held {
            hand_over(&h, hp, HASH_EOF, f);
        }
        Ok(())
    }

    /// The entries at or after hash `start`, in the kernel's order, that one fill of its
    /// tree holds (`ext4_htree_fill_tree`).
    fn fill(&self, dir: &LoadedInode, how: &HashedDir, start: u32) -> Result<Fill> {
        let mut entries = Vec::new();
        let next = match how {
            HashedDir::Flat(version) => {
                self.collect_flat(dir, *version, &mut entries)?;
                None
            }
            HashedDir::Indexed(root) => self.collect_leaves(dir, root, start, &mut entries)?,
        };
        entries.retain(|e| e.major >= start);
        sort_like_the_kernel(&mut entries);
        Ok(Fill {
            entries,
            start,
            next,
        })
    }

    /// Collects every entry of a one-block or inline directory (`htree_dirblock_to_tree`
    /// on block 0, `ext4_inlinedir_to_tree`).
    fn collect_flat(
        &self,
        dir: &LoadedInode,
        version: HashVersion,
        out: &mut Vec<Hashed>,
    ) -> Result<()> {
        if dir.has_flag(flags::INLINE_DATA) {
            return self.collect(dir, version, out, &mut |f| self.for_each_entry(dir, 0, f));
        }
        let block = self.read_dir_block(dir, 0)?;
        self.collect(dir, version, out, &mut |f| {
            self.walk_leaf_block(dir, &block, 0, 0, f).map(drop)
        })
    }

    /// Collects `.` and `..` (at the start) and the leaves from the one holding `start`:
    /// one leaf with entries, and the leaves that continue its last hash. Returns the
    /// hash the next fill starts at. A leaf is read at most once per fill, so a fill
    /// holds no more than the directory does.
    fn collect_leaves(
        &self,
        dir: &LoadedInode,
        root: &DxRoot,
        start: u32,
        out: &mut Vec<Hashed>,
    ) -> Result<Option<u32>> {
        let mut path = self.dx_probe(dir, root, start)?;
        if start <= DOTDOT_HASH {
            self.collect_dots(dir, root, start, out)?;
        }
        let mut found = !out.is_empty();
        let mut seen = HashSet::new();
        loop {
            let leaf = path.leaf();
            if !seen.insert(leaf) {
                return Err(Error::corrupt(
                    Structure::Htree,
                    format!("directory {}: htree lists block {leaf} twice", dir.ino),
                )
                .with_ino(dir.ino)
                .with_block(leaf));
            }
            let before = out.len();
            self.collect_leaf(dir, root.version, leaf, out)?;
            found |= out[before..].iter().any(|e| e.major >= start);
            // Go on while nothing at or after `start` was found, or the next leaf
            // continues the last hash of this one.
            match self.next_leaf(dir, &mut path)? {
                Some(h) if h & 1 == 1 || !found => continue,
                next => return Ok(next),
            }
        }
    }

    /// `.` (hash 0) and `..` (hash 2) from the first two entries of the root block.
    fn collect_dots(
        &self,
        dir: &LoadedInode,
        root: &DxRoot,
        start: u32,
        out: &mut Vec<Hashed>,
    ) -> Result<()> {
        let mut dots = Vec::with_capacity(2);
        self.walk_entries(dir.ino, &root.block, 0, 0, &mut |e| {
            dots.push((e.ino, e.file_type, e.name.to_vec()));
            dots.len() < 2
        })?;
        for ((ino, file_type, name), major) in dots.into_iter().zip([DOT_HASH, DOTDOT_HASH]) {
            if major >= start {
                let seq = out.len() as u32;
                out.push(Hashed {
                    major,
                    minor: 0,
                    seq,
                    ino,
                    file_type,
                    name,
                });
            }
        }
        Ok(())
    }

    /// Collects the entries of leaf block `lblk`.
    fn collect_leaf(
        &self,
        dir: &LoadedInode,
        version: HashVersion,
        lblk: u64,
        out: &mut Vec<Hashed>,
    ) -> Result<()> {
        let block = self.read_dir_block(dir, lblk)?;
        let base = lblk << self.core.geo.block_size_log;
        self.collect(dir, version, out, &mut |f| {
            self.walk_leaf_block(dir, &block, base, lblk, f).map(drop)
        })
    }

    /// Runs a walker and hashes every entry it yields into `out`.
    fn collect(
        &self,
        dir: &LoadedInode,
        version: HashVersion,
        out: &mut Vec<Hashed>,
        walk: &mut dyn FnMut(EntrySink) -> Result<()>,
    ) -> Result<()> {
        let mut err = None;
        walk(&mut |e| match self.name_hash(dir.ino, version, e.name) {
            Ok((major, minor)) => {
                let seq = out.len() as u32;
                let (ino, file_type, name) = (e.ino, e.file_type, e.name.to_vec());
                out.push(Hashed {
                    major,
                    minor,
                    seq,
                    ino,
                    file_type,
                    name,
                });
                true
            }
            Err(e) => {
                err = Some(e);
                false
            }
        })?;
        err.map_or(Ok(()), Err)
    }
}

/// Hands one entry to `f`.
fn hand_over(e: &Hashed, pos: u64, next: u64, f: &mut dyn FnMut(&RawEntry) -> bool) -> bool {
    f(&RawEntry {
        pos,
        next,
        ino: e.ino,
        name: &e.name,
        file_type: e.file_type,
    })
}

/// Sorts by (major, minor); of entries with an equal pair the first collected comes
/// first and the others follow it newest first, as the kernel's chains list them.
fn sort_like_the_kernel(entries: &mut [Hashed]) {
    entries.sort_unstable_by_key(|e| (e.major, e.minor, e.seq));
    let mut i = 0;
    while i < entries.len() {
        let key = (entries[i].major, entries[i].minor);
        let run = entries[i..]
            .iter()
            .take_while(|e| (e.major, e.minor) == key)
            .count();
        entries[i + 1..i + run].reverse();
        i += run;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(major: u32, minor: u32, seq: u32) -> Hashed {
        Hashed {
            major,
            minor,
            seq,
            ino: seq + 11,
            file_type: 1,
            name: vec![b'a'; 1],
        }
    }

    #[test]
    fn equal_hashes_list_first_then_newest() {
        let mut v = vec![h(8, 1, 0), h(4, 0, 1), h(8, 1, 2), h(8, 1, 3), h(8, 0, 4)];
        sort_like_the_kernel(&mut v);
        let seqs: Vec<u32> = v.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 4, 0, 3, 2]);
    }

    #[test]
    fn positions_count_equal_majors_and_never_go_back() {
        let mut p = Positions {
            major: 0,
            index: 0,
            last: None,
        };
        assert_eq!(p.next(0), Some(0));
        assert_eq!(p.next(2), Some(1 << 32));
        assert_eq!(p.next(2), Some((1 << 32) | 1));
        assert_eq!(p.next(6), Some(3 << 32));
        assert_eq!(p.next(4), None);
        assert_eq!(p.next(0xffff_fffc), Some(0x7fff_fffe_0000_0000));
        const { assert!(0x7fff_fffe_0000_0000 < HASH_EOF) };
    }
}
