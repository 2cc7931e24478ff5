//! Seeding the allocators from an image's bitmaps: what the read-write volume does on
//! open and mkfs's bulk writer does on the file system it has just formatted.
//!
//! A BLOCK_UNINIT group that holds only its superblock copy and descriptor table (the
//! blocks at its start) stays unloaded, as in a freshly formatted allocator: it is built
//! from that head count when first touched, and a writer leaves it BLOCK_UNINIT if it
//! never is. Other uninitialised groups (holding bitmaps or inode tables of their flex
//! group, or a meta_bg descriptor block not at their start) get the bitmap the kernel
//! computes for them. INODE_UNINIT groups stay unloaded (all free).

use super::{AllocGeometry, BlockAllocator, InodeAllocator};
use crate::format::features::ro_compat;
use crate::format::geometry::Geometry;
use crate::format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use crate::volume_core::VolumeCore;
use std::collections::BTreeMap;
use usfs_fs::{Error, Result, Structure};

/// Are uninitialised groups possible (group descriptor checksums on)?
pub(crate) fn uninit_tracking(geo: &Geometry) -> bool {
    geo.features.has_ro_compat(ro_compat::METADATA_CSUM)
        || geo.features.has_ro_compat(ro_compat::GDT_CSUM)
}

/// The allocation geometry of the file system of `core`.
pub(crate) fn alloc_geometry(core: &VolumeCore) -> AllocGeometry {
    let geo = core.geometry();
    let sb = core.superblock();
    let stripe = if sb.s_raid_stripe_width() != 0 {
        sb.s_raid_stripe_width()
    } else {
        sb.s_raid_stride() as u32
    };
    AllocGeometry {
        first_data_block: geo.first_data_block,
        blocks_count: geo.blocks_count,
        blocks_per_group: geo.blocks_per_group,
        groups_per_flex: core.groups_per_flex(),
        stripe: if stripe < geo.blocks_per_group {
            stripe
        } else {
            0
        },
    }
}

/// The metadata blocks (bitmaps and inode tables of every group) lying in each group.
fn group_meta_runs(core: &VolumeCore) -> Vec<Vec<(u64, u64)>> {
    let geo = core.geometry();
    let itb = geo.inode_table_blocks() as u64;
    let mut runs = vec![Vec::new(); geo.group_count as usize];
    for g in 0..geo.group_count {
        let d = core.group(g);
        for (start, len) in [
            (d.block_bitmap(), 1),
            (d.inode_bitmap(), 1),
            (d.inode_table(), itb),
        ] {
            let mut b = start;
            while b < start + len && b < geo.blocks_count && b >= geo.first_data_block {
                let og = geo.block_group(b);
                let end =
                    (geo.group_first_block(og) + geo.group_blocks(og) as u64).min(start + len);
                runs[og as usize].push((b, end - b));
                b = end;
            }
        }
    }
    runs
}

/// The used blocks of uninitialised group `g` as offsets in it (the kernel's computed
/// bitmap): superblock copy, descriptor and reserved GDT blocks, and any bitmaps or
/// inode tables lying in it.
fn uninit_used(core: &VolumeCore, g: u32, runs: &[(u64, u64)]) -> Vec<u32> {
    let geo = core.geometry();
    let first = geo.group_first_block(g);
    let reserved_gdt = core.superblock().s_reserved_gdt_blocks() as u32;
    let mut used: Vec<u32> = geo
        .group_base_meta(g, reserved_gdt)
        .into_iter()
        .chain(runs.iter().flat_map(|&(s, l)| s..s + l))
        .map(|b| (b - first) as u32)
        .collect();
    used.sort_unstable();
    used.dedup();
    used
}

/// The block allocator with every group's bitmap from the image (uninitialised groups
/// as the module header says). Fails when a bitmap's checksum or free count disagrees
/// with its descriptor.
pub(crate) fn seed_blocks(core: &VolumeCore) -> Result<BlockAllocator> {
    seed_blocks_over(core, &Default::default())
}

/// [`seed_blocks`] with the bitmaps of the groups in `found` taken from it instead of the
/// image (a repair's: what a checker found in use), unchecked against the descriptors.
pub(crate) fn seed_blocks_over(
    core: &VolumeCore,
    found: &BTreeMap<u32, Vec<u8>>,
) -> Result<BlockAllocator> {
    let geo = core.geometry();
    let runs = group_meta_runs(core);
    let uninit = |g: u32| uninit_tracking(geo) && core.group(g).has_flag(BG_BLOCK_UNINIT);
    // An uninitialised group whose used blocks are a prefix stays unloaded with that head.
    let mut head = vec![0u32; geo.group_count as usize];
    let mut computed = vec![None; geo.group_count as usize];
    for g in (0..geo.group_count).filter(|&g| uninit(g)) {
        let used = uninit_used(core, g, &runs[g as usize]);
        if used.iter().enumerate().all(|(k, &b)| b == k as u32) {
            head[g as usize] = used.len() as u32;
        } else {
            computed[g as usize] = Some(used);
        }
    }
    let mut a = BlockAllocator::new(alloc_geometry(core), head);
    let bs = geo.block_size as usize;
    let bpg_bytes = (geo.blocks_per_group / 8) as usize;
    for g in 0..geo.group_count {
        let d = core.group(g);
        if let Some(bm) = found.get(&g) {
            a.load_bitmap(g, bm);
            continue;
        }
        if let Some(used) = &computed[g as usize] {
            let mut bm = vec![0u8; bs];
            for &k in used {
                bm[k as usize / 8] |= 1 << (k % 8);
            }
            a.load_bitmap(g, &bm);
        } else if !uninit(g) {
            let bm = core.read_block(
                d.block_bitmap(),
                Structure::Bitmap,
                &format!("group {g} block bitmap"),
            )?;
            if let Some(seed) = core.csum_seed() {
                if !d.block_bitmap_checksum_ok(seed, &bm[..bpg_bytes], geo.desc_size as usize) {
                    return Err(Error::corrupt(
                        Structure::Bitmap,
                        format!(
                            "group {g}: block bitmap checksum does not match (run e2fsck first)"
                        ),
                    )
                    .with_block(d.block_bitmap()));
                }
            }
            a.load_bitmap(g, &bm);
        }
        if a.group_free(g) != d.free_blocks_count() {
            return Err(Error::corrupt(
                Structure::Bitmap,
                format!(
                "group {g}: {} free blocks in the bitmap, {} in the descriptor (run e2fsck first)",
                a.group_free(g),
                d.free_blocks_count()
            ),
            ));
        }
    }
    Ok(a)
}

/// The inode allocator with every initialised group's bitmap from the image. Fails when
/// a bitmap's checksum or free count disagrees with its descriptor.
pub(crate) fn seed_inodes(core: &VolumeCore) -> Result<InodeAllocator> {
    seed_inodes_over(core, &Default::default())
}

/// [`seed_inodes`] with the bitmaps and directory counts of the groups in `found` taken
/// from it instead of the image, unchecked against the descriptors.
pub(crate) fn seed_inodes_over(
    core: &VolumeCore,
    found: &BTreeMap<u32, (Vec<u8>, u32)>,
) -> Result<InodeAllocator> {
    let geo = core.geometry();
    let mut a = InodeAllocator::new(
        geo.group_count,
        geo.inodes_per_group,
        core.groups_per_flex(),
    );
    let ipg_bytes = (geo.inodes_per_group / 8) as usize;
    for g in 0..geo.group_count {
        let d = core.group(g);
        if let Some((bm, dirs)) = found.get(&g) {
            a.load_group(g, &bm[..ipg_bytes], *dirs);
            continue;
        }
        if d.has_flag(BG_INODE_UNINIT) && uninit_tracking(geo) {
            continue;
        }
        let bm = core.read_block(
            d.inode_bitmap(),
            Structure::Bitmap,
            &format!("group {g} inode bitmap"),
        )?;
        if let Some(seed) = core.csum_seed() {
            if !d.inode_bitmap_checksum_ok(seed, &bm[..ipg_bytes], geo.desc_size as usize) {
                return Err(Error::corrupt(
                    Structure::Bitmap,
                    format!("group {g}: inode bitmap checksum does not match (run e2fsck first)"),
                )
                .with_block(d.inode_bitmap()));
            }
        }
        a.load_group(g, &bm[..ipg_bytes], d.used_dirs_count());
        if a.group_free(g) != d.free_inodes_count() {
            return Err(Error::corrupt(
                Structure::Bitmap,
                format!(
                "group {g}: {} free inodes in the bitmap, {} in the descriptor (run e2fsck first)",
                a.group_free(g),
                d.free_inodes_count()
            ),
            ));
        }
    }
    Ok(a)
}
