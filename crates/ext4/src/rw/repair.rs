//! The volume as a checker's repairs use it: opened over an image that may be damaged
//! (read as the checker reads it), with the group summaries it found in place of the
//! image's, and inodes rewritten field by field whatever their state. Every change goes
//! through the volume's transactions (journaled where the image has a journal), so a
//! crash during a repair leaves the image as it was or repaired, never half of it.

use super::entry_fix::EntryFix;
use super::meta::{Freed, Meta};
use super::volume::Volume;
use crate::format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use crate::format::inode::Inode;
use crate::format::inode::ROOT_INO;
use crate::format::superblock::Superblock;
use std::collections::BTreeMap;
use usfs_dev::Device;
use usfs_fs::{Error, FileType, NewNode, Result, Timestamp};

/// The name e2fsck reconnects lost inodes under.
const LOST_FOUND: &[u8] = b"lost+found";

/// What a checker found in the groups whose summaries it will rewrite.
#[derive(Clone, Debug, Default)]
pub struct Found {
    /// Group -> its block bitmap as found (a bit per block of the group, set = in use).
    pub block_bitmaps: BTreeMap<u32, Vec<u8>>,
    /// Group -> its inode bitmap as found (a bit per inode, set = in use) and the number
    /// of directories among its inodes.
    pub inode_bitmaps: BTreeMap<u32, (Vec<u8>, u32)>,
    /// The round fixes bad descriptor checksums (e2fsck's PR_0_GDT_CSUM): the groups
    /// whose checksum is wrong lose their uninit flags and unused-inodes count too.
    pub distrust_bad_descriptors: bool,
}

/// Changed blocks after which a repair commits (1 MiB of 4 KiB blocks): a commit costs
/// two flushes, the running transaction holds its blocks in memory, and a repair's
/// peak memory is to stay within e2fsck's, which writes in place (at 32 MiB, 100k
/// fixed inodes of a 1M-inode image took 55 MiB against e2fsck's 23; at 4 MiB, 35).
/// On bench/fsck-repair's 1M-inode files image, 1 MiB against 4 MiB: peak RSS 8.4
/// against 10.8 MiB with 1k problems, 11.1 against 14.7 with 100k; on dir25 with 100k,
/// 5% more time (medians of four), within the bench's run-to-run spread.
pub const REPAIR_TXN_BLOCKS: usize = 256;

impl Volume {
    /// Opens the image on `dev` (writable; its journal already replayed) for a repair:
    /// the groups `found` names get its bitmaps and their descriptors, bitmaps and the
    /// superblock's counts are rewritten at the first commit, with every descriptor whose
    /// checksum is wrong; nothing else changes until the repair changes it. Features usfs cannot write are refused as for any writer, but quotas (the repair counts their usage again).
    pub fn open_for_repair(dev: Box<dyn Device>, found: &Found) -> Result<Volume> {
        let mut v = Volume::assemble_with(dev, true, Some(found), true)?;
        v.mark_in_use()?;
        let groups = found.block_bitmaps.keys().chain(found.inode_bitmaps.keys());
        v.txn.groups.extend(groups.copied());
        // Descriptors whose checksum is wrong are written again (with it recomputed).
        let core = &v.fs.core;
        let bad: Vec<u32> = (0..core.geo.group_count)
            .filter(|&g| core.desc_checksum_mismatch(g, core.group(g)).is_some())
            .collect();
        // (And, in the round that fixes them, as e2fsck's fix of PR_0_GDT_CSUM, such a
        // group's uninit flags and unused-inodes count go: nothing it says is trusted.
        // The allocators, seeded already, write the group's bitmaps as they hold them.)
        v.txn.groups.extend(bad.iter().copied());
        for g in bad.into_iter().filter(|_| found.distrust_bad_descriptors) {
            v.repair_group(g, |d| {
                d.set_bg_flags(d.bg_flags() & !(BG_INODE_UNINIT | BG_BLOCK_UNINIT));
                d.set_itable_unused(0);
            });
        }
        v.sb_dirty = true;
        Ok(v)
    }

    /// Rewrites inode `ino` in its table whatever its state (a bad checksum, mode or
    /// dtime): `edit` changes the raw inode, whose checksum is then set.
    pub fn repair_inode(&mut self, ino: u32, edit: impl FnOnce(&mut Inode<Vec<u8>>)) -> Result<()> {
        let ino = self.fs.check_ino(ino as u64)?;
        let mut rec = super::InodeRec {
            ino,
            raw: self.fs.read_inode_raw(ino)?,
        };
        edit(&mut rec.raw);
        self.put_inode(&mut rec)
    }

    /// Zeroes the pointer at word `index` of inode `ino`'s block map: in its i_block
    /// (`map` 0) or in the indirect block `map`, which must hold `names` there (e2fsck's
    /// "CLEARED" of a bad-blocks list entry; the block it named is let go, and i_blocks
    /// is the next check's).
    pub fn clear_map_pointer(&mut self, ino: u32, map: u64, index: u32, names: u32) -> Result<()> {
        let at = index as usize * 4;
        let word = |b: &[u8]| {
            b.get(at..at + 4)
                .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        };
        if map == 0 {
            let raw = self.fs.read_inode_raw(self.fs.check_ino(ino as u64)?)?;
            if word(&raw.i_block()[..]) != Some(names) {
                return Err(Error::Invalid);
            }
            return self.repair_inode(ino, |r| {
                let mut b: [u8; 60] = r.i_block()[..].try_into().expect("60 bytes");
                b[at..at + 4].fill(0);
                r.set_i_block(&b);
            });
        }
        let mut block = self.read_meta(map)?;
        if word(&block) != Some(names) {
            return Err(Error::Invalid);
        }
        block[at..at + 4].fill(0);
        self.write_meta(map, block)
    }

    /// `/lost+found`, made (mode 0700, owned by root) when the root has no such entry, as
    /// e2fsck's pass 3 makes it.
    pub fn lost_found(&mut self) -> Result<u32> {
        let root = self.load_dir(ROOT_INO)?;
        if let Some(ino) = self.find(&root, LOST_FOUND)? {
            return Ok(ino);
        }
        let node = NewNode {
            file_type: FileType::Directory,
            perm: 0o700,
            uid: 0,
            gid: 0,
            rdev: 0,
        };
        self.mkdir(ROOT_INO, LOST_FOUND, node)
    }

    /// Puts the group descriptors stored from block `backup` (a backup copy, after a
    /// backup superblock) in place of the ones in use: they are written over the primary
    /// table (and the backups) at the commit, with every group's bitmaps.
    pub fn restore_descriptors(&mut self, backup: u64) -> Result<()> {
        let geo = &self.fs.core.geo;
        let (n, ds, groups) = (
            geo.gdt_blocks() as u64,
            geo.desc_size as usize,
            geo.group_count,
        );
        let mut raw = Vec::new();
        for b in backup..backup + n {
            raw.extend_from_slice(&self.read_meta(b)?);
        }
        for g in 0..groups {
            let at = g as usize * ds;
            self.fs.core.groups[g as usize] = GroupDesc::from_raw(&raw[at..at + ds]);
            self.txn.groups.insert(g);
        }
        self.fixed_meta = None;
        self.sb_dirty = true;
        Ok(())
    }

    /// Gives group `g` a new block or inode bitmap (`inode`) in place of one the
    /// descriptor puts outside the file system (e2fsck's "Relocate?"): the first free
    /// block from the group's start (of what the check found in use); its contents are
    /// written with the group's summary at the commit.
    pub fn relocate_bitmap(&mut self, g: u32, inode: bool) -> Result<u64> {
        let goal = self.fs.core.geo.group_first_block(g);
        let (blk, _) = self.alloc_blocks(0, goal, 1)?;
        self.repair_group(g, |d| {
            if inode {
                d.set_inode_bitmap(blk)
            } else {
                d.set_block_bitmap(blk)
            }
        });
        Ok(blk)
    }

    /// Puts group `g`'s block or inode bitmap (`inode`) at block `b`, which the check
    /// counted in use for it (e2fsck's relocation of a bitmap found missing); its
    /// contents are written with the group's summary at the commit.
    pub fn place_bitmap(&mut self, g: u32, inode: bool, b: u64) -> Result<()> {
        if b < self.fs.core.geo.first_data_block || b >= self.fs.core.geo.blocks_count {
            return Err(Error::Invalid);
        }
        self.repair_group(g, |d| {
            if inode {
                d.set_inode_bitmap(b)
            } else {
                d.set_block_bitmap(b)
            }
        });
        Ok(())
    }

    /// Gives group `g` a new inode table (e2fsck's "Relocate?"): a copy of the one at
    /// `from` (a table over other metadata), or zeroed for one the descriptor puts
    /// outside the file system (with e2fsck's warning: the inodes of the group are lost,
    /// and the next check finds what named them).
    pub fn relocate_inode_table(&mut self, g: u32, from: Option<u64>) -> Result<u64> {
        let geo = &self.fs.core.geo;
        let n =
            (geo.inodes_per_group as u64 * geo.inode_size as u64).div_ceil(geo.block_size as u64);
        let goal = geo.group_first_block(g);
        let (blk, got) = self.alloc_blocks(0, goal, n as u32)?;
        if u64::from(got) < n {
            self.free_blocks(0, blk, u64::from(got), Freed::Metadata)?;
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::ENOSPC)));
        }
        let zero = vec![0u8; self.fs.core.geo.block_size as usize];
        for k in 0..n {
            let data = match from {
                Some(old) => self.read_meta(old + k)?,
                None => zero.clone(),
            };
            self.write_meta(blk + k, data)?;
        }
        self.repair_group(g, |d| d.set_inode_table(blk));
        Ok(blk)
    }

    /// Makes a new root directory in inode 2 (e2fsck's "Root inode not allocated.
    /// Allocate?"; what inode 2 held is overwritten): mode 0755, owned by root, `.` and
    /// `..` naming it, two links.
    pub fn make_root(&mut self) -> Result<()> {
        let mut rec = self.take_inode(ROOT_INO, FileType::Directory, 0o755);
        self.init_map(&mut rec);
        rec.raw.set_i_links_count(2);
        self.dir_init(&mut rec, ROOT_INO)?;
        self.put_inode(&mut rec)
    }

    /// Unlinks `/lost+found` when it is not a directory (if still there) and makes a new one (e2fsck's
    /// "/lost+found is not a directory. Unlink?"); the old inode, no longer named, is the
    /// next check's to reconnect.
    pub fn replace_lost_found(&mut self) -> Result<u32> {
        let mut root = self.inode_any(ROOT_INO)?;
        // (The entry may be gone already: removed in the same round as one naming an
        // inode in a bad block.)
        self.dir_edit(&mut root, |e| match e.remove(LOST_FOUND) {
            Ok(_) | Err(Error::NotFound) => Ok(()),
            Err(e) => Err(e),
        })?;
        self.put_inode(&mut root)?;
        self.lost_found()
    }

    /// `/lost+found` as [`Volume::lost_found`] makes it, or the root when there is no
    /// inode or block left to make it with (e2fsck's "Cannot allocate space for
    /// /lost+found. Place lost files in root directory instead?"; nothing is allocated
    /// then).
    pub fn lost_found_or_root(&mut self) -> Result<u32> {
        let root = self.load_dir(ROOT_INO)?;
        if let Some(ino) = self.find(&root, LOST_FOUND)? {
            return Ok(ino);
        }
        if self.inodes.free_inodes() == 0 || self.free_block_count() == 0 {
            return Ok(ROOT_INO);
        }
        self.lost_found()
    }

    /// Connects inode `ino`, which no entry names, to `/lost+found` (or the root, when
    /// there is no room to make it) as `#ino` (e2fsck's reconnection): a file gets one
    /// link, a directory's `..` names its new parent (whose link count grows); the counts
    /// of the rest are pass 4's to fix.
    pub fn reconnect(&mut self, ino: u32) -> Result<()> {
        let lf = self.lost_found_or_root()?;
        let mut rec = self.inode_any(ino)?;
        let ft = rec.file_type()?;
        let mut d = self.load_dir(lf)?;
        let name = format!("#{ino}");
        self.dir_add(&mut d, name.as_bytes(), ino, ft)?;
        if ft == FileType::Directory {
            self.dir_set_dotdot(&mut rec, lf)?;
            self.inc_dir_links(&mut d)?;
        } else {
            rec.raw.set_i_links_count(1);
        }
        self.put_inode(&mut rec)?;
        self.touch(&mut d, true);
        self.put_inode(&mut d)
    }

    /// Removes the entry at byte `off` of block `lblk` of directory `dir` (e2fsck's
    /// clearing of an entry in pass 2).
    pub fn remove_entry(&mut self, dir: u32, lblk: u64, off: usize) -> Result<()> {
        // (As e2fsck, the directory's times stay.)
        self.entry_fix(dir, lblk, off, EntryFix::Remove)
    }

    /// Sets the file type of the entry at byte `off` of logical block `lblk` of
    /// directory `dir` to `ft` (a dirent file type code; a checker's fix).
    pub fn set_entry_type(&mut self, dir: u32, lblk: u64, off: usize, ft: u8) -> Result<()> {
        self.entry_fix(dir, lblk, off, EntryFix::SetType(ft))
    }

    /// Applies a checker's fix of the entry at byte `off` of directory `dir`: `block` to
    /// a directory of blocks, `inline` to an inline directory (whose entries the checker
    /// names by their offset in the inline store).
    fn entry_fix(&mut self, dir: u32, lblk: u64, off: usize, fix: EntryFix) -> Result<()> {
        let mut d = self.inode_any(dir)?;
        if Volume::is_inline(&d) {
            self.inline_fix(&mut d, off, fix)?;
        } else {
            self.dir_edit(&mut d, |e| e.fix_at(lblk, off, fix))?;
        }
        self.put_inode(&mut d)
    }

    /// [`Volume::entry_fix`] for a salvage, which in a block directory may be of an
    /// htree index node (the index goes: `DirEdit::salvage`).
    fn entry_fix_salvage(&mut self, dir: u32, lblk: u64, off: usize) -> Result<()> {
        let mut d = self.inode_any(dir)?;
        if Volume::is_inline(&d) {
            self.inline_fix(&mut d, off, EntryFix::Salvage)?;
        } else {
            self.dir_edit(&mut d, |e| e.salvage(lblk).map(|_| ()))?;
        }
        self.put_inode(&mut d)
    }

    /// Rehashes directory `dir` as e2fsck's pass 3A does (see `DirEdit::rehash`); an
    /// inline directory is left as it is, and so is one a fix has deleted (no links,
    /// dtime set), as pass 3A passes over what is no directory in use.
    pub fn rehash_dir(&mut self, dir: u32) -> Result<()> {
        let mut d = self.inode_any(dir)?;
        if Volume::is_inline(&d) || d.raw.i_links_count() == 0 || d.raw.i_dtime() != 0 {
            return Ok(());
        }
        self.dir_edit(&mut d, |e| e.rehash())?;
        self.put_inode(&mut d)
    }

    /// Fixes the names directory `dir` holds twice as e2fsck does (see `DirEdit::
    /// fix_duplicates`).
    pub fn fix_duplicate_entries(&mut self, dir: u32) -> Result<()> {
        let mut d = self.inode_any(dir)?;
        self.dir_edit(&mut d, |e| e.fix_duplicates().map(|_| ()))?;
        self.put_inode(&mut d)
    }

    /// Makes the name of the entry at byte `off` of logical block `lblk` of directory
    /// `dir` legal as e2fsck does: each '/' and NUL becomes '.'; an empty name's entry is
    /// removed.
    pub fn fix_entry_name(&mut self, dir: u32, lblk: u64, off: usize) -> Result<()> {
        self.entry_fix(dir, lblk, off, EntryFix::FixName)
    }

    /// Changes superblock fields (a checker's fix: a feature flag, a reserved-block or
    /// quota-inode field); the superblock and its checksum are written at the commit.
    pub fn edit_superblock(&mut self, edit: impl FnOnce(&mut Superblock<Vec<u8>>)) {
        edit(&mut self.fs.core.sb);
        self.sb_dirty = true;
        self.fixed_meta = None;
    }

    /// Turns on read-only-compatible feature `flag` (e2fsck's fix of a file system that
    /// uses it without saying so, e.g. dir_nlink).
    pub fn add_ro_compat(&mut self, flag: u32) {
        let sb = &mut self.fs.core.sb;
        sb.set_s_feature_ro_compat(sb.s_feature_ro_compat() | flag);
        // A revision 0 superblock has no features: it becomes dynamic, with revision
        // 0's inode size and first inode (e2fsprogs' ext2fs_update_dynamic_rev).
        if sb.s_rev_level() == 0 {
            sb.set_s_rev_level(1);
            sb.set_s_first_ino(11);
            sb.set_s_inode_size(128);
        }
        self.sb_dirty = true;
    }

    /// Sets the checksum of xattr block `blk` (metadata_csum; nothing without it).
    pub fn fix_xattr_checksum(&mut self, blk: u64) -> Result<()> {
        let Some(seed) = self.fs.core.csum_seed else {
            return Ok(());
        };
        let mut b = self.read_meta(blk)?;
        let c = crate::format::xattr::block_checksum(seed, blk, &b);
        let at = crate::format::xattr::BLOCK_CHECKSUM_OFFSET;
        b[at..at + 4].copy_from_slice(&c.to_le_bytes());
        self.write_meta(blk, b)
    }

    /// Sets xattr block `blk`'s reference count to `n`, the inodes found using it
    /// (e2fsck's PR_1_EXTATTR_REFCOUNT), and its checksum with it.
    pub fn set_xattr_refcount(&mut self, blk: u64, n: u32) -> Result<()> {
        let mut b = self.read_meta(blk)?;
        crate::format::xattr::XattrBlockHeader::new(&mut b[..32])
            .ok_or(Error::Invalid)?
            .set_h_refcount(n);
        self.write_meta(blk, b)?;
        self.fix_xattr_checksum(blk)
    }

    /// Sets the checksum tail of extent block `blk` of inode `ino` (an extent block that
    /// passes its checks but not its checksum; nothing without metadata_csum).
    pub fn fix_extent_checksum(&mut self, ino: u32, blk: u64) -> Result<()> {
        use crate::format::extent::{block_checksum, tail_offset};
        let Some(seed) = self.fs.core.csum_seed else {
            return Ok(());
        };
        let generation = self.fs.read_inode_raw(ino)?.i_generation();
        let mut b = self.read_meta(blk)?;
        let max = u16::from_le_bytes([b[4], b[5]]);
        let t = tail_offset(max);
        if t + 4 > b.len() {
            return Err(usfs_fs::Error::corrupt(
                usfs_fs::Structure::ExtentTree,
                format!("extent block {blk}: eh_max {max} does not fit the block"),
            ));
        }
        let c = block_checksum(seed, ino, generation, &b, max);
        b[t..t + 4].copy_from_slice(&c.to_le_bytes());
        self.write_meta(blk, b)
    }

    /// Sets the checksum in the tail of leaf block `blk` of directory `dir` (a block
    /// that passes its checks but not its checksum; nothing without metadata_csum).
    pub fn fix_dir_checksum(&mut self, dir: u32, blk: u64) -> Result<()> {
        let Some(seed) = self.fs.core.csum_seed else {
            return Ok(());
        };
        let generation = self.fs.read_inode_raw(dir)?.i_generation();
        let mut b = self.read_meta(blk)?;
        let c = crate::format::dirent::leaf_checksum(seed, dir, generation, &b);
        let t = b.len() - 4;
        b[t..].copy_from_slice(&c.to_le_bytes());
        self.write_meta(blk, b)
    }

    /// Sets the checksum tail of dx block `blk` (logical block `lblk`: 0 is the root) of
    /// directory `dir` (an htree node that passes its checks but not its checksum).
    pub fn fix_dx_checksum(&mut self, dir: u32, lblk: u64, blk: u64) -> Result<()> {
        use crate::format::dx::{check_header, node_checksum, DX_ENTRY_SIZE};
        use crate::walk::dx::DxKind;
        let Some(seed) = self.fs.core.csum_seed else {
            return Ok(());
        };
        let generation = self.fs.read_inode_raw(dir)?.i_generation();
        let mut b = self.read_meta(blk)?;
        let kind = if lblk == 0 {
            DxKind::Root
        } else {
            DxKind::Node
        };
        let co = kind.count_offset();
        let (count, limit) = check_header(&b, co, true).map_err(|f| {
            usfs_fs::Error::corrupt(
                usfs_fs::Structure::Htree,
                format!("directory {dir} block {lblk}: {f:?}"),
            )
        })?;
        let end = co + limit * DX_ENTRY_SIZE;
        let c = node_checksum(seed, dir, generation, &b, co, count, end);
        b[end + 4..end + 8].copy_from_slice(&c.to_le_bytes());
        self.write_meta(blk, b)
    }

    /// Changes group `g`'s descriptor with `edit`; it is written (with its checksum and
    /// the counts the allocators hold) at the commit.
    pub fn repair_group(&mut self, g: u32, edit: impl FnOnce(&mut GroupDesc<[u8; 64]>)) {
        if let Some(d) = self.fs.core.groups.get_mut(g as usize) {
            edit(d);
            self.txn.groups.insert(g);
            self.fixed_meta = None;
        }
    }

    /// Points directory `ino`'s `..` at `parent` (making `.` and `..` first where its
    /// first block lacks them, as e2fsck's pass 2 would have).
    pub fn set_dotdot(&mut self, ino: u32, parent: u32) -> Result<()> {
        let mut rec = self.inode_any(ino)?;
        if !rec.raw.has_flag(crate::format::inode::flags::INLINE_DATA) {
            self.dir_edit(&mut rec, |e| e.fix_dots().map(|_| ()))?;
        }
        self.dir_set_dotdot(&mut rec, parent)?;
        self.put_inode(&mut rec)
    }

    /// Clears inode `ino` as e2fsck clears an inode it gives up on: no links, deleted
    /// now, its blocks and its place in the inode bitmap freed.
    pub fn clear_inode(&mut self, ino: u32) -> Result<()> {
        let mut rec = self.inode_any(ino)?;
        rec.raw.set_i_links_count(0);
        self.release(&mut rec)
    }

    /// Salvages leaf block `lblk` of directory `dir` whose chain of entries is broken, as
    /// e2fsck's pass 2 does (see `dir_salvage`), and sets its checksum (an inline
    /// directory: the entry area holding byte `off` of its store).
    pub fn salvage_dir_block(&mut self, dir: u32, lblk: u64, off: usize) -> Result<()> {
        self.entry_fix_salvage(dir, lblk, off)
    }

    /// Makes the first entries of directory `dir` `.` and `..` as e2fsck's pass 2 does
    /// (see `DirEdit::fix_dots`).
    pub fn fix_dots(&mut self, dir: u32) -> Result<()> {
        let mut d = self.inode_any(dir)?;
        if Volume::is_inline(&d) {
            // An inline directory's `.` is implied and its `..` a field: a bad one names
            // the root until pass 3 sets the parent.
            self.inline_dir_set_dotdot(&mut d, crate::format::inode::ROOT_INO);
        } else {
            self.dir_edit(&mut d, |e| e.fix_dots().map(|_| ()))?;
        }
        self.put_inode(&mut d)
    }

    /// Drops the bad htree index of directory `dir`, leaving it linear (see
    /// `DirEdit::drop_index`).
    pub fn drop_dir_index(&mut self, dir: u32) -> Result<()> {
        let mut d = self.inode_any(dir)?;
        self.dir_edit(&mut d, |e| e.drop_index())?;
        self.put_inode(&mut d)
    }

    /// Repairs the hole at logical blocks `from..to` of directory `dir` as e2fsck does:
    /// an extent-mapped directory's holes are closed by moving its blocks down
    /// ([`Volume::collapse_dir_holes`]); a block-mapped one's are filled with empty leaf
    /// blocks ("has an unallocated block. Allocate?").
    pub fn fix_dir_hole(&mut self, dir: u32, from: u64, to: u64) -> Result<()> {
        let mut d = self.inode_any(dir)?;
        if d.raw.has_flag(crate::format::inode::flags::EXTENTS) {
            return self.collapse_dir_holes(dir);
        }
        // e2fsck's largest directory without large_dir is 2^21 blocks of 1 KiB (less for
        // larger blocks): a hole past that is a block too far, not one to fill.
        let limit = 1u64 << (21 - self.fs.core.geo.block_size.trailing_zeros().min(20) + 10);
        if to.saturating_sub(from) > limit {
            return Err(usfs_fs::Error::corrupt(
                usfs_fs::Structure::Directory,
                format!(
                    "directory {dir}: a hole of {} blocks is too large to fill",
                    to - from
                ),
            )
            .with_ino(dir));
        }
        let bs = self.fs.core.geo.block_size;
        for lblk in from..to {
            let goal = self.goal_for(&d, lblk)?;
            let (p, _) = self.alloc_blocks(dir, goal, 1)?;
            self.map_add(&mut d, lblk, p, 1, false)?;
            d.add_blocks(1, bs);
            self.dir_edit(&mut d, |e| e.write_empty_leaf(p))?;
        }
        // As e2fsck's allocate_dir_block, i_size covers the new blocks.
        let end = to * u64::from(bs);
        if d.raw.size() < end {
            d.raw.set_size(end);
        }
        self.put_inode(&mut d)
    }

    /// Applies one fix as an operation of its own: a fix that fails is undone, and the
    /// rest of the transaction stays as it was.
    pub fn apply_fix(&mut self, fix: impl FnOnce(&mut Volume) -> Result<()>) -> Result<()> {
        self.begin_op();
        match fix(self) {
            Ok(()) => {
                self.end_op();
                Ok(())
            }
            Err(e) => {
                self.rollback()?;
                Err(e)
            }
        }
    }

    /// Commits the repair so far once its transaction is as large as one may be (half
    /// the journal, which must hold a transaction whole, at most [`REPAIR_TXN_BLOCKS`]);
    /// its blocks go home unflushed (checkpoint.rs), the log is marked empty when full.
    /// Returns whether it committed.
    pub fn commit_when_full(&mut self) -> Result<bool> {
        let cap = self
            .journal
            .as_ref()
            .map_or(REPAIR_TXN_BLOCKS, |j| j.capacity() / 2);
        if self.txn.dirty.len() < cap.clamp(16, REPAIR_TXN_BLOCKS) {
            return Ok(false);
        }
        self.commit()?;
        Ok(true)
    }

    /// The clock repairs stamp times with (dtime of a deleted inode).
    pub fn now(&self) -> Timestamp {
        (self.clock)()
    }

    /// Commits the repair and closes the volume, marking the file system checked as
    /// e2fsck does: valid, no errors recorded, mount count 0, last check now. `finished`:
    /// the repair's last write, where e2fsck's cleanup resets the descriptors' uninit
    /// flags (not after a round the next check must look at again: a group whose
    /// unused inodes a fix revealed would be hidden again).
    pub fn close_repaired(&mut self, finished: bool) -> Result<()> {
        let now = self.now().sec;
        self.fs.core.sb.mark_checked(now);
        self.sb_dirty = true;
        if finished {
            self.commit()?;
            self.reset_uninit()?;
        }
        self.close()
    }

    /// e2fsck's closing ext2fs_set_gdt_csum ([`uninit_reset`]) on descriptors the
    /// commits have brought up to date; the descriptor blocks of the groups that change
    /// go into the transaction.
    fn reset_uninit(&mut self) -> Result<()> {
        let geo = self.fs.core.geo.clone();
        let (ds, seed, uuid) = (
            geo.desc_size as usize,
            self.fs.core.csum_seed,
            *self.fs.core.sb.s_uuid(),
        );
        let mut blocks = std::collections::BTreeSet::new();
        for g in 0..geo.group_count {
            let mut d = self.fs.core.groups[g as usize].clone();
            let Some((flags, unused)) = uninit_reset(&geo, g, &d, self.inodes.high_water(g)) else {
                continue;
            };
            d.set_bg_flags(flags);
            d.set_itable_unused(unused);
            d.update_checksum(g, ds, seed, &uuid);
            self.fs.core.groups[g as usize] = d;
            blocks.insert(geo.desc_location(g).0);
        }
        self.write_descriptor_blocks(blocks)
    }
}

/// e2fsck's closing ext2fs_set_gdt_csum for group `g` of descriptor `d`, whose last
/// inode in use is its `high_water`th: a group with every block free (not the last)
/// gets BLOCK_UNINIT; one with every inode free INODE_UNINIT and all its inodes unused;
/// any other loses INODE_UNINIT and counts as unused the inodes past its last one in use
/// (raised too, where the kernel only lowers it). Only with descriptor checksums. The
/// flags and unused-inodes count `d` should have, `None` where it has them.
pub fn uninit_reset<B: AsRef<[u8]>>(
    geo: &crate::format::geometry::Geometry,
    g: u32,
    d: &GroupDesc<B>,
    high_water: u32,
) -> Option<(u16, u32)> {
    if !crate::alloc::seed::uninit_tracking(geo) {
        return None;
    }
    let ipg = geo.inodes_per_group;
    let mut flags = d.bg_flags();
    if d.free_blocks_count() == geo.blocks_per_group && g != geo.group_count - 1 {
        flags |= BG_BLOCK_UNINIT;
    }
    let unused = if d.free_inodes_count() == ipg {
        flags |= BG_INODE_UNINIT;
        ipg
    } else {
        flags &= !BG_INODE_UNINIT;
        ipg - high_water
    };
    ((flags, unused) != (d.bg_flags(), d.itable_unused())).then_some((flags, unused))
}

/// Would [`uninit_reset`] change a descriptor of the file system `core` reads (its
/// inode bitmaps read for the high-water marks; an INODE_UNINIT group's is all free)?
pub fn uninit_stale(core: &crate::VolumeCore) -> Result<bool> {
    let geo = core.geometry();
    for g in 0..geo.group_count {
        let d = core.group(g);
        let high = if d.free_inodes_count() == geo.inodes_per_group || d.has_flag(BG_INODE_UNINIT) {
            0
        } else {
            let bm =
                core.read_block(d.inode_bitmap(), usfs_fs::Structure::Bitmap, "inode bitmap")?;
            crate::alloc::BitSet::from_bytes(&bm, geo.inodes_per_group).high_water()
        };
        if uninit_reset(geo, g, d, high).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}
