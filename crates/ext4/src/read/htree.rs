//! Walking an htree index: read the root (hash version, depth), descend the dx nodes to
//! the leaf that holds a hash (checking their limits, order and checksums), step from
//! leaf to leaf in hash order; lookup searches the leaf, following hash-collision chains.
//! Listing in hash order (read/readdir.rs) walks the same way.

use super::inode::LoadedInode;
use super::Ext4;
use crate::format::dx_hash::{dx_hash, HashVersion};
use crate::format::features::incompat;
use crate::walk::dx::{self, DxCtx, DxKind, DxNode};
use usfs_fs::{Error, Result, Structure};

/// `s_flags` bit: the directory hash treats bytes as unsigned.
const FLAG_UNSIGNED_HASH: u32 = 0x2;

/// Block 0 of an indexed directory, checked: its bytes, the hash version names are
/// hashed with, and the depth of the tree below it.
pub(crate) struct DxRoot {
    /// The root block (its first two entries are `.` and `..`).
    pub block: Vec<u8>,
    /// The hash version (the root's, made unsigned as the superblock says).
    pub version: HashVersion,
    /// dx-node levels between the root and the leaves.
    levels: u8,
}

/// The way from the root of an htree down to one leaf (the kernel's dx_frame array):
/// every dx node on it with the entry chosen in it.
pub(crate) struct DxPath {
    frames: Vec<(DxNode, usize)>,
    /// The walker's view of the directory.
    cx: DxCtx,
}

impl DxPath {
    /// The leaf block the path ends at (inside the directory: the walker checked).
    pub(crate) fn leaf(&self) -> u64 {
        let (node, idx) = self.frames.last().expect("a path has its root");
        node.entries[*idx].1 as u64
    }
}

impl Ext4 {
    /// Reads logical block `lblk` of directory `dir`.
    pub(crate) fn read_dir_block(&self, dir: &LoadedInode, lblk: u64) -> Result<Vec<u8>> {
        let run = self.map_block(dir, lblk)?;
        let Some(p) = run.pblk else {
            return Err(Error::corrupt(
                Structure::Directory,
                format!("directory {}: logical block {lblk} is a hole", dir.ino),
            )
            .with_ino(dir.ino)
            .with_block(lblk));
        };
        self.read_block(p, Structure::Directory, &format!("directory {}", dir.ino))
    }

    /// A hash version as the kernel applies it: `version` (from an htree root, or the
    /// superblock's default) made unsigned when the superblock says names hash unsigned.
    pub(crate) fn dir_hash_version(&self, dir_ino: u32, version: u8) -> Result<HashVersion> {
        let unsigned = self.core.sb.s_flags() & FLAG_UNSIGNED_HASH != 0;
        HashVersion::from_u8(version)
            .map(|v| v.with_unsigned_flag(unsigned))
            .ok_or_else(|| {
                Error::corrupt(
                    Structure::Htree,
                    format!("directory {dir_ino}: unknown htree hash version {version}"),
                )
                .with_ino(dir_ino)
            })
    }

    /// (major, minor) hash of `name` with the superblock's seed.
    pub(crate) fn name_hash(
        &self,
        dir_ino: u32,
        version: HashVersion,
        name: &[u8],
    ) -> Result<(u32, u32)> {
        dx_hash(name, version, &self.core.sb.hash_seed()).map_err(|_| {
            Error::incompatible(format!("directory {dir_ino}: htree hash {version:?}"))
        })
    }

    /// What the dx walker needs to know about directory `dir`.
    fn dx_ctx(&self, dir: &LoadedInode) -> DxCtx {
        DxCtx {
            ino: dir.ino,
            generation: dir.raw.i_generation(),
            seed: self.core.csum_seed,
            large_dir: self.core.geo.features.has_incompat(incompat::LARGEDIR),
            nblocks: dir.raw.size().div_ceil(self.core.geo.block_size as u64),
        }
    }

    /// Reads and checks the root of indexed directory `dir` (its info; its entries are
    /// checked on the way down).
    pub(crate) fn dx_root(&self, dir: &LoadedInode) -> Result<DxRoot> {
        let block = self.read_dir_block(dir, 0)?;
        let large_dir = self.core.geo.features.has_incompat(incompat::LARGEDIR);
        let info = dx::root_info(&block, large_dir).map_err(|i| i.into_error(dir.ino, 0))?;
        let version = self.dir_hash_version(dir.ino, info.hash_version)?;
        Ok(DxRoot {
            block,
            version,
            levels: info.levels,
        })
    }

    /// Descends from `root` to the leaf whose range holds `hash` (the kernel's dx_probe):
    /// in each node the last entry whose hash is at most `hash`.
    pub(crate) fn dx_probe(&self, dir: &LoadedInode, root: &DxRoot, hash: u32) -> Result<DxPath> {
        let cx = self.dx_ctx(dir);
        let mut frames: Vec<(DxNode, usize)> = Vec::new();
        let mut node = dx::read_node(&root.block, 0, DxKind::Root, &cx)?;
        for level in 0..=root.levels {
            let idx = node
                .entries
                .partition_point(|&(h, _)| h <= hash)
                .saturating_sub(1);
            let child = node.entries[idx].1 as u64;
            frames.push((node, idx));
            if level == root.levels {
                break;
            }
            let block = self.read_dir_block(dir, child)?;
            node = dx::read_node(&block, child, DxKind::Node, &cx)?;
        }
        Ok(DxPath { frames, cx })
    }

    /// Finds `name` through the index; `Ok(None)` if it is not there.
    pub(crate) fn htree_lookup(&self, dir: &LoadedInode, name: &[u8]) -> Result<Option<u32>> {
        let root = self.dx_root(dir)?;
        let (hash, _minor) = self.name_hash(dir.ino, root.version, name)?;
        let mut path = self.dx_probe(dir, &root, hash)?;
        loop {
            if let Some(found) = self.search_leaf(dir, path.leaf(), name)? {
                return Ok(Some(found));
            }
            // Collisions may continue into the next leaf: its hash has the low bit set
            // or equals ours.
            match self.next_leaf(dir, &mut path)? {
                Some(next_hash) if next_hash & !1 == hash => continue,
                _ => return Ok(None),
            }
        }
    }

    /// Advances `path` to the next leaf in hash order (the kernel's ext4_htree_next_block);
    /// returns that leaf's starting hash as the index records it (low bit set: it
    /// continues the previous leaf's last hash), or None after the last leaf.
    pub(crate) fn next_leaf(&self, dir: &LoadedInode, path: &mut DxPath) -> Result<Option<u32>> {
        let frames = &mut path.frames;
        let depth = frames.len();
        // Climb until a node has a next entry.
        let mut lvl = depth;
        loop {
            if lvl == 0 {
                return Ok(None);
            }
            let (node, idx) = &mut frames[lvl - 1];
            if *idx + 1 < node.entries.len() {
                *idx += 1;
                break;
            }
            lvl -= 1;
        }
        let hash = frames[lvl - 1].0.entries[frames[lvl - 1].1].0;
        // Descend to the first entries below.
        frames.truncate(lvl);
        while frames.len() < depth {
            let (node, idx) = frames.last().expect("non-empty");
            let child = node.entries[*idx].1 as u64;
            let block = self.read_dir_block(dir, child)?;
            let n = dx::read_node(&block, child, DxKind::Node, &path.cx)?;
            frames.push((n, 0));
        }
        Ok(Some(hash))
    }

    /// Searches one leaf block (checksum verified) for `name`.
    fn search_leaf(&self, dir: &LoadedInode, lblk: u64, name: &[u8]) -> Result<Option<u32>> {
        let block = self.read_dir_block(dir, lblk)?;
        let mut found = None;
        let bs = self.core.geo.block_size as u64;
        let mut f = |e: &super::dir::RawEntry| {
            if e.name == name {
                found = Some(e.ino);
                false
            } else {
                true
            }
        };
        self.walk_leaf_block(dir, &block, lblk * bs, lblk, &mut f)?;
        Ok(found)
    }
}
