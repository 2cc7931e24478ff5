//! e2fsck's fallback to the backup group descriptors: when the primary descriptors put a
//! bitmap or inode table outside the file system but the first backup copy (group 1's,
//! after its backup superblock) is sound, the backup is what the file system is read
//! by, and the repair writes it over the primary (e2fsck: "Group descriptors look
//! bad... trying backup blocks..."). The next check then judges the descriptors and the
//! counts the backup holds.

use crate::ctx::Ctx;
use crate::problem::{Code, Problem};
use usfs_ext4::format::features::incompat;
use usfs_ext4::format::group_desc::GroupDesc;

/// The problem when the primary descriptors are bad and group 1's backup is sound
/// (values: the backup's first block, the primary's first block, and, in `group`, the
/// number of descriptor blocks).
pub(crate) fn check(ctx: &Ctx) -> Vec<Problem> {
    let geo = ctx.geo;
    let primary_bad = (0..geo.group_count).any(|g| !locations_ok(ctx, ctx.fs.group(g)));
    if !primary_bad || geo.group_count < 2 || geo.features.has_incompat(incompat::META_BG) {
        return Vec::new();
    }
    if !geo.group_has_super(1) {
        return Vec::new();
    }
    let n = geo.gdt_blocks();
    let backup = geo.group_first_block(1) + 1;
    let primary = geo.sb_block() + 1;
    let bs = geo.block_size as usize;
    let mut raw = vec![0u8; n as usize * bs];
    if ctx
        .fs
        .device()
        .read_at(&mut raw, backup << geo.block_size_log)
        .is_err()
    {
        return Vec::new();
    }
    let ds = geo.desc_size as usize;
    let sound = (0..geo.group_count as usize)
        .all(|g| locations_ok(ctx, &GroupDesc::from_raw(&raw[g * ds..(g + 1) * ds])));
    if !sound {
        return Vec::new();
    }
    vec![Problem::new(
        Code::GroupDescBackup,
        format!(
            "blocks {backup}..{} over {primary}..{}",
            backup + n as u64,
            primary + n as u64
        ),
    )
    .with_group(n)
    .values(backup, primary)]
}

/// Do descriptor `d`'s bitmaps and inode table lie inside the file system?
fn locations_ok(ctx: &Ctx, d: &GroupDesc<[u8; 64]>) -> bool {
    let geo = ctx.geo;
    let itable =
        (geo.inodes_per_group as u64 * geo.inode_size as u64).div_ceil(geo.block_size as u64);
    [
        (d.block_bitmap(), 1),
        (d.inode_bitmap(), 1),
        (d.inode_table(), itable),
    ]
    .iter()
    .all(|&(b, n)| ctx.valid_block(b) && ctx.valid_block(b + n - 1))
}
