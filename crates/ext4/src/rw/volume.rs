//! The read-write volume: an [`Ext4`] reader over an [`Overlay`] of the device, the block
//! and inode allocators seeded from the image's bitmaps, and the running transaction.
//!
//! Every metadata change is a whole-block write into the overlay (so the reader, and every
//! mutator, sees it at once) recorded in the transaction; [`Volume::commit`]
//! (commit.rs) writes bitmaps, descriptors and superblock from the allocators, logs every
//! changed block to the journal, then writes them home (checkpoint.rs).

use crate::alloc::seed::{seed_blocks, seed_blocks_over, seed_inodes, seed_inodes_over};
use crate::alloc::{BlockAllocator, InodeAllocator, Purpose, Request};
use crate::format::features::{compat, incompat, ro_compat};
use crate::format::geometry::Geometry;
use crate::format::superblock::{Superblock, SUPERBLOCK_OFFSET};
use crate::journal::JournalWriter;
use crate::rw::meta::{Freed, Meta};
use crate::rw::orphan::ReleasedOrphan;
use crate::write::no_space;
use crate::Ext4;
use std::collections::BTreeSet;
use std::sync::Arc;
use usfs_dev::{Device, Overlay};
use usfs_fs::{Error, Result, Structure, Timestamp};

/// The changes of the running transaction.
#[derive(Debug, Default)]
pub(crate) struct Txn {
    /// Metadata blocks changed (held in the overlay until committed and written home).
    pub dirty: BTreeSet<u64>,
    /// Blocks freed: handed back to the allocator when the transaction commits.
    pub freed: Vec<(u64, u64)>,
    /// Freed metadata blocks the journal must revoke.
    pub revoked: BTreeSet<u64>,
    /// Groups whose block bitmap, inode bitmap or counts changed.
    pub groups: BTreeSet<u32>,
    /// File data was written since the last commit (flush it before the commit).
    pub data_written: bool,
}

/// An ext4 image opened for reading and writing.
pub struct Volume {
    /// The reader, over the overlay; its superblock and descriptors are kept current.
    pub(crate) fs: Ext4,
    pub(crate) overlay: Arc<Overlay>,
    pub(crate) blocks: BlockAllocator,
    pub(crate) inodes: InodeAllocator,
    pub(crate) txn: Txn,
    /// Where the superblock's block lives (0 with blocks over 1 KiB, else 1).
    pub(crate) sb_block: u64,
    /// The clock (fixed in tests).
    pub(crate) clock: fn() -> Timestamp,
    /// Counter mixed into new inodes' generation numbers.
    pub(crate) gen_counter: u64,
    /// Closed: no more changes.
    pub(crate) closed: bool,
    /// Open counts of inodes the front ends hold open.
    pub(crate) open_count: std::collections::HashMap<u32, u32>,
    /// The in-memory superblock changed (orphan list) and must be committed.
    pub(crate) sb_dirty: bool,
    /// The journal every transaction is logged to (None without has_journal).
    pub(crate) journal: Option<JournalWriter>,
    /// The undo log of the running operation.
    pub(crate) undo: Option<super::undo::Undo>,
    /// Data written into holes and not yet given blocks (delayed allocation), by inode.
    pub(crate) pending: super::delalloc::Buffered,
    /// When buffered blocks of closed files are next written back.
    pub(crate) writeback: super::delalloc::WritebackMark,
    /// Blocks logged since the last checkpoint (with a journal; checkpoint.rs).
    pub(crate) logged: super::checkpoint::Logged,
    /// The file system's own blocks as sorted disjoint ranges, once a repair asked
    /// (`map_rebuild`); dropped when a descriptor changes.
    pub(crate) fixed_meta: Option<Arc<[(u64, u64)]>>,
}

/// Features whose on-disk structures usfs does not keep right when it writes.
const WRITE_INCOMPAT_REFUSED: u32 = incompat::ENCRYPT
    | incompat::CASEFOLD
    | incompat::MMP
    | incompat::JOURNAL_DEV
    | incompat::DIRDATA
    | incompat::COMPRESSION;
const WRITE_RO_COMPAT_REFUSED: u32 = ro_compat::BIGALLOC
    | ro_compat::QUOTA
    | ro_compat::PROJECT
    | ro_compat::VERITY
    | ro_compat::HAS_SNAPSHOT
    | ro_compat::REPLICA
    | ro_compat::READONLY
    | ro_compat::SHARED_BLOCKS
    | ro_compat::ORPHAN_PRESENT
    | ro_compat::BTREE_DIR;
const WRITE_COMPAT_REFUSED: u32 =
    compat::EXCLUDE_INODE | compat::EXCLUDE_BITMAP | compat::FAST_COMMIT;

impl Volume {
    /// Opens the image on `dev` (opened writable) for changes. Features usfs cannot write
    /// are refused by name before anything is written; so are images whose bitmaps or
    /// descriptors are damaged (a corrupt image is never made worse).
    pub fn open(dev: Box<dyn Device>) -> Result<Volume> {
        Volume::open_as(dev, false).map(|(v, _)| v)
    }

    /// [`Volume::open`] for a checker's repair, which counts quota usage again once it
    /// is done: images with quotas open too, and the orphans released are not taken off
    /// their owners' usage. Also returns the orphans released, in list order.
    pub fn open_uncounted(dev: Box<dyn Device>) -> Result<(Volume, Vec<ReleasedOrphan>)> {
        Volume::open_as(dev, true)
    }

    /// [`Volume::open`]; `repair` lets images with quotas and encrypted images open (see
    /// [`Volume::open_uncounted`]).
    fn open_as(dev: Box<dyn Device>, repair: bool) -> Result<(Volume, Vec<ReleasedOrphan>)> {
        let dev: Arc<dyn Device> = Arc::from(dev);
        // Writers replay the journal onto the image first, as the kernel does at mount.
        crate::replay_journal(Box::new(dev.clone()))?;
        let mut v = Volume::assemble_with(Box::new(dev), true, None, repair)?;
        v.mark_in_use()?;
        let released = v.cleanup_orphans()?;
        v.commit()?;
        Ok((v, released))
    }

    /// The volume over `dev` without the opening steps (no journal replay, nothing
    /// written): `journaled` opens the journal for writing and refuses fast_commit with
    /// the other features usfs cannot write; without it the volume writes home directly
    /// (the fast-commit replay, which runs before the journal is marked empty).
    pub(crate) fn assemble(dev: Box<dyn Device>, journaled: bool) -> Result<Volume> {
        Volume::assemble_with(dev, journaled, None, false)
    }

    /// [`Volume::assemble`]; with `found` (a repair), the image is read as the checker
    /// reads it (checksum and location problems listed, not refused) and the allocators of
    /// the groups it names start from its bitmaps. `repair` (which counts quota usage
    /// again after, and changes encrypted files and directories as structure only) lets
    /// images with quotas and encrypted images open.
    pub(crate) fn assemble_with(
        dev: Box<dyn Device>,
        journaled: bool,
        found: Option<&super::repair::Found>,
        repair: bool,
    ) -> Result<Volume> {
        let mut raw = vec![0u8; 1024];
        dev.read_at(&mut raw, SUPERBLOCK_OFFSET).map_err(|_| {
            Error::corrupt(
                Structure::Superblock,
                "image too small to hold an ext4 superblock",
            )
        })?;
        let sb = Superblock::new(raw).expect("1024 bytes");
        let log = sb.block_size_log();
        if !(10..=16).contains(&log) {
            return Err(Error::corrupt(
                Structure::Superblock,
                format!("superblock: block size 2^{log} out of range"),
            ));
        }
        let overlay = Arc::new(Overlay::new(dev, 1 << log));
        let fs = match found {
            None if repair => Ext4::open_structure(Box::new(overlay.clone()))?,
            None => Ext4::open(Box::new(overlay.clone()))?,
            Some(_) => Ext4::open_for_check(Box::new(overlay.clone()))?.0,
        };
        check_features_as(fs.geometry().features, journaled, repair)?;
        let geo = fs.geometry().clone();
        let (blocks, inodes) = match found {
            None => (seed_blocks(&fs.core)?, seed_inodes(&fs.core)?),
            Some(f) => (
                seed_blocks_over(&fs.core, &f.block_bitmaps)?,
                seed_inodes_over(&fs.core, &f.inode_bitmaps)?,
            ),
        };
        let sb_block = SUPERBLOCK_OFFSET >> geo.block_size_log;
        let journal = if journaled && geo.features.has_compat(compat::HAS_JOURNAL) {
            let map = fs.journal_map()?;
            Some(JournalWriter::open(overlay.base(), map, geo.block_size)?)
        } else {
            None
        };
        Ok(Volume {
            fs,
            overlay,
            blocks,
            inodes,
            txn: Txn::default(),
            sb_block,
            clock: Timestamp::now,
            gen_counter: 0,
            closed: false,
            open_count: Default::default(),
            sb_dirty: false,
            journal,
            undo: None,
            pending: Default::default(),
            writeback: Default::default(),
            logged: Default::default(),
            fixed_meta: None,
        })
    }

    /// The reader's view of the volume (every change made so far included).
    pub fn reader(&self) -> &Ext4 {
        &self.fs
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        self.fs.geometry()
    }

    /// Serves allocation request `req` and records it in the transaction (and in the
    /// running operation's undo log). Metadata blocks and data blocks both come here; the
    /// request's purpose decides which preallocation serves it. No request takes blocks
    /// promised to buffered data ([`Volume::unreserved_free`]): it gets fewer blocks, or
    /// ENOSPC when none are left. When only preallocation windows hold free blocks, they
    /// are given back and the request is tried again.
    pub(crate) fn alloc_request(&mut self, req: &Request) -> Result<(u64, u32)> {
        let allowed = self.unreserved_free(req.len as u64);
        if allowed == 0 {
            return Err(no_space(
                "blocks",
                format!(
                    "no space left: {} free, all promised to buffered data",
                    self.blocks.free_blocks() + self.blocks.preallocated()
                ),
            ));
        }
        let req = Request {
            len: req.len.min(u32::try_from(allowed).unwrap_or(u32::MAX)),
            ..*req
        };
        let (start, got) = match self.blocks.alloc(&req) {
            Err(_) if self.blocks.preallocated() > 0 => {
                self.blocks.release_all();
                self.blocks.alloc(&req)
            }
            r => r,
        }
        .map_err(|e| no_space("blocks", e))?;
        self.undo_alloc(start, got as u64);
        let mut b = start;
        while b < start + got as u64 {
            self.touch_block_group(b);
            let g = self.fs.core.geo.block_group(b);
            b = self.fs.core.geo.group_first_block(g) + self.fs.core.geo.group_blocks(g) as u64;
        }
        // A block reused in this transaction must not be revoked by it.
        for k in start..start + got as u64 {
            self.txn.revoked.remove(&k);
        }
        Ok((start, got))
    }

    /// Free blocks now (the allocator's count; blocks freed in the running transaction
    /// are not yet among them).
    pub fn free_block_count(&self) -> u64 {
        self.blocks.free_blocks()
    }

    /// Changed blocks after which the running transaction is committed: the journal
    /// must hold a transaction whole.
    pub(crate) fn commit_threshold(&self) -> usize {
        let cap = self
            .journal
            .as_ref()
            .map_or(usize::MAX, |j| j.capacity() / 2);
        crate::rw::COMMIT_BLOCKS.min(cap).max(16)
    }

    /// Marks the group holding block `b` dirty.
    pub(crate) fn touch_block_group(&mut self, b: u64) {
        let g = self.fs.core.geo.block_group(b);
        self.txn.groups.insert(g);
    }
}

/// [`check_write_features`], quotas and encryption allowed with `repair`.
fn check_features_as(
    mut f: crate::format::features::Features,
    journaled: bool,
    repair: bool,
) -> Result<()> {
    if repair {
        f.ro_compat &= !(ro_compat::QUOTA | ro_compat::PROJECT);
        f.incompat &= !crate::format::features::incompat::ENCRYPT;
    }
    check_write_features(&f, journaled)
}

/// Would [`Volume::open_for_repair`] refuse the features `f` (as for any writer, but
/// quotas and encryption)?
pub fn check_repair_features(f: &crate::format::features::Features) -> Result<()> {
    check_features_as(*f, true, true)
}

/// Refuses features whose structures the writer would not keep right (fast_commit only
/// when the volume writes the journal: `journaled`).
pub(crate) fn check_write_features(
    f: &crate::format::features::Features,
    journaled: bool,
) -> Result<()> {
    let compat_refused = if journaled {
        WRITE_COMPAT_REFUSED
    } else {
        WRITE_COMPAT_REFUSED & !compat::FAST_COMMIT
    };
    let refused = crate::format::features::Features {
        compat: f.compat & compat_refused,
        incompat: f.incompat & WRITE_INCOMPAT_REFUSED,
        ro_compat: f.ro_compat & WRITE_RO_COMPAT_REFUSED,
    };
    let names = refused.names();
    if !names.is_empty() {
        return Err(Error::incompatible(format!(
            "usfs cannot change images with {}",
            names.join(", ")
        )));
    }
    Ok(())
}

impl Meta for Volume {
    fn geo(&self) -> &Geometry {
        self.fs.geometry()
    }

    fn csum_seed(&self) -> Option<u32> {
        self.fs.csum_seed()
    }

    fn read_meta(&self, blk: u64) -> Result<Vec<u8>> {
        self.fs.read_block(blk, Structure::Image, "metadata block")
    }

    fn write_meta(&mut self, blk: u64, data: Vec<u8>) -> Result<()> {
        let geo = self.fs.geometry();
        if blk < geo.first_data_block
            || blk >= geo.blocks_count
            || data.len() != geo.block_size as usize
        {
            return Err(Error::corrupt(
                Structure::Image,
                format!("metadata write to block {blk} outside the file system"),
            )
            .with_block(blk));
        }
        self.undo_block(blk);
        self.overlay.put(blk, data.into());
        self.txn.dirty.insert(blk);
        Ok(())
    }

    fn alloc_blocks(&mut self, owner: u32, goal: u64, len: u32) -> Result<(u64, u32)> {
        let _ = owner;
        let req = Request {
            goal,
            len: len.max(1),
            purpose: Purpose::Metadata,
        };
        self.alloc_request(&req)
    }

    fn free_blocks(&mut self, owner: u32, start: u64, len: u64, how: Freed) -> Result<()> {
        let geo = self.fs.geometry();
        if start < geo.first_data_block || len == 0 || start.saturating_add(len) > geo.blocks_count
        {
            return Err(Error::corrupt(
                Structure::Image,
                format!("inode {owner}: freeing blocks {start}..+{len} outside the file system"),
            )
            .with_ino(owner)
            .with_block(start));
        }
        // Revoke records for metadata blocks (the log may hold copies of them), and for
        // any block logged since the last checkpoint or changed in this transaction,
        // whatever it is freed as (a directory's blocks are freed as file blocks): replay
        // must not write them over what the block holds next.
        let end = start + len;
        let journaled: Vec<u64> = if how == Freed::Metadata {
            (start..end).collect()
        } else {
            let logged = self.logged.range(start..end).copied();
            logged
                .chain(self.txn.dirty.range(start..end).copied())
                .collect()
        };
        for b in journaled {
            if self.txn.revoked.insert(b) {
                self.undo_revoke(b);
            }
            if self.txn.dirty.contains(&b) {
                self.undo_block(b);
                self.txn.dirty.remove(&b);
                self.overlay.remove(b);
            }
        }
        self.txn.freed.push((start, len));
        Ok(())
    }
}
