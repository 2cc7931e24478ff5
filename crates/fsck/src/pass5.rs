//! Pass 5: group summaries. The on-disk block and inode bitmaps (uninitialised groups
//! read as what the kernel would build for them) against what passes 0-1 found; bitmap
//! checksums and padding; per-group free counts and directory counts; the superblock's
//! totals (which the kernel recomputes: information only).

use crate::ctx::{Ctx, Worker};
use crate::pass0::metadata_blocks_of_group;
use crate::problem::{Code, Problem};
use crate::state::InodeKind;
use std::collections::HashSet;
use usfs_ext4::format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use usfs_ext4::rw::repair::Found;
use usfs_fs::FileType;

/// Collects bit differences as e2fsck prints them: ` -(a--b) +c`, by block or inode
/// number (with bigalloc, the first block of each cluster: runs go by `step`).
struct Diffs {
    out: String,
    run: Option<(bool, u64, u64)>,
    count: usize,
    step: u64,
}

impl Diffs {
    fn new(step: u64) -> Diffs {
        Diffs {
            out: String::new(),
            run: None,
            count: 0,
            step,
        }
    }

    fn add(&mut self, on_disk: bool, n: u64) {
        self.count += 1;
        if let Some((sign, a, b)) = self.run {
            if sign == on_disk && b + self.step == n {
                self.run = Some((sign, a, n));
                return;
            }
            self.flush();
        }
        self.run = Some((on_disk, n, n));
    }

    fn flush(&mut self) {
        if let Some((on_disk, a, b)) = self.run.take() {
            let sign = if on_disk { '-' } else { '+' };
            if self.out.len() < 2000 {
                if a == b {
                    self.out.push_str(&format!(" {sign}{a}"));
                } else {
                    self.out.push_str(&format!(" {sign}({a}--{b})"));
                }
            }
        }
    }

    fn finish(mut self) -> Option<String> {
        self.flush();
        (self.count > 0).then_some(self.out)
    }
}

/// Are all bits from `from` to the end of the bitmap block set?
fn padding_set(buf: &[u8], from: u64) -> bool {
    let end = buf.len() as u64 * 8;
    let mut k = from;
    while k < end && !k.is_multiple_of(8) {
        if buf[(k / 8) as usize] & (1 << (k % 8)) == 0 {
            return false;
        }
        k += 1;
    }
    buf[(k / 8) as usize..].iter().all(|&b| b == 0xFF)
}

/// The running state of pass 5: the one-block bitmap buffer, what the uninitialised
/// groups' block bitmaps would hold, the bit differences and the free totals so far.
struct Pass5<'c> {
    /// The shared read-only context.
    ctx: &'c Ctx<'c>,
    /// The metadata checksum seed (None without metadata_csum).
    csum: Option<u32>,
    /// The bitmap block being checked.
    buf: Vec<u8>,
    /// Clusters (blocks without bigalloc) the kernel would mark in the bitmaps of
    /// BLOCK_UNINIT groups.
    uninit_extra: HashSet<u64>,
    /// Block bitmap differences, over all groups.
    block_diffs: Diffs,
    /// Inode bitmap differences, over all groups.
    inode_diffs: Diffs,
    /// Free clusters (blocks) counted from the bitmaps.
    free_blocks_total: u64,
    /// A block bitmap's padding was reported (e2fsck reports it once).
    block_padding_reported: bool,
    /// Free inodes counted from the bitmaps.
    free_inodes_total: u64,
    /// The bitmaps as found of every group whose summary disagrees (what a repair
    /// writes).
    found: Found,
}

/// Runs pass 5.
pub(crate) fn run(ctx: &Ctx, w: &mut Worker) -> Found {
    let mut p = Pass5 {
        ctx,
        csum: ctx.fs.csum_seed(),
        buf: vec![0u8; ctx.geo.block_size as usize],
        uninit_extra: uninit_block_bitmaps(ctx),
        block_diffs: Diffs::new(1 << ctx.geo.cluster_shift),
        inode_diffs: Diffs::new(1),
        free_blocks_total: 0,
        block_padding_reported: false,
        free_inodes_total: 0,
        found: Found::default(),
    };
    for g in 0..ctx.geo.group_count {
        p.check_block_bitmap(w, g);
        p.check_inode_bitmap(w, g);
    }
    p.report_totals(w)
}

/// Sets bit `k` of `bm`.
fn set_bit(bm: &mut [u8], k: u64) {
    bm[(k / 8) as usize] |= 1 << (k % 8);
}

/// What the on-disk block bitmaps of uninitialised groups say, filled in as the kernel
/// would (their own superblock/descriptor copies and, wherever those lie, their bitmaps
/// and inode table), as cluster numbers.
fn uninit_block_bitmaps(ctx: &Ctx) -> HashSet<u64> {
    let geo = ctx.geo;
    let mut uninit_extra = HashSet::new();
    let itable_blocks =
        (geo.inodes_per_group as u64 * geo.inode_size as u64).div_ceil(geo.block_size as u64);
    for g in 0..geo.group_count {
        let d = ctx.fs.group(g);
        if ctx.bitmap_uninit(g, BG_BLOCK_UNINIT) {
            uninit_extra.extend(metadata_blocks_of_group(ctx, g));
            uninit_extra.insert(d.block_bitmap());
            uninit_extra.insert(d.inode_bitmap());
            uninit_extra.extend((0..itable_blocks).map(|k| d.inode_table() + k));
        }
    }
    let shift = geo.cluster_shift;
    match shift {
        0 => uninit_extra,
        _ => uninit_extra.into_iter().map(|b| b >> shift).collect(),
    }
}

impl Pass5<'_> {
    /// Group `g`'s block bitmap against the clusters (blocks) found; its checksum, its
    /// padding (last group) and the group's free cluster count.
    fn check_block_bitmap(&mut self, w: &mut Worker, g: u32) {
        let (ctx, geo) = (self.ctx, self.ctx.geo);
        let bs = geo.block_size as usize;
        let d = ctx.fs.group(g);
        let first = geo.group_first_block(g);
        let shift = geo.cluster_shift;
        // (Bits of the bitmap: clusters, blocks without bigalloc.)
        let nblocks = (geo.group_blocks(g) as u64).div_ceil(1 << shift);
        let buf = &mut self.buf;
        let uninit = ctx.bitmap_uninit(g, BG_BLOCK_UNINIT);
        let readable = !uninit
            && ctx.valid_block(d.block_bitmap())
            && ctx.read_block(d.block_bitmap(), buf).is_ok();
        if !uninit && !readable {
            buf.fill(0);
        }
        let mut used = 0u64;
        let mut found_bm = vec![0u8; bs];
        // (A bitmap that cannot be read is written anew whatever it would hold: the
        // repair must not read it.)
        let mut differs = !uninit && !readable;
        for k in 0..nblocks {
            let b = first + (k << shift);
            let found = ctx.shared.block_used(b);
            if found {
                set_bit(&mut found_bm, k);
            }
            let on_disk = if uninit {
                self.uninit_extra.contains(&(b >> shift))
            } else {
                buf[(k / 8) as usize] & (1 << (k % 8)) != 0
            };
            if found != on_disk {
                self.block_diffs.add(on_disk, b);
                differs = true;
            }
            // Free counts come from the bitmap as it is (e2fsck -n does the same for
            // blocks and inodes: differences were reported just above).
            used += u64::from(on_disk);
        }
        if !uninit {
            if let Some(seed) = self.csum {
                let n = (geo.blocks_per_group >> shift) as usize / 8;
                let ok = d.block_bitmap_checksum_ok(seed, &buf[..n], geo.desc_size as usize);
                if !ok {
                    differs = true;
                    w.report(
                        Problem::new(
                            Code::BitmapChecksum,
                            format!("Block bitmap for group {g} fails checksum"),
                        )
                        .with_group(g),
                    );
                }
            }
            // Past the group's bits the block is all ones: from the last group's end,
            // and in every group from the whole bytes past a group's worth (what
            // libext2fs's bitmap_tail_verify checks as it reads each bitmap; with
            // bigalloc a group's clusters fill a fraction of the block).
            let per_group = (geo.blocks_per_group >> shift) as usize / 8;
            let pad_ok = if g == geo.group_count - 1 {
                (nblocks..(bs * 8) as u64).all(|k| buf[(k / 8) as usize] & (1 << (k % 8)) != 0)
            } else {
                buf[per_group.min(bs)..].iter().all(|&b| b == 0xFF)
            };
            if !pad_ok {
                differs = true;
                if !self.block_padding_reported {
                    self.block_padding_reported = true;
                    w.report(Problem::new(Code::BitmapPadding, "block").with_group(g));
                }
            }
        }
        let free = nblocks - used;
        self.free_blocks_total += free;
        if free != d.free_blocks_count() as u64 {
            differs = true;
            w.report(
                Problem::new(
                    Code::GroupFreeBlocks,
                    format!("{g} ({}, counted={free})", d.free_blocks_count()),
                )
                .with_group(g),
            );
        }
        if differs {
            self.found.block_bitmaps.insert(g, found_bm);
        }
    }

    /// Group `g`'s inode bitmap against the inodes found; its padding and checksum, the
    /// group's free inode and directory counts.
    fn check_inode_bitmap(&mut self, w: &mut Worker, g: u32) {
        let (ctx, geo) = (self.ctx, self.ctx.geo);
        let d = ctx.fs.group(g);
        let buf = &mut self.buf;
        let iuninit = ctx.bitmap_uninit(g, BG_INODE_UNINIT);
        let ireadable = !iuninit
            && ctx.valid_block(d.inode_bitmap())
            && ctx.read_block(d.inode_bitmap(), buf).is_ok();
        if iuninit || !ireadable {
            buf.fill(0);
        }
        let (mut iused, mut dirs) = (0u64, 0u64);
        let mut found_bm = vec![0u8; geo.block_size as usize];
        // (As for the block bitmap: one that cannot be read is written anew.)
        let mut differs = !iuninit && !ireadable;
        for k in 0..geo.inodes_per_group {
            let ino = g * geo.inodes_per_group + k + 1;
            let kind = ctx.shared.kind(ino);
            let found = ino < geo.first_ino
                || kind != InodeKind::Unused
                || ctx.shared.ea_inodes.get(ino as u64);
            if kind == InodeKind::Used(FileType::Directory) {
                dirs += 1;
            }
            if found {
                set_bit(&mut found_bm, k as u64);
            }
            let on_disk = buf[(k / 8) as usize] & (1 << (k % 8)) != 0;
            if found != on_disk {
                self.inode_diffs.add(on_disk, ino as u64);
                differs = true;
            }
            iused += u64::from(on_disk);
        }
        if !iuninit && !padding_set(buf, geo.inodes_per_group as u64) {
            differs = true;
            w.report(Problem::new(Code::BitmapPadding, "inode").with_group(g));
        }
        if !iuninit {
            if let Some(seed) = self.csum {
                let n = (geo.inodes_per_group / 8) as usize;
                let ok = d.inode_bitmap_checksum_ok(seed, &buf[..n], geo.desc_size as usize);
                if !ok {
                    differs = true;
                    w.report(
                        Problem::new(
                            Code::BitmapChecksum,
                            format!("Inode bitmap for group {g} fails checksum"),
                        )
                        .with_group(g),
                    );
                }
            }
        }
        let ifree = geo.inodes_per_group as u64 - iused;
        self.free_inodes_total += ifree;
        if self.check_group_counts(w, g, ifree, dirs) || differs {
            self.found.inode_bitmaps.insert(g, (found_bm, dirs as u32));
        }
    }

    /// Group `g`'s free inode and directory counts against those counted; true when
    /// either differs.
    fn check_group_counts(&self, w: &mut Worker, g: u32, ifree: u64, dirs: u64) -> bool {
        let d = self.ctx.fs.group(g);
        let wrong = ifree != d.free_inodes_count() as u64 || dirs != d.used_dirs_count() as u64;
        if ifree != d.free_inodes_count() as u64 {
            w.report(
                Problem::new(
                    Code::GroupFreeInodes,
                    format!("{g} ({}, counted={ifree})", d.free_inodes_count()),
                )
                .with_group(g),
            );
        }
        if dirs != d.used_dirs_count() as u64 {
            w.report(
                Problem::new(
                    Code::GroupDirs,
                    format!("{g} ({}, counted={dirs})", d.used_dirs_count()),
                )
                .with_group(g),
            );
        }
        wrong
    }

    /// The bitmap differences over all groups, and the superblock's free totals against
    /// those counted; returns the found summaries of the groups that disagree.
    fn report_totals(self, w: &mut Worker) -> Found {
        let geo = self.ctx.geo;
        let sb = self.ctx.fs.superblock();
        if let Some(s) = self.block_diffs.finish() {
            w.report(Problem::new(
                Code::BlockBitmapDiff,
                s.trim_start().to_string(),
            ));
        }
        if let Some(s) = self.inode_diffs.finish() {
            w.report(Problem::new(
                Code::InodeBitmapDiff,
                s.trim_start().to_string(),
            ));
        }
        // (In blocks; the groups' counts are in clusters.)
        let sb_free = sb.free_blocks_count(geo.is64());
        let free = self.free_blocks_total << geo.cluster_shift;
        if sb_free != free {
            w.report(Problem::new(
                Code::TotalFreeBlocks,
                format!("{sb_free}, counted={free}"),
            ));
        }
        let sb_ifree = sb.s_free_inodes_count() as u64;
        if sb_ifree != self.free_inodes_total {
            w.report(Problem::new(
                Code::TotalFreeInodes,
                format!("{sb_ifree}, counted={}", self.free_inodes_total),
            ));
        }
        self.found
    }
}
