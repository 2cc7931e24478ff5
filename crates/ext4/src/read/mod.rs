//! Reading an ext4 image: opening (superblock, descriptors), inodes, block mapping,
//! directories, extended attributes, and the [`FileSystem`](usfs_fs::FileSystem) impl.

mod describe;
pub(crate) mod dir;
pub(crate) mod fs_impl;
pub(crate) mod htree;
pub(crate) mod inode;
mod journal;
pub(crate) mod readdir;
pub use journal::replay_journal;
pub(crate) mod map;
pub(crate) mod xattr;

use crate::format::features::{self, incompat, ro_compat};
use crate::format::geometry::Geometry;
use crate::format::group_desc::GroupDesc;
use crate::format::superblock::{Superblock, EXT4_MAGIC, SUPERBLOCK_OFFSET};
use usfs_dev::Device;
use usfs_fs::{Error, Result};

/// A read-only ext2/3/4 file system on a device.
pub struct Ext4 {
    pub(crate) dev: Box<dyn Device>,
    /// The superblock (the read-write volume keeps it current).
    pub(crate) sb: Superblock<Vec<u8>>,
    pub(crate) geo: Geometry,
    /// Every group descriptor (the read-write volume keeps them current).
    pub(crate) groups: Vec<GroupDesc<[u8; 64]>>,
    /// The metadata checksum seed when metadata_csum is on.
    pub(crate) csum_seed: Option<u32>,
}

impl Ext4 {
    /// Opens the file system on `dev`: reads and checks the superblock and every group
    /// descriptor. Unsupported features give [`Error::Incompatible`] naming them. A
    /// journal that needs recovery is replayed in memory (the device is not written):
    /// the file system reads as after the kernel's or e2fsck's recovery.
    pub fn open(dev: Box<dyn Device>) -> Result<Ext4> {
        if needs_recovery(&*dev) {
            return Ext4::open_recovering(dev);
        }
        let (fs, issues) = Ext4::open_inner(dev, true, false)?;
        debug_assert!(issues.is_empty());
        Ok(fs)
    }

    /// Opens for checking: checksum and location problems of the superblock and the group
    /// descriptors are returned instead of failing (the checker reports them). Only a
    /// superblock whose geometry makes no sense at all is an error. A journal that needs
    /// recovery is refused ([`Error::Incompatible`] "needs_recovery"): replay it first.
    pub fn open_for_check(dev: Box<dyn Device>) -> Result<(Ext4, Vec<OpenIssue>)> {
        Ext4::open_inner(dev, false, false)
    }

    /// Opens; `strict` fails on checksum and location problems instead of listing them,
    /// `recovering` accepts needs_recovery (the first open of a replay in memory).
    fn open_inner(
        dev: Box<dyn Device>,
        strict: bool,
        recovering: bool,
    ) -> Result<(Ext4, Vec<OpenIssue>)> {
        let mut issues = Vec::new();
        let mut raw = vec![0u8; 1024];
        dev.read_at(&mut raw, SUPERBLOCK_OFFSET).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                Error::corrupt("image too small to hold an ext4 superblock")
            } else {
                Error::Io(e)
            }
        })?;
        let sb = Superblock::new(raw).expect("1024 bytes");
        if sb.s_magic() != EXT4_MAGIC {
            return Err(Error::corrupt(format!(
                "bad superblock magic {:#06x} (expected 0xef53)",
                sb.s_magic()
            )));
        }
        let f = features::Features {
            compat: sb.s_feature_compat(),
            incompat: sb.s_feature_incompat(),
            ro_compat: sb.s_feature_ro_compat(),
        };
        let metadata_csum = f.has_ro_compat(ro_compat::METADATA_CSUM);
        if metadata_csum {
            if sb.s_checksum_type() != 1 {
                return Err(Error::incompatible(format!(
                    "metadata checksum type {} (only crc32c)",
                    sb.s_checksum_type()
                )));
            }
            let want = sb.compute_checksum();
            if sb.s_checksum() != want {
                if strict {
                    return Err(Error::corrupt(format!(
                        "superblock checksum {:#010x} does not match contents ({want:#010x})",
                        sb.s_checksum()
                    )));
                }
                issues.push(OpenIssue::SuperblockChecksum {
                    stored: sb.s_checksum(),
                    computed: want,
                });
            }
        }
        check_features(&f, recovering)?;
        let geo = Geometry::new(&sb, dev.len())?;
        let csum_seed = metadata_csum.then(|| {
            if f.has_incompat(incompat::CSUM_SEED) {
                sb.s_checksum_seed()
            } else {
                crate::format::checksum::crc32c_raw(!0, sb.s_uuid())
            }
        });
        let mut fs = Ext4 {
            dev,
            sb,
            geo,
            groups: Vec::new(),
            csum_seed,
        };
        fs.groups = fs.load_groups(strict, &mut issues)?;
        Ok((fs, issues))
    }

    /// The superblock as read.
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

    /// Reads block `blk` into `buf` (one block long, or a multiple for a run).
    pub(crate) fn read_block_into(&self, blk: u64, buf: &mut [u8], what: &str) -> Result<()> {
        let nblocks = (buf.len() as u64) >> self.geo.block_size_log;
        if blk == 0
            || blk
                .checked_add(nblocks)
                .is_none_or(|e| e > self.geo.blocks_count)
        {
            return Err(Error::corrupt(format!(
                "{what}: block {blk} outside the file system (0..{})",
                self.geo.blocks_count
            )));
        }
        self.dev.read_at(buf, blk << self.geo.block_size_log)?;
        Ok(())
    }

    /// Reads block `blk` into a new buffer.
    pub(crate) fn read_block(&self, blk: u64, what: &str) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.geo.block_size as usize];
        self.read_block_into(blk, &mut buf, what)?;
        Ok(buf)
    }

    fn load_groups(
        &self,
        strict: bool,
        issues: &mut Vec<OpenIssue>,
    ) -> Result<Vec<GroupDesc<[u8; 64]>>> {
        let g = &self.geo;
        let ds = g.desc_size as usize;
        let gdt_csum = g.features.has_ro_compat(ro_compat::GDT_CSUM);
        let mut out = Vec::with_capacity(g.group_count as usize);
        let mut cached: Option<(u64, Vec<u8>)> = None;
        for grp in 0..g.group_count {
            let (blk, off) = g.desc_location(grp);
            if cached.as_ref().is_none_or(|(b, _)| *b != blk) {
                cached = Some((blk, self.read_block(blk, "group descriptor table")?));
            }
            let block = &cached.as_ref().expect("just filled").1;
            let desc = GroupDesc::from_raw(&block[off..off + ds]);
            if self.csum_seed.is_some() || gdt_csum {
                let want = desc.compute_checksum(grp, ds, self.csum_seed, self.sb.s_uuid());
                if desc.bg_checksum() != want {
                    if strict {
                        return Err(Error::corrupt(format!(
                            "group {grp} descriptor checksum {:#06x} does not match contents ({want:#06x})",
                            desc.bg_checksum()
                        )));
                    }
                    issues.push(OpenIssue::DescriptorChecksum {
                        group: grp,
                        stored: desc.bg_checksum(),
                        computed: want,
                    });
                }
            }
            let itable_blocks =
                (g.inodes_per_group as u64 * g.inode_size as u64).div_ceil(g.block_size as u64);
            for (what, b, len) in [
                ("block bitmap", desc.block_bitmap(), 1),
                ("inode bitmap", desc.inode_bitmap(), 1),
                ("inode table", desc.inode_table(), itable_blocks),
            ] {
                if b < g.first_data_block + 1 || b.saturating_add(len) > g.blocks_count {
                    if strict {
                        return Err(Error::corrupt(format!(
                            "group {grp}: {what} at block {b} lies outside the file system"
                        )));
                    }
                    issues.push(OpenIssue::MetadataOutside {
                        group: grp,
                        what,
                        block: b,
                    });
                }
            }
            out.push(desc);
        }
        Ok(out)
    }
}

/// A problem found while opening for a check ([`Ext4::open_for_check`]).
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

/// Does the superblock on `dev` say the journal needs recovery? (False when unreadable:
/// the open that follows reports that.)
fn needs_recovery(dev: &dyn Device) -> bool {
    let mut f = [0u8; 4];
    dev.read_at(&mut f, SUPERBLOCK_OFFSET + 0x60).is_ok()
        && u32::from_le_bytes(f) & incompat::RECOVER != 0
}

/// Refuses feature sets the reader cannot serve correctly.
fn check_features(f: &features::Features, recovering: bool) -> Result<()> {
    if f.has_incompat(incompat::RECOVER) && !recovering {
        return Err(Error::incompatible(
            "needs_recovery: the journal holds transactions not yet replayed (run e2fsck, or mount and unmount it once)",
        ));
    }
    if f.has_incompat(incompat::JOURNAL_DEV) {
        return Err(Error::incompatible(
            "journal_dev: this is an external journal device, not a file system",
        ));
    }
    let mut unknown = f.incompat & !features::READ_INCOMPAT_SUPPORTED;
    if recovering {
        unknown &= !incompat::RECOVER;
    }
    if unknown != 0 {
        let names = features::Features {
            incompat: unknown,
            ..Default::default()
        }
        .names();
        return Err(Error::incompatible(names.join(", ")));
    }
    let refused = f.ro_compat & features::READ_RO_COMPAT_REFUSED;
    if refused != 0 {
        let names = features::Features {
            ro_compat: refused,
            ..Default::default()
        }
        .names();
        return Err(Error::incompatible(names.join(", ")));
    }
    Ok(())
}
