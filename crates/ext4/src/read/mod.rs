//! Reading an ext4 image: opening (superblock, descriptors), inodes, block mapping,
//! directories, extended attributes, and the [`FileSystem`](usfs_fs::FileSystem) impl.

mod describe;
pub(crate) mod dir;
pub(crate) mod fs_impl;
pub(crate) mod htree;
pub(crate) mod inode;
mod journal;
mod quota;
pub(crate) mod readdir;
pub use journal::replay_journal;
pub(crate) mod map;
pub(crate) mod xattr;

use crate::format::features::{self, incompat};
use crate::format::geometry::Geometry;
use crate::format::group_desc::GroupDesc;
use crate::format::superblock::{Superblock, SUPERBLOCK_OFFSET};
pub use crate::volume_core::OpenIssue;
use crate::volume_core::{features_of, VolumeCore};
use usfs_dev::Device;
use usfs_fs::{Error, Result, Structure};

/// A read-only ext2/3/4 file system on a device.
pub struct Ext4 {
    /// The device, superblock, geometry, descriptors and checksum seed (the read-write
    /// volume keeps the superblock and descriptors current).
    pub(crate) core: VolumeCore,
}

impl Ext4 {
    /// Opens the file system on `dev`: reads and checks the superblock and every group
    /// descriptor. Unsupported features give [`Error::Incompatible`] naming them. A
    /// journal that needs recovery is replayed in memory (the device is not written):
    /// the file system reads as after the kernel's or e2fsck's recovery.
    pub fn open(dev: Box<dyn Device>) -> Result<Ext4> {
        let fs = Ext4::open_structure(dev)?;
        // (Names and contents are ciphertext; without the keys there is nothing to show
        // as the kernel shows it. A check or repair reads the structure only.)
        if fs.core.geo.features.has_incompat(incompat::ENCRYPT) {
            return Err(Error::incompatible(
                "encrypt: names and contents are encrypted (usfs has no keys; usfs fsck checks such images)",
            ));
        }
        Ok(fs)
    }

    /// [`Ext4::open`] for a user of the structure only, names and contents aside (a
    /// repair): encrypted images open too.
    pub fn open_structure(dev: Box<dyn Device>) -> Result<Ext4> {
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

    /// [`Ext4::open_for_check`] of an image whose journal may need recovery, without
    /// replaying it (nothing the journal holds is applied): for a check that reads the
    /// image as it is (e2fsck -n) and a repair judging the journal before the replay.
    /// An external journal needing recovery is refused by name (its log is elsewhere).
    pub fn open_unreplayed(dev: Box<dyn Device>) -> Result<(Ext4, Vec<OpenIssue>)> {
        let (fs, issues) = Ext4::open_inner(dev, false, true)?;
        let sb = &fs.core.sb;
        if sb.s_feature_incompat() & incompat::RECOVER != 0 && sb.s_journal_inum() == 0 {
            fs.journal_map()?;
        }
        Ok((fs, issues))
    }

    /// Opens; `strict` fails on checksum and location problems instead of listing them,
    /// `recovering` accepts needs_recovery (the first open of a replay in memory).
    fn open_inner(
        dev: Box<dyn Device>,
        strict: bool,
        recovering: bool,
    ) -> Result<(Ext4, Vec<OpenIssue>)> {
        let mut issues = Vec::new();
        let sb = VolumeCore::read_superblock(&*dev, strict, &mut issues)?;
        check_features(&features_of(&sb), recovering)?;
        let core = VolumeCore::open(dev, sb, strict, &mut issues)?;
        Ok((Ext4 { core }, issues))
    }

    /// The shared core: device, superblock, geometry, descriptors, checksum seed.
    pub fn core(&self) -> &VolumeCore {
        &self.core
    }

    /// The superblock as read.
    pub fn superblock(&self) -> &Superblock<Vec<u8>> {
        self.core.superblock()
    }

    /// The derived geometry.
    pub fn geometry(&self) -> &Geometry {
        self.core.geometry()
    }

    /// The descriptor of group `g`.
    pub fn group(&self, g: u32) -> &GroupDesc<[u8; 64]> {
        self.core.group(g)
    }

    /// The device.
    pub fn device(&self) -> &dyn Device {
        self.core.device()
    }

    /// The metadata checksum seed, when metadata_csum is on.
    pub fn csum_seed(&self) -> Option<u32> {
        self.core.csum_seed()
    }

    /// Reads block `blk` of `structure` into `buf` (one block long, or a multiple for a
    /// run).
    pub(crate) fn read_block_into(
        &self,
        blk: u64,
        buf: &mut [u8],
        structure: Structure,
        what: &str,
    ) -> Result<()> {
        self.core.read_block_into(blk, buf, structure, what)
    }

    /// Reads block `blk` of `structure` into a new buffer.
    pub(crate) fn read_block(&self, blk: u64, structure: Structure, what: &str) -> Result<Vec<u8>> {
        self.core.read_block(blk, structure, what)
    }
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
