//! The core every user of an ext4 image stands on: the device, the superblock, the
//! geometry derived from it, every group descriptor and the metadata checksum seed.
//!
//! The reader ([`Ext4`](crate::Ext4)) holds one, and so the read-write
//! [`Volume`](crate::rw::Volume) and the checker (through
//! [`Ext4::open_for_check`](crate::Ext4::open_for_check)) stand on it; mkfs's bulk
//! [`Writer`](crate::write::Writer) holds one too (mkfs formats, then opens what it
//! formatted). Reading the superblock and the descriptors, computing the checksum seed,
//! and laying out the descriptor table and the superblock copies happen here, once.

use crate::format::features::{incompat, ro_compat, Features};
use crate::format::geometry::Geometry;
use crate::format::group_desc::GroupDesc;
use crate::format::superblock::{Superblock, EXT4_MAGIC, SUPERBLOCK_OFFSET};
use usfs_dev::Device;
use usfs_fs::{Error, Result, Structure};

/// An ext4 image's device with what every reader and writer derives from its superblock.
pub struct VolumeCore {
    /// The device holding the image.
    pub(crate) dev: Box<dyn Device>,
    /// The primary superblock (writers keep it current in memory).
    pub(crate) sb: Superblock<Vec<u8>>,
    /// The geometry derived from the superblock.
    pub(crate) geo: Geometry,
    /// Every group descriptor, in group order (writers keep them current in memory).
    pub(crate) groups: Vec<GroupDesc<[u8; 64]>>,
    /// The metadata checksum seed when metadata_csum is on.
    pub(crate) csum_seed: Option<u32>,
}

/// A problem found while opening for a check ([`Ext4::open_for_check`](crate::Ext4::open_for_check)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenIssue {
    /// The superblock checksum does not match.
    SuperblockChecksum {
        /// Stored value.
        stored: u32,
        /// Value of the contents.
        computed: u32,
    },
    /// A group descriptor checksum does not match.
    DescriptorChecksum {
        /// The group.
        group: u32,
        /// Stored value.
        stored: u16,
        /// Value of the contents.
        computed: u16,
    },
    /// A bitmap or inode table lies outside the file system.
    MetadataOutside {
        /// The group.
        group: u32,
        /// "block bitmap", "inode bitmap" or "inode table".
        what: &'static str,
        /// Where the descriptor says it is.
        block: u64,
    },
}

/// The metadata checksum seed of a file system with superblock `sb` (`None` without
/// metadata_csum): `s_checksum_seed` with csum_seed, else crc32c(~0, uuid).
pub fn checksum_seed<B: AsRef<[u8]>>(sb: &Superblock<B>) -> Option<u32> {
    let f = features_of(sb);
    f.has_ro_compat(ro_compat::METADATA_CSUM).then(|| {
        if f.has_incompat(incompat::CSUM_SEED) {
            sb.s_checksum_seed()
        } else {
            crate::format::checksum::crc32c_raw(!0, sb.s_uuid())
        }
    })
}

/// The feature words of `sb`.
pub fn features_of<B: AsRef<[u8]>>(sb: &Superblock<B>) -> Features {
    Features {
        compat: sb.s_feature_compat(),
        incompat: sb.s_feature_incompat(),
        ro_compat: sb.s_feature_ro_compat(),
    }
}

impl VolumeCore {
    /// A core for the new file system described by `sb` on `dev` (formatting): the
    /// geometry and checksum seed derived from it, every descriptor zero.
    pub fn new(dev: Box<dyn Device>, sb: Superblock<Vec<u8>>) -> Result<VolumeCore> {
        let geo = Geometry::new(&sb, dev.len())?;
        let groups = vec![GroupDesc::from_raw(&[0u8; 64]); geo.group_count as usize];
        Ok(VolumeCore {
            csum_seed: checksum_seed(&sb),
            dev,
            sb,
            geo,
            groups,
        })
    }

    /// Reads the primary superblock of `dev`: its magic, checksum type and checksum
    /// (a bad checksum fails when `strict`, else is listed in `issues`).
    pub(crate) fn read_superblock(
        dev: &dyn Device,
        strict: bool,
        issues: &mut Vec<OpenIssue>,
    ) -> Result<Superblock<Vec<u8>>> {
        let mut raw = vec![0u8; 1024];
        dev.read_at(&mut raw, SUPERBLOCK_OFFSET).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::corrupt(
                    Structure::Superblock,
                    "image too small to hold an ext4 superblock",
                )
            } else {
                Error::Io(e)
            }
        })?;
        let sb = Superblock::new(raw).expect("1024 bytes");
        if sb.s_magic() != EXT4_MAGIC {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!(
                    "bad superblock magic {:#06x} (expected 0xef53)",
                    sb.s_magic()
                ),
            ));
        }
        if features_of(&sb).has_ro_compat(ro_compat::METADATA_CSUM) {
            if sb.s_checksum_type() != 1 {
                return Err(Error::incompatible(format!(
                    "metadata checksum type {} (only crc32c)",
                    sb.s_checksum_type()
                )));
            }
            let want = sb.compute_checksum();
            if sb.s_checksum() != want {
                if strict {
                    return Err(Error::corrupt(
                        Structure::Superblock,
                        format!(
                            "superblock checksum {:#010x} does not match contents ({want:#010x})",
                            sb.s_checksum()
                        ),
                    ));
                }
                issues.push(OpenIssue::SuperblockChecksum {
                    stored: sb.s_checksum(),
                    computed: want,
                });
            }
        }
        Ok(sb)
    }

    /// Opens the file system of superblock `sb` (from [`VolumeCore::read_superblock`]) on
    /// `dev`: derives the geometry and checksum seed and reads every group descriptor.
    /// Checksum and location problems of the descriptors fail when `strict`, else are
    /// listed in `issues`.
    pub(crate) fn open(
        dev: Box<dyn Device>,
        sb: Superblock<Vec<u8>>,
        strict: bool,
        issues: &mut Vec<OpenIssue>,
    ) -> Result<VolumeCore> {
        let mut core = VolumeCore::new(dev, sb)?;
        core.groups = core.read_groups(strict, issues)?;
        Ok(core)
    }

    /// The superblock.
    pub fn superblock(&self) -> &Superblock<Vec<u8>> {
        &self.sb
    }

    /// The derived geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// The descriptor of group `g`.
    pub fn group(&self, g: u32) -> &GroupDesc<[u8; 64]> {
        &self.groups[g as usize]
    }

    /// The device.
    pub fn device(&self) -> &dyn Device {
        &*self.dev
    }

    /// The metadata checksum seed, when metadata_csum is on.
    pub fn csum_seed(&self) -> Option<u32> {
        self.csum_seed
    }

    /// Groups per flex group (1 without flex_bg).
    pub fn groups_per_flex(&self) -> u32 {
        if self.geo.features.has_incompat(incompat::FLEX_BG) {
            1u32 << self.sb.s_log_groups_per_flex().min(31)
        } else {
            1
        }
    }

    /// Reads block `blk` into `buf` (one block long, or a multiple for a run): a block of
    /// `structure`, named `what` in the error if it lies outside the file system.
    pub(crate) fn read_block_into(
        &self,
        blk: u64,
        buf: &mut [u8],
        structure: Structure,
        what: &str,
    ) -> Result<()> {
        let nblocks = (buf.len() as u64) >> self.geo.block_size_log;
        if blk == 0
            || blk
                .checked_add(nblocks)
                .is_none_or(|e| e > self.geo.blocks_count)
        {
            let msg = format!(
                "{what}: block {blk} outside the file system (0..{})",
                self.geo.blocks_count
            );
            return Err(Error::corrupt(structure, msg).with_block(blk));
        }
        self.dev.read_at(buf, blk << self.geo.block_size_log)?;
        Ok(())
    }

    /// Reads block `blk` into a new buffer.
    pub(crate) fn read_block(&self, blk: u64, structure: Structure, what: &str) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.geo.block_size as usize];
        self.read_block_into(blk, &mut buf, structure, what)?;
        Ok(buf)
    }

    /// Reads every group descriptor, checking checksums and metadata locations.
    fn read_groups(
        &self,
        strict: bool,
        issues: &mut Vec<OpenIssue>,
    ) -> Result<Vec<GroupDesc<[u8; 64]>>> {
        let g = &self.geo;
        let ds = g.desc_size as usize;
        let mut out = Vec::with_capacity(g.group_count as usize);
        let mut cached: Option<(u64, Vec<u8>)> = None;
        for grp in 0..g.group_count {
            let (blk, off) = g.desc_location(grp);
            if cached.as_ref().is_none_or(|(b, _)| *b != blk) {
                cached = Some((
                    blk,
                    self.read_block(blk, Structure::GroupDescriptor, "group descriptor table")?,
                ));
            }
            let block = &cached.as_ref().expect("just filled").1;
            let desc = GroupDesc::from_raw(&block[off..off + ds]);
            self.check_group(grp, &desc, strict, issues)?;
            out.push(desc);
        }
        Ok(out)
    }

    /// Do the descriptors carry checksums (metadata_csum, or gdt_csum: uninit_bg)? Only
    /// then do their uninit flags and unused-inode counts mean anything.
    pub fn has_desc_checksums(&self) -> bool {
        self.csum_seed.is_some() || self.geo.features.has_ro_compat(ro_compat::GDT_CSUM)
    }

    /// The checksum descriptor `desc` of group `grp` should carry when it differs from
    /// the one it carries (None: it matches, or descriptors carry no checksums).
    pub fn desc_checksum_mismatch(&self, grp: u32, desc: &GroupDesc<[u8; 64]>) -> Option<u16> {
        let ds = self.geo.desc_size as usize;
        let want = desc.compute_checksum(grp, ds, self.csum_seed, self.sb.s_uuid());
        (self.has_desc_checksums() && desc.bg_checksum() != want).then_some(want)
    }

    /// Checks descriptor `desc` of group `grp`: its checksum and that its bitmaps and
    /// inode table lie inside the file system.
    fn check_group(
        &self,
        grp: u32,
        desc: &GroupDesc<[u8; 64]>,
        strict: bool,
        issues: &mut Vec<OpenIssue>,
    ) -> Result<()> {
        let g = &self.geo;
        if let Some(want) = self.desc_checksum_mismatch(grp, desc) {
            if strict {
                return Err(Error::corrupt(
                    Structure::GroupDescriptor,
                    format!(
                    "group {grp} descriptor checksum {:#06x} does not match contents ({want:#06x})",
                    desc.bg_checksum()
                ),
                ));
            }
            issues.push(OpenIssue::DescriptorChecksum {
                group: grp,
                stored: desc.bg_checksum(),
                computed: want,
            });
        }
        let itable_blocks =
            (g.inodes_per_group as u64 * g.inode_size as u64).div_ceil(g.block_size as u64);
        for (what, b, len) in [
            ("block bitmap", desc.block_bitmap(), 1),
            ("inode bitmap", desc.inode_bitmap(), 1),
            ("inode table", desc.inode_table(), itable_blocks),
        ] {
            if b < g.sb_block() + 1 || b.saturating_add(len) > g.blocks_count {
                if strict {
                    return Err(Error::corrupt(
                        Structure::GroupDescriptor,
                        format!("group {grp}: {what} at block {b} lies outside the file system"),
                    )
                    .with_block(b));
                }
                issues.push(OpenIssue::MetadataOutside {
                    group: grp,
                    what,
                    block: b,
                });
            }
        }
        Ok(())
    }

    /// Puts every descriptor that lives in descriptor-table block `blk` into `block`
    /// (its bytes; the rest of the block is left as it is).
    pub(crate) fn fill_descriptor_block(&self, blk: u64, block: &mut [u8]) {
        let geo = &self.geo;
        let ds = geo.desc_size as usize;
        let per = geo.descs_per_block();
        // Every descriptor in this block (meta_bg: the block holds one meta group's).
        let first_g = (0..geo.group_count)
            .find(|&g| geo.desc_location(g).0 == blk)
            .unwrap_or(0);
        let first_g = first_g / per * per;
        for g in first_g..(first_g + per).min(geo.group_count) {
            let (b, off) = geo.desc_location(g);
            if b == blk {
                block[off..off + ds].copy_from_slice(&self.groups[g as usize].bytes()[..ds]);
            }
        }
    }

    /// The superblock copy group `g` holds: its group number set, the journal's
    /// recovery flag cleared in backups, the checksum updated.
    pub(crate) fn superblock_copy(&self, g: u32) -> Superblock<Vec<u8>> {
        let mut sb = self.sb.clone();
        sb.set_s_block_group_nr(g as u16);
        if g != 0 {
            // Backups say nothing about the journal's recovery state.
            sb.set_s_feature_incompat(sb.s_feature_incompat() & !incompat::RECOVER);
        }
        sb.update_checksum();
        sb
    }

    /// Writes every superblock copy and, after each, the descriptor table (primary and
    /// backups; not meta_bg). Used when a whole file system is written at once.
    pub(crate) fn write_superblocks_and_descriptors(&self) -> Result<()> {
        let geo = &self.geo;
        if geo.features.has_incompat(incompat::META_BG) {
            return Err(Error::incompatible(
                "meta_bg: the descriptor table is not written whole",
            ));
        }
        let bs = geo.block_size as usize;
        let (gdt_block, _) = geo.desc_location(0);
        let mut gdt = vec![0u8; geo.gdt_blocks() as usize * bs];
        for (k, block) in gdt.chunks_exact_mut(bs).enumerate() {
            self.fill_descriptor_block(gdt_block + k as u64, block);
        }
        for g in 0..geo.group_count {
            if !geo.group_has_super(g) {
                continue;
            }
            let first = geo.group_first_block(g);
            let sb_at = if g == 0 {
                SUPERBLOCK_OFFSET
            } else {
                first << geo.block_size_log
            };
            self.dev.write_at(self.superblock_copy(g).bytes(), sb_at)?;
            let gdt_at = if g == 0 { gdt_block } else { first + 1 };
            self.dev.write_at(&gdt, gdt_at << geo.block_size_log)?;
        }
        Ok(())
    }
}
