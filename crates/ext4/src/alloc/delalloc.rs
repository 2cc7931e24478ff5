//! Delayed allocation: data is written into a buffer and no block is chosen until the
//! buffer is flushed, when the allocator knows how big the file is. [`plan_extents`] is
//! the flush step on its own (mkfs uses it directly: the source file is the buffer).

use super::blocks::{BlockAllocator, NoSpace, Purpose, Request, MAX_EXTENT_LEN};
use std::collections::BTreeMap;

/// Logical blocks `lblk..lblk+len` of a file live at physical `pblk..pblk+len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First logical block.
    pub lblk: u64,
    /// First physical block.
    pub pblk: u64,
    /// Length in blocks (at most 32768: one ext4 extent).
    pub len: u32,
}

/// Chooses blocks for the logical ranges `ranges` (sorted, disjoint `(lblk, blocks)`) of
/// inode `owner`, all at once: every request knows the file's total size, the first
/// starts at `goal`, each next one at the end of the previous extent. On failure
/// nothing stays allocated.
pub fn plan_extents(
    alloc: &mut BlockAllocator,
    owner: u32,
    goal: u64,
    ranges: &[(u64, u64)],
) -> Result<Vec<Mapping>, NoSpace> {
    let total: u64 = ranges.iter().map(|r| r.1).sum();
    let mut out: Vec<Mapping> = Vec::new();
    let mut goal = goal;
    for &(lblk, count) in ranges {
        let mut done = 0u64;
        while done < count {
            let want = (count - done).min(MAX_EXTENT_LEN as u64) as u32;
            let req = Request {
                goal,
                len: want,
                purpose: Purpose::Data {
                    owner,
                    final_blocks: Some(total),
                },
            };
            let (p, got) = match alloc.alloc(&req) {
                Ok(x) => x,
                Err(e) => {
                    for m in &out {
                        alloc
                            .free(m.pblk, m.len as u64)
                            .expect("blocks just allocated are in use");
                    }
                    return Err(NoSpace {
                        wanted: total,
                        free: e.free,
                    });
                }
            };
            let l = lblk + done;
            match out.last_mut() {
                Some(m)
                    if m.lblk + m.len as u64 == l
                        && m.pblk + m.len as u64 == p
                        && m.len + got <= MAX_EXTENT_LEN =>
                {
                    m.len += got
                }
                _ => out.push(Mapping {
                    lblk: l,
                    pblk: p,
                    len: got,
                }),
            }
            done += got as u64;
            goal = p + got as u64;
        }
    }
    Ok(out)
}

/// A file written through a buffer: [`DelayedFile::write`] only copies bytes;
/// [`DelayedFile::flush`] allocates every dirty block in one go and hands back where each
/// block's data goes.
#[derive(Clone, Debug, Default)]
pub struct DelayedFile {
    block_size: u32,
    /// Dirty blocks by logical number.
    blocks: BTreeMap<u64, Vec<u8>>,
    size: u64,
}

impl DelayedFile {
    /// An empty file with `block_size`-byte blocks.
    pub fn new(block_size: u32) -> DelayedFile {
        DelayedFile {
            block_size,
            blocks: BTreeMap::new(),
            size: 0,
        }
    }

    /// Buffers `data` at byte `offset`. No block is allocated.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let bs = self.block_size as u64;
        let mut pos = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let lblk = pos / bs;
            let o = (pos % bs) as usize;
            let n = rest.len().min(bs as usize - o);
            let b = self
                .blocks
                .entry(lblk)
                .or_insert_with(|| vec![0; bs as usize]);
            b[o..o + n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            pos += n as u64;
        }
        self.size = self.size.max(offset + data.len() as u64);
    }

    /// File size so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Blocks the flush will need (what a writer reserves against ENOSPC).
    pub fn reserved_blocks(&self) -> u64 {
        self.blocks.len() as u64
    }

    /// Allocates blocks for every dirty block, contiguous where the space allows, and
    /// returns the mappings with the data for each (one buffer per mapping).
    pub fn flush(
        self,
        alloc: &mut BlockAllocator,
        owner: u32,
        goal: u64,
    ) -> Result<Vec<(Mapping, Vec<u8>)>, NoSpace> {
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for &l in self.blocks.keys() {
            match ranges.last_mut() {
                Some(r) if r.0 + r.1 == l => r.1 += 1,
                _ => ranges.push((l, 1)),
            }
        }
        let maps = plan_extents(alloc, owner, goal, &ranges)?;
        let mut blocks = self.blocks;
        Ok(maps
            .into_iter()
            .map(|m| {
                let mut data = Vec::with_capacity(m.len as usize * self.block_size as usize);
                for l in m.lblk..m.lblk + m.len as u64 {
                    data.extend_from_slice(&blocks.remove(&l).expect("dirty block"));
                }
                (m, data)
            })
            .collect())
    }
}
