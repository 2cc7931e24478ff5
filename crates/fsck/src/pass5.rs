//! Pass 5: group summaries. The on-disk block and inode bitmaps (uninitialised groups
//! read as what the kernel would build for them) against what passes 0-1 found; bitmap
//! checksums and padding; per-group free counts and directory counts; the superblock's
//! totals (which the kernel recomputes: information only).

use crate::ctx::{Ctx, Worker};
use crate::pass0::metadata_blocks_of_group;
use crate::problem::{Code, Problem};
use crate::state::InodeKind;
use usfs_ext4::format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use usfs_fs::FileType;

/// Collects bit differences as e2fsck prints them: ` -(a--b) +c`.
#[derive(Default)]
struct Diffs {
    out: String,
    run: Option<(bool, u64, u64)>,
    count: usize,
}

impl Diffs {
    fn add(&mut self, on_disk: bool, n: u64) {
        self.count += 1;
        if let Some((sign, a, b)) = self.run {
            if sign == on_disk && b + 1 == n {
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

/// Runs pass 5.
pub fn run(ctx: &Ctx, w: &mut Worker) {
    let geo = ctx.geo;
    let bs = geo.block_size as usize;
    let csum = ctx.fs.csum_seed();
    let sb = ctx.fs.superblock();
    let mut buf = vec![0u8; bs];
    // What the on-disk block bitmaps say, with uninitialised groups filled in as the
    // kernel would (their own superblock/descriptor copies and, wherever those lie,
    // their bitmaps and inode table).
    let mut uninit_extra = std::collections::HashSet::new();
    let itable_blocks = (geo.inodes_per_group as u64 * geo.inode_size as u64).div_ceil(bs as u64);
    for g in 0..geo.group_count {
        let d = ctx.fs.group(g);
        if ctx.group_flag(g, BG_BLOCK_UNINIT) {
            uninit_extra.extend(metadata_blocks_of_group(ctx, g));
            uninit_extra.insert(d.block_bitmap());
            uninit_extra.insert(d.inode_bitmap());
            uninit_extra.extend((0..itable_blocks).map(|k| d.inode_table() + k));
        }
    }
    let mut block_diffs = Diffs::default();
    let mut inode_diffs = Diffs::default();
    let (mut free_blocks_total, mut free_inodes_total) = (0u64, 0u64);
    for g in 0..geo.group_count {
        let d = ctx.fs.group(g);
        let first = geo.group_first_block(g);
        let nblocks = geo.group_blocks(g) as u64;
        // Block bitmap.
        let uninit = ctx.group_flag(g, BG_BLOCK_UNINIT);
        let readable = !uninit
            && ctx.valid_block(d.block_bitmap())
            && ctx.read_block(d.block_bitmap(), &mut buf).is_ok();
        if !uninit && !readable {
            buf.fill(0);
        }
        let mut used = 0u64;
        for k in 0..nblocks {
            let b = first + k;
            let found = ctx.shared.blocks.get(b);
            let on_disk = if uninit {
                uninit_extra.contains(&b)
            } else {
                buf[(k / 8) as usize] & (1 << (k % 8)) != 0
            };
            if found != on_disk {
                block_diffs.add(on_disk, b);
            }
            // Free counts come from the bitmap as it is (e2fsck -n does the same for
            // blocks and inodes: differences were reported just above).
            used += u64::from(on_disk);
        }
        if !uninit {
            if let Some(seed) = csum {
                let n = (geo.blocks_per_group / 8) as usize;
                let ok = d.block_bitmap_checksum_ok(seed, &buf[..n], geo.desc_size as usize);
                if !ok {
                    w.report(
                        Problem::new(
                            Code::BitmapChecksum,
                            format!("Block bitmap for group {g} fails checksum"),
                        )
                        .group(g),
                    );
                }
            }
            if g == geo.group_count - 1 && nblocks < (bs * 8) as u64 {
                let pad_ok =
                    (nblocks..(bs * 8) as u64).all(|k| buf[(k / 8) as usize] & (1 << (k % 8)) != 0);
                if !pad_ok {
                    w.report(Problem::new(Code::BitmapPadding, "block").group(g));
                }
            }
        }
        let free = nblocks - used;
        free_blocks_total += free;
        if free != d.free_blocks_count() as u64 {
            w.report(
                Problem::new(
                    Code::GroupFreeBlocks,
                    format!("{g} ({}, counted={free})", d.free_blocks_count()),
                )
                .group(g),
            );
        }

        // Inode bitmap.
        let iuninit = ctx.group_flag(g, BG_INODE_UNINIT);
        let ireadable = !iuninit
            && ctx.valid_block(d.inode_bitmap())
            && ctx.read_block(d.inode_bitmap(), &mut buf).is_ok();
        if iuninit || !ireadable {
            buf.fill(0);
        }
        let (mut iused, mut dirs) = (0u64, 0u64);
        for k in 0..geo.inodes_per_group {
            let ino = g * geo.inodes_per_group + k + 1;
            let kind = ctx.shared.kind(ino);
            let found = ino < geo.first_ino
                || kind != InodeKind::Unused
                || ctx.shared.ea_inodes.get(ino as u64);
            if kind == InodeKind::Used(FileType::Directory) {
                dirs += 1;
            }
            let on_disk = buf[(k / 8) as usize] & (1 << (k % 8)) != 0;
            if found != on_disk {
                inode_diffs.add(on_disk, ino as u64);
            }
            iused += u64::from(on_disk);
        }
        if !iuninit && !padding_set(&buf, geo.inodes_per_group as u64) {
            w.report(Problem::new(Code::BitmapPadding, "inode").group(g));
        }
        if !iuninit {
            if let Some(seed) = csum {
                let n = (geo.inodes_per_group / 8) as usize;
                let ok = d.inode_bitmap_checksum_ok(seed, &buf[..n], geo.desc_size as usize);
                if !ok {
                    w.report(
                        Problem::new(
                            Code::BitmapChecksum,
                            format!("Inode bitmap for group {g} fails checksum"),
                        )
                        .group(g),
                    );
                }
            }
        }
        let ifree = geo.inodes_per_group as u64 - iused;
        free_inodes_total += ifree;
        if ifree != d.free_inodes_count() as u64 {
            w.report(
                Problem::new(
                    Code::GroupFreeInodes,
                    format!("{g} ({}, counted={ifree})", d.free_inodes_count()),
                )
                .group(g),
            );
        }
        if dirs != d.used_dirs_count() as u64 {
            w.report(
                Problem::new(
                    Code::GroupDirs,
                    format!("{g} ({}, counted={dirs})", d.used_dirs_count()),
                )
                .group(g),
            );
        }
    }
    if let Some(s) = block_diffs.finish() {
        w.report(Problem::new(
            Code::BlockBitmapDiff,
            s.trim_start().to_string(),
        ));
    }
    if let Some(s) = inode_diffs.finish() {
        w.report(Problem::new(
            Code::InodeBitmapDiff,
            s.trim_start().to_string(),
        ));
    }
    let sb_free = sb.free_blocks_count(geo.is64());
    if sb_free != free_blocks_total {
        w.report(Problem::new(
            Code::TotalFreeBlocks,
            format!("{sb_free}, counted={free_blocks_total}"),
        ));
    }
    let sb_ifree = sb.s_free_inodes_count() as u64;
    if sb_ifree != free_inodes_total {
        w.report(Problem::new(
            Code::TotalFreeInodes,
            format!("{sb_ifree}, counted={free_inodes_total}"),
        ));
    }
}
