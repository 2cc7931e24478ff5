//! e2fsck's fallback to the backup group descriptors: when the primary descriptors fail
//! libext2fs's ext2fs_check_desc (a bitmap or inode table outside the file system, or
//! outside its group without flex_bg, or over a superblock, a descriptor block or
//! another group's table) but the first backup copy (group 1's, after its backup
//! superblock) passes it, the backup is what the file system is read by, and the repair writes it over the primary (e2fsck: "Group descriptors look
//! bad... trying backup blocks..."). The next check then judges the descriptors and the
//! counts the backup holds.

use crate::ctx::Ctx;
use crate::problem::{Code, Problem};
use crate::ranges::Ranges;
use usfs_ext4::format::features::incompat;
use usfs_ext4::format::group_desc::GroupDesc;

/// The problem when the primary descriptors are bad and group 1's backup is sound
/// (values: the backup's first block, the primary's first block, and, in `group`, the
/// number of descriptor blocks).
pub(crate) fn check(ctx: &Ctx) -> Vec<Problem> {
    let geo = ctx.geo;
    let primary_bad = !descs_sound(ctx, |g| ctx.fs.group(g).clone());
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
    let copy = |g: u32| {
        let g = g as usize;
        GroupDesc::from_raw(&raw[g * ds..(g + 1) * ds])
    };
    if !descs_sound(ctx, copy) {
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

/// Do the descriptors `desc(g)` pass ext2fs_check_desc? Each group's block bitmap,
/// inode bitmap and inode table, in that order, must lie in the file system (in the
/// group without flex_bg) and on no block marked before: the superblock and descriptor
/// copies, the reserved descriptor blocks, the tables of the groups before.
fn descs_sound(ctx: &Ctx, desc: impl Fn(u32) -> GroupDesc<[u8; 64]>) -> bool {
    let geo = ctx.geo;
    let itable = geo.inode_table_blocks() as u64;
    let flex = geo.features.has_incompat(incompat::FLEX_BG);
    let mut marked = Ranges::default();
    // (Block 0 too where the superblock is in block 1 of the first cluster, as
    // ext2fs_reserve_super_and_bgd marks it.)
    let below_sb = geo.sb_block() - geo.first_data_block;
    if below_sb > 0 {
        marked.insert(geo.first_data_block, below_sb);
    }
    for g in 0..geo.group_count {
        for b in crate::pass0::metadata_blocks_of_group(ctx, g) {
            if !marked.overlaps(b, 1) {
                marked.insert(b, 1);
            }
        }
    }
    (0..geo.group_count).all(|g| {
        let d = desc(g);
        let (first, last) = match flex {
            true => (geo.first_data_block, geo.blocks_count - 1),
            false => (
                geo.group_first_block(g),
                geo.group_first_block(g) + geo.group_blocks(g) as u64 - 1,
            ),
        };
        [
            (d.block_bitmap(), 1),
            (d.inode_bitmap(), 1),
            (d.inode_table(), itable),
        ]
        .into_iter()
        .all(|(b, n)| {
            let ok = b >= first && b.saturating_add(n - 1) <= last && !marked.overlaps(b, n);
            if ok {
                marked.insert(b, n);
            }
            ok
        })
    })
}
