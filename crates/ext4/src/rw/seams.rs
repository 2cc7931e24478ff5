//! Where the volume's operations meet the per-structure mutators: block maps
//! (`map_*`), directories (`dir_*`) and the xattr block reference of an inode.

use super::inode::InodeRec;
use super::volume::Volume;
use crate::format::xattr::{block_checksum, XattrBlockHeader, BLOCK_CHECKSUM_OFFSET, XATTR_MAGIC};
use crate::rw::meta::{Freed, Meta};
use usfs_fs::{Error, FileType, Result};

/// One run of a file's block map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MapRun {
    /// First logical block.
    pub lblk: u64,
    /// Blocks in the run (at least 1).
    pub len: u64,
    /// Physical block of `lblk` (None: a hole).
    pub pblk: Option<u64>,
    /// Allocated but unwritten (reads as zeros).
    pub unwritten: bool,
}

impl Volume {
    /// The run of `rec`'s map holding logical block `lblk`.
    pub(crate) fn map_run(&self, rec: &InodeRec, lblk: u64) -> Result<MapRun> {
        let _ = (rec, lblk);
        Err(Error::incompatible("block map mutator not merged yet"))
    }

    /// Maps `len` blocks from `pblk` at logical block `lblk` (a hole).
    pub(crate) fn map_add(
        &mut self,
        rec: &mut InodeRec,
        lblk: u64,
        pblk: u64,
        len: u32,
        unwritten: bool,
    ) -> Result<()> {
        let _ = (rec, lblk, pblk, len, unwritten);
        Err(Error::incompatible("block map mutator not merged yet"))
    }

    /// Unmaps and frees logical blocks `from..to`.
    pub(crate) fn map_punch(&mut self, rec: &mut InodeRec, from: u64, to: u64) -> Result<()> {
        let _ = (rec, from, to);
        Err(Error::incompatible("block map mutator not merged yet"))
    }

    /// Marks `len` blocks at `lblk` written.
    pub(crate) fn map_written(&mut self, rec: &mut InodeRec, lblk: u64, len: u64) -> Result<()> {
        let _ = (rec, lblk, len);
        Err(Error::incompatible("block map mutator not merged yet"))
    }

    /// Adds entry `name` -> `ino` to directory `dir`.
    pub(crate) fn dir_add(
        &mut self,
        dir: &mut InodeRec,
        name: &[u8],
        ino: u32,
        ft: FileType,
    ) -> Result<()> {
        let _ = (dir, name, ino, ft);
        Err(Error::incompatible("directory mutator not merged yet"))
    }

    /// Removes entry `name` from `dir`; returns the inode it named.
    pub(crate) fn dir_remove(&mut self, dir: &mut InodeRec, name: &[u8]) -> Result<u32> {
        let _ = (dir, name);
        Err(Error::incompatible("directory mutator not merged yet"))
    }

    /// Points the existing entry `name` of `dir` at `ino`.
    pub(crate) fn dir_replace(
        &mut self,
        dir: &mut InodeRec,
        name: &[u8],
        ino: u32,
        ft: FileType,
    ) -> Result<()> {
        let _ = (dir, name, ino, ft);
        Err(Error::incompatible("directory mutator not merged yet"))
    }

    /// The first block of new directory `rec` (`.` and `..` = `parent`).
    pub(crate) fn dir_init(&mut self, rec: &mut InodeRec, parent: u32) -> Result<()> {
        let _ = (rec, parent);
        Err(Error::incompatible("directory mutator not merged yet"))
    }

    /// Points `..` of directory `rec` at `parent`.
    pub(crate) fn dir_set_dotdot(&mut self, rec: &mut InodeRec, parent: u32) -> Result<()> {
        let _ = (rec, parent);
        Err(Error::incompatible("directory mutator not merged yet"))
    }

    /// Does directory `rec` hold nothing but `.` and `..`?
    pub(crate) fn dir_is_empty(&self, rec: &InodeRec) -> Result<bool> {
        let l = crate::read::inode::LoadedInode {
            ino: rec.ino,
            raw: rec.raw.clone(),
        };
        let mut empty = true;
        self.fs.for_each_entry(&l, 0, &mut |e| {
            if e.name != b"." && e.name != b".." {
                empty = false;
            }
            empty
        })?;
        Ok(empty)
    }

    /// Drops `rec`'s reference to its xattr block: the block is freed with its last
    /// reference, else its refcount goes down by one.
    pub(crate) fn drop_xattr_block(&mut self, rec: &mut InodeRec) -> Result<()> {
        let blk = rec.raw.file_acl();
        if blk == 0 {
            return Ok(());
        }
        let mut block = self.read_meta(blk)?;
        let mut h = XattrBlockHeader::new(&mut block[..32]).expect("32 bytes");
        if h.h_magic() != XATTR_MAGIC || h.h_blocks() != 1 {
            return Err(Error::corrupt(format!(
                "inode {}: xattr block {blk} has a bad header",
                rec.ino
            )));
        }
        let refs = h.h_refcount();
        if refs <= 1 {
            self.free_blocks(rec.ino, blk, 1, Freed::Metadata)?;
        } else {
            h.set_h_refcount(refs - 1);
            if let Some(seed) = self.csum_seed() {
                block[BLOCK_CHECKSUM_OFFSET..BLOCK_CHECKSUM_OFFSET + 4].fill(0);
                let c = block_checksum(seed, blk, &block);
                block[BLOCK_CHECKSUM_OFFSET..BLOCK_CHECKSUM_OFFSET + 4]
                    .copy_from_slice(&c.to_le_bytes());
            }
            self.write_meta(blk, block)?;
        }
        rec.raw.set_file_acl(0);
        rec.add_blocks(-1, self.fs.geo.block_size);
        Ok(())
    }
}
