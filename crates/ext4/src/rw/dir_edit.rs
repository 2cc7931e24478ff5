//! The directory mutator: adds, removes and retargets entries of one directory, linear or
//! hashed (htree), as the kernel's fs/ext4/namei.c does, written only against [`Meta`] and
//! [`DirFile`]. Every block it changes is read (and its checksum verified) first and
//! written back whole with its checksums set; a block whose checksum is wrong is never
//! modified. Linear directories grow by one block when no block has room, and become
//! htrees when a single-block directory overflows and dir_index is on (the htree half
//! lives in [`super::dir_htree`]); trailing empty blocks of linear directories are freed
//! after a removal. Htrees never shrink (as in the kernel).

use super::dir_leaf::{Ent, LeafFmt};
use super::entry_fix::{edit_area, EntryFix};
use super::meta::{DirFile, Meta};
use crate::format::dirent::{self, DirentFault};
use crate::format::dx_hash::{dx_hash, HashVersion};
use crate::format::features::{compat, incompat};
use crate::format::superblock::Superblock;
use usfs_fs::{Error, FileType, Result, Structure};

/// `s_flags` bit: directory hashes read name bytes as unsigned char.
const FLAG_UNSIGNED_HASH: u32 = 0x2;

/// The htree hash parameters of a file system, from its superblock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashParams {
    /// s_def_hash_version: stored in the root of every new htree (0 legacy, 1 half_md4,
    /// 2 tea).
    pub default_version: u8,
    /// s_flags has EXT2_FLAGS_UNSIGNED_HASH: versions 0..=2 hash as their unsigned twins.
    pub unsigned: bool,
    /// s_hash_seed as four words (all zero: the default seed).
    pub seed: [u32; 4],
}

impl HashParams {
    /// The parameters `sb` records.
    pub fn from_superblock<B: AsRef<[u8]>>(sb: &Superblock<B>) -> HashParams {
        HashParams {
            default_version: sb.s_def_hash_version(),
            unsigned: sb.s_flags() & FLAG_UNSIGNED_HASH != 0,
            seed: sb.hash_seed(),
        }
    }

    /// (major, minor) hash of `name` in a directory whose root records `version`.
    pub(crate) fn hash(&self, dir: u32, version: u8, name: &[u8]) -> Result<(u32, u32)> {
        let v = HashVersion::from_u8(version)
            .ok_or_else(|| {
                Error::corrupt(
                    Structure::Htree,
                    format!("directory {dir}: unknown htree hash version {version}"),
                )
                .with_ino(dir)
            })?
            .with_unsigned_flag(self.unsigned);
        dx_hash(name, v, &self.seed)
            .map_err(|e| Error::incompatible(format!("directory {dir}: {e}")))
    }
}

/// Checks a name for an entry: 1..=255 bytes (else ENAMETOOLONG / EINVAL), no `/` or NUL
/// (EINVAL).
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.len() > 255 {
        return Err(Error::NameTooLong);
    }
    if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
        return Err(Error::Invalid);
    }
    Ok(())
}

/// `.` and `..` are the directory's own; entries of that name are not added or removed.
fn check_entry_name(name: &[u8]) -> Result<()> {
    check_name(name)?;
    if name == b"." || name == b".." {
        return Err(Error::Invalid);
    }
    Ok(())
}

/// EEXIST: the name is already in the directory.
pub(crate) fn exists() -> Error {
    Error::Exists
}

/// A live entry found by name, with the block that holds it.
pub(crate) struct Found {
    /// Logical and physical block.
    pub lblk: u64,
    pub pblk: u64,
    /// The block (checksum verified).
    pub buf: Vec<u8>,
    /// The entry's offset and rec_len.
    pub off: usize,
    pub rec_len: usize,
    /// The previous entry in the block's chain (offset, rec_len).
    pub prev: Option<(usize, usize)>,
    /// What it points at.
    pub ino: u32,
    pub ft: u8,
}

/// One directory opened for changes: the transaction's metadata, the directory's blocks
/// and the file system's hash parameters.
pub struct DirEdit<'a> {
    pub(crate) m: &'a mut dyn Meta,
    pub(crate) d: &'a mut dyn DirFile,
    pub(crate) hp: &'a HashParams,
    pub(crate) fmt: LeafFmt,
    pub(crate) seed: Option<u32>,
    pub(crate) dir_index: bool,
    pub(crate) large_dir: bool,
}

impl<'a> DirEdit<'a> {
    /// Opens directory `d` for changes in the transaction of `m`.
    pub fn new(m: &'a mut dyn Meta, d: &'a mut dyn DirFile, hp: &'a HashParams) -> Self {
        let geo = m.geo();
        let fmt = LeafFmt {
            bs: geo.block_size,
            csum: m.csum_seed().is_some(),
            has_ft: geo.features.has_incompat(incompat::FILETYPE),
            inodes_count: geo.inodes_count,
        };
        let dir_index = geo.features.has_compat(compat::DIR_INDEX);
        let large_dir = geo.features.has_incompat(incompat::LARGEDIR);
        let seed = m.csum_seed();
        DirEdit {
            m,
            d,
            hp,
            fmt,
            seed,
            dir_index,
            large_dir,
        }
    }

    /// Writes the first block of a new, empty directory (`.` and `..` pointing at
    /// `parent`). The directory must have no blocks yet.
    pub fn init(&mut self, parent: u32) -> Result<()> {
        self.init_with(parent, &[])
    }

    /// Writes the first block of a directory that has none: `.`, `..` (= `parent`), then
    /// `ents` (an inline directory becoming a block one, as the kernel's
    /// ext4_finish_convert_inline_dir). They must fit in one block.
    pub(crate) fn init_with(&mut self, parent: u32, ents: &[Ent]) -> Result<()> {
        if self.d.nblocks() != 0 {
            return Err(Error::corrupt(
                Structure::Directory,
                format!(
                    "directory {}: init of a directory that has blocks",
                    self.d.ino()
                ),
            )
            .with_ino(self.d.ino()));
        }
        let mut all = vec![
            self.dot_ent(b".", self.d.ino()),
            self.dot_ent(b"..", parent),
        ];
        all.extend_from_slice(ents);
        let need: usize = all.iter().map(|e| dirent::entry_size(e.name.len())).sum();
        if need > self.fmt.usable() {
            return Err(Error::corrupt(
                Structure::Directory,
                format!(
                    "directory {}: {} entries do not fit in one block",
                    self.d.ino(),
                    all.len()
                ),
            )
            .with_ino(self.d.ino()));
        }
        let pblk = self.d.append_block(self.m)?;
        let buf = self.fmt.pack(&all);
        self.write_leaf(pblk, buf)
    }

    fn dot_ent(&self, name: &[u8], ino: u32) -> Ent {
        Ent {
            name: name.to_vec(),
            ino,
            ft: dirent::dirent_file_type(FileType::Directory),
        }
    }

    /// The inode and type `name` points at (`.` and `..` included), if it is there.
    pub fn lookup(&mut self, name: &[u8]) -> Result<Option<(u32, Option<FileType>)>> {
        check_name(name)?;
        Ok(self
            .find(name)?
            .map(|f| (f.ino, dirent::file_type_from_dirent(f.ft))))
    }

    /// Adds `name` -> `ino` (of type `ft`). EEXIST if the name is there; ENOSPC (an
    /// [`Error::Io`] of kind StorageFull) when no block can be allocated or the htree
    /// index is full.
    pub fn add(&mut self, name: &[u8], ino: u32, ft: FileType) -> Result<()> {
        let e = Ent {
            name: name.to_vec(),
            ino,
            ft: dirent::dirent_file_type(ft),
        };
        self.add_ent(&e)
    }

    /// [`DirEdit::add`] of entry `e` as it is (its file type code kept).
    pub(crate) fn add_ent(&mut self, e: &Ent) -> Result<()> {
        check_entry_name(&e.name)?;
        if e.ino == 0 || e.ino > self.fmt.inodes_count {
            return Err(Error::Invalid);
        }
        if self.indexed() {
            if self.find(&e.name)?.is_some() {
                return Err(exists());
            }
            return self.htree_add(e);
        }
        self.linear_add(e)
    }

    /// Removes `name`; returns the inode it pointed at. NotFound if it is not there.
    pub fn remove(&mut self, name: &[u8]) -> Result<u32> {
        check_entry_name(name)?;
        let Some(mut f) = self.find(name)? else {
            return Err(Error::NotFound);
        };
        let usable = self.fmt.usable();
        self.fmt
            .delete(&mut f.buf[..usable], f.off, f.rec_len, f.prev);
        let last = f.lblk + 1 == self.d.nblocks();
        self.write_leaf(f.pblk, f.buf)?;
        if last && !self.indexed() {
            self.free_trailing_empty()?;
        }
        Ok(f.ino)
    }

    /// Points the existing entry `name` at `ino` (type `ft`), as rename over an existing
    /// name does; returns the inode it pointed at before.
    pub fn replace(&mut self, name: &[u8], ino: u32, ft: FileType) -> Result<u32> {
        check_entry_name(name)?;
        if ino == 0 || ino > self.fmt.inodes_count {
            return Err(Error::Invalid);
        }
        let Some(mut f) = self.find(name)? else {
            return Err(Error::NotFound);
        };
        self.fmt
            .retarget(&mut f.buf, f.off, ino, dirent::dirent_file_type(ft));
        self.write_leaf(f.pblk, f.buf)?;
        Ok(f.ino)
    }

    /// Points `..` at `parent` (a directory moved to another parent).
    pub fn set_dotdot(&mut self, parent: u32) -> Result<()> {
        if self.indexed() {
            return self.htree_set_dotdot(parent);
        }
        let (pblk, mut buf) = self.read_leaf(0)?;
        let (off, _) = self.dotdot_at(0, &buf[..self.fmt.usable()])?;
        self.fmt.retarget(&mut buf, off, parent, 2);
        self.write_leaf(pblk, buf)
    }

    /// Applies a checker's `fix` to the entry at byte `off` of leaf block `lblk`, named by
    /// place (the chain before it need only be walkable), and writes the block back with
    /// its checksum tail set. A leaf that lacks its tail under metadata_csum is edited
    /// whole and written back as it is: e2fsck reads it as a block without a tail, and
    /// the directory is rehashed.
    pub(crate) fn fix_at(&mut self, lblk: u64, off: usize, fix: EntryFix) -> Result<()> {
        let (pblk, mut buf) = self.read_raw(lblk)?;
        let whole = self.fmt.csum && dirent::find_tail(&buf).is_none();
        let len = if whole { buf.len() } else { self.fmt.usable() };
        if !edit_area(&self.fmt, &mut buf[..len], off, fix) {
            return Err(self.corrupt(lblk, format!("no entry at offset {off}")));
        }
        if whole {
            self.m.write_meta(pblk, buf)
        } else {
            self.write_leaf(pblk, buf)
        }
    }

    /// Removes the entry at byte `off` of logical block `lblk` ([`Self::fix_at`]).
    pub fn remove_at(&mut self, lblk: u64, off: usize) -> Result<()> {
        self.fix_at(lblk, off, EntryFix::Remove)
    }

    /// Does the directory hold nothing but `.` and `..`?
    pub fn is_empty(&mut self) -> Result<bool> {
        let indexed = self.indexed();
        for lblk in 0..self.d.nblocks() {
            if indexed && (lblk == 0 || self.is_dx_node(lblk)?) {
                continue;
            }
            let (_, buf) = self.read_leaf(lblk)?;
            let live = self.live(lblk, &buf)?;
            let skip = if lblk == 0 { 2 } else { 0 };
            if live.len() > skip {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Is this an htree directory (the INDEX flag, honoured only with dir_index, as the
    /// kernel's is_dx)?
    pub(crate) fn indexed(&self) -> bool {
        self.dir_index && self.d.is_indexed()
    }

    /// Finds the live entry `name`.
    pub(crate) fn find(&mut self, name: &[u8]) -> Result<Option<Found>> {
        if self.indexed() {
            if name == b"." || name == b".." {
                return self.htree_find_dot(name);
            }
            return self.htree_find(name);
        }
        for lblk in 0..self.d.nblocks() {
            let (pblk, buf) = self.read_leaf(lblk)?;
            if let Some(f) = self.scan(lblk, pblk, buf, name)? {
                return Ok(Some(f));
            }
        }
        Ok(None)
    }

    /// Looks for `name` in `buf` (logical block `lblk`, walked over `area_len` bytes).
    pub(crate) fn scan_area(
        &self,
        lblk: u64,
        pblk: u64,
        buf: Vec<u8>,
        area_len: usize,
        name: &[u8],
    ) -> Result<Option<Found>> {
        let mut prev = None;
        let mut hit = None;
        for e in self.fmt.walk(&buf[..area_len]) {
            let e = e.map_err(|f| self.fault(lblk, f))?;
            if e.ino != 0 && e.name == name {
                hit = Some((e.off, e.rec_len, prev, e.ino, e.file_type));
                break;
            }
            prev = Some((e.off, e.rec_len));
        }
        Ok(hit.map(|(off, rec_len, prev, ino, ft)| Found {
            lblk,
            pblk,
            buf,
            off,
            rec_len,
            prev,
            ino,
            ft,
        }))
    }

    /// Looks for `name` in leaf `buf`.
    pub(crate) fn scan(
        &self,
        lblk: u64,
        pblk: u64,
        buf: Vec<u8>,
        name: &[u8],
    ) -> Result<Option<Found>> {
        let usable = self.fmt.usable();
        self.scan_area(lblk, pblk, buf, usable, name)
    }

    /// Linear directories: the first block with room (the kernel's first fit), else a new
    /// block; a single full block becomes an htree when dir_index is on.
    fn linear_add(&mut self, e: &Ent) -> Result<()> {
        let n = self.d.nblocks();
        if n == 0 {
            return Err(Error::corrupt(
                Structure::Directory,
                format!("directory {}: no blocks", self.d.ino()),
            )
            .with_ino(self.d.ino()));
        }
        let usable = self.fmt.usable();
        let mut room = None;
        let mut block0 = None;
        for lblk in 0..n {
            let (pblk, buf) = self.read_leaf(lblk)?;
            for d in self.live(lblk, &buf)? {
                if d.name == e.name.as_slice() {
                    return Err(exists());
                }
            }
            if room.is_none() {
                let slot = self.fmt.find_slot(&buf[..usable], e.name.len());
                if let Some(slot) = slot.map_err(|f| self.fault(lblk, f))? {
                    room = Some((pblk, buf, slot));
                } else if n == 1 {
                    block0 = Some(buf);
                }
            }
        }
        if let Some((pblk, mut buf, slot)) = room {
            self.fmt
                .insert(&mut buf[..usable], slot, &e.name, e.ino, e.ft);
            return self.write_leaf(pblk, buf);
        }
        if let (Some(buf), true) = (block0, self.dir_index) {
            return self.make_indexed(buf, e);
        }
        let pblk = self.d.append_block(self.m)?;
        let buf = self.fmt.pack(std::slice::from_ref(e));
        self.write_leaf(pblk, buf)
    }

    /// Frees the empty blocks at the end of a linear directory (never block 0).
    fn free_trailing_empty(&mut self) -> Result<()> {
        let n = self.d.nblocks();
        let mut keep = n;
        while keep > 1 {
            let (_, buf) = self.read_leaf(keep - 1)?;
            if !self.live(keep - 1, &buf)?.is_empty() {
                break;
            }
            keep -= 1;
        }
        if keep < n {
            self.d.truncate_blocks(self.m, keep)?;
        }
        Ok(())
    }

    /// The live entries of leaf `buf` (logical block `lblk`).
    pub(crate) fn live<'b>(&self, lblk: u64, buf: &'b [u8]) -> Result<Vec<dirent::Dirent<'b>>> {
        self.fmt
            .live(&buf[..self.fmt.usable()])
            .map_err(|f| self.fault(lblk, f))
    }

    /// Offset and rec_len of `..` in the first block's entries `area` (`.` first, `..`
    /// second, as the kernel requires).
    pub(crate) fn dotdot_at(&self, lblk: u64, area: &[u8]) -> Result<(usize, usize)> {
        let mut w = self.fmt.walk(area);
        let dot = w.next().transpose().map_err(|f| self.fault(lblk, f))?;
        let dotdot = w.next().transpose().map_err(|f| self.fault(lblk, f))?;
        match (dot, dotdot) {
            (Some(a), Some(b)) if a.name == b"." && b.name == b".." && a.ino != 0 && b.ino != 0 => {
                Ok((b.off, b.rec_len))
            }
            _ => Err(self.corrupt(lblk, "no '.' and '..' at the start".into())),
        }
    }

    /// Physical block of logical block `lblk` (checked against the directory's size).
    pub(crate) fn pblk(&mut self, lblk: u64) -> Result<u64> {
        let n = self.d.nblocks();
        if lblk >= n {
            return Err(self.corrupt(lblk, format!("beyond the directory's {n} blocks")));
        }
        self.d.pblk(self.m, lblk)
    }

    /// Reads a block as is.
    pub(crate) fn read_raw(&mut self, lblk: u64) -> Result<(u64, Vec<u8>)> {
        let pblk = self.pblk(lblk)?;
        let buf = self.m.read_meta(pblk)?;
        if buf.len() != self.fmt.bs as usize {
            return Err(self.corrupt(lblk, format!("read {} bytes", buf.len())));
        }
        Ok((pblk, buf))
    }

    /// Reads a leaf block, verifying its checksum tail when metadata_csum is on.
    pub(crate) fn read_leaf(&mut self, lblk: u64) -> Result<(u64, Vec<u8>)> {
        let (pblk, buf) = self.read_raw(lblk)?;
        if let Some(seed) = self.seed {
            if let Err(fault) = dirent::check_tail(seed, self.d.ino(), self.d.generation(), &buf) {
                return Err(self.corrupt(lblk, fault.to_string()));
            }
        }
        Ok((pblk, buf))
    }

    /// Writes a leaf block, setting its checksum tail when metadata_csum is on.
    pub(crate) fn write_leaf(&mut self, pblk: u64, mut buf: Vec<u8>) -> Result<()> {
        if let Some(seed) = self.seed {
            self.fmt.init_tail(&mut buf);
            let c = dirent::leaf_checksum(seed, self.d.ino(), self.d.generation(), &buf);
            let t = buf.len() - 4;
            buf[t..].copy_from_slice(&c.to_le_bytes());
        }
        self.m.write_meta(pblk, buf)
    }

    /// A corrupt-directory error naming this directory and block `lblk`.
    pub(crate) fn corrupt(&self, lblk: u64, what: String) -> Error {
        self.damaged(Structure::Directory, lblk, what)
    }

    /// As [`DirEdit::corrupt`], for damage in the htree index.
    pub(crate) fn corrupt_htree(&self, lblk: u64, what: String) -> Error {
        self.damaged(Structure::Htree, lblk, what)
    }

    /// Damage to `structure` in logical block `lblk` of this directory.
    fn damaged(&self, structure: Structure, lblk: u64, what: String) -> Error {
        let ino = self.d.ino();
        Error::corrupt(structure, format!("directory {ino} block {lblk}: {what}"))
            .with_ino(ino)
            .with_block(lblk)
    }

    /// A damaged entry chain in block `lblk`.
    pub(crate) fn fault(&self, lblk: u64, (off, f): (usize, DirentFault)) -> Error {
        self.corrupt(lblk, format!("entry at byte {off}: {f}"))
    }
}
