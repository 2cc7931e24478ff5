//! Formatting: geometry from the options, the superblock, metadata placement (flex_bg
//! packing of bitmaps and inode tables), the journal, the reserved inodes, the root and
//! lost+found.

use super::dir::DirEntryIn;
use super::options::{apply_feature_edits, MkfsOptions};
use super::writer::{no_space, Writer, EXTRA_ISIZE};
use crate::alloc::{AllocGeometry, BlockAllocator};
use crate::format::checksum::crc32c_raw;
use crate::format::features::{compat, incompat, ro_compat, Features};
use crate::format::geometry::Geometry;
use crate::format::inode::{JOURNAL_INO, ROOT_INO};
use crate::format::superblock::{Superblock, EXT4_MAGIC};
use crate::journal::superblock::JBD2_SUPERBLOCK_V2;
use crate::journal::{JournalSuperblock, JBD2_MAGIC};
use usfs_dev::Device;
use usfs_fs::{Error, Result, Timestamp};

/// Inode of lost+found.
pub const LOST_FOUND_INO: u32 = 11;
/// log2 of groups per flex group (mke2fs's default 16).
pub const LOG_GROUPS_PER_FLEX: u8 = 4;

fn usage(msg: impl Into<String>) -> Error {
    Error::incompatible(msg.into())
}

/// mke2fs's journal size for a file system of `blocks` blocks (ext2fs_default_journal_size).
pub fn default_journal_blocks(blocks: u64) -> Option<u32> {
    Some(match blocks {
        b if b < 2048 => return None,
        b if b < 32768 => 1024,
        b if b < 256 * 1024 => 4096,
        b if b < 512 * 1024 => 8192,
        b if b < 4096 * 1024 => 16384,
        b if b < 8192 * 1024 => 32768,
        b if b < 16384 * 1024 => 65536,
        b if b < 32768 * 1024 => 131072,
        _ => 262144,
    })
}

fn random_bytes() -> [u8; 16] {
    use std::io::Read;
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(&mut b).is_ok() {
            return b;
        }
    }
    // No /dev/urandom: derive from the clock and the process id.
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let x = t ^ ((std::process::id() as u128) << 64);
    b.copy_from_slice(&x.to_le_bytes());
    b
}

/// A version-4 UUID from 16 random bytes.
fn uuid_v4(mut b: [u8; 16]) -> [u8; 16] {
    b[6] = (b[6] & 0x0F) | 0x40;
    b[8] = (b[8] & 0x3F) | 0x80;
    b
}

/// Formats `dev` (which must read as zeros: a new or truncated image file) as ext4 and
/// returns the writer, holding an empty root directory and lost+found. Call
/// [`Writer::finish`] to write the metadata.
pub fn format(dev: Box<dyn Device>, opts: &MkfsOptions) -> Result<Writer> {
    let features = apply_feature_edits(&opts.features)?;
    let is64 = features.has_incompat(incompat::BIT64);
    let size = opts.size.min(dev.len());
    let bs = opts
        .block_size
        .unwrap_or(if size < 512 << 20 { 1024 } else { 4096 });
    if !bs.is_power_of_two() || !(1024..=65536).contains(&bs) {
        return Err(usage(format!(
            "block size {bs}: must be a power of two from 1024 to 65536"
        )));
    }
    let isz = opts.inode_size;
    if !isz.is_power_of_two() || !(256..=bs.min(1024)).contains(&isz) {
        return Err(usage(format!(
            "inode size {isz}: must be 256, 512 or 1024 (and at most the block size)"
        )));
    }
    let log = bs.trailing_zeros();
    let mut blocks = size / bs as u64;
    let max_blocks = if is64 { 1u64 << 48 } else { u32::MAX as u64 };
    if blocks > max_blocks {
        return Err(usage(format!(
            "{blocks} blocks are too many{}",
            if is64 {
                ""
            } else {
                " without the 64bit feature"
            }
        )));
    }
    let fdb: u64 = if bs == 1024 { 1 } else { 0 };
    let bpg = (bs * 8).min(65528);
    if blocks < 64 + fdb {
        return Err(usage(format!("image too small: {size} bytes")));
    }
    let desc_size: u32 = if is64 { 64 } else { 32 };
    let mut groups = (blocks - fdb).div_ceil(bpg as u64);
    let gdt_blocks = |groups: u64| groups.div_ceil((bs / desc_size) as u64);
    let rem = (blocks - fdb) % bpg as u64;
    if groups > 1 && rem != 0 && rem < 256.max(1 + gdt_blocks(groups) + 50) {
        blocks -= rem;
        groups -= 1;
    }
    if groups > u32::MAX as u64 || 1 + gdt_blocks(groups) >= bpg as u64 / 2 {
        return Err(usage(format!(
            "{groups} block groups need a descriptor table larger than a group (meta_bg is not supported)"
        )));
    }
    let groups = groups as u32;
    // Inodes per group: from -N, else from the bytes-per-inode ratio.
    let ratio = opts.bytes_per_inode.unwrap_or(match size {
        s if s < 512 << 20 => 4096,
        s if s < 4 << 40 => 16384,
        s if s < 16 << 40 => 32768,
        _ => 65536,
    });
    if ratio < bs as u64 / 4 || ratio > 64 << 20 {
        return Err(usage(format!("bytes per inode {ratio} out of range")));
    }
    let want = opts.inodes.unwrap_or((blocks * bs as u64) / ratio).max(16);
    let ipb = bs / isz;
    let unit = ipb.max(8);
    let max_ipg = {
        let by_bits = (65536 - ipb).min(bs * 8) / unit * unit;
        let by_space = (bpg as u64 / 2 * bs as u64 / isz as u64) as u32 / unit * unit;
        by_bits.min(by_space)
    };
    let mut ipg = (want.div_ceil(groups as u64).min(u32::MAX as u64) as u32).div_ceil(unit) * unit;
    ipg = ipg.clamp(unit, max_ipg);
    while groups as u64 * ipg as u64 > u32::MAX as u64 {
        ipg -= unit;
    }
    if opts.inodes.is_some_and(|n| n > groups as u64 * ipg as u64) {
        return Err(usage(format!(
            "{} inodes do not fit: at most {} in {groups} groups",
            opts.inodes.unwrap_or(0),
            groups as u64 * max_ipg as u64
        )));
    }
    let now = Timestamp {
        sec: opts.time.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0)
        }),
        nsec: 0,
    };
    let uuid = opts.uuid.unwrap_or_else(|| uuid_v4(random_bytes()));
    let hash_seed = match opts.uuid {
        // A given UUID makes the whole image reproducible: derive the hash seed from it.
        Some(u) => {
            let mut s = [0u8; 16];
            for (i, c) in s.chunks_exact_mut(4).enumerate() {
                c.copy_from_slice(&crc32c_raw(i as u32, &u).to_le_bytes());
            }
            uuid_v4(s)
        }
        None => uuid_v4(random_bytes()),
    };

    // The superblock.
    let mut sb = Superblock::new(vec![0u8; 1024]).expect("1024 bytes");
    sb.set_s_inodes_count(groups * ipg);
    sb.set_blocks_count(blocks);
    let reserved = (blocks as f64 * opts.reserved_percent / 100.0) as u64;
    if !(0.0..=50.0).contains(&opts.reserved_percent) {
        return Err(usage(format!(
            "reserved percentage {} out of range 0..50",
            opts.reserved_percent
        )));
    }
    sb.set_r_blocks_count(reserved);
    sb.set_s_first_data_block(fdb as u32);
    sb.set_s_log_block_size(log - 10);
    sb.set_s_log_cluster_size(log - 10);
    sb.set_s_blocks_per_group(bpg);
    sb.set_s_clusters_per_group(bpg);
    sb.set_s_inodes_per_group(ipg);
    sb.set_s_wtime(now.sec as u32);
    sb.set_s_wtime_hi((now.sec >> 32) as u8);
    sb.set_s_max_mnt_count(0xFFFF);
    sb.set_s_magic(EXT4_MAGIC);
    sb.set_s_state(1);
    sb.set_s_errors(1);
    sb.set_s_lastcheck(now.sec as u32);
    sb.set_s_lastcheck_hi((now.sec >> 32) as u8);
    sb.set_s_creator_os(0);
    sb.set_s_rev_level(1);
    sb.set_s_first_ino(11);
    sb.set_s_inode_size(isz as u16);
    sb.set_s_feature_compat(features.compat);
    sb.set_s_feature_incompat(features.incompat);
    sb.set_s_feature_ro_compat(features.ro_compat);
    sb.set_s_uuid(&uuid);
    let mut label = [0u8; 16];
    if opts.label.len() > 16 {
        return Err(usage("label longer than 16 bytes"));
    }
    label[..opts.label.len()].copy_from_slice(&opts.label);
    sb.set_s_volume_name(&label);
    sb.set_s_hash_seed(&hash_seed);
    sb.set_s_def_hash_version(1); // half_md4
    sb.set_s_desc_size(if is64 { 64 } else { 0 });
    sb.set_s_default_mount_opts(0x0004 | 0x0008); // user_xattr, acl
    sb.set_s_mkfs_time(now.sec as u32);
    sb.set_s_mkfs_time_hi((now.sec >> 32) as u8);
    sb.set_s_min_extra_isize(EXTRA_ISIZE);
    sb.set_s_want_extra_isize(EXTRA_ISIZE);
    sb.set_s_flags(1); // signed directory hash (x86 char)
    sb.set_s_raid_stride(opts.stride.min(u16::MAX as u32) as u16);
    sb.set_s_raid_stripe_width(opts.stripe_width);
    let flex = features.has_incompat(incompat::FLEX_BG);
    sb.set_s_log_groups_per_flex(if flex { LOG_GROUPS_PER_FLEX } else { 0 });
    if features.has_ro_compat(ro_compat::METADATA_CSUM) {
        sb.set_s_checksum_type(1);
    }
    if features.has_incompat(incompat::CSUM_SEED) {
        sb.set_s_checksum_seed(crc32c_raw(!0, &uuid));
    }
    let geo = Geometry::new(&sb, dev.len())?;
    let gpf = if flex { 1u32 << LOG_GROUPS_PER_FLEX } else { 1 };

    let ageo = AllocGeometry {
        first_data_block: fdb,
        blocks_count: blocks,
        blocks_per_group: bpg,
        groups_per_flex: gpf,
        stripe: if opts.stripe_width > 0 {
            opts.stripe_width
        } else {
            opts.stride
        },
    };
    let head: Vec<u32> = (0..groups)
        .map(|g| {
            if geo.group_has_super(g) {
                (1 + geo.gdt_blocks()).min(geo.group_blocks(g))
            } else {
                0
            }
        })
        .collect();
    let balloc = BlockAllocator::new(ageo, head);
    let mut w = Writer::new(dev, sb, geo, balloc, gpf, now);
    // The last group is always initialised (mke2fs does the same).
    w.blocks.load(groups - 1);
    place_group_metadata(&mut w, gpf)?;
    for ino in 1..w.geo.first_ino {
        w.inodes
            .reserve(ino, ino == ROOT_INO)
            .map_err(Error::corrupt)?;
        w.init_inode(ino);
    }
    if features.has_compat(compat::HAS_JOURNAL) {
        let jb = opts.journal_blocks.or(default_journal_blocks(blocks));
        match jb {
            Some(jb) => make_journal(&mut w, jb, &features)?,
            None => {
                let f = w.sb.s_feature_compat() & !compat::HAS_JOURNAL;
                w.sb.set_s_feature_compat(f);
                w.geo.features.compat = f;
            }
        }
    }
    w.root_owner = opts.root_owner;
    make_root_and_lost_found(&mut w, opts.root_owner.unwrap_or((0, 0)))?;
    Ok(w)
}

/// Places every group's block bitmap, inode bitmap and inode table: with flex_bg, those
/// of a flex group are packed at the start of its first group (all block bitmaps, then
/// all inode bitmaps, then all inode tables), as mke2fs lays them out.
fn place_group_metadata(w: &mut Writer, gpf: u32) -> Result<()> {
    let groups = w.geo.group_count;
    let itb =
        (w.geo.inodes_per_group as u64 * w.geo.inode_size as u64 / w.geo.block_size as u64) as u32;
    for f in 0..groups.div_ceil(gpf) {
        let first = f * gpf;
        let last = (first + gpf).min(groups);
        let mut goal = w.geo.group_first_block(first);
        while w.blocks.is_used(goal) {
            goal += 1;
        }
        let place = |w: &mut Writer, goal: &mut u64, len: u32| -> Result<u64> {
            let (s, l) = w.alloc_meta(*goal, len)?;
            if l < len {
                return Err(no_space(
                    "group metadata",
                    format!("no run of {len} blocks"),
                ));
            }
            *goal = s + l as u64;
            Ok(s)
        };
        for g in first..last {
            let b = place(w, &mut goal, 1)?;
            w.descs[g as usize].set_block_bitmap(b);
        }
        for g in first..last {
            let b = place(w, &mut goal, 1)?;
            w.descs[g as usize].set_inode_bitmap(b);
        }
        for g in first..last {
            let b = place(w, &mut goal, itb)?;
            w.descs[g as usize].set_inode_table(b);
        }
    }
    Ok(())
}

/// An empty, clean jbd2 journal in inode 8: `blocks` contiguous blocks where possible,
/// starting in the flex group at the middle of the file system.
fn make_journal(w: &mut Writer, blocks: u32, features: &Features) -> Result<()> {
    let gpf = w.groups_per_flex();
    let mut g = w.geo.group_count.saturating_sub(1) / 2;
    if w.geo.group_count > gpf {
        g = g / gpf * gpf;
    }
    let mut goal = w.geo.group_first_block(g);
    while w.blocks.is_used(goal) && goal + 1 < w.geo.blocks_count {
        goal += 1;
    }
    let mut maps = Vec::new();
    let mut done = 0u32;
    while done < blocks {
        let (s, l) = w.alloc_meta(
            goal,
            (blocks - done).min(crate::alloc::blocks::MAX_EXTENT_LEN),
        )?;
        maps.push(crate::alloc::Mapping {
            lblk: done as u64,
            pblk: s,
            len: l,
        });
        done += l;
        goal = s + l as u64;
    }
    let bs = w.geo.block_size;
    let mut jsb = JournalSuperblock::new(vec![0u8; bs as usize]).expect("block >= 1024");
    jsb.set_h_magic(JBD2_MAGIC);
    jsb.set_h_blocktype(JBD2_SUPERBLOCK_V2);
    jsb.set_s_blocksize(bs);
    jsb.set_s_maxlen(blocks);
    jsb.set_s_first(1);
    jsb.set_s_sequence(1);
    jsb.set_s_uuid(w.sb.s_uuid());
    jsb.set_s_nr_users(1);
    w.write_blocks(maps[0].pblk, jsb.bytes())?;
    let _ = features;
    let now = w.now;
    let isz = w.geo.inode_size as usize;
    {
        let mut i = w.inode_mut(JOURNAL_INO);
        i.set_i_mode(0o100600);
        i.set_i_links_count(1);
        i.set_size(blocks as u64 * bs as u64);
        i.set_times(now, now, now, now, isz);
    }
    w.set_extents(JOURNAL_INO, &maps)?;
    // The superblock keeps a copy of the journal's i_block and size.
    let ji = w.inode(JOURNAL_INO);
    let mut jnl = [0u8; 68];
    jnl[..60].copy_from_slice(ji.i_block());
    jnl[60..64].copy_from_slice(&ji.i_size_high().to_le_bytes());
    jnl[64..68].copy_from_slice(&ji.i_size_lo().to_le_bytes());
    w.sb.set_s_jnl_blocks(&jnl);
    w.sb.set_s_jnl_backup_type(1);
    w.sb.set_s_journal_inum(JOURNAL_INO);
    Ok(())
}

/// Number of blocks mke2fs gives lost+found: 16 KiB, at least two blocks, at most 12.
fn lost_found_blocks(bs: u32) -> u32 {
    (16384 / bs).clamp(2, 12)
}

fn make_root_and_lost_found(w: &mut Writer, owner: (u32, u32)) -> Result<()> {
    let now = w.now;
    let isz = w.geo.inode_size as usize;
    {
        let mut r = w.inode_mut(ROOT_INO);
        r.set_i_mode(0o040755);
        r.set_uid(owner.0);
        r.set_gid(owner.1);
        r.set_i_links_count(3);
        r.set_times(now, now, now, now, isz);
    }
    w.inodes
        .reserve(LOST_FOUND_INO, true)
        .map_err(Error::corrupt)?;
    w.init_inode(LOST_FOUND_INO);
    {
        let mut l = w.inode_mut(LOST_FOUND_INO);
        l.set_i_mode(0o040700);
        l.set_i_links_count(2);
        l.set_times(now, now, now, now, isz);
    }
    let n = lost_found_blocks(w.geo.block_size);
    w.write_dir(LOST_FOUND_INO, ROOT_INO, &[], n, false)?;
    Ok(())
}

/// The entry of lost+found in the root directory.
pub fn lost_found_entry() -> DirEntryIn {
    DirEntryIn {
        name: b"lost+found".to_vec(),
        ino: LOST_FOUND_INO,
        file_type: 2,
    }
}
