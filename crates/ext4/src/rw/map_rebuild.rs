//! A repair's rebuild of one inode's block map: the map is walked as the checker walks
//! it (leniently: pointers out of range, unreadable or bad nodes and out-of-order extents
//! are left out, as e2fsck clears them), then built again from nothing with the runs
//! that are left. For e2fsck's pass 1D cloning of multiply-claimed blocks the blocks the
//! caller names as shared are copied to new blocks first, so that the other claimant
//! keeps the original. The
//! old tree blocks (extent nodes, indirect blocks) leave the map: freed when this inode
//! was their only owner, else left to the other. The inode's xattr block is cloned the
//! same way when shared.

use super::blockmap::{BlockMap, MetaSource};
use super::meta::{Freed, Meta};
use super::volume::Volume;
use crate::format::inode::flags;
use crate::format::xattr::{block_checksum, XattrBlockHeader, BLOCK_CHECKSUM_OFFSET};
use crate::walk::{self, MapIssue, MapVisitor, Mode, Scratch};
use std::ops::ControlFlow;
use usfs_fs::{Error, Result};

/// What a lenient walk of a map finds: data runs (lblk, pblk, len, unwritten) in key
/// order and the tree blocks.
#[derive(Default)]
struct Found {
    runs: Vec<(u64, u64, u64, bool)>,
    nodes: Vec<u64>,
}

/// How [`Volume::rebuild`] lays the runs out again.
#[derive(Clone, Copy)]
struct Shape {
    /// Move runs down to close holes.
    collapse: bool,
    /// Leave out logical blocks from this one on.
    end: u64,
    /// Map uninitialized runs as initialized.
    written: bool,
}

impl Default for Shape {
    fn default() -> Shape {
        Shape {
            collapse: false,
            end: u64::MAX,
            written: false,
        }
    }
}

impl MapVisitor for Found {
    fn data(&mut self, lblk: u64, pblk: u64, len: u64, unwritten: bool) {
        self.runs.push((lblk, pblk, len, unwritten));
    }
    fn node(&mut self, blk: u64) {
        self.nodes.push(blk);
    }
    fn issue(&mut self, _: MapIssue) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

impl Volume {
    /// Builds the block map of inode `ino` again, copying each data block for which
    /// `shared(block)` is true to a new block and mapping the copy in its place; tree
    /// blocks for which `shared` is true are left to their other owner, the rest freed.
    /// `shared` is asked once per block the map holds, in map order (so a caller counting
    /// claims can let the last one keep the original). i_blocks follows: the data count
    /// is unchanged, the tree blocks are those of the new map. An inode without a block
    /// map (inline data, fast symlink, device) is left alone.
    pub fn rebuild_map(&mut self, ino: u32, shared: &mut dyn FnMut(u64) -> bool) -> Result<()> {
        self.rebuild(ino, shared, Shape::default())
    }

    /// Closes the holes in the map of extent-mapped directory `dir` by moving each
    /// extent after a gap down to the next logical block (e2fsck's "block B should be at
    /// block C"); its i_size follows in the next check.
    pub fn collapse_dir_holes(&mut self, dir: u32) -> Result<()> {
        let shape = Shape {
            collapse: true,
            ..Shape::default()
        };
        self.rebuild(dir, &mut |_| false, shape)
    }

    /// Builds the map of directory `dir` again without the blocks at logical `end` and
    /// past (e2fsck's "causes directory to be too big. CLEARED": the checker left them
    /// unclaimed, so they are not freed here), and, if `written`, with its uninitialized
    /// extents marked initialized (e2fsck's fix of a directory block in one).
    pub fn rebuild_dir_map(&mut self, dir: u32, end: u64, written: bool) -> Result<()> {
        let shape = Shape {
            end,
            written,
            ..Shape::default()
        };
        self.rebuild(dir, &mut |_| false, shape)
    }

    /// [`Volume::rebuild_map`] in the given shape.
    fn rebuild(
        &mut self,
        ino: u32,
        shared: &mut dyn FnMut(u64) -> bool,
        shape: Shape,
    ) -> Result<()> {
        let collapse = shape.collapse;
        let mut rec = self.inode_any(ino)?;
        if !self.has_block_map(&rec) {
            return Ok(());
        }
        let extents = rec.raw.has_flag(flags::EXTENTS);
        let found = self.walk_map(&rec);
        let mut fresh = [0u8; 60];
        if extents {
            BlockMap::init_extent_root(&mut fresh);
        }
        rec.raw.set_i_block(&fresh);
        let bs = self.geo().block_size;
        let mut shared = self.keeping_fixed_metadata(shared);
        for &blk in &found.nodes {
            if !shared(blk) {
                self.free_blocks(ino, blk, 1, Freed::Metadata)?;
            }
        }
        rec.add_blocks(-(found.nodes.len() as i64), bs);
        let mut next = 0;
        for &(lblk, pblk, len, unwritten) in &found.runs {
            let kept = len.min(shape.end.saturating_sub(lblk));
            // Blocks left out are no longer the inode's (not freed: see rebuild_dir_map).
            rec.add_blocks(-((len - kept) as i64), bs);
            if kept == 0 {
                continue;
            }
            let len = kept;
            let unwritten = unwritten && !shape.written;
            let lblk = if collapse { lblk.min(next) } else { lblk };
            next = lblk + len;
            // Each block is asked about once, then runs of one fate are mapped together.
            let fates: Vec<bool> = (0..len).map(|k| shared(pblk + k)).collect();
            let mut i = 0;
            while i < fates.len() {
                let copy = fates[i];
                let n = fates[i..].iter().take_while(|&&f| f == copy).count();
                let (l, p) = (lblk + i as u64, pblk + i as u64);
                if copy {
                    self.map_copies(&mut rec, l, p, n as u64, unwritten)?;
                } else {
                    self.map_add(&mut rec, l, p, n as u32, unwritten)?;
                }
                i += n;
            }
        }
        self.put_inode(&mut rec)
    }

    /// `shared`, but true for the file system's own blocks too (superblock and
    /// descriptor copies, reserved GDT blocks, bitmaps, inode tables): a map rebuilt or
    /// deleted never frees those, whatever damaged map named them, and data found on them
    /// is copied off (`shared` is still asked first, so a caller counting claims sees
    /// every one).
    fn keeping_fixed_metadata<'s>(
        &mut self,
        shared: &'s mut dyn FnMut(u64) -> bool,
    ) -> impl FnMut(u64) -> bool + 's {
        let runs = self
            .fixed_meta
            .get_or_insert_with(|| fixed_metadata(&self.fs.core).into())
            .clone();
        move |b| {
            let asked = shared(b);
            let i = runs.partition_point(|&(start, _)| start <= b);
            asked || (i > 0 && b < runs[i - 1].1)
        }
    }

    /// The runs and tree blocks of `rec`'s block map, walked leniently (bad parts skipped).
    fn walk_map(&self, rec: &super::InodeRec) -> Found {
        let mut root = *rec.raw.i_block();
        let extents = rec.raw.has_flag(flags::EXTENTS);
        let cx = BlockMap::new(rec.ino, rec.raw.i_generation(), &mut root, extents).cx(self);
        let mut found = Found::default();
        let mut scratch = Scratch::default();
        let src = MetaSource(self);
        let _ = if extents {
            walk::extent::scan(&src, &cx, &root, Mode::Lenient, &mut scratch, &mut found)
        } else {
            walk::indirect::scan(&src, &cx, &root, &mut scratch, &mut found)
        };
        found
    }

    /// Deletes inode `ino` as e2fsck does when it cannot clone its shared blocks: its
    /// blocks are freed except those for which `shared(block)` is true (another claimant
    /// keeps them), and the inode itself is freed (no links, deleted now). Entries naming
    /// it are the next check's to clear.
    pub fn delete_sharing(&mut self, ino: u32, shared: &mut dyn FnMut(u64) -> bool) -> Result<()> {
        let mut rec = self.inode_any(ino)?;
        let mut shared = self.keeping_fixed_metadata(shared);
        if self.has_block_map(&rec) {
            let found = self.walk_map(&rec);
            for &blk in &found.nodes {
                if !shared(blk) {
                    self.free_blocks(ino, blk, 1, Freed::Metadata)?;
                }
            }
            for &(_, pblk, len, _) in &found.runs {
                for b in pblk..pblk + len {
                    if !shared(b) {
                        self.free_blocks(ino, b, 1, Freed::Data)?;
                    }
                }
            }
            let mut fresh = [0u8; 60];
            if rec.raw.has_flag(flags::EXTENTS) {
                BlockMap::init_extent_root(&mut fresh);
            }
            rec.raw.set_i_block(&fresh);
        }
        let acl = rec.raw.file_acl();
        if acl != 0 && !shared(acl) {
            self.drop_xattr_block(&mut rec)?;
        }
        rec.raw.set_file_acl(0);
        rec.raw.set_blocks_512(0);
        rec.raw.set_size(0);
        self.free_inode(&mut rec)
    }

    /// Whether [`Volume::rebuild_map`] of `ino` copying `copies` blocks has room: the
    /// copies, a new tree as large as the old one (freed blocks are not reused before
    /// the commit) and one more node for extents split around the copies.
    pub fn rebuild_fits(&self, ino: u32, copies: u64) -> Result<bool> {
        let rec = self.inode_any(ino)?;
        let nodes = if self.has_block_map(&rec) {
            self.walk_map(&rec).nodes.len() as u64
        } else {
            0
        };
        Ok(copies + nodes < self.unreserved_free(u64::MAX))
    }

    /// Copies the `n` blocks from `pblk` to new blocks (near them) and maps the copies at
    /// `lblk` of `rec` (unwritten ones are not copied: they read as zeros).
    fn map_copies(
        &mut self,
        rec: &mut super::InodeRec,
        lblk: u64,
        pblk: u64,
        n: u64,
        unwritten: bool,
    ) -> Result<()> {
        let mut done = 0;
        while done < n {
            let want = (n - done).min(u32::MAX as u64) as u32;
            let (new, got) = self.alloc_blocks(rec.ino, pblk + done, want)?;
            for k in 0..got as u64 {
                if !unwritten {
                    let data = self.read_meta(pblk + done + k)?;
                    self.write_meta(new + k, data)?;
                }
            }
            self.map_add(rec, lblk + done, new, got, unwritten)?;
            done += got as u64;
        }
        Ok(())
    }

    /// Gives inode `ino` its own copy of its xattr block (its reference count 1, its
    /// checksum for the new place); the original stays with its other owners.
    pub fn clone_xattr_block(&mut self, ino: u32) -> Result<()> {
        let mut rec = self.inode_any(ino)?;
        let old = rec.raw.file_acl();
        if old == 0 {
            return Ok(());
        }
        let mut b = self.read_meta(old)?;
        let (new, _) = self.alloc_blocks(ino, old, 1)?;
        XattrBlockHeader::new(&mut b[..32])
            .ok_or(Error::Invalid)?
            .set_h_refcount(1);
        if let Some(seed) = self.csum_seed() {
            let c = block_checksum(seed, new, &b);
            b[BLOCK_CHECKSUM_OFFSET..BLOCK_CHECKSUM_OFFSET + 4].copy_from_slice(&c.to_le_bytes());
        }
        self.write_meta(new, b)?;
        rec.raw.set_file_acl(new);
        self.put_inode(&mut rec)
    }
}

/// The file system's own blocks in `core`, as sorted disjoint ranges `[start, end)`.
fn fixed_metadata(core: &crate::volume_core::VolumeCore) -> Vec<(u64, u64)> {
    let geo = core.geometry();
    let reserved = core.superblock().s_reserved_gdt_blocks() as u32;
    let itb = geo.inode_table_blocks() as u64;
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for g in 0..geo.group_count {
        // (The superblock copy, descriptors and reserved GDT blocks: one run each.)
        for b in geo.group_base_meta(g, reserved) {
            match runs.last_mut() {
                Some(last) if last.1 == b => last.1 = b + 1,
                _ => runs.push((b, b + 1)),
            }
        }
        let d = core.group(g);
        for (start, len) in [
            (d.block_bitmap(), 1),
            (d.inode_bitmap(), 1),
            (d.inode_table(), itb),
        ] {
            runs.push((start, start.saturating_add(len)));
        }
    }
    runs.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for (s, e) in runs {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}
