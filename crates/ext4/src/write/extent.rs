//! Extent trees: up to four extents in the inode; more go to leaf blocks under index
//! entries, as many levels as needed (checksummed tree blocks).

use super::writer::Writer;
use crate::alloc::Mapping;
use crate::format::extent::{
    block_checksum, tail_offset, Extent, ExtentHeader, ExtentIndex, ENTRY_SIZE, EXTENT_MAGIC,
    MAX_DEPTH,
};
use crate::format::inode::flags;
use usfs_fs::{Error, Result, Structure};

/// Entries the root in `i_block` holds.
const ROOT_ENTRIES: usize = 4;

/// One entry of a node being built: its first logical block and its 12 bytes.
type Entry = (u64, [u8; 12]);

fn header(buf: &mut [u8], entries: usize, max: usize, depth: u16) {
    let mut h = ExtentHeader::new(&mut buf[..12]).expect("12 bytes");
    h.set_eh_magic(EXTENT_MAGIC);
    h.set_eh_entries(entries as u16);
    h.set_eh_max(max as u16);
    h.set_eh_depth(depth);
}

fn leaf_entry(m: &Mapping) -> Entry {
    let mut e = Extent::new([0u8; 12]).expect("12 bytes");
    e.set_ee_block(m.lblk as u32);
    e.set_ee_len(m.len as u16);
    e.set_ee_start_hi((m.pblk >> 32) as u16);
    e.set_ee_start_lo(m.pblk as u32);
    (m.lblk, e.into_inner())
}

fn index_entry(lblk: u64, child: u64) -> Entry {
    let mut e = ExtentIndex::new([0u8; 12]).expect("12 bytes");
    e.set_ei_block(lblk as u32);
    e.set_ei_leaf_hi((child >> 32) as u16);
    e.set_ei_leaf_lo(child as u32);
    (lblk, e.into_inner())
}

impl Writer {
    /// Maps inode `ino`'s data by `maps` (sorted, each at most 32768 blocks, logical
    /// blocks below 2^32): builds the extent tree, allocating and writing its blocks,
    /// sets the EXTENTS flag and adds data and tree blocks to `i_blocks`.
    pub fn set_extents(&mut self, ino: u32, maps: &[Mapping]) -> Result<()> {
        if maps.iter().any(|m| m.lblk + m.len as u64 > 1 << 32) {
            return Err(Error::incompatible(format!(
                "inode {ino}: data past 2^32 blocks"
            )));
        }
        let bs = self.core.geo.block_size as usize;
        let per_block = (bs - ENTRY_SIZE) / ENTRY_SIZE;
        let mut level: Vec<Entry> = maps.iter().map(leaf_entry).collect();
        let mut depth: u16 = 0;
        let mut tree_blocks = 0u64;
        let mut goal = maps.first().map_or(self.data_goal(ino, false), |m| m.pblk);
        while level.len() > ROOT_ENTRIES {
            if depth >= MAX_DEPTH {
                return Err(Error::incompatible(format!(
                    "inode {ino}: extent tree deeper than {MAX_DEPTH}"
                )));
            }
            let nodes = level.len().div_ceil(per_block);
            // Spread entries evenly so every node is about equally full.
            let each = level.len().div_ceil(nodes);
            let mut next = Vec::with_capacity(nodes);
            for chunk in level.chunks(each) {
                let blk = if ino == crate::format::inode::JOURNAL_INO {
                    self.alloc_meta(goal, 1)?.0
                } else {
                    self.alloc_file_block(ino, goal)?
                };
                goal = blk + 1;
                tree_blocks += 1;
                let mut buf = vec![0u8; bs];
                header(&mut buf, chunk.len(), per_block, depth);
                for (i, (_, e)) in chunk.iter().enumerate() {
                    let o = ENTRY_SIZE * (i + 1);
                    buf[o..o + ENTRY_SIZE].copy_from_slice(e);
                }
                if let Some(seed) = self.core.csum_seed {
                    let c = block_checksum(seed, ino, 0, &buf, per_block as u16);
                    let t = tail_offset(per_block as u16);
                    buf[t..t + 4].copy_from_slice(&c.to_le_bytes());
                }
                self.write_blocks(blk, &buf)?;
                next.push(index_entry(chunk[0].0, blk));
            }
            level = next;
            depth += 1;
        }
        let mut root = [0u8; 60];
        header(&mut root, level.len(), ROOT_ENTRIES, depth);
        for (i, (_, e)) in level.iter().enumerate() {
            let o = ENTRY_SIZE * (i + 1);
            root[o..o + ENTRY_SIZE].copy_from_slice(e);
        }
        let data: u64 = maps.iter().map(|m| m.len as u64).sum();
        {
            let mut i = self.inode_mut(ino);
            i.set_i_block(&root);
            i.set_i_flags(i.i_flags() | flags::EXTENTS);
        }
        self.add_blocks(ino, data + tree_blocks);
        Ok(())
    }

    /// Frees the blocks of inode `ino` (whose extent tree lies wholly in the inode, as
    /// format leaves the root directory's) and leaves it with no data: an empty extent
    /// root, size 0, no blocks counted, not indexed.
    pub fn drop_blocks(&mut self, ino: u32) -> Result<()> {
        let root = self.inode(ino).i_block().to_vec();
        let h = ExtentHeader::new(&root[..12]).expect("12 bytes");
        if h.eh_magic() != EXTENT_MAGIC || h.eh_depth() != 0 {
            return Err(Error::corrupt(
                Structure::ExtentTree,
                format!("inode {ino}: not an extent tree held in the inode"),
            )
            .with_ino(ino));
        }
        for k in 0..(h.eh_entries() as usize).min(ROOT_ENTRIES) {
            let o = ENTRY_SIZE * (k + 1);
            let e = Extent::new(&root[o..o + ENTRY_SIZE]).expect("12 bytes");
            self.blocks.free(e.start(), e.len() as u64).map_err(|m| {
                Error::corrupt(Structure::ExtentTree, format!("inode {ino}: {m}")).with_ino(ino)
            })?;
        }
        let mut empty = [0u8; 60];
        header(&mut empty, 0, ROOT_ENTRIES, 0);
        let mut i = self.inode_mut(ino);
        i.set_i_block(&empty);
        i.set_i_flags(i.i_flags() & !flags::INDEX);
        i.set_size(0);
        i.set_blocks_512(0);
        Ok(())
    }
}
