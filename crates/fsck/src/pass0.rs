//! Pass 0: what opening found (superblock and descriptor checksums, misplaced tables),
//! group descriptor sanity, the journal superblock; and marking every block of file-system
//! metadata (superblocks, descriptor tables, reserved GDT, bitmaps, inode tables) as used
//! before pass 1 claims file blocks.

use crate::ctx::Ctx;
use crate::problem::{Code, Problem};
use usfs_ext4::format::features::compat;
use usfs_ext4::format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use usfs_ext4::OpenIssue;

/// Converts what opening found into problems.
pub(crate) fn open_issues(issues: &[OpenIssue]) -> Vec<Problem> {
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
            OpenIssue::MetadataOutside { group, what, block } => {
                let p = Problem::new(
                    Code::GroupMetadataLocation,
                    format!(
                        "The {what} for group {group} is not in the filesystem (block {block})"
                    ),
                )
                .group(*group);
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
            .group(bad_groups[0]),
        );
    }
    out
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
    for &b in &super_or_desc {
        ctx.shared.claim_block(b);
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
            if (0..n).any(|k| ctx.shared.blocks.get(b + k)) {
                out.push(
                    Problem::new(
                        Code::GroupMetadataLocation,
                        format!("Group {g}'s {what} at {b} conflicts with some other fs block"),
                    )
                    .group(g)
                    .values(kind, b),
                );
                continue;
            }
            for k in 0..n {
                ctx.shared.claim_block(b + k);
            }
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
                    .group(g),
                );
            }
        } else if d.has_flag(BG_INODE_UNINIT) || d.has_flag(BG_BLOCK_UNINIT) {
            out.push(
                Problem::new(
                    Code::GroupUnusedInodes,
                    format!("Group {g} has uninit flags without group descriptor checksums"),
                )
                .group(g),
            );
        }
    }
    if geo.features.has_compat(compat::HAS_JOURNAL) {
        out.extend(check_journal(ctx));
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
            .ino(7),
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

/// The journal inode and superblock: an inode too short or unreadable is unusable
/// (e2fsck's PR_0_JOURNAL_BAD_INODE: deleted and made anew by a repair); a superblock
/// without the magic or a known type is corrupt.
fn check_journal(ctx: &Ctx) -> Vec<Problem> {
    use usfs_fs::FileSystem;
    let ino = ctx.fs.superblock().s_journal_inum();
    if ino == 0 {
        // External journal: nothing here to check.
        return Vec::new();
    }
    let bad_inode = |why: String| vec![Problem::new(Code::JournalBad, why).ino(ino).values(1, 0)];
    let mut sb = vec![0u8; ctx.geo.block_size as usize];
    match ctx.fs.read_at(ino as u64, 0, &mut sb) {
        Ok(n) if n == sb.len() => {
            let magic = u32::from_be_bytes(sb[0..4].try_into().unwrap());
            let btype = u32::from_be_bytes(sb[4..8].try_into().unwrap());
            // (e2fsck_journal_load: no magic, and the journal is as good as none.)
            if magic != 0xC03B_3998 {
                return bad_inode(format!("Superblock has an invalid journal (inode {ino})"));
            }
            let at = ctx.fs.journal_map().ok().and_then(|m| m.fs_block(0));
            let nr_users = u32::from_be_bytes(sb[0x40..0x44].try_into().unwrap());
            if let (4, 2.., Some(blk)) = (btype, nr_users, at) {
                return vec![Problem::new(Code::JournalClearV2, "").ino(ino).block(blk)];
            }
            journal_superblock(ctx, ino, &sb, at)
        }
        Ok(_) => bad_inode("Journal is too short".into()),
        // Deleted only when e2fsck would find the inode itself unusable (read raw, as
        // e2fsck reads it: not in use or not a regular file, with no copy of its map
        // in the superblock); a read this reader refuses for other reasons (an inode
        // in a group's unused area) has no fix.
        Err(e) if journal_inode_unusable(ctx, ino) => {
            bad_inode(format!("Journal inode is invalid: {e}"))
        }
        Err(e) => {
            vec![Problem::new(Code::JournalBad, format!("Journal inode is invalid: {e}")).ino(ino)]
        }
    }
}

/// The journal superblock `sb` (block 0 of journal inode `ino`, at block `at`) as
/// e2fsck's e2fsck_journal_load judges it: corrupt (a log block's type, a bad checksum
/// or block size, longer than its file) is written anew (found 2: e2fsck's "Journal
/// superblock is corrupt"); a version or features it does not know stop the repair
/// (found 3: e2fsck aborts).
fn journal_superblock(ctx: &Ctx, ino: u32, sb: &[u8], at: Option<u64>) -> Vec<Problem> {
    let bs = ctx.geo.block_size;
    let size = ctx.fs.read_inode_raw(ino).map_or(0, |r| r.size());
    let blocks = (size / bs as u64).min(u32::MAX as u64) as u32;
    match usfs_ext4::journal::JournalInfo::load(sb, bs, blocks) {
        Ok(_) => Vec::new(),
        Err(usfs_fs::Error::Corrupt(c)) => {
            let p = Problem::new(
                Code::JournalBad,
                format!("Journal superblock is corrupt ({})", c.detail),
            )
            .ino(ino)
            .values(2, blocks as u64);
            vec![match at {
                Some(blk) => p.block(blk),
                None => p,
            }]
        }
        Err(e) => vec![
            Problem::new(Code::JournalBad, format!("Journal superblock: {e}"))
                .ino(ino)
                .values(3, 0),
        ],
    }
}

/// Is journal inode `ino` unusable as e2fsck's e2fsck_get_journal reads it: not in use
/// or not a regular file, and no backup of its map in the superblock that e2fsck could
/// use instead (1.47 reads the backup as a block map: an extent tree there is no use)?
fn journal_inode_unusable(ctx: &Ctx, ino: u32) -> bool {
    let Ok(raw) = ctx.fs.read_inode_raw(ino) else {
        return true;
    };
    let usable = raw.i_links_count() != 0 && raw.i_mode() & 0o170000 == 0o100000;
    let sb = ctx.fs.superblock();
    let backup = sb.s_jnl_blocks();
    let extent_backup =
        u16::from_le_bytes([backup[0], backup[1]]) == usfs_ext4::format::extent::EXTENT_MAGIC;
    !usable && (sb.s_jnl_backup_type() != 1 || extent_backup)
}
