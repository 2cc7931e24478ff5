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
/// Illegal block numbers reported one by one; past this many the list is cleared whole.
const MAX_ILLEGAL: u32 = 4096;

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
    if inode.has_flag(usfs_ext4::format::inode::flags::EXTENTS)
        && !ctx
            .geo
            .features
            .has_incompat(usfs_ext4::format::features::incompat::EXTENTS)
        && !usfs_ext4::format::extent::header_ok(inode.i_block())
    {
        // (e2fsck's PR_1_EXTENTS_SET: the inode is cleared, its list with it.)
        let why = "Inode 1 has EXTENTS_FL flag set on filesystem without extents support";
        out.push(Problem::new(Code::BadBlocksInodeClear, why).with_ino(BAD_BLOCKS_INO));
        return found;
    }
    let words: Vec<u32> = inode
        .i_block()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect();
    if words.iter().all(|&w| w == 0) {
        return found;
    }
    let mut problems = Vec::new();
    let mut list = List {
        ctx,
        out: &mut problems,
        listed: Vec::new(),
        illegal: 0,
        buf: vec![0u8; ctx.geo.block_size as usize],
    };
    for (i, &b) in words[..DIRECT].iter().enumerate() {
        list.data(
            i as u64,
            b,
            Ptr {
                map: 0,
                index: i as u32,
            },
        );
    }
    let per = ctx.geo.block_size as u64 / 4;
    let mut start = DIRECT as u64;
    for (level, &b) in (1..).zip(&words[DIRECT..15]) {
        let at = Ptr {
            map: 0,
            index: DIRECT as u32 + level - 1,
        };
        list.indirect(b, level, start, at);
        start += per.pow(level);
    }
    let List {
        listed, illegal, ..
    } = list;
    // e2fsck's order: the inode's own block on its list, then its fields, as pass 1
    // reads it; either way the inode is cleared, and the list with it.
    let own = ctx.fs.group(0).inode_table();
    let clear = if listed.iter().any(|&(b, _)| b == own) {
        Some("Bad block list says the bad block list inode is bad")
    } else if !inode_valid(ctx, &inode) {
        Some("The bad block inode looks invalid")
    } else if illegal > MAX_ILLEGAL {
        Some("Too many illegal blocks in the bad block inode")
    } else {
        None
    };
    if let Some(why) = clear {
        out.push(Problem::new(Code::BadBlocksInodeClear, why).with_ino(BAD_BLOCKS_INO));
        return found;
    }
    out.append(&mut problems);
    classify(ctx, out, listed, &mut found);
    found
}

/// Are the bad-blocks inode's fields those of one (e2fsck's PR_1_INVALID_BAD_INODE
/// test): no mode, owner, links, inline data or xattr block, and its checksum right?
fn inode_valid(ctx: &Ctx, inode: &usfs_ext4::format::inode::Inode<Vec<u8>>) -> bool {
    let csum_ok = ctx
        .fs
        .csum_seed()
        .is_none_or(|seed| inode.checksum_ok(seed, BAD_BLOCKS_INO, ctx.geo.inode_size as usize));
    csum_ok
        && inode.i_mode() == 0
        && inode.uid() == 0
        && inode.gid() == 0
        && inode.i_links_count() == 0
        && !inode.has_flag(usfs_ext4::format::inode::flags::INLINE_DATA)
        && inode.file_acl() == 0
}

/// Where a pointer of the bad-blocks map is: in i_block (`map` 0) or in the indirect
/// block `map`, at word `index`.
#[derive(Clone, Copy, Debug)]
struct Ptr {
    map: u64,
    index: u32,
}

impl Problem {
    /// Attaches the place of a bad-blocks map pointer and the block it names.
    fn at_ptr(self, at: Ptr, names: u64) -> Problem {
        self.with_block(at.map).values(at.index as u64, names)
    }
}

/// The walk over the bad-blocks inode's map.
struct List<'a, 'b> {
    ctx: &'a Ctx<'a>,
    out: &'b mut Vec<Problem>,
    /// Valid listed blocks, with where they are listed.
    listed: Vec<(u64, Ptr)>,
    illegal: u32,
    buf: Vec<u8>,
}

impl List<'_, '_> {
    fn illegal(&mut self, what: String, at: Ptr, b: u32) {
        self.illegal += 1;
        if self.illegal <= MAX_ILLEGAL {
            let p = Problem::new(Code::BadBlocksIllegal, what).with_ino(BAD_BLOCKS_INO);
            self.out.push(p.at_ptr(at, b as u64));
        }
    }

    fn data(&mut self, lblk: u64, b: u32, at: Ptr) {
        if b == 0 || self.listed.len() >= MAX_LISTED {
            return;
        }
        if !self.ctx.valid_block(b as u64) {
            let what = format!("Illegal block #{lblk} ({b}) in bad block inode");
            return self.illegal(what, at, b);
        }
        self.listed.push((b as u64, at));
    }

    /// An indirect block of `level` (1 = single) whose first entry maps `start`,
    /// named by the pointer at `at`.
    fn indirect(&mut self, b: u32, level: u32, start: u64, at: Ptr) {
        if b == 0 || self.listed.len() >= MAX_LISTED {
            return;
        }
        if !self.ctx.valid_block(b as u64) {
            let what = format!("Illegal indirect block ({b}) in bad block inode");
            return self.illegal(what, at, b);
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
        for (i, &w) in (0u32..).zip(&words) {
            let at = Ptr {
                map: b as u64,
                index: i,
            };
            if level == 1 {
                self.data(start + i as u64, w, at);
            } else {
                self.indirect(w, level - 1, start + i as u64 * span, at);
            }
        }
    }
}

/// Sorts the listed blocks by what they hold.
fn classify(ctx: &Ctx, out: &mut Vec<Problem>, mut listed: Vec<(u64, Ptr)>, found: &mut BadBlocks) {
    let geo = ctx.geo;
    listed.sort_unstable_by_key(|&(b, _)| b);
    listed.dedup_by_key(|&mut (b, _)| b);
    let itable_blocks =
        (geo.inodes_per_group as u64 * geo.inode_size as u64).div_ceil(geo.block_size as u64);
    let inodes_per_block = (geo.block_size / geo.inode_size).max(1);
    for (b, at) in listed {
        let primary = if b == geo.first_data_block {
            Some(format!(
                "The primary superblock ({b}) is on the bad block list"
            ))
        } else if b > geo.first_data_block && b <= geo.first_data_block + geo.gdt_blocks() as u64 {
            Some(format!(
                "Block {b} in the primary group descriptors is on the bad block list"
            ))
        } else {
            None
        };
        if let Some(what) = primary {
            let p = Problem::new(Code::BadBlocksPrimary, what).with_ino(BAD_BLOCKS_INO);
            out.push(p.at_ptr(at, b));
            continue;
        }
        let mut metadata = false;
        for g in 0..geo.group_count {
            let d = ctx.fs.group(g);
            for (kind, what, loc) in [
                (1, "block bitmap", d.block_bitmap()),
                (2, "inode bitmap", d.inode_bitmap()),
            ] {
                if loc == b {
                    out.push(
                        Problem::new(
                            Code::BadBlocksMetadata,
                            format!("Group {g}'s {what} ({b}) is bad"),
                        )
                        .with_group(g)
                        .values(kind, b),
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
        if !metadata && !ctx.shared.block_used(b) {
            ctx.shared.claim_block(b);
        }
    }
    found.inodes.sort_unstable_by_key(|r| *r.start());
}
