//! Inline data (the `inline_data` feature) in the read-write volume, kept as the kernel's
//! fs/ext4/inline.c keeps it: an inode's first 60 bytes in i_block, the rest in the value
//! of its in-inode attribute `system.data`, the INLINE_DATA flag set and no block map.
//!
//! - Files: a write that still fits in the inode stays inline, `system.data` growing to
//!   what it needs (ext4_try_to_write_inline_data); a shrink cuts `system.data` to what is
//!   left and zeroes i_block past the end (ext4_inline_data_truncate); a growth by
//!   truncate stays inline (the bytes past the stored ones read as zeros). A write past
//!   what the inode can hold, and fallocate, first make the file block-mapped
//!   (ext4_convert_inline_data_to_extent): its stored bytes move to a new block,
//!   `system.data` and INLINE_DATA go, an extent root (block map without extents) takes
//!   i_block.
//! - Directories: i_block starts with the parent's inode number; entries fill the rest of
//!   i_block and the `system.data` value (no `.`/`..` entries, no checksum tail), and
//!   i_size is 60 + the value's size. Entries are added, removed and retargeted in place
//!   (an inline directory never shrinks, as in the kernel). An entry that finds no room
//!   grows an empty `system.data` to all the room the inode has
//!   (ext4_update_inline_dir); failing that, the directory becomes a normal one-block
//!   directory with `.` and `..` (ext4_convert_inline_data_nolock) and the entry goes
//!   there.
//! - New files and directories are created block-mapped, as on images without the
//!   feature (the kernel would create small ones inline).
//!
//! The stored bytes and entries are read with the reader's own parsing
//! ([`Ext4::inline_bytes`](crate::Ext4), `for_each_entry`); entries are edited with the
//! one leaf walker ([`LeafFmt`]).

use super::dir_leaf::{Ent, LeafFmt};
use super::inode::InodeRec;
use super::volume::Volume;
use super::xattr::{ibody_area, is_inline_data, write_ibody};
use crate::format::dirent::{self, DirentFault};
use crate::format::features::incompat;
use crate::format::inode::{flags, I_BLOCK_SIZE};
use crate::format::xattr::{self as fx, OnDisk, INDEX_SYSTEM};
use crate::read::inode::LoadedInode;
use usfs_fs::{Error, FileType, Result, Structure};

/// Bytes at the start of an inline directory's i_block that hold the parent's inode.
const DOTDOT_SIZE: usize = 4;
/// Growing an empty `system.data` for less than one small entry is not worth it
/// (EXT4_DIR_REC_LEN(1)).
const MIN_REC_LEN: usize = 12;

/// `rec` as the reader takes it.
fn loaded(rec: &InodeRec) -> LoadedInode {
    LoadedInode {
        ino: rec.ino,
        raw: rec.raw.clone(),
    }
}

/// The entry areas of an inline directory whose store is `len` bytes: the rest of
/// i_block after the parent, then the `system.data` value (possibly empty).
pub(super) fn areas(len: usize) -> [(usize, usize); 2] {
    [(DOTDOT_SIZE, I_BLOCK_SIZE), (I_BLOCK_SIZE, len)]
}

/// A live entry found in an inline directory.
struct Hit {
    /// The area holding it (start, end in the store).
    area: (usize, usize),
    /// Its offset and rec_len inside the area, and its predecessor's.
    off: usize,
    rec_len: usize,
    prev: Option<(usize, usize)>,
    /// What it points at.
    ino: u32,
}

impl Volume {
    /// Does `rec` keep its bytes inline?
    pub(crate) fn is_inline(rec: &InodeRec) -> bool {
        rec.raw.has_flag(flags::INLINE_DATA)
    }

    /// `rec`'s in-inode attributes in on-disk form.
    fn ibody_set(&self, rec: &InodeRec) -> Result<Vec<OnDisk>> {
        Ok(self
            .fs
            .read_ibody_xattrs(&loaded(rec))?
            .into_iter()
            .map(|x| OnDisk {
                index: x.index,
                name: x.name,
                value: x.value,
            })
            .collect())
    }

    /// Sets `rec`'s `system.data` value to `tail` (`None`: removes the attribute), the
    /// other in-inode attributes kept in order. False, nothing changed, when they would
    /// no longer fit in the inode.
    fn set_data_tail(&self, rec: &mut InodeRec, tail: Option<&[u8]>) -> Result<bool> {
        let mut set = self.ibody_set(rec)?;
        let at = set.iter().position(is_inline_data);
        match (at, tail) {
            (Some(i), Some(t)) => set[i].value = t.to_vec(),
            (None, Some(t)) => set.push(OnDisk {
                index: INDEX_SYSTEM,
                name: b"data".to_vec(),
                value: t.to_vec(),
            }),
            (Some(i), None) => {
                set.remove(i);
            }
            (None, None) => return Ok(true),
        }
        Ok(write_ibody(rec, self.fs.core.geo.inode_size, &set))
    }

    /// The largest `system.data` value `rec` can hold beside its other in-inode
    /// attributes (a multiple of 4), as the kernel's get_max_inline_xattr_value_size.
    fn max_data_tail(&self, rec: &InodeRec) -> Result<usize> {
        let Some((start, end)) = ibody_area(rec, self.fs.core.geo.inode_size) else {
            return Ok(0);
        };
        let used: usize = self
            .ibody_set(rec)?
            .iter()
            .filter(|a| !is_inline_data(a))
            .map(|a| fx::entry_size(a.name.len()) + a.value.len().next_multiple_of(4))
            .sum();
        // Magic, the other entries and their values, the `data` entry, the end marker.
        let used = 4 + used + fx::entry_size(4) + 4;
        Ok((end - start).saturating_sub(used) & !3)
    }

    /// Stores `bytes` as `rec`'s inline bytes: the first 60 in i_block (zero-padded), the
    /// rest as the `system.data` value. False, nothing changed, when they do not fit.
    fn store_inline(&self, rec: &mut InodeRec, mut bytes: Vec<u8>) -> Result<bool> {
        let tail = bytes.get(I_BLOCK_SIZE..).unwrap_or(&[]);
        if !self.set_data_tail(rec, Some(tail))? {
            return Ok(false);
        }
        bytes.resize(bytes.len().max(I_BLOCK_SIZE), 0);
        let ib: [u8; I_BLOCK_SIZE] = bytes[..I_BLOCK_SIZE].try_into().expect("60 bytes");
        rec.raw.set_i_block(&ib);
        Ok(true)
    }

    /// What inline inode `rec` stores, as the reader reads it (i_block, then the
    /// `system.data` value when i_size reaches past i_block).
    pub(super) fn inline_store(&self, rec: &InodeRec) -> Result<Vec<u8>> {
        self.fs.inline_bytes(&loaded(rec))
    }

    /// Writes `data` at `offset` (`end` = offset + its length, checked by the caller) of
    /// inline file `rec` when the file still fits in its inode; false when it must first
    /// become block-mapped ([`Volume::uninline_file`]). Size and times are the caller's.
    pub(crate) fn inline_write(
        &mut self,
        rec: &mut InodeRec,
        offset: u64,
        data: &[u8],
    ) -> Result<bool> {
        let size = rec.raw.size();
        let end = offset + data.len() as u64;
        let new_len = size.max(end);
        let cap = (I_BLOCK_SIZE + self.max_data_tail(rec)?) as u64;
        if new_len > cap {
            return Ok(false);
        }
        let mut bytes = self.inline_store(rec)?;
        // system.data never shrinks on a write (ext4_prepare_inline_data only grows it).
        let keep = bytes.len();
        bytes.truncate(size as usize);
        bytes.resize((new_len as usize).max(keep), 0);
        bytes[offset as usize..end as usize].copy_from_slice(data);
        self.store_inline(rec, bytes)
    }

    /// Sets the size of inline file `rec` (it stays inline): a shrink cuts `system.data`
    /// to the bytes left past i_block and zeroes i_block past the end; a growth zeroes
    /// the stored bytes past the old end, which then read as zeros with the rest.
    pub(crate) fn inline_set_size(&mut self, rec: &mut InodeRec, size: u64) -> Result<()> {
        let old = rec.raw.size();
        let mut bytes = self.inline_store(rec)?;
        if size < old {
            bytes.truncate(size as usize);
        } else {
            let keep = bytes.len();
            bytes.truncate(old.min(keep as u64) as usize);
            bytes.resize(keep, 0);
        }
        if !self.store_inline(rec, bytes)? {
            return Err(Error::corrupt(
                Structure::InlineData,
                format!("inode {}: inline data no longer fits in the inode", rec.ino),
            )
            .with_ino(rec.ino));
        }
        rec.raw.set_size(size);
        Ok(())
    }

    /// Makes inline file `rec` block-mapped, as ext4_convert_inline_data_to_extent: its
    /// stored bytes move to a newly allocated block (i_blocks counts it), `system.data`
    /// and INLINE_DATA go, i_block gets an empty extent root (zeroed block pointers on
    /// file systems without extents). i_size is kept.
    pub(crate) fn uninline_file(&mut self, rec: &mut InodeRec) -> Result<()> {
        let size = rec.raw.size();
        let mut bytes = self.inline_store(rec)?;
        bytes.truncate(size.min(bytes.len() as u64) as usize);
        self.drop_inline(rec)?;
        if !bytes.is_empty() {
            self.write_data(rec, 0, &bytes)?;
        }
        Ok(())
    }

    /// Removes `rec`'s inline store: `system.data`, the INLINE_DATA flag, i_block
    /// (replaced by an empty block map).
    fn drop_inline(&mut self, rec: &mut InodeRec) -> Result<()> {
        if !self.set_data_tail(rec, None)? {
            return Err(Error::corrupt(
                Structure::Xattr,
                format!("inode {}: in-inode attributes do not fit", rec.ino),
            )
            .with_ino(rec.ino));
        }
        rec.raw.set_i_flags(rec.raw.i_flags() & !flags::INLINE_DATA);
        rec.raw.set_i_block(&[0u8; I_BLOCK_SIZE]);
        self.init_map(rec);
        Ok(())
    }

    /// How entries in inline directories look (no checksum tail).
    pub(super) fn inline_fmt(&self) -> LeafFmt {
        let geo = &self.fs.core.geo;
        LeafFmt {
            bs: geo.block_size,
            csum: false,
            has_ft: geo.features.has_incompat(incompat::FILETYPE),
            inodes_count: geo.inodes_count,
        }
    }

    /// The store of inline directory `dir` (i_block, then `system.data`), checked to be
    /// as long as i_size says.
    fn inline_dir_store(&self, dir: &InodeRec) -> Result<Vec<u8>> {
        let b = self.inline_store(dir)?;
        if b.len() as u64 != dir.raw.size() {
            return Err(Error::corrupt(
                Structure::InlineData,
                format!(
                    "inline directory {}: i_size {} but {} bytes stored",
                    dir.ino,
                    dir.raw.size(),
                    b.len()
                ),
            )
            .with_ino(dir.ino));
        }
        Ok(b)
    }

    /// A damaged entry chain in inline directory `dir` (area starting at `base`).
    fn inline_fault(dir: &InodeRec, base: usize, (off, f): (usize, DirentFault)) -> Error {
        Error::corrupt(
            Structure::Directory,
            format!(
                "inline directory {}: entry at byte {}: {f}",
                dir.ino,
                base + off
            ),
        )
        .with_ino(dir.ino)
    }

    /// Finds the live entry `name` in inline directory store `b`.
    fn inline_find(&self, dir: &InodeRec, b: &[u8], name: &[u8]) -> Result<Option<Hit>> {
        let fmt = self.inline_fmt();
        for area in areas(b.len()) {
            let mut prev = None;
            for e in fmt.walk(&b[area.0..area.1]) {
                let e = e.map_err(|f| Self::inline_fault(dir, area.0, f))?;
                if e.ino != 0 && e.name == name {
                    return Ok(Some(Hit {
                        area,
                        off: e.off,
                        rec_len: e.rec_len,
                        prev,
                        ino: e.ino,
                    }));
                }
                prev = Some((e.off, e.rec_len));
            }
        }
        Ok(None)
    }

    /// Writes inline directory store `b` back into `dir` (i_size follows it).
    pub(super) fn inline_dir_put(&self, dir: &mut InodeRec, b: Vec<u8>) -> Result<()> {
        let len = b.len() as u64;
        if !self.store_inline(dir, b)? {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::ENOSPC)));
        }
        dir.raw.set_size(len);
        Ok(())
    }

    /// Adds `name` -> `ino` to inline directory `dir` if it finds room there (growing an
    /// empty `system.data` first, as ext4_try_add_inline_entry); false when the
    /// directory must become a block directory first.
    pub(crate) fn inline_dir_add(
        &mut self,
        dir: &mut InodeRec,
        name: &[u8],
        ino: u32,
        ft: FileType,
    ) -> Result<bool> {
        let fmt = self.inline_fmt();
        let mut b = self.inline_dir_store(dir)?;
        if self.inline_find(dir, &b, name)?.is_some() {
            return Err(Error::Exists);
        }
        let code = dirent::dirent_file_type(ft);
        if b.len() == I_BLOCK_SIZE {
            let first = &b[DOTDOT_SIZE..I_BLOCK_SIZE];
            let fits = fmt.find_slot(first, name.len());
            if fits
                .map_err(|f| Self::inline_fault(dir, DOTDOT_SIZE, f))?
                .is_none()
            {
                let max = self.max_data_tail(dir)?;
                if max <= MIN_REC_LEN {
                    return Ok(false);
                }
                b.resize(I_BLOCK_SIZE + max, 0);
                fmt.put(&mut b[I_BLOCK_SIZE..], 0, max, b"", 0, 0);
            }
        }
        for (s, e) in areas(b.len()) {
            let slot = fmt
                .find_slot(&b[s..e], name.len())
                .map_err(|f| Self::inline_fault(dir, s, f))?;
            if let Some(slot) = slot {
                fmt.insert(&mut b[s..e], slot, name, ino, code);
                self.inline_dir_put(dir, b)?;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Removes `name` from inline directory `dir` (its space joins the entry before it,
    /// or its inode becomes 0); returns the inode it named.
    pub(crate) fn inline_dir_remove(&mut self, dir: &mut InodeRec, name: &[u8]) -> Result<u32> {
        let mut b = self.inline_dir_store(dir)?;
        let h = self.inline_find(dir, &b, name)?.ok_or(Error::NotFound)?;
        let (s, e) = h.area;
        self.inline_fmt()
            .delete(&mut b[s..e], h.off, h.rec_len, h.prev);
        self.inline_dir_put(dir, b)?;
        Ok(h.ino)
    }

    /// Points the existing entry `name` of inline directory `dir` at `ino`.
    pub(crate) fn inline_dir_replace(
        &mut self,
        dir: &mut InodeRec,
        name: &[u8],
        ino: u32,
        ft: FileType,
    ) -> Result<()> {
        let mut b = self.inline_dir_store(dir)?;
        let h = self.inline_find(dir, &b, name)?.ok_or(Error::NotFound)?;
        let (s, e) = h.area;
        self.inline_fmt()
            .retarget(&mut b[s..e], h.off, ino, dirent::dirent_file_type(ft));
        self.inline_dir_put(dir, b)
    }

    /// Points `..` of inline directory `dir` at `parent` (the first 4 bytes of i_block).
    pub(crate) fn inline_dir_set_dotdot(&mut self, dir: &mut InodeRec, parent: u32) {
        let mut ib = *dir.raw.i_block();
        ib[..DOTDOT_SIZE].copy_from_slice(&parent.to_le_bytes());
        dir.raw.set_i_block(&ib);
    }

    /// Makes inline directory `dir` a block directory, as ext4_convert_inline_data_nolock:
    /// one new block with `.`, `..` and its entries (and the checksum tail with
    /// metadata_csum), i_size one block; `system.data` and INLINE_DATA go.
    pub(crate) fn uninline_dir(&mut self, dir: &mut InodeRec) -> Result<()> {
        let mut parent = 0;
        let mut ents = Vec::new();
        self.fs.for_each_entry(&loaded(dir), 0, &mut |e| {
            match e.name {
                b"." => {}
                b".." => parent = e.ino,
                name => ents.push(Ent {
                    name: name.to_vec(),
                    ino: e.ino,
                    ft: e.file_type,
                }),
            }
            true
        })?;
        if parent == 0 || parent > self.fs.core.geo.inodes_count {
            return Err(Error::corrupt(
                Structure::Directory,
                format!("inline directory {}: parent inode {parent}", dir.ino),
            )
            .with_ino(dir.ino));
        }
        self.drop_inline(dir)?;
        dir.raw.set_size(0);
        self.dir_init_with(dir, parent, &ents)
    }
}
