//! Where the volume's operations meet the per-structure mutators: block maps
//! ([`BlockMap`]: extent trees and indirect maps), directories ([`DirEdit`] over a
//! [`DirFile`] of the directory's inode) and the xattr block reference of an inode.

use super::blockmap::BlockMap;
use super::dir_edit::{DirEdit, HashParams};
use super::inode::InodeRec;
use super::meta::{DirFile, Freed, Meta};
use super::volume::Volume;
use crate::format::inode::flags;
use crate::format::xattr::{block_checksum, XattrBlockHeader, BLOCK_CHECKSUM_OFFSET};
use usfs_fs::{Error, FileType, Result, Structure};

/// One run of a file's block map (the walkers' own type).
pub(crate) type MapRun = crate::walk::Mapped;

/// Runs `f` on the block map of `rec`, then stores the changed `i_block` and counts the
/// tree blocks it allocated or freed in i_blocks.
fn with_map<T>(
    m: &mut dyn Meta,
    rec: &mut InodeRec,
    f: impl FnOnce(&mut BlockMap, &mut dyn Meta) -> Result<T>,
) -> Result<T> {
    let mut ib: [u8; 60] = *rec.raw.i_block();
    let extents = rec.raw.has_flag(flags::EXTENTS);
    let mut bm = BlockMap::new(rec.ino, rec.raw.i_generation(), &mut ib, extents);
    let out = f(&mut bm, m);
    let meta = bm.meta_blocks;
    rec.raw.set_i_block(&ib);
    rec.add_blocks(meta, m.geo().block_size);
    out
}

/// The run of `rec`'s map holding logical block `lblk`.
fn lookup(m: &dyn Meta, rec: &InodeRec, lblk: u64) -> Result<MapRun> {
    let mut ib: [u8; 60] = *rec.raw.i_block();
    let extents = rec.raw.has_flag(flags::EXTENTS);
    BlockMap::new(rec.ino, rec.raw.i_generation(), &mut ib, extents).lookup(m, lblk)
}

/// A directory's blocks as the directory mutator sees them: its inode's block map.
struct VolDir<'a> {
    rec: &'a mut InodeRec,
    /// Block size in bytes.
    bs: u64,
}

impl DirFile for VolDir<'_> {
    fn ino(&self) -> u32 {
        self.rec.ino
    }
    fn generation(&self) -> u32 {
        self.rec.raw.i_generation()
    }
    fn nblocks(&self) -> u64 {
        self.rec.raw.size() / self.bs
    }
    fn pblk(&mut self, m: &mut dyn Meta, lblk: u64) -> Result<u64> {
        let r = lookup(m, self.rec, lblk)?;
        match r.pblk {
            Some(p) if !r.unwritten => Ok(p + (lblk - r.lblk)),
            _ => Err(Error::corrupt(
                Structure::Directory,
                format!("directory {}: logical block {lblk} is a hole", self.rec.ino),
            )
            .with_ino(self.rec.ino)
            .with_block(lblk)),
        }
    }
    fn append_block(&mut self, m: &mut dyn Meta) -> Result<u64> {
        let bs = m.geo().block_size as u64;
        let n = self.rec.raw.size() / bs;
        let goal = match n.checked_sub(1).map(|l| self.pblk(m, l)) {
            Some(Ok(p)) => p + 1,
            _ => m
                .geo()
                .group_first_block((self.rec.ino - 1) / m.geo().inodes_per_group),
        };
        let (p, _) = m.alloc_blocks(self.rec.ino, goal, 1)?;
        if let Err(e) = with_map(m, self.rec, |bm, m| bm.insert(m, n, p, 1, false)) {
            m.free_blocks(self.rec.ino, p, 1, Freed::Data)?;
            return Err(e);
        }
        self.rec.add_blocks(1, bs as u32);
        self.rec.raw.set_size((n + 1) * bs);
        Ok(p)
    }
    fn truncate_blocks(&mut self, m: &mut dyn Meta, from: u64) -> Result<()> {
        let bs = m.geo().block_size as u64;
        let freed = with_map(m, self.rec, |bm, m| bm.remove(m, from, u64::MAX))?;
        self.rec.add_blocks(-(freed as i64), bs as u32);
        self.rec.raw.set_size(from * bs);
        Ok(())
    }
    fn is_indexed(&self) -> bool {
        self.rec.raw.has_flag(flags::INDEX)
    }
    fn set_indexed(&mut self, on: bool) {
        let f = self.rec.raw.i_flags();
        self.rec.raw.set_i_flags(if on {
            f | flags::INDEX
        } else {
            f & !flags::INDEX
        });
    }
}

impl Volume {
    /// The run of `rec`'s map holding logical block `lblk`.
    pub(crate) fn map_run(&self, rec: &InodeRec, lblk: u64) -> Result<MapRun> {
        lookup(self, rec, lblk)
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
        with_map(self, rec, |bm, m| {
            bm.insert(m, lblk, pblk, len as u64, unwritten)
        })
    }

    /// Unmaps and frees logical blocks `from..to` (data blocks counted out of i_blocks).
    pub(crate) fn map_punch(&mut self, rec: &mut InodeRec, from: u64, to: u64) -> Result<()> {
        let bs = self.fs.core.geo.block_size;
        let freed = with_map(self, rec, |bm, m| bm.remove(m, from, to))?;
        rec.add_blocks(-(freed as i64), bs);
        Ok(())
    }

    /// Marks `len` blocks at `lblk` written.
    pub(crate) fn map_written(&mut self, rec: &mut InodeRec, lblk: u64, len: u64) -> Result<()> {
        with_map(self, rec, |bm, m| bm.mark_written(m, lblk, len))
    }

    /// Runs `f` on directory `dir` opened for changes.
    pub(crate) fn dir_edit<T>(
        &mut self,
        dir: &mut InodeRec,
        f: impl FnOnce(&mut DirEdit) -> Result<T>,
    ) -> Result<T> {
        if dir.raw.has_flag(flags::INLINE_DATA) {
            return Err(Error::corrupt(
                Structure::InlineData,
                format!("directory {}: block edit of an inline directory", dir.ino),
            )
            .with_ino(dir.ino));
        }
        let hp = HashParams::from_superblock(&self.fs.core.sb);
        let mut d = VolDir {
            rec: dir,
            bs: self.fs.core.geo.block_size as u64,
        };
        let mut e = DirEdit::new(self, &mut d, &hp);
        f(&mut e)
    }

    /// Adds entry `name` -> `ino` to directory `dir`.
    pub(crate) fn dir_add(
        &mut self,
        dir: &mut InodeRec,
        name: &[u8],
        ino: u32,
        ft: FileType,
    ) -> Result<()> {
        if Self::is_inline(dir) {
            if self.inline_dir_add(dir, name, ino, ft)? {
                return Ok(());
            }
            self.uninline_dir(dir)?;
        }
        self.dir_edit(dir, |e| e.add(name, ino, ft))
    }

    /// Removes entry `name` from `dir`; returns the inode it named.
    pub(crate) fn dir_remove(&mut self, dir: &mut InodeRec, name: &[u8]) -> Result<u32> {
        if Self::is_inline(dir) {
            return self.inline_dir_remove(dir, name);
        }
        self.dir_edit(dir, |e| e.remove(name))
    }

    /// Points the existing entry `name` of `dir` at `ino`.
    pub(crate) fn dir_replace(
        &mut self,
        dir: &mut InodeRec,
        name: &[u8],
        ino: u32,
        ft: FileType,
    ) -> Result<()> {
        if Self::is_inline(dir) {
            return self.inline_dir_replace(dir, name, ino, ft);
        }
        self.dir_edit(dir, |e| e.replace(name, ino, ft).map(|_| ()))
    }

    /// The first block of new directory `rec` (`.` and `..` = `parent`).
    pub(crate) fn dir_init(&mut self, rec: &mut InodeRec, parent: u32) -> Result<()> {
        self.dir_edit(rec, |e| e.init(parent))
    }

    /// The first block of directory `rec` that has none: `.`, `..` = `parent`, `ents`.
    pub(crate) fn dir_init_with(
        &mut self,
        rec: &mut InodeRec,
        parent: u32,
        ents: &[super::dir_leaf::Ent],
    ) -> Result<()> {
        self.dir_edit(rec, |e| e.init_with(parent, ents))
    }

    /// Points `..` of directory `rec` at `parent`.
    pub(crate) fn dir_set_dotdot(&mut self, rec: &mut InodeRec, parent: u32) -> Result<()> {
        if Self::is_inline(rec) {
            self.inline_dir_set_dotdot(rec, parent);
            return Ok(());
        }
        self.dir_edit(rec, |e| e.set_dotdot(parent))
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
        if let Some(issue) = crate::walk::xattr::header_issue(&block) {
            return Err(issue.into_error(rec.ino, crate::walk::xattr::Area::Block(blk)));
        }
        let mut h = XattrBlockHeader::new(&mut block[..32]).expect("32 bytes");
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
        rec.add_blocks(-1, self.fs.core.geo.block_size);
        Ok(())
    }
}
