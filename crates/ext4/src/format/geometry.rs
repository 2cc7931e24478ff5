//! Derived layout of a file system: sizes, group count, where descriptors and backups live.
//! Built once from a validated superblock; everything here is plain arithmetic.

use super::features::{compat, incompat, ro_compat, Features};
use super::superblock::Superblock;
use usfs_fs::{Error, Result, Structure};

/// The numbers every reader and writer needs, checked for sanity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Block size in bytes (1 KiB .. 64 KiB).
    pub block_size: u32,
    /// log2 of the block size.
    pub block_size_log: u32,
    /// Total blocks.
    pub blocks_count: u64,
    /// First data block (1 with 1 KiB blocks, else 0; 0 with bigalloc).
    pub first_data_block: u64,
    /// Blocks per group.
    pub blocks_per_group: u32,
    /// log2 of the blocks per cluster (0 without bigalloc, where a cluster is a block).
    pub cluster_shift: u32,
    /// Inodes per group.
    pub inodes_per_group: u32,
    /// Total inodes.
    pub inodes_count: u32,
    /// Inode record size.
    pub inode_size: u32,
    /// First non-reserved inode.
    pub first_ino: u32,
    /// Number of block groups.
    pub group_count: u32,
    /// On-disk group descriptor size (32, or s_desc_size with 64bit).
    pub desc_size: u32,
    /// Features.
    pub features: Features,
    /// First meta block group (meta_bg).
    pub first_meta_bg: u32,
    /// Groups with backups under sparse_super2.
    pub backup_bgs: [u32; 2],
}

impl Geometry {
    /// Derives and validates the geometry of `sb` on a device of `dev_len` bytes.
    pub fn new<B: AsRef<[u8]>>(sb: &Superblock<B>, dev_len: u64) -> Result<Geometry> {
        let features = Features {
            compat: sb.s_feature_compat(),
            incompat: sb.s_feature_incompat(),
            ro_compat: sb.s_feature_ro_compat(),
        };
        let is64 = features.has_incompat(incompat::BIT64);
        let block_size_log = sb.block_size_log();
        if !(10..=16).contains(&block_size_log) {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!("superblock: block size 2^{block_size_log} out of range"),
            ));
        }
        let block_size = 1u32 << block_size_log;
        let blocks_count = sb.blocks_count(is64);
        let first_data_block = sb.s_first_data_block() as u64;
        let blocks_per_group = sb.s_blocks_per_group();
        let inodes_per_group = sb.s_inodes_per_group();
        let (inode_size, first_ino) = if sb.s_rev_level() == 0 {
            (128, 11)
        } else {
            (sb.s_inode_size() as u32, sb.s_first_ino())
        };
        // (With bigalloc a bitmap bit is a cluster: a group is as many clusters as its
        // bitmap has bits, each of 2^k blocks.)
        // (A cluster smaller than a block, or of more than 2^16 blocks, is refused, as
        // the kernel refuses it.)
        let cluster_shift = match features.has_ro_compat(super::features::ro_compat::BIGALLOC) {
            true => sb
                .s_log_cluster_size()
                .saturating_add(10)
                .checked_sub(block_size_log)
                .unwrap_or(u32::MAX),
            false => 0,
        };
        if cluster_shift > 16
            || cluster_shift > 0
                && (!blocks_per_group.is_multiple_of(1 << cluster_shift)
                    || sb.s_clusters_per_group() != blocks_per_group >> cluster_shift)
        {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!(
                    "superblock: {blocks_per_group} blocks per group in {} clusters of 2^{cluster_shift} blocks",
                    sb.s_clusters_per_group()
                ),
            ));
        }
        if blocks_per_group == 0 || blocks_per_group >> cluster_shift > block_size * 8 {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!(
                    "superblock: {blocks_per_group} blocks per group (block size {block_size})"
                ),
            ));
        }
        if inodes_per_group == 0 || inodes_per_group > block_size * 8 {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!("superblock: {inodes_per_group} inodes per group"),
            ));
        }
        if inode_size < 128 || inode_size > block_size || !inode_size.is_power_of_two() {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!("superblock: inode size {inode_size}"),
            ));
        }
        // (Block 1 with 1 KiB blocks, else 0; with bigalloc always 0, the first cluster.)
        let first_expected = u64::from(block_size == 1024 && cluster_shift == 0);
        if first_data_block >= blocks_count || first_data_block != first_expected {
            return Err(Error::corrupt(Structure::Superblock, format!(
                "superblock: first data block {first_data_block} with {blocks_count} blocks of {block_size} bytes"
            )));
        }
        let groups = (blocks_count - first_data_block).div_ceil(blocks_per_group as u64);
        if groups == 0 || groups > u32::MAX as u64 {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!("superblock: {groups} block groups"),
            ));
        }
        let group_count = groups as u32;
        let inodes_count = sb.s_inodes_count();
        if inodes_count as u64 != group_count as u64 * inodes_per_group as u64 {
            return Err(Error::corrupt(Structure::Superblock, format!(
                "superblock: inode count {inodes_count} is not {group_count} groups x {inodes_per_group}"
            )));
        }
        // Every inode needs its record in an inode table on the device: this also bounds
        // what a checker allocates per inode on a hostile superblock.
        if inodes_count as u64 * inode_size as u64 > dev_len {
            return Err(Error::corrupt(Structure::Superblock, format!(
                "superblock: {inodes_count} inodes of {inode_size} bytes do not fit in an image of {dev_len} bytes"
            )));
        }
        if first_ino < 11 || first_ino > inodes_count {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!("superblock: first inode {first_ino}"),
            ));
        }
        let desc_size = if is64 { sb.s_desc_size() as u32 } else { 32 };
        if is64 && (!(64..=1024).contains(&desc_size) || !desc_size.is_power_of_two()) {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!("superblock: descriptor size {desc_size}"),
            ));
        }
        let needed = blocks_count.saturating_mul(block_size as u64);
        if needed > dev_len {
            return Err(Error::corrupt(Structure::Superblock, format!(
                "image is truncated: the superblock says {blocks_count} blocks of {block_size} bytes ({needed} bytes), the image has {dev_len} bytes"
            )));
        }
        let bgs = sb.s_backup_bgs();
        let backup_bgs = [
            u32::from_le_bytes(bgs[0..4].try_into().unwrap()),
            u32::from_le_bytes(bgs[4..8].try_into().unwrap()),
        ];
        Ok(Geometry {
            block_size,
            block_size_log,
            blocks_count,
            first_data_block,
            blocks_per_group,
            cluster_shift,
            inodes_per_group,
            inodes_count,
            inode_size,
            first_ino,
            group_count,
            desc_size,
            features,
            first_meta_bg: sb.s_first_meta_bg(),
            backup_bgs,
        })
    }

    /// Is the 64bit feature on?
    pub fn is64(&self) -> bool {
        self.features.has_incompat(incompat::BIT64)
    }

    /// Descriptors per block.
    pub fn descs_per_block(&self) -> u32 {
        self.block_size / self.desc_size
    }

    /// Blocks of the group descriptor table (without meta_bg).
    pub fn gdt_blocks(&self) -> u32 {
        self.group_count.div_ceil(self.descs_per_block())
    }

    /// First block of group `g`.
    pub fn group_first_block(&self, g: u32) -> u64 {
        self.first_data_block + g as u64 * self.blocks_per_group as u64
    }

    /// Blocks in group `g` (the last may be short).
    pub fn group_blocks(&self, g: u32) -> u32 {
        let start = self.group_first_block(g);
        (self.blocks_count - start).min(self.blocks_per_group as u64) as u32
    }

    /// Group holding block `b`.
    pub fn block_group(&self, b: u64) -> u32 {
        ((b - self.first_data_block) / self.blocks_per_group as u64) as u32
    }

    /// Does group `g` hold a superblock backup (and with it a descriptor table copy)?
    pub fn group_has_super(&self, g: u32) -> bool {
        if g == 0 {
            return true;
        }
        if self.features.has_compat(compat::SPARSE_SUPER2) {
            return g == self.backup_bgs[0] || g == self.backup_bgs[1];
        }
        if g <= 1 || !self.features.has_ro_compat(ro_compat::SPARSE_SUPER) {
            return true;
        }
        if g & 1 == 0 {
            return false;
        }
        is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7)
    }

    /// Descriptor-table blocks stored in group `g` (what the kernel's ext4_bg_num_gdb
    /// counts; reserved GDT blocks are not among them): the whole table (or, with meta_bg,
    /// its blocks before the first meta group) where a superblock copy lives; with meta_bg,
    /// one block in the first, second and last group of each meta group past those.
    pub fn group_gdt_blocks(&self, g: u32) -> u32 {
        let per = self.descs_per_block();
        let meta_bg = self.features.has_incompat(incompat::META_BG);
        if meta_bg && g / per >= self.first_meta_bg {
            let first = g / per * per;
            let last = first + per - 1;
            return u32::from(g == first || g == first + 1 || g == last);
        }
        if !self.group_has_super(g) {
            return 0;
        }
        if meta_bg {
            self.first_meta_bg
        } else {
            self.gdt_blocks()
        }
    }

    /// Blocks of each group's inode table.
    pub fn inode_table_blocks(&self) -> u32 {
        (self.inodes_per_group as u64 * self.inode_size as u64).div_ceil(self.block_size as u64)
            as u32
    }

    /// Blocks the file system's own structures take, as the kernel computes them for
    /// statfs (ext4_calculate_overhead without bigalloc, which since Linux 5.18 ignores
    /// s_overhead_clusters and always counts): the blocks before the first data block,
    /// and per group its superblock copy, descriptor-table blocks, the `reserved_gdt`
    /// blocks kept after a table outside meta_bg (ext4_num_base_meta_blocks), two bitmaps
    /// and the inode table. The journal is not included.
    pub fn metadata_overhead(&self, reserved_gdt: u32) -> u64 {
        let per_group = u64::from(self.inode_table_blocks()) + 2;
        let meta_from = u64::from(self.first_meta_bg) * u64::from(self.descs_per_block());
        let meta_bg = self.features.has_incompat(incompat::META_BG);
        (0..self.group_count).fold(self.first_data_block, |acc, g| {
            let sb = self.group_has_super(g);
            let reserved = if sb && (!meta_bg || u64::from(g) < meta_from) {
                u64::from(reserved_gdt)
            } else {
                0
            };
            acc + per_group + u64::from(sb) + u64::from(self.group_gdt_blocks(g)) + reserved
        })
    }

    /// The blocks of group `g` that hold its superblock copy, descriptor-table blocks and
    /// (outside meta_bg) the `reserved_gdt` blocks after them: what the kernel's
    /// ext4_num_base_meta_blocks counts, as block numbers (in group 0 from
    /// [`Geometry::sb_block`]: block 1 on bigalloc with 1 KiB blocks).
    pub fn group_base_meta(&self, g: u32, reserved_gdt: u32) -> Vec<u64> {
        let mut out = Vec::new();
        let first = match g {
            0 => self.sb_block(),
            _ => self.group_first_block(g),
        };
        let has_super = self.group_has_super(g);
        if has_super {
            out.push(first);
        }
        let per = self.descs_per_block();
        let meta_bg = self.features.has_incompat(incompat::META_BG);
        if !meta_bg || g / per < self.first_meta_bg {
            if has_super {
                let old = if meta_bg {
                    self.first_meta_bg as u64
                } else {
                    self.gdt_blocks() as u64 + reserved_gdt as u64
                };
                out.extend((1..=old).map(|k| first + k));
            }
        } else {
            let r = g % per;
            if r == 0 || r == 1 || r == per - 1 {
                out.push(first + u64::from(has_super));
            }
        }
        out.retain(|&b| b < self.blocks_count);
        out
    }

    /// The block holding the primary superblock: the first data block, but block 1 on
    /// a file system of 1 KiB blocks whose first data block is 0 (bigalloc's first
    /// cluster), as libext2fs's ext2fs_descriptor_block_loc2 places it.
    pub fn sb_block(&self) -> u64 {
        match (self.first_data_block, self.block_size) {
            (0, 1024) => 1,
            (b, _) => b,
        }
    }

    /// Block holding the descriptors of group `g`, and the byte offset inside it.
    pub fn desc_location(&self, g: u32) -> (u64, usize) {
        let per = self.descs_per_block();
        let nr = g / per;
        let off = (g % per * self.desc_size) as usize;
        let meta_bg = self.features.has_incompat(incompat::META_BG);
        if !meta_bg || nr < self.first_meta_bg {
            return (self.sb_block() + 1 + nr as u64, off);
        }
        let first = nr * per;
        if first == 0 {
            return (self.sb_block() + 1, off);
        }
        let has_super = u64::from(self.group_has_super(first));
        (self.group_first_block(first) + has_super, off)
    }
}

fn is_power_of(mut n: u32, base: u32) -> bool {
    while n.is_multiple_of(base) {
        n /= base;
    }
    n == 1
}

#[cfg(test)]
mod tests {
    #[test]
    fn powers() {
        for (n, want) in [
            (1, true),
            (3, true),
            (9, true),
            (25, true),
            (49, true),
            (27, true),
            (15, false),
            (21, false),
        ] {
            assert_eq!(
                super::is_power_of(n, 3) || super::is_power_of(n, 5) || super::is_power_of(n, 7),
                want,
                "{n}"
            );
        }
    }
}
