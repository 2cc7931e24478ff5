//! Formatting: geometry from the options, the superblock, metadata placement (flex_bg
//! packing of bitmaps and inode tables), the journal, the reserved inodes, the root and
//! lost+found, all written: what [`format()`] leaves is a complete empty file system,
//! which mkfs -d then opens ([`Writer::open`]) and fills.

use super::dir::DirEntryIn;
use super::options::{apply_feature_edits, MkfsOptions};
use super::writer::{no_space, Writer, EXTRA_ISIZE};
use crate::alloc::seed::alloc_geometry;
use crate::alloc::{BlockAllocator, InodeAllocator};
use crate::format::checksum::crc32c_raw;
use crate::format::features::{compat, incompat, ro_compat, Features};
use crate::format::inode::{JOURNAL_INO, ROOT_INO};
use crate::format::superblock::{Superblock, EXT4_MAGIC};
use crate::journal::JournalSuperblock;
use crate::volume_core::VolumeCore;
use usfs_dev::Device;
use usfs_fs::{Error, Result, Structure, Timestamp};

/// Inode of lost+found.
pub const LOST_FOUND_INO: u32 = 11;
/// log2 of groups per flex group (mke2fs's default 16).
pub(super) const LOG_GROUPS_PER_FLEX: u8 = 4;

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

/// 16 random bytes (/dev/urandom; the clock and process id without it).
pub(crate) fn random_bytes() -> [u8; 16] {
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

/// Formats `dev` (which must read as zeros: a new or truncated image file) as ext4: writes
/// a complete, empty file system (superblock and backups, descriptors, bitmaps, the used
/// part of the inode tables, the journal, the root directory and lost+found), flushes it,
/// and returns the device. [`Writer::open`] opens the result for filling.
pub fn format(dev: Box<dyn Device>, opts: &MkfsOptions) -> Result<Box<dyn Device>> {
    let features = apply_feature_edits(&opts.features)?;
    let layout = Layout::new(opts, &features, dev.len())?;
    let (now, uuid, hash_seed) = identity(opts);
    let sb = superblock(&layout, &features, opts, now, &uuid, &hash_seed)?;
    let mut w = empty_writer(dev, sb, now)?;
    place_group_metadata(&mut w)?;
    for ino in 1..w.core.geo.first_ino {
        w.inodes
            .reserve(ino, ino == ROOT_INO)
            .map_err(|e| Error::corrupt(Structure::Bitmap, e).with_ino(ino))?;
        w.init_inode(ino);
    }
    if features.has_compat(compat::HAS_JOURNAL) {
        match opts
            .journal_blocks
            .or(default_journal_blocks(layout.blocks))
        {
            Some(jb) => make_journal(&mut w, jb)?,
            None => {
                let f = w.core.sb.s_feature_compat() & !compat::HAS_JOURNAL;
                w.core.sb.set_s_feature_compat(f);
                w.core.geo.features.compat = f;
            }
        }
    }
    make_root_and_lost_found(&mut w, opts.root_owner.unwrap_or((0, 0)))?;
    w.finish()
}

/// The sizes of the file system to make, derived from the options and the device.
struct Layout {
    /// Bytes the options ask for (at most the device's length).
    size: u64,
    /// Block size in bytes.
    block_size: u32,
    /// Blocks in the file system.
    blocks: u64,
    /// First data block (1 with 1 KiB blocks, else 0).
    first_data_block: u64,
    /// Blocks per group.
    blocks_per_group: u32,
    /// Block groups.
    groups: u32,
    /// Inodes per group.
    inodes_per_group: u32,
    /// Inode record size.
    inode_size: u32,
}

impl Layout {
    /// Checks the sizes in `opts` and derives blocks, groups and inodes per group.
    fn new(opts: &MkfsOptions, features: &Features, dev_len: u64) -> Result<Layout> {
        let is64 = features.has_incompat(incompat::BIT64);
        let size = opts.size.min(dev_len);
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
        let blocks = size / bs as u64;
        let max_blocks = if is64 { 1u64 << 48 } else { u32::MAX as u64 };
        if blocks > max_blocks {
            let why = if is64 {
                ""
            } else {
                " without the 64bit feature"
            };
            return Err(usage(format!("{blocks} blocks are too many{why}")));
        }
        let mut l = Layout {
            size,
            block_size: bs,
            blocks,
            first_data_block: if bs == 1024 { 1 } else { 0 },
            blocks_per_group: (bs * 8).min(65528),
            groups: 0,
            inodes_per_group: 0,
            inode_size: isz,
        };
        l.groups = l.block_groups(is64)?;
        l.inodes_per_group = l.inodes_per_group(opts)?;
        Ok(l)
    }

    /// The number of block groups; drops a last group too small to be worth having (as
    /// mke2fs does), which shortens the file system.
    fn block_groups(&mut self, is64: bool) -> Result<u32> {
        let (bs, fdb, bpg) = (
            self.block_size,
            self.first_data_block,
            self.blocks_per_group,
        );
        if self.blocks < 64 + fdb {
            return Err(usage(format!("image too small: {} bytes", self.size)));
        }
        let desc_size: u32 = if is64 { 64 } else { 32 };
        let mut groups = (self.blocks - fdb).div_ceil(bpg as u64);
        let gdt_blocks = |groups: u64| groups.div_ceil((bs / desc_size) as u64);
        let rem = (self.blocks - fdb) % bpg as u64;
        if groups > 1 && rem != 0 && rem < 256.max(1 + gdt_blocks(groups) + 50) {
            self.blocks -= rem;
            groups -= 1;
        }
        if groups > u32::MAX as u64 || 1 + gdt_blocks(groups) >= bpg as u64 / 2 {
            return Err(usage(format!(
                "{groups} block groups need a descriptor table larger than a group (meta_bg is not supported)"
            )));
        }
        Ok(groups as u32)
    }

    /// Inodes per group: from -N, else from the bytes-per-inode ratio, in whole inode
    /// table blocks (at least 8 inodes' worth of bitmap).
    fn inodes_per_group(&self, opts: &MkfsOptions) -> Result<u32> {
        let (bs, isz, groups) = (self.block_size, self.inode_size, self.groups);
        let ratio = opts.bytes_per_inode.unwrap_or(match self.size {
            s if s < 512 << 20 => 4096,
            s if s < 4 << 40 => 16384,
            s if s < 16 << 40 => 32768,
            _ => 65536,
        });
        if ratio < bs as u64 / 4 || ratio > 64 << 20 {
            return Err(usage(format!("bytes per inode {ratio} out of range")));
        }
        let want = opts
            .inodes
            .unwrap_or((self.blocks * bs as u64) / ratio)
            .max(16);
        let ipb = bs / isz;
        let unit = ipb.max(8);
        let max_ipg = {
            let by_bits = (65536 - ipb).min(bs * 8) / unit * unit;
            let by_space =
                (self.blocks_per_group as u64 / 2 * bs as u64 / isz as u64) as u32 / unit * unit;
            by_bits.min(by_space)
        };
        let mut ipg =
            (want.div_ceil(groups as u64).min(u32::MAX as u64) as u32).div_ceil(unit) * unit;
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
        Ok(ipg)
    }
}

/// The creation time, the UUID and the directory hash seed. A given UUID makes the
/// whole image reproducible: the hash seed is then derived from it.
fn identity(opts: &MkfsOptions) -> (Timestamp, [u8; 16], [u8; 16]) {
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
        Some(u) => {
            let mut s = [0u8; 16];
            for (i, c) in s.chunks_exact_mut(4).enumerate() {
                c.copy_from_slice(&crc32c_raw(i as u32, &u).to_le_bytes());
            }
            uuid_v4(s)
        }
        None => uuid_v4(random_bytes()),
    };
    (now, uuid, hash_seed)
}

/// The superblock of the new file system (free counts are set when it is written).
fn superblock(
    l: &Layout,
    features: &Features,
    opts: &MkfsOptions,
    now: Timestamp,
    uuid: &[u8; 16],
    hash_seed: &[u8; 16],
) -> Result<Superblock<Vec<u8>>> {
    let mut sb = Superblock::new(vec![0u8; 1024]).expect("1024 bytes");
    let log = l.block_size.trailing_zeros();
    sb.set_s_inodes_count(l.groups * l.inodes_per_group);
    sb.set_blocks_count(l.blocks);
    if !(0.0..=50.0).contains(&opts.reserved_percent) {
        return Err(usage(format!(
            "reserved percentage {} out of range 0..50",
            opts.reserved_percent
        )));
    }
    sb.set_r_blocks_count((l.blocks as f64 * opts.reserved_percent / 100.0) as u64);
    sb.set_s_first_data_block(l.first_data_block as u32);
    sb.set_s_log_block_size(log - 10);
    sb.set_s_log_cluster_size(log - 10);
    sb.set_s_blocks_per_group(l.blocks_per_group);
    sb.set_s_clusters_per_group(l.blocks_per_group);
    sb.set_s_inodes_per_group(l.inodes_per_group);
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
    sb.set_s_inode_size(l.inode_size as u16);
    sb.set_s_feature_compat(features.compat);
    sb.set_s_feature_incompat(features.incompat);
    sb.set_s_feature_ro_compat(features.ro_compat);
    sb.set_s_uuid(uuid);
    if opts.label.len() > 16 {
        return Err(usage("label longer than 16 bytes"));
    }
    let mut label = [0u8; 16];
    label[..opts.label.len()].copy_from_slice(&opts.label);
    sb.set_s_volume_name(&label);
    sb.set_s_hash_seed(hash_seed);
    sb.set_s_def_hash_version(1); // half_md4
    let is64 = features.has_incompat(incompat::BIT64);
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
        sb.set_s_checksum_seed(crc32c_raw(!0, uuid));
    }
    Ok(sb)
}

/// A writer on the new file system of superblock `sb`: every descriptor zero, every
/// block free but each group's superblock copy and descriptor table, no inode in use;
/// the last group initialised (mke2fs does the same).
fn empty_writer(dev: Box<dyn Device>, sb: Superblock<Vec<u8>>, now: Timestamp) -> Result<Writer> {
    let core = VolumeCore::new(dev, sb)?;
    let geo = &core.geo;
    let head: Vec<u32> = (0..geo.group_count)
        .map(|g| {
            if geo.group_has_super(g) {
                (1 + geo.gdt_blocks()).min(geo.group_blocks(g))
            } else {
                0
            }
        })
        .collect();
    let mut blocks = BlockAllocator::new(alloc_geometry(&core), head);
    blocks.load(geo.group_count - 1);
    let inodes = InodeAllocator::new(
        geo.group_count,
        geo.inodes_per_group,
        core.groups_per_flex(),
    );
    Ok(Writer::new(core, blocks, inodes, now))
}

/// Places every group's block bitmap, inode bitmap and inode table: with flex_bg, those
/// of a flex group are packed at the start of its first group (all block bitmaps, then
/// all inode bitmaps, then all inode tables), as mke2fs lays them out.
fn place_group_metadata(w: &mut Writer) -> Result<()> {
    let gpf = w.groups_per_flex();
    let groups = w.core.geo.group_count;
    let itb = (w.core.geo.inodes_per_group as u64 * w.core.geo.inode_size as u64
        / w.core.geo.block_size as u64) as u32;
    for f in 0..groups.div_ceil(gpf) {
        let first = f * gpf;
        let last = (first + gpf).min(groups);
        let mut goal = w.core.geo.group_first_block(first);
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
            w.core.groups[g as usize].set_block_bitmap(b);
        }
        for g in first..last {
            let b = place(w, &mut goal, 1)?;
            w.core.groups[g as usize].set_inode_bitmap(b);
        }
        for g in first..last {
            let b = place(w, &mut goal, itb)?;
            w.core.groups[g as usize].set_inode_table(b);
        }
    }
    Ok(())
}

/// An empty, clean jbd2 journal in inode 8: `blocks` contiguous blocks where possible,
/// starting in the flex group at the middle of the file system.
fn make_journal(w: &mut Writer, blocks: u32) -> Result<()> {
    let gpf = w.groups_per_flex();
    let mut g = w.core.geo.group_count.saturating_sub(1) / 2;
    if w.core.geo.group_count > gpf {
        g = g / gpf * gpf;
    }
    let mut goal = w.core.geo.group_first_block(g);
    while w.blocks.is_used(goal) && goal + 1 < w.core.geo.blocks_count {
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
    let bs = w.core.geo.block_size;
    let jsb = JournalSuperblock::new_empty(bs, blocks, w.core.sb.s_uuid());
    w.write_blocks(maps[0].pblk, jsb.bytes())?;
    let now = w.now;
    let isz = w.core.geo.inode_size as usize;
    {
        let mut i = w.inode_mut(JOURNAL_INO);
        i.set_i_mode(0o100600);
        i.set_i_links_count(1);
        i.set_size(blocks as u64 * bs as u64);
        i.set_times(now, now, now, now, isz);
    }
    w.set_extents(JOURNAL_INO, &maps)?;
    // The superblock keeps a copy of the journal's i_block and size.
    let jnl = w.inode(JOURNAL_INO).journal_backup();
    w.core.sb.set_s_jnl_blocks(&jnl);
    w.core.sb.set_s_jnl_backup_type(1);
    w.core.sb.set_s_journal_inum(JOURNAL_INO);
    Ok(())
}

/// Number of blocks mke2fs gives lost+found: 16 KiB, at least two blocks, at most 12.
fn lost_found_blocks(bs: u32) -> u32 {
    (16384 / bs).clamp(2, 12)
}

/// lost+found with its blocks, then the root directory (owned by `owner`) holding only
/// lost+found. The root's block comes last, so populate, which gives it back before
/// writing the root anew, leaves no hole behind lost+found.
fn make_root_and_lost_found(w: &mut Writer, owner: (u32, u32)) -> Result<()> {
    let now = w.now;
    let isz = w.core.geo.inode_size as usize;
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
        .map_err(|e| Error::corrupt(Structure::Bitmap, e).with_ino(LOST_FOUND_INO))?;
    w.init_inode(LOST_FOUND_INO);
    {
        let mut l = w.inode_mut(LOST_FOUND_INO);
        l.set_i_mode(0o040700);
        l.set_i_links_count(2);
        l.set_times(now, now, now, now, isz);
    }
    let n = lost_found_blocks(w.core.geo.block_size);
    w.write_dir(LOST_FOUND_INO, ROOT_INO, &[], n, false)?;
    w.write_dir(ROOT_INO, ROOT_INO, &[lost_found_entry()], 1, false)
}

/// The entry of lost+found in the root directory.
pub fn lost_found_entry() -> DirEntryIn {
    DirEntryIn {
        name: b"lost+found".to_vec(),
        ino: LOST_FOUND_INO,
        file_type: 2,
    }
}
