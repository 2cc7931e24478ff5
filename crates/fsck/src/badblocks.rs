//! The bad-blocks inode (inode 1): its block map lists blocks the disk cannot hold data
//! in. Read before pass 1 (it decides which inodes pass 1 may read), with e2fsck's pass-1
//! rules: every listed block and indirect block must be a valid block number; a bad block
//! may not be the primary superblock, a primary descriptor block or a bitmap (nothing
//! could replace them); a bad block in an inode table makes the inodes stored there
//! unreadable — they count as in use, and entries naming them are reported in pass 2.
//! Other bad blocks (and backup superblocks or descriptors) are simply marked in use.

use crate::ctx::Ctx;
use crate::problem::{Code, Problem};
use std::ops::RangeInclusive;

/// The bad-blocks inode.
const BAD_BLOCKS_INO: u32 = 1;
/// Direct block pointers in i_block.
const DIRECT: usize = 12;
/// Most listed blocks looked at (a corrupt map could name the whole disk, many times).
const MAX_LISTED: usize = 1 << 20;
/// e2fsck gives up on the list after this many illegal block numbers.
const MAX_ILLEGAL: u32 = 12;

/// What the bad-blocks list means for the other passes.
#[derive(Debug, Default)]
pub(crate) struct BadBlocks {
    /// Inodes stored in bad inode-table blocks (sorted, disjoint ranges).
    pub inodes: Vec<RangeInclusive<u32>>,
}

impl BadBlocks {
    /// Is `ino` stored in a bad block?
    pub(crate) fn holds(&self, ino: u32) -> bool {
        let i = self.inodes.partition_point(|r| *r.end() < ino);
        self.inodes.get(i).is_some_and(|r| r.contains(&ino))
    }
}

/// Reads and checks the bad-blocks list; marks its blocks in use. Runs after pass 0 has
/// marked the file-system metadata, before pass 1.
pub(crate) fn check(ctx: &Ctx, out: &mut Vec<Problem>) -> BadBlocks {
    let mut found = BadBlocks::default();
    let Ok(inode) = ctx.fs.read_inode_raw(BAD_BLOCKS_INO) else {
        return found;
    };
    let words: Vec<u32> = inode
        .i_block()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    if words.iter().all(|&w| w == 0) {
        return found;
    }
    let mut list = List {
        ctx,
        out,
        listed: Vec::new(),
        illegal: 0,
        buf: vec![0u8; ctx.geo.block_size as usize],
    };
    for (i, &b) in words[..DIRECT].iter().enumerate() {
        list.data(i as u64, b);
    }
    let per = ctx.geo.block_size as u64 / 4;
    let mut start = DIRECT as u64;
    for (level, &b) in (1..).zip(&words[DIRECT..15]) {
        list.indirect(b, level, start);
        start += per.pow(level);
    }
    let List { listed, .. } = list;
    classify(ctx, out, listed, &mut found);
    found
}

/// The walk over the bad-blocks inode's map.
struct List<'a, 'b> {
    ctx: &'a Ctx<'a>,
    out: &'b mut Vec<Problem>,
    /// Valid listed blocks.
    listed: Vec<u64>,
    illegal: u32,
    buf: Vec<u8>,
}

impl List<'_, '_> {
    fn illegal(&mut self, what: String) {
        self.illegal += 1;
        if self.illegal <= MAX_ILLEGAL {
            self.out
                .push(Problem::new(Code::BadBlocksIllegal, what).ino(BAD_BLOCKS_INO));
        }
    }

    fn data(&mut self, lblk: u64, b: u32) {
        if b == 0 || self.listed.len() >= MAX_LISTED {
            return;
        }
        if !self.ctx.valid_block(b as u64) {
            self.illegal(format!("Illegal block #{lblk} ({b}) in bad block inode"));
            return;
        }
        self.listed.push(b as u64);
    }

    /// An indirect block of `level` (1 = single) whose first entry maps `start`.
    fn indirect(&mut self, b: u32, level: u32, start: u64) {
        if b == 0 || self.listed.len() >= MAX_LISTED {
            return;
        }
        if !self.ctx.valid_block(b as u64) {
            self.illegal(format!("Illegal indirect block ({b}) in bad block inode"));
            return;
        }
        self.ctx.shared.claim_block(b as u64);
        let mut buf = std::mem::take(&mut self.buf);
        if self.ctx.read_block(b as u64, &mut buf).is_err() {
            self.buf = buf;
            return;
        }
        let words: Vec<u32> = buf
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        self.buf = buf;
        let span = (words.len() as u64).pow(level - 1);
        for (i, &w) in (0u64..).zip(&words) {
            if level == 1 {
                self.data(start + i, w);
            } else {
                self.indirect(w, level - 1, start + i * span);
            }
        }
    }
}

/// Sorts the listed blocks by what they hold.
fn classify(ctx: &Ctx, out: &mut Vec<Problem>, mut listed: Vec<u64>, found: &mut BadBlocks) {
    let geo = ctx.geo;
    listed.sort_unstable();
    listed.dedup();
    let itable_blocks =
        (geo.inodes_per_group as u64 * geo.inode_size as u64).div_ceil(geo.block_size as u64);
    let inodes_per_block = (geo.block_size / geo.inode_size).max(1);
    for b in listed {
        if b == geo.first_data_block {
            out.push(Problem::new(
                Code::BadBlocksPrimary,
                format!("The primary superblock ({b}) is on the bad block list"),
            ));
            continue;
        }
        if b > geo.first_data_block && b <= geo.first_data_block + geo.gdt_blocks() as u64 {
            out.push(Problem::new(
                Code::BadBlocksPrimary,
                format!("Block {b} in the primary group descriptors is on the bad block list"),
            ));
            continue;
        }
        let mut metadata = false;
        for g in 0..geo.group_count {
            let d = ctx.fs.group(g);
            for (what, at) in [
                ("block bitmap", d.block_bitmap()),
                ("inode bitmap", d.inode_bitmap()),
            ] {
                if at == b {
                    out.push(
                        Problem::new(
                            Code::BadBlocksMetadata,
                            format!("Group {g}'s {what} ({b}) is bad"),
                        )
                        .group(g),
                    );
                    metadata = true;
                }
            }
            let t = d.inode_table();
            if (t..t + itable_blocks).contains(&b) {
                let first = g * geo.inodes_per_group + (b - t) as u32 * inodes_per_block + 1;
                found.inodes.push(first..=first + inodes_per_block - 1);
                metadata = true;
            }
        }
        // Backup superblocks and descriptors are metadata already; anything else is now
        // in use (by the bad-blocks inode).
        if !metadata && !ctx.shared.blocks.get(b) {
            ctx.shared.claim_block(b);
        }
    }
    found.inodes.sort_unstable_by_key(|r| *r.start());
}
