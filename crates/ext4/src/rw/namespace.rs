//! Namespace operations of the read-write volume: create (files, devices, fifos,
//! sockets), mkdir, symlink, link, unlink, rmdir and rename, with the link counts,
//! times and `..` entries the kernel keeps. Each runs inside the running transaction.

use super::inode::InodeRec;
use super::volume::Volume;
use crate::format::features::ro_compat;
use crate::format::inode::{encode_rdev, flags, I_BLOCK_SIZE, ROOT_INO};
use usfs_fs::{Error, FileType, NewNode, RenameFlags, Result, Structure};

/// Links a directory may have before dir_nlink makes it 1 ("many"), as EXT4_LINK_MAX.
const LINK_MAX: u16 = 65000;

/// Checks a name for a new entry (`.` and `..` always exist).
pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    super::dir_edit::check_name(name)?;
    if name == b"." || name == b".." {
        return Err(Error::Exists);
    }
    Ok(())
}

impl Volume {
    /// Loads `dir` and checks it is a directory usfs can change.
    pub(crate) fn load_dir(&self, dir: u32) -> Result<InodeRec> {
        let d = self.inode(dir)?;
        if d.file_type()? != FileType::Directory {
            return Err(Error::NotDir);
        }
        Ok(d)
    }

    /// The inode `name` names in `dir`, if any.
    pub fn find(&self, dir: &InodeRec, name: &[u8]) -> Result<Option<u32>> {
        let l = crate::read::inode::LoadedInode {
            ino: dir.ino,
            raw: dir.raw.clone(),
        };
        match self.fs.dir_lookup(&l, name) {
            Ok(i) => Ok(Some(i)),
            Err(Error::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates `name` in `dir` as a new inode of `node`'s kind (not a directory or
    /// symlink: see [`Volume::mkdir`], [`Volume::symlink`]).
    pub fn create(&mut self, dir: u32, name: &[u8], node: NewNode) -> Result<u32> {
        if matches!(node.file_type, FileType::Directory | FileType::Symlink) {
            return Err(Error::Invalid);
        }
        let (mut d, mut rec) = self.new_entry(dir, name, &node)?;
        match node.file_type {
            FileType::Regular => self.init_map(&mut rec),
            FileType::CharDevice | FileType::BlockDevice => {
                let (major, minor) = (
                    ((node.rdev >> 8) & 0xFFF) as u32 | ((node.rdev >> 32) & !0xFFF) as u32,
                    (node.rdev & 0xFF) as u32 | ((node.rdev >> 12) & !0xFF) as u32,
                );
                let mut ib = [0u8; 60];
                ib[..8].copy_from_slice(&encode_rdev(major, minor));
                rec.raw.set_i_block(&ib);
            }
            _ => {}
        }
        self.put_inode(&mut rec)?;
        self.dir_add(&mut d, name, rec.ino, node.file_type)?;
        self.touch(&mut d, true);
        self.put_inode(&mut d)?;
        Ok(rec.ino)
    }

    /// Creates directory `name` in `dir`.
    pub fn mkdir(&mut self, dir: u32, name: &[u8], node: NewNode) -> Result<u32> {
        let node = NewNode {
            file_type: FileType::Directory,
            ..node
        };
        let (mut d, mut rec) = self.new_entry(dir, name, &node)?;
        self.init_map(&mut rec);
        rec.raw.set_i_links_count(2);
        self.dir_init(&mut rec, dir)?;
        self.put_inode(&mut rec)?;
        self.dir_add(&mut d, name, rec.ino, FileType::Directory)?;
        self.inc_dir_links(&mut d)?;
        self.touch(&mut d, true);
        self.put_inode(&mut d)?;
        Ok(rec.ino)
    }

    /// Creates symbolic link `name` in `dir` pointing at `target`: inside the inode when
    /// it is shorter than 60 bytes (a fast symlink), else in a data block.
    pub fn symlink(
        &mut self,
        dir: u32,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<u32> {
        if target.is_empty() || target.contains(&0) {
            return Err(Error::Invalid);
        }
        if target.len() >= self.fs.core.geo.block_size as usize {
            return Err(Error::NameTooLong);
        }
        let node = NewNode {
            file_type: FileType::Symlink,
            perm: 0o777,
            uid,
            gid,
            rdev: 0,
        };
        let (mut d, mut rec) = self.new_entry(dir, name, &node)?;
        if target.len() < I_BLOCK_SIZE {
            let mut ib = [0u8; 60];
            ib[..target.len()].copy_from_slice(target);
            rec.raw.set_i_block(&ib);
            rec.raw.set_size(target.len() as u64);
        } else {
            self.init_map(&mut rec);
            self.write_data(&mut rec, 0, target)?;
        }
        self.put_inode(&mut rec)?;
        self.dir_add(&mut d, name, rec.ino, FileType::Symlink)?;
        self.touch(&mut d, true);
        self.put_inode(&mut d)?;
        Ok(rec.ino)
    }

    /// Adds link `name` in `dir` to inode `ino` (not a directory).
    pub fn link(&mut self, ino: u32, dir: u32, name: &[u8]) -> Result<()> {
        check_name(name)?;
        let mut rec = self.inode(ino)?;
        let ft = rec.file_type()?;
        if ft == FileType::Directory {
            return Err(Error::NotPermitted);
        }
        if rec.raw.i_links_count() >= LINK_MAX {
            return Err(Error::TooManyLinks);
        }
        let mut d = self.load_dir(dir)?;
        if self.find(&d, name)?.is_some() {
            return Err(Error::Exists);
        }
        self.dir_add(&mut d, name, ino, ft)?;
        rec.raw.set_i_links_count(rec.raw.i_links_count() + 1);
        self.touch(&mut rec, false);
        self.put_inode(&mut rec)?;
        self.touch(&mut d, true);
        self.put_inode(&mut d)
    }

    /// Removes the non-directory entry `name` from `dir`; the inode is released with its
    /// last link.
    pub fn unlink(&mut self, dir: u32, name: &[u8]) -> Result<()> {
        let mut d = self.load_dir(dir)?;
        let ino = self.find(&d, name)?.ok_or(Error::NotFound)?;
        let mut rec = self.inode(ino)?;
        if rec.file_type()? == FileType::Directory {
            return Err(Error::IsDir);
        }
        self.dir_remove(&mut d, name)?;
        self.touch(&mut d, true);
        self.put_inode(&mut d)?;
        self.drop_link(&mut rec)
    }

    /// Removes the empty directory `name` from `dir`.
    pub fn rmdir(&mut self, dir: u32, name: &[u8]) -> Result<()> {
        if name == b"." {
            return Err(Error::Invalid);
        }
        if name == b".." {
            return Err(Error::NotEmpty);
        }
        let mut d = self.load_dir(dir)?;
        let ino = self.find(&d, name)?.ok_or(Error::NotFound)?;
        let mut rec = self.load_dir(ino)?;
        if !self.dir_is_empty(&rec)? {
            return Err(Error::NotEmpty);
        }
        self.dir_remove(&mut d, name)?;
        self.dec_dir_links(&mut d);
        self.touch(&mut d, true);
        self.put_inode(&mut d)?;
        rec.raw.set_i_links_count(0);
        self.release(&mut rec)
    }

    /// Renames `name` in `dir` to `new_name` in `new_dir`.
    pub fn rename(
        &mut self,
        dir: u32,
        name: &[u8],
        new_dir: u32,
        new_name: &[u8],
        fl: RenameFlags,
    ) -> Result<()> {
        check_name(new_name)?;
        if name == b"." || name == b".." {
            return Err(Error::Invalid);
        }
        let d = self.load_dir(dir)?;
        let src = self.find(&d, name)?.ok_or(Error::NotFound)?;
        let nd = self.load_dir(new_dir)?;
        let dst = self.find(&nd, new_name)?;
        if fl.exchange && dst.is_none() {
            return Err(Error::NotFound);
        }
        if fl.noreplace && dst.is_some() {
            return Err(Error::Exists);
        }
        if dst == Some(src) {
            return Ok(());
        }
        let src_rec = self.inode(src)?;
        let src_dir = src_rec.file_type()? == FileType::Directory;
        if src_dir && dir != new_dir && self.is_ancestor(src, new_dir)? {
            return Err(Error::Invalid);
        }
        if fl.exchange {
            let dst = dst.expect("checked");
            let dst_rec = self.inode(dst)?;
            if dst_rec.file_type()? == FileType::Directory
                && dir != new_dir
                && self.is_ancestor(dst, dir)?
            {
                return Err(Error::Invalid);
            }
            return self.exchange(dir, name, src_rec, new_dir, new_name, dst_rec);
        }
        if let Some(t) = dst {
            let t_rec = self.inode(t)?;
            let t_dir = t_rec.file_type()? == FileType::Directory;
            match (src_dir, t_dir) {
                (false, true) => return Err(Error::IsDir),
                (true, false) => return Err(Error::NotDir),
                (true, true) if !self.dir_is_empty(&t_rec)? => return Err(Error::NotEmpty),
                _ => {}
            }
        }
        self.move_entry(dir, name, src_rec, new_dir, new_name, dst)
    }

    /// The rename proper (checks done): points `new_name` at the source, drops the
    /// replaced target, removes the old name, and moves `..` of a directory.
    fn move_entry(
        &mut self,
        dir: u32,
        name: &[u8],
        mut src: InodeRec,
        new_dir: u32,
        new_name: &[u8],
        dst: Option<u32>,
    ) -> Result<()> {
        let ft = src.file_type()?;
        let is_dir = ft == FileType::Directory;
        let mut nd = self.load_dir(new_dir)?;
        match dst {
            Some(t) => {
                self.dir_replace(&mut nd, new_name, src.ino, ft)?;
                let mut t_rec = self.inode(t)?;
                if t_rec.file_type()? == FileType::Directory {
                    t_rec.raw.set_i_links_count(0);
                    self.dec_dir_links(&mut nd);
                    self.release(&mut t_rec)?;
                } else {
                    self.drop_link(&mut t_rec)?;
                }
            }
            None => self.dir_add(&mut nd, new_name, src.ino, ft)?,
        }
        if is_dir && dir != new_dir {
            self.inc_dir_links(&mut nd)?;
        }
        self.touch(&mut nd, true);
        self.put_inode(&mut nd)?;
        let mut d = self.load_dir(dir)?;
        self.dir_remove(&mut d, name)?;
        if is_dir && dir != new_dir {
            self.dir_set_dotdot(&mut src, new_dir)?;
            self.dec_dir_links(&mut d);
        }
        self.touch(&mut d, true);
        self.put_inode(&mut d)?;
        self.touch(&mut src, false);
        self.put_inode(&mut src)
    }

    /// RENAME_EXCHANGE: both names stay, pointing at each other's inode.
    fn exchange(
        &mut self,
        dir: u32,
        name: &[u8],
        mut a: InodeRec,
        new_dir: u32,
        new_name: &[u8],
        mut b: InodeRec,
    ) -> Result<()> {
        let (fa, fb) = (a.file_type()?, b.file_type()?);
        let mut nd = self.load_dir(new_dir)?;
        self.dir_replace(&mut nd, new_name, a.ino, fa)?;
        self.touch(&mut nd, true);
        self.put_inode(&mut nd)?;
        let mut d = self.load_dir(dir)?;
        self.dir_replace(&mut d, name, b.ino, fb)?;
        self.touch(&mut d, true);
        self.put_inode(&mut d)?;
        if dir != new_dir {
            let (a_dir, b_dir) = (fa == FileType::Directory, fb == FileType::Directory);
            if a_dir {
                self.dir_set_dotdot(&mut a, new_dir)?;
            }
            if b_dir {
                self.dir_set_dotdot(&mut b, dir)?;
            }
            if a_dir != b_dir {
                let mut d = self.load_dir(dir)?;
                let mut nd = self.load_dir(new_dir)?;
                if a_dir {
                    self.dec_dir_links(&mut d);
                    self.inc_dir_links(&mut nd)?;
                } else {
                    self.inc_dir_links(&mut d)?;
                    self.dec_dir_links(&mut nd);
                }
                self.put_inode(&mut d)?;
                self.put_inode(&mut nd)?;
            }
        }
        self.touch(&mut a, false);
        self.put_inode(&mut a)?;
        self.touch(&mut b, false);
        self.put_inode(&mut b)
    }

    /// Is directory `anc` `dir` itself or one of its ancestors (walking `..`)?
    fn is_ancestor(&self, anc: u32, mut dir: u32) -> Result<bool> {
        for _ in 0..self.fs.core.geo.inodes_count {
            if dir == anc {
                return Ok(true);
            }
            if dir == ROOT_INO {
                return Ok(false);
            }
            let d = self.load_dir(dir)?;
            dir = self.find(&d, b"..")?.ok_or_else(|| {
                Error::corrupt(Structure::Directory, format!("directory {dir} has no '..'"))
                    .with_ino(dir)
            })?;
        }
        Err(Error::corrupt(
            Structure::Directory,
            "directory '..' chain loops",
        ))
    }

    /// Checks `name` is free in `dir` and allocates the inode for it.
    fn new_entry(&mut self, dir: u32, name: &[u8], node: &NewNode) -> Result<(InodeRec, InodeRec)> {
        check_name(name)?;
        let d = self.load_dir(dir)?;
        if d.raw.i_links_count() == 0 {
            return Err(Error::NotFound);
        }
        if self.find(&d, name)?.is_some() {
            return Err(Error::Exists);
        }
        if node.file_type == FileType::Directory
            && d.raw.i_links_count() >= LINK_MAX
            && !self.dir_nlink()
        {
            return Err(Error::TooManyLinks);
        }
        let mut rec = self.new_inode(dir, node.file_type, node.perm, node.uid, node.gid)?;
        if node.file_type != FileType::Symlink {
            self.inherit_acl(&d, &mut rec)?;
        }
        Ok((d, rec))
    }

    fn dir_nlink(&self) -> bool {
        self.fs
            .core
            .geo
            .features
            .has_ro_compat(ro_compat::DIR_NLINK)
    }

    /// A new subdirectory's `..` link (1 = "many" past LINK_MAX with dir_nlink).
    pub(crate) fn inc_dir_links(&mut self, d: &mut InodeRec) -> Result<()> {
        let n = d.raw.i_links_count();
        if n == 1 {
            return Ok(());
        }
        if n + 1 >= LINK_MAX {
            if !self.dir_nlink() {
                return Err(Error::TooManyLinks);
            }
            d.raw.set_i_links_count(1);
        } else {
            d.raw.set_i_links_count(n + 1);
        }
        Ok(())
    }

    /// A subdirectory went away.
    fn dec_dir_links(&mut self, d: &mut InodeRec) {
        let n = d.raw.i_links_count();
        if n > 2 {
            d.raw.set_i_links_count(n - 1);
        }
    }

    /// Drops one link of a non-directory; releases the inode with the last.
    pub(crate) fn drop_link(&mut self, rec: &mut InodeRec) -> Result<()> {
        let n = rec.raw.i_links_count();
        if n <= 1 {
            rec.raw.set_i_links_count(0);
            if self.is_open(rec.ino) {
                self.touch(rec, false);
                return self.add_orphan(rec);
            }
            return self.release(rec);
        }
        rec.raw.set_i_links_count(n - 1);
        self.touch(rec, false);
        self.put_inode(rec)
    }

    /// Frees an unlinked inode: its blocks, its xattr block reference, the inode.
    pub(crate) fn release(&mut self, rec: &mut InodeRec) -> Result<()> {
        if self.has_block_map(rec) {
            self.map_punch(rec, 0, u64::MAX)?;
        }
        self.drop_xattr_block(rec)?;
        rec.raw.set_size(0);
        self.free_inode(rec)
    }

    /// Does this inode have a block map (extent tree or indirect blocks) rather than
    /// inline bytes in i_block (fast symlinks, devices, inline data)?
    pub(crate) fn has_block_map(&self, rec: &InodeRec) -> bool {
        if rec.raw.has_flag(flags::INLINE_DATA) {
            return false;
        }
        match rec.file_type() {
            Ok(FileType::Regular | FileType::Directory) => true,
            Ok(FileType::Symlink) => {
                rec.raw.has_flag(flags::EXTENTS)
                    || rec.raw.i_blocks_lo() != 0
                    || rec.raw.size() >= I_BLOCK_SIZE as u64
            }
            _ => false,
        }
    }
}
