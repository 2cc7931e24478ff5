//! The ext2/3/4 superblock: 1024 bytes at byte offset 1024 of the device (backups at the
//! start of some block groups; see [`super::geometry`]).

use super::checksum::crc32c_raw;

/// Byte offset of the primary superblock.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// `s_magic` of every ext2/3/4 file system.
pub const EXT4_MAGIC: u16 = 0xEF53;
/// Offset of `s_checksum`.
pub const SB_CHECKSUM_OFFSET: usize = 0x3FC;
/// `s_state` bit: cleanly unmounted (EXT2_VALID_FS).
pub const STATE_VALID_FS: u16 = 0x1;
/// `s_state` bit: errors detected (EXT2_ERROR_FS).
pub const STATE_ERROR_FS: u16 = 0x2;

usfs_fs::layout! {
    /// The ext4 superblock (struct ext4_super_block), 1024 bytes at byte 1024 of the
    /// device. Block counts are split into `_lo`/`_hi` halves; the `_hi` halves are only
    /// meaningful with the 64bit feature.
    pub struct Superblock[1024] {
        /// Total inode count.
        s_inodes_count / set_s_inodes_count: u32 @ 0x00,
        /// Total block count, low 32 bits.
        s_blocks_count_lo / set_s_blocks_count_lo: u32 @ 0x04,
        /// Blocks reserved for the superuser, low 32 bits.
        s_r_blocks_count_lo / set_s_r_blocks_count_lo: u32 @ 0x08,
        /// Free block count, low 32 bits.
        s_free_blocks_count_lo / set_s_free_blocks_count_lo: u32 @ 0x0C,
        /// Free inode count.
        s_free_inodes_count / set_s_free_inodes_count: u32 @ 0x10,
        /// First data block: 1 for 1 KiB blocks (the superblock's block), else 0.
        s_first_data_block / set_s_first_data_block: u32 @ 0x14,
        /// Block size is 2 ^ (10 + s_log_block_size).
        s_log_block_size / set_s_log_block_size: u32 @ 0x18,
        /// Cluster size is 2 ^ (10 + s_log_cluster_size) with bigalloc, else = block size.
        s_log_cluster_size / set_s_log_cluster_size: u32 @ 0x1C,
        /// Blocks per group.
        s_blocks_per_group / set_s_blocks_per_group: u32 @ 0x20,
        /// Clusters per group (= blocks per group without bigalloc).
        s_clusters_per_group / set_s_clusters_per_group: u32 @ 0x24,
        /// Inodes per group.
        s_inodes_per_group / set_s_inodes_per_group: u32 @ 0x28,
        /// Last mount time (seconds since the epoch, low 32 bits).
        s_mtime / set_s_mtime: u32 @ 0x2C,
        /// Last write time, low 32 bits.
        s_wtime / set_s_wtime: u32 @ 0x30,
        /// Mounts since the last fsck.
        s_mnt_count / set_s_mnt_count: u16 @ 0x34,
        /// Mounts allowed before an fsck is required (-1: unlimited).
        s_max_mnt_count / set_s_max_mnt_count: u16 @ 0x36,
        /// Magic signature, 0xEF53.
        s_magic / set_s_magic: u16 @ 0x38,
        /// State: 1 cleanly unmounted, 2 errors detected, 4 orphans being recovered.
        s_state / set_s_state: u16 @ 0x3A,
        /// Behaviour on errors: 1 continue, 2 remount read-only, 3 panic.
        s_errors / set_s_errors: u16 @ 0x3C,
        /// Minor revision level.
        s_minor_rev_level / set_s_minor_rev_level: u16 @ 0x3E,
        /// Time of the last check, low 32 bits.
        s_lastcheck / set_s_lastcheck: u32 @ 0x40,
        /// Maximum time between checks, seconds.
        s_checkinterval / set_s_checkinterval: u32 @ 0x44,
        /// Creator OS: 0 Linux, 1 Hurd, 2 Masix, 3 FreeBSD, 4 Lites.
        s_creator_os / set_s_creator_os: u32 @ 0x48,
        /// Revision: 0 original (128-byte inodes, first inode 11), 1 dynamic.
        s_rev_level / set_s_rev_level: u32 @ 0x4C,
        /// Default uid for reserved blocks.
        s_def_resuid / set_s_def_resuid: u16 @ 0x50,
        /// Default gid for reserved blocks.
        s_def_resgid / set_s_def_resgid: u16 @ 0x52,
        /// First non-reserved inode (revision 1).
        s_first_ino / set_s_first_ino: u32 @ 0x54,
        /// Size of an inode record in bytes (revision 1).
        s_inode_size / set_s_inode_size: u16 @ 0x58,
        /// Block group holding this superblock (for backups).
        s_block_group_nr / set_s_block_group_nr: u16 @ 0x5A,
        /// Compatible feature flags ([`compat`](super::features::compat)).
        s_feature_compat / set_s_feature_compat: u32 @ 0x5C,
        /// Incompatible feature flags ([`incompat`](super::features::incompat)).
        s_feature_incompat / set_s_feature_incompat: u32 @ 0x60,
        /// Read-only-compatible feature flags ([`ro_compat`](super::features::ro_compat)).
        s_feature_ro_compat / set_s_feature_ro_compat: u32 @ 0x64,
        /// Volume UUID.
        s_uuid / set_s_uuid: [16] @ 0x68,
        /// Volume label, NUL padded.
        s_volume_name / set_s_volume_name: [16] @ 0x78,
        /// Directory where last mounted, NUL padded.
        s_last_mounted / set_s_last_mounted: [64] @ 0x88,
        /// Compression algorithm bitmap (unused).
        s_algorithm_usage_bitmap / set_s_algorithm_usage_bitmap: u32 @ 0xC8,
        /// Blocks to preallocate for files (unused by ext4).
        s_prealloc_blocks / set_s_prealloc_blocks: u8 @ 0xCC,
        /// Blocks to preallocate for directories.
        s_prealloc_dir_blocks / set_s_prealloc_dir_blocks: u8 @ 0xCD,
        /// Reserved GDT blocks for online growth (resize_inode).
        s_reserved_gdt_blocks / set_s_reserved_gdt_blocks: u16 @ 0xCE,
        /// UUID of the journal superblock.
        s_journal_uuid / set_s_journal_uuid: [16] @ 0xD0,
        /// Inode number of the journal file.
        s_journal_inum / set_s_journal_inum: u32 @ 0xE0,
        /// Device number of an external journal.
        s_journal_dev / set_s_journal_dev: u32 @ 0xE4,
        /// Head of the orphan inode list.
        s_last_orphan / set_s_last_orphan: u32 @ 0xE8,
        /// Seed of the htree directory hash, four little-endian u32 words.
        s_hash_seed / set_s_hash_seed: [16] @ 0xEC,
        /// Default hash version for directories: 0 legacy, 1 half_md4, 2 tea.
        s_def_hash_version / set_s_def_hash_version: u8 @ 0xFC,
        /// How `s_jnl_blocks` backs up the journal inode (1: a copy of i_block + size).
        s_jnl_backup_type / set_s_jnl_backup_type: u8 @ 0xFD,
        /// Group descriptor size with the 64bit feature (32 otherwise).
        s_desc_size / set_s_desc_size: u16 @ 0xFE,
        /// Default mount options.
        s_default_mount_opts / set_s_default_mount_opts: u32 @ 0x100,
        /// First metablock group with meta_bg.
        s_first_meta_bg / set_s_first_meta_bg: u32 @ 0x104,
        /// File-system creation time, low 32 bits.
        s_mkfs_time / set_s_mkfs_time: u32 @ 0x108,
        /// Backup of the journal inode's i_block (15 words), i_size_high and i_size.
        s_jnl_blocks / set_s_jnl_blocks: [68] @ 0x10C,
        /// Total block count, high 32 bits.
        s_blocks_count_hi / set_s_blocks_count_hi: u32 @ 0x150,
        /// Reserved block count, high 32 bits.
        s_r_blocks_count_hi / set_s_r_blocks_count_hi: u32 @ 0x154,
        /// Free block count, high 32 bits.
        s_free_blocks_count_hi / set_s_free_blocks_count_hi: u32 @ 0x158,
        /// Every inode has at least this many extra bytes.
        s_min_extra_isize / set_s_min_extra_isize: u16 @ 0x15C,
        /// New inodes should reserve this many extra bytes.
        s_want_extra_isize / set_s_want_extra_isize: u16 @ 0x15E,
        /// Flags: 1 signed directory hash, 2 unsigned directory hash, 4 test filesystem.
        s_flags / set_s_flags: u32 @ 0x160,
        /// RAID stride (blocks per disk before moving on).
        s_raid_stride / set_s_raid_stride: u16 @ 0x164,
        /// Multi-mount protection update interval, seconds.
        s_mmp_interval / set_s_mmp_interval: u16 @ 0x166,
        /// Block of the multi-mount protection data.
        s_mmp_block / set_s_mmp_block: u64 @ 0x168,
        /// RAID stripe width (blocks on all data disks).
        s_raid_stripe_width / set_s_raid_stripe_width: u32 @ 0x170,
        /// Groups per flex group is 2 ^ s_log_groups_per_flex.
        s_log_groups_per_flex / set_s_log_groups_per_flex: u8 @ 0x174,
        /// Metadata checksum algorithm: 1 = crc32c.
        s_checksum_type / set_s_checksum_type: u8 @ 0x175,
        /// Encryption level (versioning of encryption).
        s_encryption_level / set_s_encryption_level: u8 @ 0x176,
        /// Padding.
        s_reserved_pad / set_s_reserved_pad: u8 @ 0x177,
        /// KiB written over the file system's lifetime.
        s_kbytes_written / set_s_kbytes_written: u64 @ 0x178,
        /// Inode of the active snapshot (unused upstream).
        s_snapshot_inum / set_s_snapshot_inum: u32 @ 0x180,
        /// Id of the active snapshot.
        s_snapshot_id / set_s_snapshot_id: u32 @ 0x184,
        /// Blocks reserved for the active snapshot.
        s_snapshot_r_blocks_count / set_s_snapshot_r_blocks_count: u64 @ 0x188,
        /// Head of the snapshot list.
        s_snapshot_list / set_s_snapshot_list: u32 @ 0x190,
        /// Errors seen.
        s_error_count / set_s_error_count: u32 @ 0x194,
        /// First error time.
        s_first_error_time / set_s_first_error_time: u32 @ 0x198,
        /// Inode of the first error.
        s_first_error_ino / set_s_first_error_ino: u32 @ 0x19C,
        /// Block of the first error.
        s_first_error_block / set_s_first_error_block: u64 @ 0x1A0,
        /// Function of the first error, NUL padded.
        s_first_error_func / set_s_first_error_func: [32] @ 0x1A8,
        /// Source line of the first error.
        s_first_error_line / set_s_first_error_line: u32 @ 0x1C8,
        /// Last error time.
        s_last_error_time / set_s_last_error_time: u32 @ 0x1CC,
        /// Inode of the last error.
        s_last_error_ino / set_s_last_error_ino: u32 @ 0x1D0,
        /// Source line of the last error.
        s_last_error_line / set_s_last_error_line: u32 @ 0x1D4,
        /// Block of the last error.
        s_last_error_block / set_s_last_error_block: u64 @ 0x1D8,
        /// Function of the last error, NUL padded.
        s_last_error_func / set_s_last_error_func: [32] @ 0x1E0,
        /// Default mount options as a string, NUL padded.
        s_mount_opts / set_s_mount_opts: [64] @ 0x200,
        /// Inode of the user quota file.
        s_usr_quota_inum / set_s_usr_quota_inum: u32 @ 0x240,
        /// Inode of the group quota file.
        s_grp_quota_inum / set_s_grp_quota_inum: u32 @ 0x244,
        /// Overhead blocks/clusters of the file system.
        s_overhead_clusters / set_s_overhead_clusters: u32 @ 0x248,
        /// Groups holding backups with sparse_super2 (two u32).
        s_backup_bgs / set_s_backup_bgs: [8] @ 0x24C,
        /// Encryption algorithms in use.
        s_encrypt_algos / set_s_encrypt_algos: [4] @ 0x254,
        /// Salt for the string2key encryption algorithm.
        s_encrypt_pw_salt / set_s_encrypt_pw_salt: [16] @ 0x258,
        /// Inode of lost+found.
        s_lpf_ino / set_s_lpf_ino: u32 @ 0x268,
        /// Inode of the project quota file.
        s_prj_quota_inum / set_s_prj_quota_inum: u32 @ 0x26C,
        /// crc32c(~0, uuid), stored when the metadata_csum_seed feature is set.
        s_checksum_seed / set_s_checksum_seed: u32 @ 0x270,
        /// High 8 bits of s_wtime.
        s_wtime_hi / set_s_wtime_hi: u8 @ 0x274,
        /// High 8 bits of s_mtime.
        s_mtime_hi / set_s_mtime_hi: u8 @ 0x275,
        /// High 8 bits of s_mkfs_time.
        s_mkfs_time_hi / set_s_mkfs_time_hi: u8 @ 0x276,
        /// High 8 bits of s_lastcheck.
        s_lastcheck_hi / set_s_lastcheck_hi: u8 @ 0x277,
        /// High 8 bits of s_first_error_time.
        s_first_error_time_hi / set_s_first_error_time_hi: u8 @ 0x278,
        /// High 8 bits of s_last_error_time.
        s_last_error_time_hi / set_s_last_error_time_hi: u8 @ 0x279,
        /// errno of the first error.
        s_first_error_errcode / set_s_first_error_errcode: u8 @ 0x27A,
        /// errno of the last error.
        s_last_error_errcode / set_s_last_error_errcode: u8 @ 0x27B,
        /// Filename charset encoding (casefold).
        s_encoding / set_s_encoding: u16 @ 0x27C,
        /// Filename charset encoding flags.
        s_encoding_flags / set_s_encoding_flags: u16 @ 0x27E,
        /// Inode of the orphan file.
        s_orphan_file_inum / set_s_orphan_file_inum: u32 @ 0x280,
        /// Checksum of the superblock: crc32c(~0, bytes 0..0x3FC).
        s_checksum / set_s_checksum: u32 @ 0x3FC,
    }
}

impl<B: AsRef<[u8]>> Superblock<B> {
    /// Block size in bytes (may be absurd on a corrupt image: validate before use).
    pub fn block_size_log(&self) -> u32 {
        self.s_log_block_size().saturating_add(10)
    }

    /// Total blocks (both halves when `is64`).
    pub fn blocks_count(&self, is64: bool) -> u64 {
        join(self.s_blocks_count_lo(), self.s_blocks_count_hi(), is64)
    }

    /// Reserved blocks.
    pub fn r_blocks_count(&self, is64: bool) -> u64 {
        join(self.s_r_blocks_count_lo(), self.s_r_blocks_count_hi(), is64)
    }

    /// Free blocks.
    pub fn free_blocks_count(&self, is64: bool) -> u64 {
        join(
            self.s_free_blocks_count_lo(),
            self.s_free_blocks_count_hi(),
            is64,
        )
    }

    /// The checksum this superblock should carry.
    pub fn compute_checksum(&self) -> u32 {
        crc32c_raw(!0, &self.bytes()[..SB_CHECKSUM_OFFSET])
    }

    /// The volume label as bytes, without padding.
    pub fn label(&self) -> &[u8] {
        trim_nul(self.s_volume_name())
    }

    /// The hash seed as four words.
    pub fn hash_seed(&self) -> [u32; 4] {
        let b = self.s_hash_seed();
        std::array::from_fn(|i| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap()))
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Superblock<B> {
    /// Stores the checksum of the current contents, with metadata_csum (without it the
    /// field is reserved and left as it is, as e2fsprogs leaves it).
    pub fn update_checksum(&mut self) {
        if self.s_feature_ro_compat() & super::features::ro_compat::METADATA_CSUM != 0 {
            let c = self.compute_checksum();
            self.set_s_checksum(c);
        }
    }

    /// Marks the file system checked at `now` (seconds), as e2fsck ends a run that may
    /// write: valid, no errors recorded, mount count 0, last check now.
    pub fn mark_checked(&mut self, now: i64) {
        let s = self.s_state();
        self.set_s_state((s | STATE_VALID_FS) & !STATE_ERROR_FS);
        self.set_s_mnt_count(0);
        self.set_s_lastcheck(now as u32);
        self.set_s_lastcheck_hi((now >> 32) as u8);
    }
}

/// Joins a lo/hi pair; the high half counts only when `is64`.
pub fn join(lo: u32, hi: u32, is64: bool) -> u64 {
    if is64 {
        (hi as u64) << 32 | lo as u64
    } else {
        lo as u64
    }
}

/// The bytes of a NUL-padded field up to the first NUL.
pub fn trim_nul(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Superblock<B> {
    /// Sets the block count (both halves).
    pub fn set_blocks_count(&mut self, n: u64) {
        self.set_s_blocks_count_lo(n as u32);
        self.set_s_blocks_count_hi((n >> 32) as u32);
    }
    /// Sets the reserved block count (both halves).
    pub fn set_r_blocks_count(&mut self, n: u64) {
        self.set_s_r_blocks_count_lo(n as u32);
        self.set_s_r_blocks_count_hi((n >> 32) as u32);
    }
    /// Sets the free block count (both halves).
    pub fn set_free_blocks_count(&mut self, n: u64) {
        self.set_s_free_blocks_count_lo(n as u32);
        self.set_s_free_blocks_count_hi((n >> 32) as u32);
    }
}
