//! Directory contents: linear entry blocks (with leaf checksums), inline directories, and
//! lookup (through the htree index when the directory has one).

use super::inode::LoadedInode;
use super::Ext4;
use crate::format::dirent::{self, Dirents};
use crate::format::features::{compat, incompat};
use crate::format::inode::{flags, I_BLOCK_SIZE};
use usfs_fs::{DirEntry, Error, FileType, Result, Structure};

/// How far an inline directory's entries sit from their readdir positions: the kernel
/// gives them the positions they would have in a block, whose `.` and `..` take 24 bytes
/// where the inline parent field takes 4.
const INLINE_SHIFT: u64 = 20;

/// One entry as found on disk, with its position.
#[derive(Debug)]
pub(crate) struct RawEntry<'a> {
    /// Byte offset of the entry within the directory (the readdir cookie of this entry;
    /// kept for the checker, which reports where a bad entry sits).
    #[allow(dead_code)]
    pub pos: u64,
    /// Offset of the next entry.
    pub next: u64,
    /// Inode number (non-zero).
    pub ino: u32,
    /// The name.
    pub name: &'a [u8],
    /// File type code from the entry.
    pub file_type: u8,
}

impl Ext4 {
    /// Does this inode keep its directory entries inline?
    fn is_inline(&self, dir: &LoadedInode) -> bool {
        dir.has_flag(flags::INLINE_DATA)
    }

    /// Calls `f` for every live entry of `dir` at or after byte position `from`, in disk
    /// order, including `.` and `..`; `f` returns false to stop.
    pub(crate) fn for_each_entry(
        &self,
        dir: &LoadedInode,
        from: u64,
        f: &mut dyn FnMut(&RawEntry) -> bool,
    ) -> Result<()> {
        if dir.file_type()? != FileType::Directory {
            return Err(Error::NotDir);
        }
        if self.is_inline(dir) {
            return self.for_each_inline(dir, from, f);
        }
        let bs = self.core.geo.block_size as u64;
        let size = dir.raw.size();
        let nblocks = size.div_ceil(bs);
        let mut lblk = from / bs;
        let mut buf = vec![0u8; bs as usize];
        while lblk < nblocks {
            let run = self.map_block(dir, lblk)?;
            let Some(p) = run.pblk else {
                lblk += run.len;
                continue;
            };
            for k in 0..run.len.min(nblocks - lblk) {
                let blk = p + k;
                self.read_block_into(
                    blk,
                    &mut buf,
                    Structure::Directory,
                    &format!("directory {}", dir.ino),
                )?;
                let base = (lblk + k) * bs;
                let start = from.saturating_sub(base);
                if !self.walk_block(dir, &buf, base, start, lblk + k, f)? {
                    return Ok(());
                }
            }
            lblk += run.len;
        }
        Ok(())
    }

    /// Is this block of an indexed directory an interior dx node (one empty entry spanning
    /// the whole block)?
    pub(crate) fn is_dx_node(&self, dir: &LoadedInode, lblk: u64, block: &[u8]) -> bool {
        if lblk == 0 || !dir.has_flag(flags::INDEX) {
            return false;
        }
        dirent::is_dx_node(block)
    }

    /// Parses one leaf block of an indexed directory from its start.
    pub(crate) fn walk_leaf_block(
        &self,
        dir: &LoadedInode,
        block: &[u8],
        base: u64,
        lblk: u64,
        f: &mut dyn FnMut(&RawEntry) -> bool,
    ) -> Result<bool> {
        self.walk_block(dir, block, base, 0, lblk, f)
    }

    /// Parses one directory block. Returns false if `f` asked to stop.
    fn walk_block(
        &self,
        dir: &LoadedInode,
        block: &[u8],
        base: u64,
        start: u64,
        lblk: u64,
        f: &mut dyn FnMut(&RawEntry) -> bool,
    ) -> Result<bool> {
        let bs = block.len();
        let indexed_root = lblk == 0 && dir.has_flag(flags::INDEX);
        if self.is_dx_node(dir, lblk, block) {
            return Ok(true);
        }
        let mut end = bs;
        if let Some(seed) = self.core.csum_seed {
            if !indexed_root {
                let generation = dir.raw.i_generation();
                if let Err(fault) = dirent::check_tail(seed, dir.ino, generation, block) {
                    let msg = format!("directory {} block {lblk}: {fault}", dir.ino);
                    return Err(Error::corrupt(Structure::Directory, msg)
                        .with_ino(dir.ino)
                        .with_block(lblk));
                }
                end = bs - dirent::TAIL_SIZE;
            }
        }
        self.walk_entries(dir.ino, &block[..end], base, start, f)
    }

    /// Walks a chain of entries filling `area` (a block, or an inline area). Entries
    /// before `start` (relative to the area) are skipped but still validated.
    pub(crate) fn walk_entries(
        &self,
        dir_ino: u32,
        area: &[u8],
        base: u64,
        start: u64,
        f: &mut dyn FnMut(&RawEntry) -> bool,
    ) -> Result<bool> {
        let has_ft = self.core.geo.features.has_incompat(incompat::FILETYPE);
        let walk = Dirents::new(
            area,
            self.core.geo.block_size,
            has_ft,
            self.core.geo.inodes_count,
        );
        for item in walk {
            let e = item.map_err(|(off, fault)| {
                Error::corrupt(
                    Structure::Directory,
                    format!(
                        "directory {dir_ino}: entry at byte {}: {fault}",
                        base + off as u64
                    ),
                )
                .with_ino(dir_ino)
            })?;
            if e.ino != 0 && e.off as u64 >= start {
                let r = RawEntry {
                    pos: base + e.off as u64,
                    next: base + (e.off + e.rec_len) as u64,
                    ino: e.ino,
                    name: e.name,
                    file_type: e.file_type,
                };
                if !f(&r) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Inline directories: parent inode in the first 4 bytes of i_block, entries in the
    /// rest of i_block and in the system.data xattr. Positions are the kernel's
    /// (ext4_read_inline_dir), those the directory would have as a block: `.` at 0, `..`
    /// at 12, an entry at byte `o` of i_block or `60 + o` of the xattr value at `o + 20`.
    fn for_each_inline(
        &self,
        dir: &LoadedInode,
        from: u64,
        f: &mut dyn FnMut(&RawEntry) -> bool,
    ) -> Result<()> {
        let ib = dir.raw.i_block();
        let parent = u32::from_le_bytes(ib[0..4].try_into().unwrap());
        let dots = [
            (0, 12, dir.ino, &b"."[..]),
            (12, INLINE_SHIFT + 4, parent, b".."),
        ];
        for (pos, next, ino, name) in dots {
            if from <= pos {
                let file_type = dirent::dirent_file_type(FileType::Directory);
                let e = RawEntry {
                    pos,
                    next,
                    ino,
                    name,
                    file_type,
                };
                if !f(&e) {
                    return Ok(());
                }
            }
        }
        let area_start = |o: u64| from.saturating_sub(o + INLINE_SHIFT);
        if !self.walk_entries(dir.ino, &ib[4..], 4 + INLINE_SHIFT, area_start(4), f)? {
            return Ok(());
        }
        let extra = self.inline_xattr_data(dir)?;
        if !extra.is_empty() {
            let base = I_BLOCK_SIZE as u64 + INLINE_SHIFT;
            self.walk_entries(dir.ino, &extra, base, area_start(I_BLOCK_SIZE as u64), f)?;
        }
        Ok(())
    }

    /// Looks `name` up in `dir`.
    pub(crate) fn dir_lookup(&self, dir: &LoadedInode, name: &[u8]) -> Result<u32> {
        if name.is_empty() {
            return Err(Error::NotFound);
        }
        if name.len() > 255 {
            return Err(Error::NameTooLong);
        }
        if dir.file_type()? != FileType::Directory {
            return Err(Error::NotDir);
        }
        let indexed = dir.has_flag(flags::INDEX)
            && !self.is_inline(dir)
            && self.core.geo.features.has_compat(compat::DIR_INDEX)
            && name != b"."
            && name != b"..";
        if indexed {
            if let Some(found) = self.htree_lookup(dir, name)? {
                return Ok(found);
            }
            return Err(Error::NotFound);
        }
        let mut found = None;
        self.for_each_entry(dir, 0, &mut |e| {
            if e.name == name {
                found = Some(e.ino);
                false
            } else {
                true
            }
        })?;
        found.ok_or(Error::NotFound)
    }

    /// Converts a raw entry for the public interface.
    pub(crate) fn to_dir_entry(e: &RawEntry) -> DirEntry {
        DirEntry {
            name: e.name.to_vec(),
            ino: e.ino as u64,
            file_type: dirent::file_type_from_dirent(e.file_type),
        }
    }
}
