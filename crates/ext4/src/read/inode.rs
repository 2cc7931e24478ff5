//! Loading inodes from the inode tables, with checksum and sanity checks.

use super::Ext4;
use crate::format::features::ro_compat;
use crate::format::group_desc::BG_INODE_UNINIT;
use crate::format::inode::{flags, Inode};
use usfs_fs::{Error, FileType, Result, Structure};

/// An inode read from disk, with its number.
pub(crate) struct LoadedInode {
    /// Inode number.
    pub ino: u32,
    /// The record (padded view).
    pub raw: Inode<Vec<u8>>,
}

impl LoadedInode {
    /// The file type from `i_mode`.
    pub(crate) fn file_type(&self) -> Result<FileType> {
        FileType::from_mode(self.raw.i_mode() as u32).ok_or_else(|| {
            Error::corrupt(
                Structure::Inode,
                format!("inode {}: invalid mode {:#o}", self.ino, self.raw.i_mode()),
            )
            .with_ino(self.ino)
        })
    }

    /// Is an `i_flags` bit set?
    pub(crate) fn has_flag(&self, f: u32) -> bool {
        self.raw.has_flag(f)
    }
}

impl Ext4 {
    /// Converts an [`usfs_fs::Ino`] to an inode number, checking the range.
    pub(crate) fn check_ino(&self, ino: u64) -> Result<u32> {
        if ino == 0 || ino > self.core.geo.inodes_count as u64 {
            return Err(Error::corrupt(
                Structure::InodeTable,
                format!(
                    "inode number {ino} out of range 1..={}",
                    self.core.geo.inodes_count
                ),
            )
            .with_ino(ino));
        }
        Ok(ino as u32)
    }

    /// Byte offset of inode `ino` on the device.
    pub fn inode_offset(&self, ino: u32) -> u64 {
        let g = (ino - 1) / self.core.geo.inodes_per_group;
        let idx = (ino - 1) % self.core.geo.inodes_per_group;
        (self.core.groups[g as usize].inode_table() << self.core.geo.block_size_log)
            + idx as u64 * self.core.geo.inode_size as u64
    }

    /// Reads inode `ino`'s record without judging it (for the checker).
    pub fn read_inode_raw(&self, ino: u32) -> Result<Inode<Vec<u8>>> {
        let ino = self.check_ino(ino as u64)?;
        let mut buf = vec![0u8; self.core.geo.inode_size as usize];
        self.core.dev.read_at(&mut buf, self.inode_offset(ino))?;
        Ok(Inode::from_raw(&buf))
    }

    /// Does inode `ino` pass the reader's checks of an inode in use ([`Ext4::load_inode`]:
    /// range, unused table area, extra size, checksum, mode)? Its map is not read.
    pub fn inode_loads(&self, ino: u32) -> Result<()> {
        self.load_inode(ino as u64).map(|_| ())
    }

    /// Loads an in-use inode: range, uninitialised-table, checksum and mode checks.
    pub(crate) fn load_inode(&self, ino: u64) -> Result<LoadedInode> {
        let ino = self.check_ino(ino)?;
        let g = (ino - 1) / self.core.geo.inodes_per_group;
        let idx = (ino - 1) % self.core.geo.inodes_per_group;
        let desc = &self.core.groups[g as usize];
        let uninit_tracking = self.core.csum_seed.is_some()
            || self.core.geo.features.has_ro_compat(ro_compat::GDT_CSUM);
        if uninit_tracking
            && (desc.has_flag(BG_INODE_UNINIT)
                || idx
                    >= self
                        .core
                        .geo
                        .inodes_per_group
                        .saturating_sub(desc.itable_unused()))
        {
            return Err(Error::corrupt(
                Structure::InodeTable,
                format!(
                "inode {ino} is referenced but lies in the unused part of group {g}'s inode table"
            ),
            )
            .with_ino(ino));
        }
        let raw = self.read_inode_raw(ino)?;
        let isz = self.core.geo.inode_size as usize;
        if isz > 128 {
            let extra = raw.i_extra_isize() as usize;
            if 128 + extra > isz || !extra.is_multiple_of(4) {
                return Err(Error::corrupt(
                    Structure::Inode,
                    format!("inode {ino}: i_extra_isize {extra} invalid"),
                )
                .with_ino(ino));
            }
        }
        if let Some(seed) = self.core.csum_seed {
            if !raw.checksum_ok(seed, ino, isz) {
                return Err(Error::corrupt(
                    Structure::Inode,
                    format!("inode {ino}: checksum does not match"),
                )
                .with_ino(ino));
            }
        }
        let inode = LoadedInode { ino, raw };
        if inode.raw.i_mode() == 0 || (inode.raw.i_links_count() == 0 && inode.raw.i_dtime() != 0) {
            return Err(Error::corrupt(
                Structure::Inode,
                format!("inode {ino} is referenced but not in use"),
            )
            .with_ino(ino));
        }
        inode.file_type()?;
        // Logical block numbers are 32 bits: no file extends past 2^32 blocks.
        let max_size = (1u64 << 32) << self.core.geo.block_size_log;
        if inode.raw.size() > max_size {
            return Err(Error::corrupt(
                Structure::Inode,
                format!(
                    "inode {ino}: size {} exceeds the largest possible file ({max_size})",
                    inode.raw.size()
                ),
            )
            .with_ino(ino));
        }
        if inode.has_flag(flags::ENCRYPT) {
            return Err(Error::incompatible(format!(
                "encrypt (inode {ino} is encrypted)"
            )));
        }
        Ok(inode)
    }
}
