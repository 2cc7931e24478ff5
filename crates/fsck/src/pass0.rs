//! Pass 0: what opening found (superblock and descriptor checksums, misplaced tables),
//! group descriptor sanity, the journal superblock; and marking every block of file-system
//! metadata (superblocks, descriptor tables, reserved GDT, bitmaps, inode tables) as used
//! before pass 1 claims file blocks.

use crate::ctx::Ctx;
use crate::problem::{Code, Problem};
use usfs_ext4::format::features::{compat, incompat};
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use usfs_ext4::OpenIssue;

/// Converts what opening found into problems (on a file system of geometry `geo`).
pub(crate) fn open_issues(issues: &[OpenIssue], geo: &Geometry) -> Vec<Problem> {
    let mut bad_groups = Vec::new();
    let mut out = Vec::new();
    for i in issues {
        match i {
            OpenIssue::SuperblockChecksum { stored, computed } => {
                out.push(Problem::new(
                    Code::SuperblockChecksum,
                    format!("stored {stored:#010x}, computed {computed:#010x}"),
                ));
            }
            OpenIssue::DescriptorChecksum { group, .. } => bad_groups.push(*group),
            OpenIssue::MetadataOutside { group, what, block } if missing(geo, *group, *block) => {
                let kind = if *what == "block bitmap" { 1 } else { 2 };
                out.push(
                    Problem::new(Code::GroupMetadataMissing, "")
                        .with_group(*group)
                        .values(kind, 0),
                );
            }
            OpenIssue::MetadataOutside { group, what, block } => {
                let p = Problem::new(
                    Code::GroupMetadataLocation,
                    format!(
                        "The {what} for group {group} is not in the filesystem (block {block})"
                    ),
                )
                .with_group(*group);
                // Relocated (found: 1 block bitmap, 2 inode bitmap, 3 inode table).
                out.push(match *what {
                    "block bitmap" => p.values(1, 0),
                    "inode bitmap" => p.values(2, 0),
                    _ => p.values(3, 0),
                });
            }
        }
    }
    if !bad_groups.is_empty() {
        let list: Vec<String> = bad_groups.iter().map(u32::to_string).collect();
        out.push(
            Problem::new(
                Code::GroupDescChecksum,
                format!("groups {}", list.join(", ")),
            )
            .with_group(bad_groups[0]),
        );
    }
    out
}

/// Is a bitmap of group `g` at `block` one e2fsck's check_super_block takes for missing
/// without asking (block 0, inside the range it accepts: the group's blocks, or with
/// flex_bg the file system's, from first_data_block)? (A block outside is asked about:
/// PR_0_BB_NOT_GROUP.) Inode tables are left to [`Code::GroupMetadataLocation`].
fn missing(geo: &Geometry, g: u32, block: u64) -> bool {
    let flex = geo.features.has_incompat(incompat::FLEX_BG);
    block == 0 && geo.first_data_block == 0 && (flex || g == 0)
}

/// Gives each [`Code::GroupMetadataMissing`] bitmap in `problems` its new block, as
/// e2fsck's new_table_block picks it at the end of pass 1: the first block pass 1 left
/// free in the group (with flex_bg, in its flex group, then anywhere), its last block
/// excepted (ext2fs_get_free_blocks2 stops before it), counted in use from then on. A
/// bitmap with no free block there keeps `expected` 0: the repair's allocator tries,
/// and fails as e2fsck's relocation fails.
pub(crate) fn place_missing(ctx: &Ctx, problems: &mut [Problem]) {
    let geo = ctx.geo;
    for p in problems.iter_mut() {
        let (Code::GroupMetadataMissing, Some(g)) = (p.code, p.group()) else {
            continue;
        };
        let (first, last) = if geo.features.has_incompat(incompat::FLEX_BG) {
            let per = 1u32 << ctx.fs.superblock().s_log_groups_per_flex().min(31);
            let last_g = (g | (per - 1)).min(geo.group_count - 1);
            (
                geo.group_first_block(g / per * per),
                last_block(geo, last_g),
            )
        } else {
            (geo.group_first_block(g), last_block(geo, g))
        };
        let flex = geo.features.has_incompat(incompat::FLEX_BG);
        let free = |from: u64, to: u64| (from..to).find(|&b| !ctx.shared.block_used(b));
        let anywhere = || free(geo.first_data_block, geo.blocks_count);
        let Some(b) = free(first, last).or_else(|| flex.then(anywhere).flatten()) else {
            continue;
        };
        ctx.shared.claim_block(b);
        let what = if p.found() == Some(2) {
            "inode bitmap"
        } else {
            "block bitmap"
        };
        *p = Problem::new(
            Code::GroupMetadataMissing,
            format!("Relocating group {g}'s {what} to {b}..."),
        )
        .with_group(g)
        .values(p.found().unwrap_or(1), b);
    }
}

/// The last block of group `g`.
fn last_block(geo: &Geometry, g: u32) -> u64 {
    geo.group_first_block(g) + geo.group_blocks(g) as u64 - 1
}

/// Group descriptor sanity and metadata marking.
pub(crate) fn check(ctx: &Ctx) -> Vec<Problem> {
    let mut out = Vec::new();
    let geo = ctx.geo;
    let itable_blocks =
        (geo.inodes_per_group as u64 * geo.inode_size as u64).div_ceil(geo.block_size as u64);
    let csums = ctx.fs.csum_seed().is_some()
        || geo
            .features
            .has_ro_compat(usfs_ext4::format::features::ro_compat::GDT_CSUM);
    let super_or_desc: std::collections::HashSet<u64> = (0..geo.group_count)
        .flat_map(|g| metadata_blocks_of_group(ctx, g))
        .collect();
    // (Conflicts are between blocks, as e2fsck's sub-cluster bitmap of this stage
    // sees them; the shared bitmap is per cluster.)
    let mut marked = crate::ranges::Ranges::default();
    for &b in &super_or_desc {
        ctx.shared.claim_block(b);
        marked.insert(b, 1);
    }
    for g in 0..geo.group_count {
        let d = ctx.fs.group(g);
        // e2fsck's mark_table_blocks order: the inode table, then the bitmaps.
        for (kind, what, b, n) in [
            (3, "inode table", d.inode_table(), itable_blocks),
            (1, "block bitmap", d.block_bitmap(), 1),
            (2, "inode bitmap", d.inode_bitmap(), 1),
        ] {
            if !ctx.valid_block(b) || !ctx.valid_block(b + n - 1) {
                continue;
            }
            // Over a superblock, a descriptor copy or another table (e2fsck's
            // PR_1_*_CONFLICT): relocated, a table with its contents.
            if marked.overlaps(b, n) {
                out.push(
                    Problem::new(
                        Code::GroupMetadataLocation,
                        format!("Group {g}'s {what} at {b} conflicts with some other fs block"),
                    )
                    .with_group(g)
                    .values(kind, b),
                );
                continue;
            }
            for k in 0..n {
                ctx.shared.claim_block(b + k);
            }
            marked.insert(b, n);
        }
        if csums {
            if d.itable_unused() > geo.inodes_per_group || d.free_inodes_count() < d.itable_unused()
            {
                out.push(
                    Problem::new(
                        Code::GroupUnusedInodes,
                        format!(
                            "Group {g} has an invalid unused inodes count {}",
                            d.itable_unused()
                        ),
                    )
                    .with_group(g),
                );
            }
            if g == geo.group_count - 1 && d.has_flag(BG_BLOCK_UNINIT) {
                out.push(Problem::new(Code::LastGroupBlockUninit, "").with_group(g));
            }
        } else if d.has_flag(BG_INODE_UNINIT)
            || d.has_flag(BG_BLOCK_UNINIT)
            || d.itable_unused() != 0
        {
            // (e2fsck's PR_0_GDT_UNINIT: an unused-inodes count left by a feature turned
            // off counts too.)
            out.push(
                Problem::new(
                    Code::GroupUnusedInodes,
                    format!("Group descriptor {g} marked uninitialized without feature set"),
                )
                .with_group(g),
            );
        }
    }
    if geo.features.has_compat(compat::HAS_JOURNAL) {
        out.extend(crate::journal::check(ctx.fs));
    }
    out.extend(crate::backup_gdt::check(ctx));
    out.extend(check_quota_inodes(ctx));
    out.extend(check_resize_feature(ctx));
    if ctx.fs.superblock().s_last_orphan() != 0 {
        out.push(Problem::new(
            Code::OrphanList,
            format!(
                "Orphan inode list starts at inode {} (not cleanly unmounted)",
                ctx.fs.superblock().s_last_orphan()
            ),
        ));
    }
    out
}

/// The superblock copy, descriptor-table blocks and reserved GDT blocks group `g` holds.
pub(crate) fn metadata_blocks_of_group(ctx: &Ctx, g: u32) -> Vec<u64> {
    ctx.geo
        .group_base_meta(g, ctx.fs.superblock().s_reserved_gdt_blocks() as u32)
}

/// e2fsck's check_resize_inode, its first part: resize_inode may not go with meta_bg;
/// without it the reserved GDT block count and the resize inode's map are zero.
fn check_resize_feature(ctx: &Ctx) -> Vec<Problem> {
    let (sb, f) = (ctx.fs.superblock(), &ctx.geo.features);
    if f.has_compat(compat::RESIZE_INODE) {
        if f.has_incompat(usfs_ext4::format::features::incompat::META_BG) {
            return vec![Problem::new(Code::ResizeInodeMetaBg, "")];
        }
        return Vec::new();
    }
    let mapped = ctx
        .fs
        .read_inode_raw(7)
        .is_ok_and(|r| r.i_block().iter().any(|&b| b != 0));
    let mut out = Vec::new();
    if sb.s_reserved_gdt_blocks() != 0 {
        out.push(Problem::new(
            Code::ResizeInodeNotClear,
            format!(
                "Filesystem does not have resize_inode enabled, but s_reserved_gdt_blocks is {}; should be zero",
                sb.s_reserved_gdt_blocks()
            ),
        ));
    }
    if mapped {
        out.push(
            Problem::new(
                Code::ResizeInodeNotClear,
                "Resize_inode not enabled, but the resize inode is non-zero",
            )
            .with_ino(7),
        );
    }
    out
}

/// The superblock's quota inode numbers: a reserved inode other than the quota ones (3
/// and 4), or a number past the inode count, is invalid (e2fsck's rule).
fn check_quota_inodes(ctx: &Ctx) -> Vec<Problem> {
    let [usr, grp, prj] = crate::quota::inodes(ctx);
    [("user", usr), ("group", grp), ("project", prj)]
        .into_iter()
        .enumerate()
        .filter(|&(_, (_, ino))| crate::quota::invalid_inode(ctx, ino))
        .map(|(kind, (what, ino))| {
            // (found: the quota type, 0 user, 1 group, 2 project; the fix sets it to 0.)
            Problem::new(
                Code::QuotaInode,
                format!("Invalid {what} quota inode {ino}"),
            )
            .values(kind as u64, 0)
        })
        .collect()
}
