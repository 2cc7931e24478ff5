//! Logical-to-physical block mapping: extent trees (any depth, checksummed blocks) and
//! ext2/ext3 indirect block maps.

use super::inode::LoadedInode;
use super::Ext4;
use crate::format::extent::{
    self, Extent, ExtentHeader, ExtentIndex, ENTRY_SIZE, EXTENT_MAGIC, MAX_DEPTH,
};
use crate::format::inode::flags;
use usfs_fs::{Error, Result};

/// A run of logical blocks with one fate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// First logical block of the run.
    pub lblk: u64,
    /// Length in blocks (at least 1).
    pub len: u64,
    /// Physical block of `lblk`, or `None` for a hole or an unwritten extent.
    pub pblk: Option<u64>,
}

/// Logical blocks a file can address (2^32).
const MAX_LBLK: u64 = 1 << 32;

impl Ext4 {
    /// Maps logical block `lblk` of `inode`: the run containing it.
    pub(crate) fn map_block(&self, inode: &LoadedInode, lblk: u64) -> Result<Run> {
        if lblk >= MAX_LBLK {
            return Ok(Run {
                lblk,
                len: u64::MAX - lblk,
                pblk: None,
            });
        }
        if inode.has_flag(flags::EXTENTS) {
            self.map_extent(inode, lblk)
        } else {
            self.map_indirect(inode, lblk)
        }
    }

    /// Validates a node header; `max_cap` is the most entries the node can hold.
    fn check_header(
        &self,
        ino: u32,
        h: &ExtentHeader<&[u8]>,
        max_cap: usize,
        depth: Option<u16>,
    ) -> Result<()> {
        let bad = |what: String| Err(Error::corrupt(format!("inode {ino}: extent tree: {what}")));
        if h.eh_magic() != EXTENT_MAGIC {
            return bad(format!("bad magic {:#06x}", h.eh_magic()));
        }
        if h.eh_max() as usize > max_cap || h.eh_max() == 0 {
            return bad(format!("eh_max {} (at most {max_cap})", h.eh_max()));
        }
        if h.eh_entries() > h.eh_max() {
            return bad(format!(
                "{} entries in a node of {}",
                h.eh_entries(),
                h.eh_max()
            ));
        }
        if h.eh_depth() > MAX_DEPTH || depth.is_some_and(|d| d != h.eh_depth()) {
            return bad(format!("depth {} where {depth:?} expected", h.eh_depth()));
        }
        Ok(())
    }

    fn map_extent(&self, inode: &LoadedInode, lblk: u64) -> Result<Run> {
        let ino = inode.ino;
        let root = inode.raw.i_block().to_vec();
        let mut node: Vec<u8> = root;
        let mut cap = 4;
        let mut expect_depth = None;
        // End (exclusive) of the logical range the current node covers.
        let mut limit = MAX_LBLK;
        loop {
            let h = ExtentHeader::new(&node[..]).expect("node >= 12 bytes");
            self.check_header(ino, &h, cap, expect_depth)?;
            let n = h.eh_entries() as usize;
            let depth = h.eh_depth();
            let at = |i: usize| &node[ENTRY_SIZE * (i + 1)..ENTRY_SIZE * (i + 2)];
            if depth == 0 {
                // Last extent starting at or before lblk.
                let mut hole_end = limit;
                for i in 0..n {
                    let e = Extent::new(at(i)).expect("12 bytes");
                    let start = e.ee_block() as u64;
                    if start > lblk {
                        hole_end = hole_end.min(start);
                        break;
                    }
                    let len = e.len() as u64;
                    if lblk < start + len {
                        let pstart = e.start();
                        if pstart == 0 || pstart + len > self.geo.blocks_count {
                            return Err(Error::corrupt(format!(
                                "inode {ino}: extent ({start}, {len}) at physical block {pstart} lies outside the file system"
                            )));
                        }
                        let off = lblk - start;
                        let pblk = (!e.is_unwritten()).then_some(pstart + off);
                        return Ok(Run {
                            lblk,
                            len: len - off,
                            pblk,
                        });
                    }
                }
                return Ok(Run {
                    lblk,
                    len: hole_end.saturating_sub(lblk).max(1),
                    pblk: None,
                });
            }
            // Index node: last index with ei_block <= lblk.
            let mut chosen = None;
            for i in 0..n {
                let ix = ExtentIndex::new(at(i)).expect("12 bytes");
                if ix.ei_block() as u64 > lblk {
                    limit = limit.min(ix.ei_block() as u64);
                    break;
                }
                chosen = Some(ix.leaf());
            }
            let Some(child) = chosen else {
                let end = if n > 0 {
                    ExtentIndex::new(at(0)).expect("12").ei_block() as u64
                } else {
                    limit
                };
                return Ok(Run {
                    lblk,
                    len: end.saturating_sub(lblk).max(1),
                    pblk: None,
                });
            };
            let block = self.read_block(child, &format!("inode {ino}: extent tree node"))?;
            let bs = self.geo.block_size as usize;
            cap = (bs - ENTRY_SIZE) / ENTRY_SIZE;
            let ch = ExtentHeader::new(&block[..]).expect("block >= 12");
            self.check_header(ino, &ch, cap, Some(depth - 1))?;
            if let Some(seed) = self.csum_seed {
                let max = ch.eh_max();
                let off = extent::tail_offset(max);
                if off + 4 > bs {
                    return Err(Error::corrupt(format!(
                        "inode {ino}: extent block {child} has no room for its checksum"
                    )));
                }
                let stored = u32::from_le_bytes(block[off..off + 4].try_into().unwrap());
                let want = extent::block_checksum(seed, ino, inode.raw.i_generation(), &block, max);
                if stored != want {
                    return Err(Error::corrupt(format!(
                        "inode {ino}: extent block {child} checksum does not match"
                    )));
                }
            }
            node = block;
            expect_depth = Some(depth - 1);
        }
    }

    fn map_indirect(&self, inode: &LoadedInode, lblk: u64) -> Result<Run> {
        let ino = inode.ino;
        let ib = inode.raw.i_block();
        let word = |i: usize| u32::from_le_bytes(ib[i * 4..i * 4 + 4].try_into().unwrap()) as u64;
        let per = (self.geo.block_size / 4) as u64;
        if lblk < 12 {
            // Direct blocks: extend over consecutive direct pointers.
            return Ok(self.extend_run(lblk, 12 - lblk, |k| word((lblk + k) as usize)));
        }
        // Which tree (single/double/triple) and the index path inside it.
        let mut rel = lblk - 12;
        let mut span = per;
        let mut level = 1;
        while rel >= span {
            rel -= span;
            level += 1;
            if level > 3 {
                return Ok(Run {
                    lblk,
                    len: u64::MAX - lblk,
                    pblk: None,
                });
            }
            span *= per;
        }
        let mut ptr = word(11 + level);
        let mut sub = span;
        for _ in 0..level {
            sub /= per;
            if ptr == 0 {
                // A hole covering the rest of this subtree.
                let len = sub * per - rel % (sub * per);
                return Ok(Run {
                    lblk,
                    len,
                    pblk: None,
                });
            }
            let block = self.read_block(ptr, &format!("inode {ino}: indirect block"))?;
            let idx = (rel / sub) as usize;
            rel %= sub;
            let get =
                |i: usize| u32::from_le_bytes(block[i * 4..i * 4 + 4].try_into().unwrap()) as u64;
            if sub == 1 {
                let remaining = per - idx as u64;
                return Ok(self.extend_run(lblk, remaining, |k| get(idx + k as usize)));
            }
            ptr = get(idx);
        }
        unreachable!("the loop returns at the leaf level")
    }

    /// A run starting at `lblk` over up to `max` pointers read by `ptr(k)`: consecutive
    /// physical blocks, or consecutive holes.
    fn extend_run(&self, lblk: u64, max: u64, ptr: impl Fn(u64) -> u64) -> Run {
        let first = ptr(0);
        let mut len = 1;
        while len < max {
            let p = ptr(len);
            let cont = if first == 0 { p == 0 } else { p == first + len };
            if !cont {
                break;
            }
            len += 1;
        }
        Run {
            lblk,
            len,
            pblk: (first != 0).then_some(first),
        }
    }
}
