//! Changes to an ext2/ext3 indirect block map (fs/ext4/indirect.c is the model): insert
//! sets pointers, creating the single/double/triple indirect blocks on the way (zeroed,
//! written as metadata); remove clears pointers, frees the data blocks and every
//! indirect block left without pointers. Paths come from the one walker
//! ([`crate::walk::indirect::find_path`]).

use super::blockmap::{BlockMap, MetaSource};
use super::meta::{Freed, Meta};
use crate::walk::indirect::{self, locate, per_block, ptr, set_ptr, Slot, DIRECT};
use usfs_fs::{Error, Result, Structure};

/// Frees of contiguous data blocks, gathered into one call per run.
struct FreeRuns {
    ino: u32,
    run: Option<(u64, u64)>,
}

impl FreeRuns {
    fn add(&mut self, m: &mut dyn Meta, blk: u64) -> Result<()> {
        match &mut self.run {
            Some((s, l)) if *s + *l == blk => *l += 1,
            _ => {
                self.flush(m)?;
                self.run = Some((blk, 1));
            }
        }
        Ok(())
    }
    fn flush(&mut self, m: &mut dyn Meta) -> Result<()> {
        if let Some((s, l)) = self.run.take() {
            m.free_blocks(self.ino, s, l, Freed::Data)?;
        }
        Ok(())
    }
}

fn all_zero(buf: &[u8]) -> bool {
    buf.iter().all(|&b| b == 0)
}

impl BlockMap<'_> {
    /// Logical blocks the indirect map can address.
    fn ind_limit(&self, block_size: u32) -> u64 {
        let per = per_block(block_size);
        (DIRECT + per + per * per + per * per * per).min(crate::walk::MAX_LBLK)
    }

    fn ind_overlap(&self, lblk: u64) -> Error {
        Error::corrupt(
            Structure::BlockMap,
            format!(
                "inode {}: block map: insert over mapped block {lblk}",
                self.ino
            ),
        )
        .with_ino(self.ino)
    }

    /// Maps `len` blocks from `lblk` to `pblk..`, all currently holes.
    pub(super) fn ind_insert(
        &mut self,
        m: &mut dyn Meta,
        lblk: u64,
        pblk: u64,
        len: u64,
    ) -> Result<()> {
        let bs = m.geo().block_size;
        let end = lblk + len;
        if end > self.ind_limit(bs) {
            return Err(Error::incompatible(format!(
                "inode {}: logical block {} past what an indirect block map addresses",
                self.ino,
                end - 1
            )));
        }
        let per = per_block(bs);
        let mut cur = lblk;
        while cur < end {
            let slot = locate(bs, cur).expect("below the limit");
            let p = pblk + (cur - lblk);
            if slot.level == 0 {
                if ptr(&self.i_block[..], cur as usize) != 0 {
                    return Err(self.ind_overlap(cur));
                }
                set_ptr(&mut self.i_block[..], cur as usize, p);
                cur += 1;
                continue;
            }
            let (blk, mut leaf, idx) = self.ind_leaf(m, slot, p)?;
            let n = (end - cur).min(per - idx as u64);
            for k in 0..n as usize {
                if ptr(&leaf, idx + k) != 0 {
                    return Err(self.ind_overlap(cur + k as u64));
                }
                set_ptr(&mut leaf, idx + k, p + k as u64);
            }
            m.write_meta(blk, leaf)?;
            cur += n;
        }
        Ok(())
    }

    /// The last indirect block on the way to `slot` (block, contents, pointer index),
    /// creating the missing indirect blocks near `goal`.
    fn ind_leaf(
        &mut self,
        m: &mut dyn Meta,
        slot: Slot,
        goal: u64,
    ) -> Result<(u64, Vec<u8>, usize)> {
        let cx = self.cx(m);
        let path = indirect::find_path(&MetaSource(m), &cx, &self.i_block[..], slot)?;
        let mut nodes = path.nodes;
        let have = nodes.len();
        if have < slot.level {
            let per = per_block(cx.block_size);
            let blks = self.alloc_meta_blocks(m, goal, slot.level - have)?;
            for (d, &b) in (have..slot.level).zip(&blks) {
                // Index of the pointer taken at depth d (0 = the top block).
                let idx = (slot.rel / per.pow((slot.level - 1 - d) as u32)) % per;
                match d {
                    0 => set_ptr(&mut self.i_block[..], slot.slot, b),
                    _ => {
                        let (_, parent, pi) = &mut nodes[d - 1];
                        set_ptr(parent, *pi, b);
                    }
                }
                nodes.push((b, vec![0u8; cx.block_size as usize], idx as usize));
            }
            // The blocks that changed: the parent of the first new one, the new ones
            // (the leaf is the caller's to write).
            for (b, buf, _) in &nodes[have.saturating_sub(1)..slot.level - 1] {
                m.write_meta(*b, buf.clone())?;
            }
        }
        Ok(nodes.pop().expect("level >= 1"))
    }

    /// Unmaps `from..to`: clears pointers, frees data and emptied indirect blocks.
    pub(super) fn ind_remove(&mut self, m: &mut dyn Meta, from: u64, to: u64) -> Result<u64> {
        let cx = self.cx(m);
        let bs = cx.block_size;
        let per = per_block(bs);
        let to = to.min(self.ind_limit(bs));
        let mut runs = FreeRuns {
            ino: self.ino,
            run: None,
        };
        let mut freed = 0;
        let mut cur = from;
        while cur < to {
            let slot = locate(bs, cur).expect("below the limit");
            if slot.level == 0 {
                let p = ptr(&self.i_block[..], cur as usize);
                if p != 0 {
                    cx.check_data(cur, p, 1).map_err(in_block_map)?;
                    runs.add(m, p)?;
                    freed += 1;
                    set_ptr(&mut self.i_block[..], cur as usize, 0);
                }
                cur += 1;
                continue;
            }
            let path = indirect::find_path(&MetaSource(m), &cx, &self.i_block[..], slot)?;
            if let Some(h) = path.hole {
                cur += h;
                continue;
            }
            let mut nodes = path.nodes;
            let (blk, mut leaf, idx) = nodes.pop().expect("level >= 1");
            let n = (to - cur).min(per - idx as u64);
            for k in 0..n {
                let i = idx + k as usize;
                let p = ptr(&leaf, i);
                if p != 0 {
                    cx.check_data(cur + k, p, 1).map_err(in_block_map)?;
                    runs.add(m, p)?;
                    freed += 1;
                    set_ptr(&mut leaf, i, 0);
                }
            }
            cur += n;
            if all_zero(&leaf) {
                self.ind_free_up(m, slot, nodes, blk)?;
            } else {
                m.write_meta(blk, leaf)?;
            }
        }
        runs.flush(m)?;
        Ok(freed)
    }

    /// Frees indirect block `blk` (now empty) and clears its pointer in its parent,
    /// freeing the parents left empty in turn (`nodes` are the parents, top first).
    fn ind_free_up(
        &mut self,
        m: &mut dyn Meta,
        slot: Slot,
        mut nodes: Vec<(u64, Vec<u8>, usize)>,
        mut blk: u64,
    ) -> Result<()> {
        loop {
            self.free_meta_block(m, blk)?;
            let Some((pb, mut parent, pi)) = nodes.pop() else {
                set_ptr(&mut self.i_block[..], slot.slot, 0);
                return Ok(());
            };
            set_ptr(&mut parent, pi, 0);
            if !all_zero(&parent) {
                return m.write_meta(pb, parent);
            }
            blk = pb;
        }
    }
}

/// A data pointer found outside the file system by the shared check, which reports it as
/// an extent: here it is a pointer of the block map.
fn in_block_map(e: Error) -> Error {
    e.in_structure(Structure::BlockMap)
}
