//! Lookup through an htree index: hash the name, descend the dx nodes (checking their
//! limits and checksums), then search the leaf block, following hash-collision chains.

use super::inode::LoadedInode;
use super::Ext4;
use crate::format::dx::{self, DxRootInfo, NODE_COUNT_OFFSET, ROOT_COUNT_OFFSET};
use crate::format::dx_hash::{dx_hash, HashVersion};
use crate::format::features::incompat;
use usfs_fs::{Error, Result};

/// `s_flags` bit: the directory hash treats bytes as unsigned.
const FLAG_UNSIGNED_HASH: u32 = 0x2;

/// One parsed dx node: its (hash, logical block) entries, entry 0 with hash 0.
struct DxNode {
    entries: Vec<(u32, u32)>,
}

impl Ext4 {
    /// Reads logical block `lblk` of directory `dir`.
    pub(crate) fn read_dir_block(&self, dir: &LoadedInode, lblk: u64) -> Result<Vec<u8>> {
        let run = self.map_block(dir, lblk)?;
        let Some(p) = run.pblk else {
            return Err(Error::corrupt(format!(
                "directory {}: logical block {lblk} is a hole",
                dir.ino
            )));
        };
        self.read_block(p, &format!("directory {}", dir.ino))
    }

    /// The hash version used by an indexed directory (root info + superblock flags).
    pub(crate) fn dir_hash_version(&self, dir_ino: u32, info_version: u8) -> Result<HashVersion> {
        let mut v = info_version;
        if v <= 2 && self.sb.s_flags() & FLAG_UNSIGNED_HASH != 0 {
            v += 3;
        }
        HashVersion::from_u8(v).ok_or_else(|| {
            Error::corrupt(format!(
                "directory {dir_ino}: unknown htree hash version {v}"
            ))
        })
    }

    /// Parses the dx node in `block` with its header at `count_offset`.
    fn parse_dx(
        &self,
        dir: &LoadedInode,
        block: &[u8],
        count_offset: usize,
        lblk: u64,
    ) -> Result<DxNode> {
        let bad = |what: String| {
            Err(Error::corrupt(format!(
                "directory {} htree block {lblk}: {what}",
                dir.ino
            )))
        };
        let (count, limit) = match dx::check_header(block, count_offset, self.csum_seed.is_some()) {
            Ok(h) => h,
            Err(fault) => return bad(fault.to_string()),
        };
        if let Some(seed) = self.csum_seed {
            let gen = dir.raw.i_generation();
            if !dx::tail_checksum_ok(seed, dir.ino, gen, block, count_offset, count, limit) {
                return bad("checksum does not match".into());
            }
        }
        if let Some(i) = dx::first_unordered(block, count_offset, count) {
            return bad(format!("hashes out of order at entry {i}"));
        }
        let entries = (0..count)
            .map(|i| dx::entry(block, count_offset, i))
            .collect();
        Ok(DxNode { entries })
    }

    /// Finds `name` through the index; `Ok(None)` if it is not there.
    pub(crate) fn htree_lookup(&self, dir: &LoadedInode, name: &[u8]) -> Result<Option<u32>> {
        let root = self.read_dir_block(dir, 0)?;
        let info = DxRootInfo::new(&root[0x18..]).expect("in block");
        let large_dir = self.geo.features.has_incompat(incompat::LARGEDIR);
        if !dx::root_info_ok(&info, large_dir) {
            return Err(Error::corrupt(format!(
                "directory {}: bad htree root (levels {}, info length {})",
                dir.ino,
                info.indirect_levels(),
                info.info_length()
            )));
        }
        let version = self.dir_hash_version(dir.ino, info.hash_version())?;
        let Ok((hash, _minor)) = dx_hash(name, version, &self.sb.hash_seed()) else {
            return Err(Error::incompatible(format!(
                "directory {}: htree hash {version:?}",
                dir.ino
            )));
        };
        // Path from the root to the leaf level: (node, chosen index).
        let mut path: Vec<(DxNode, usize)> = Vec::new();
        let mut node = self.parse_dx(dir, &root, ROOT_COUNT_OFFSET, 0)?;
        let nblocks = dir.raw.size().div_ceil(self.geo.block_size as u64);
        for level in 0..=info.indirect_levels() {
            let idx = node
                .entries
                .partition_point(|&(h, _)| h <= hash)
                .saturating_sub(1);
            let child = node.entries[idx].1 as u64;
            path.push((node, idx));
            if level == info.indirect_levels() {
                break;
            }
            if child == 0 || child >= nblocks {
                return Err(Error::corrupt(format!(
                    "directory {}: htree points at block {child} of {nblocks}",
                    dir.ino
                )));
            }
            let block = self.read_dir_block(dir, child)?;
            node = self.parse_dx(dir, &block, NODE_COUNT_OFFSET, child)?;
        }
        loop {
            let (leaf_node, idx) = path.last().expect("non-empty");
            let leaf = leaf_node.entries[*idx].1 as u64;
            if leaf >= nblocks {
                return Err(Error::corrupt(format!(
                    "directory {}: htree points at block {leaf} of {nblocks}",
                    dir.ino
                )));
            }
            if let Some(found) = self.search_leaf(dir, leaf, name)? {
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

    /// Advances `path` to the next leaf in hash order; returns that leaf's starting hash.
    fn next_leaf(&self, dir: &LoadedInode, path: &mut Vec<(DxNode, usize)>) -> Result<Option<u32>> {
        let depth = path.len();
        // Climb until a node has a next entry.
        let mut lvl = depth;
        loop {
            if lvl == 0 {
                return Ok(None);
            }
            let (node, idx) = &mut path[lvl - 1];
            if *idx + 1 < node.entries.len() {
                *idx += 1;
                break;
            }
            lvl -= 1;
        }
        let hash = path[lvl - 1].0.entries[path[lvl - 1].1].0;
        // Descend to the first entries below.
        path.truncate(lvl);
        while path.len() < depth {
            let (node, idx) = path.last().expect("non-empty");
            let child = node.entries[*idx].1 as u64;
            let block = self.read_dir_block(dir, child)?;
            let n = self.parse_dx(dir, &block, NODE_COUNT_OFFSET, child)?;
            path.push((n, 0));
        }
        Ok(Some(hash))
    }

    /// Searches one leaf block (checksum verified) for `name`.
    fn search_leaf(&self, dir: &LoadedInode, lblk: u64, name: &[u8]) -> Result<Option<u32>> {
        let block = self.read_dir_block(dir, lblk)?;
        let mut found = None;
        let bs = self.geo.block_size as u64;
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
