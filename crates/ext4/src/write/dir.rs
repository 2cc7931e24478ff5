//! Directories: linear blocks of entries (with checksum tails), and hashed (htree)
//! directories once they outgrow one block: a dx_root in block 0, one level of dx nodes
//! when the root cannot point at every leaf, and leaves filled in hash order.

use super::writer::Writer;
use crate::alloc::plan_extents;
use crate::format::dirent::{encode_rec_len, DirEntryHeader, DirTail, TAIL_FILE_TYPE, TAIL_SIZE};
use crate::format::dx::{
    node_checksum, DxCountLimit, DxRootInfo, DX_ENTRY_SIZE, DX_TAIL_SIZE, NODE_COUNT_OFFSET,
    ROOT_COUNT_OFFSET,
};
use crate::format::dx_hash::{dx_hash, HashVersion};
use crate::format::features::compat;
use crate::format::inode::flags;
use usfs_fs::{Error, Result};

/// One entry to put in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntryIn {
    /// Name (1..=255 bytes, no `/` or NUL).
    pub name: Vec<u8>,
    /// Inode.
    pub ino: u32,
    /// Entry file type code (1 regular .. 7 symlink).
    pub file_type: u8,
}

/// Space an entry with an `n`-byte name needs.
fn rec_size(n: usize) -> usize {
    (8 + n + 3) & !3
}

/// Fills directory leaf blocks one entry at a time.
struct LeafPacker {
    bs: usize,
    usable: usize,
    csum: bool,
    blocks: Vec<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
    last: Option<usize>,
}

impl LeafPacker {
    fn new(bs: usize, csum: bool) -> LeafPacker {
        LeafPacker {
            bs,
            usable: bs - if csum { TAIL_SIZE } else { 0 },
            csum,
            blocks: Vec::new(),
            cur: vec![0; bs],
            pos: 0,
            last: None,
        }
    }

    fn fits(&self, name_len: usize) -> bool {
        self.pos + rec_size(name_len) <= self.usable
    }

    fn put(&mut self, name: &[u8], ino: u32, ft: u8) {
        if !self.fits(name.len()) {
            self.close();
        }
        let n = rec_size(name.len());
        let mut h = DirEntryHeader::new(&mut self.cur[self.pos..self.pos + 8]).expect("8 bytes");
        h.set_inode(ino);
        h.set_rec_len(encode_rec_len(n as u32, self.bs as u32));
        h.set_name_len(name.len() as u8);
        h.set_file_type(ft);
        self.cur[self.pos + 8..self.pos + 8 + name.len()].copy_from_slice(name);
        self.last = Some(self.pos);
        self.pos += n;
    }

    /// Ends the current block: the last entry reaches the tail (an empty block gets one
    /// unused entry spanning it).
    fn close(&mut self) {
        let at = self.last.unwrap_or(0);
        let len = self.usable - at;
        let mut h = DirEntryHeader::new(&mut self.cur[at..at + 8]).expect("8 bytes");
        h.set_rec_len(encode_rec_len(len as u32, self.bs as u32));
        if self.csum {
            let t = self.bs - TAIL_SIZE;
            let mut tail = DirTail::new(&mut self.cur[t..]).expect("12 bytes");
            tail.set_det_rec_len(TAIL_SIZE as u16);
            tail.set_det_reserved_ft(TAIL_FILE_TYPE);
        }
        self.blocks
            .push(std::mem::replace(&mut self.cur, vec![0; self.bs]));
        self.pos = 0;
        self.last = None;
    }

    fn finish(mut self) -> Vec<Vec<u8>> {
        if self.pos > 0 || self.blocks.is_empty() {
            self.close();
        }
        self.blocks
    }
}

impl Writer {
    /// Writes directory `ino` (parent `parent`) holding `entries` (besides `.` and
    /// `..`), in at least `min_blocks` blocks: linear if it fits one block (or `htree`
    /// is false or dir_index is off), else hashed. Allocates and writes its blocks and
    /// sets its size, flags and extents. Link counts are the caller's.
    pub fn write_dir(
        &mut self,
        ino: u32,
        parent: u32,
        entries: &[DirEntryIn],
        min_blocks: u32,
        htree: bool,
    ) -> Result<()> {
        let bs = self.core.geo.block_size as usize;
        let csum = self.has_csum();
        let mut lin = LeafPacker::new(bs, csum);
        lin.put(b".", ino, 2);
        lin.put(b"..", parent, 2);
        for e in entries {
            lin.put(&e.name, e.ino, e.file_type);
        }
        let mut blocks = lin.finish();
        let mut indexed = false;
        if blocks.len() > 1 && htree && self.core.geo.features.has_compat(compat::DIR_INDEX) {
            blocks = self.htree_blocks(ino, parent, entries)?;
            indexed = true;
        }
        while blocks.len() < min_blocks as usize {
            let mut p = LeafPacker::new(bs, csum);
            p.close();
            blocks.extend(p.blocks);
        }
        if let Some(seed) = self.core.csum_seed {
            for b in blocks.iter_mut() {
                if crate::format::dirent::find_tail(b).is_some() {
                    let c = crate::format::dirent::leaf_checksum(seed, ino, 0, b);
                    let t = bs - 4;
                    b[t..].copy_from_slice(&c.to_le_bytes());
                }
            }
        }
        let n = blocks.len() as u64;
        let goal = self.data_goal(ino, true);
        let maps = plan_extents(&mut self.blocks, ino, goal, &[(0, n)])
            .map_err(|e| super::writer::no_space(&format!("directory inode {ino}"), e))?;
        for m in &maps {
            let from = m.lblk as usize;
            let data: Vec<u8> = blocks[from..from + m.len as usize].concat();
            self.write_blocks(m.pblk, &data)?;
        }
        self.set_extents(ino, &maps)?;
        let mut i = self.inode_mut(ino);
        i.set_size(n * bs as u64);
        if indexed {
            i.set_i_flags(i.i_flags() | flags::INDEX);
        }
        Ok(())
    }

    /// The blocks of a hashed directory: root, dx nodes (if any), then the leaves.
    fn htree_blocks(&self, ino: u32, parent: u32, entries: &[DirEntryIn]) -> Result<Vec<Vec<u8>>> {
        let bs = self.core.geo.block_size as usize;
        let csum = self.has_csum();
        let tail = if csum { DX_TAIL_SIZE } else { 0 };
        let seed = self.core.sb.hash_seed();
        let mut hashed: Vec<(u32, u32, &DirEntryIn)> = entries
            .iter()
            .map(|e| {
                let (h, m) = dx_hash(&e.name, HashVersion::HalfMd4, &seed)
                    .map_err(|e| Error::incompatible(e.to_string()))?;
                Ok((h, m, e))
            })
            .collect::<Result<_>>()?;
        hashed.sort_by_key(|a| (a.0, a.1));
        // Leaves in hash order; each starts a new dx range.
        let mut p = LeafPacker::new(bs, csum);
        let mut starts: Vec<u32> = Vec::new();
        let mut prev_hash: Option<u32> = None;
        for (h, _, e) in &hashed {
            if p.blocks.is_empty() && p.last.is_none() || !p.fits(e.name.len()) {
                if p.last.is_some() {
                    p.close();
                }
                // A hash continuing from the previous leaf is marked with the low bit.
                starts.push(if prev_hash == Some(*h) { h | 1 } else { *h });
            }
            p.put(&e.name, e.ino, e.file_type);
            prev_hash = Some(*h);
        }
        let leaves = p.finish();
        let root_limit = (bs - ROOT_COUNT_OFFSET - tail) / DX_ENTRY_SIZE;
        let node_limit = (bs - NODE_COUNT_OFFSET - tail) / DX_ENTRY_SIZE;
        let (levels, nodes) = if leaves.len() <= root_limit {
            (0u8, 0usize)
        } else {
            let nodes = leaves.len().div_ceil(node_limit);
            if nodes > root_limit {
                return Err(Error::incompatible(format!(
                    "directory inode {ino}: {} entries need a 3-level htree (large_dir is not supported)",
                    entries.len()
                )));
            }
            (1, nodes)
        };
        let first_leaf = 1 + nodes as u32;
        let mut out = Vec::with_capacity(1 + nodes + leaves.len());
        // Root.
        let mut root = vec![0u8; bs];
        {
            let mut d = DirEntryHeader::new(&mut root[0..8]).expect("8");
            d.set_inode(ino);
            d.set_rec_len(12);
            d.set_name_len(1);
            d.set_file_type(2);
        }
        root[8] = b'.';
        {
            let mut d = DirEntryHeader::new(&mut root[12..20]).expect("8");
            d.set_inode(parent);
            d.set_rec_len(encode_rec_len(bs as u32 - 12, bs as u32));
            d.set_name_len(2);
            d.set_file_type(2);
        }
        root[20..22].copy_from_slice(b"..");
        {
            let mut info = DxRootInfo::new(&mut root[0x18..0x20]).expect("8");
            info.set_hash_version(HashVersion::HalfMd4.to_u8());
            info.set_info_length(8);
            info.set_indirect_levels(levels);
        }
        let root_entries: Vec<(u32, u32)> = if levels == 0 {
            starts
                .iter()
                .enumerate()
                .map(|(i, &h)| (h, first_leaf + i as u32))
                .collect()
        } else {
            let each = leaves.len().div_ceil(nodes);
            let mut node_blocks = Vec::new();
            let mut root_e = Vec::new();
            for (n, chunk) in starts.chunks(each).enumerate() {
                let base = n * each;
                let ents: Vec<(u32, u32)> = chunk
                    .iter()
                    .enumerate()
                    .map(|(i, &h)| (h, first_leaf + (base + i) as u32))
                    .collect();
                let mut node = vec![0u8; bs];
                {
                    let mut d = DirEntryHeader::new(&mut node[0..8]).expect("8");
                    d.set_rec_len(encode_rec_len(bs as u32, bs as u32));
                }
                self.fill_dx(&mut node, NODE_COUNT_OFFSET, node_limit, &ents, ino);
                node_blocks.push(node);
                root_e.push((chunk[0], 1 + n as u32));
            }
            out.push(Vec::new()); // root placeholder
            out.extend(node_blocks);
            root_e
        };
        self.fill_dx(&mut root, ROOT_COUNT_OFFSET, root_limit, &root_entries, ino);
        if out.is_empty() {
            out.push(root);
        } else {
            out[0] = root;
        }
        out.extend(leaves);
        Ok(out)
    }

    /// Writes count/limit, the (hash, block) entries (the first entry's hash slot holds
    /// count/limit) and, with metadata_csum, the dx tail.
    fn fill_dx(&self, buf: &mut [u8], at: usize, limit: usize, ents: &[(u32, u32)], ino: u32) {
        {
            let mut cl = DxCountLimit::new(&mut buf[at..at + 8]).expect("8");
            cl.set_limit(limit as u16);
            cl.set_count(ents.len() as u16);
            cl.set_block(ents[0].1);
        }
        for (i, &(h, b)) in ents.iter().enumerate().skip(1) {
            let o = at + i * DX_ENTRY_SIZE;
            buf[o..o + 4].copy_from_slice(&h.to_le_bytes());
            buf[o + 4..o + 8].copy_from_slice(&b.to_le_bytes());
        }
        if let Some(seed) = self.core.csum_seed {
            let t = at + limit * DX_ENTRY_SIZE;
            let c = node_checksum(seed, ino, 0, buf, at, ents.len(), t);
            buf[t + 4..t + 8].copy_from_slice(&c.to_le_bytes());
        }
    }
}
