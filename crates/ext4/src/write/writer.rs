//! The bulk writer's state: the shared volume core (device, superblock, descriptors),
//! allocators seeded from the bitmaps and the inode tables being filled.
//! [`Writer::finish`] writes every piece of metadata.

use super::itable::{self, InodeTable, TableLayout};
use super::xattr::XattrBlocks;
use crate::alloc::seed::{seed_blocks, seed_inodes};
use crate::alloc::{BlockAllocator, InodeAllocator, InodeKind, NoSpace, Purpose, Request};
use crate::format::features::{incompat, ro_compat, Features};
use crate::format::geometry::Geometry;
use crate::format::group_desc::{BG_BLOCK_UNINIT, BG_INODE_UNINIT, BG_INODE_ZEROED};
use crate::format::inode::Inode;
use crate::volume_core::{features_of, VolumeCore};
use std::io;
use usfs_dev::Device;
use usfs_fs::{Error, Result, Timestamp};

/// Size of `i_extra_isize` the writer gives every inode (all fields through i_projid).
pub(super) const EXTRA_ISIZE: u16 = 32;

/// An ext4 file system being filled in bulk (mkfs -d): opened on an image [`format()`]
/// has just written, it keeps inode tables, bitmaps and counts in memory and writes them
/// all at [`Writer::finish`].
///
/// [`format()`]: super::format()
pub struct Writer {
    /// The device, superblock, geometry, descriptors and checksum seed (the superblock's
    /// counts and the descriptors are brought up to date by [`Writer::finish`]).
    pub(crate) core: VolumeCore,
    /// The block allocator.
    pub blocks: BlockAllocator,
    /// The inode allocator.
    pub inodes: InodeAllocator,
    /// Inode tables of the groups that have inodes (mapped on first use).
    itables: Vec<Option<InodeTable>>,
    pub(crate) xattr_blocks: XattrBlocks,
    /// Creation time of the file system (crtime of every inode written).
    pub now: Timestamp,
    /// While `Some`, [`Writer::write_blocks`] collects `(byte offset, bytes)` here instead
    /// of writing, so populate can send them along with file data in image order (see
    /// [`Writer::defer_writes`]).
    deferred: std::sync::Mutex<Option<Vec<BlockWrite>>>,
}

/// A block write kept by [`Writer::defer_writes`]: image byte offset and bytes.
pub(super) type BlockWrite = (u64, Vec<u8>);

/// The no-space error every write path returns: errno ENOSPC with a message.
pub fn no_space(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Io(io::Error::new(
        io::ErrorKind::StorageFull,
        format!("{what}: {e}"),
    ))
}

impl Writer {
    /// A writer on `core` with allocators `blocks` and `inodes`, no inode table in
    /// memory yet.
    pub(crate) fn new(
        core: VolumeCore,
        blocks: BlockAllocator,
        inodes: InodeAllocator,
        now: Timestamp,
    ) -> Writer {
        let n = core.geo.group_count as usize;
        Writer {
            core,
            inodes,
            itables: (0..n).map(|_| None).collect(),
            blocks,
            xattr_blocks: XattrBlocks::default(),
            now,
            deferred: std::sync::Mutex::new(None),
        }
    }

    /// Opens the file system [`format()`](super::format()) left on `dev` for filling:
    /// reads the superblock and the descriptors through the shared [`VolumeCore`], seeds
    /// the allocators from the bitmaps (as the read-write volume does) and reads the
    /// inode records in use. Free blocks and unused inode records must read as zeros (a
    /// freshly formatted image); inodes get the file system's creation time as crtime.
    pub fn open(dev: Box<dyn Device>) -> Result<Writer> {
        let mut issues = Vec::new();
        let sb = VolumeCore::read_superblock(&*dev, true, &mut issues)?;
        check_bulk_features(&features_of(&sb))?;
        let core = VolumeCore::open(dev, sb, true, &mut issues)?;
        let blocks = seed_blocks(&core)?;
        let inodes = seed_inodes(&core)?;
        let sb = &core.sb;
        let now = Timestamp {
            sec: (sb.s_mkfs_time() as i64) | (sb.s_mkfs_time_hi() as i64) << 32,
            nsec: 0,
        };
        let mut w = Writer::new(core, blocks, inodes, now);
        w.read_inode_tables()?;
        Ok(w)
    }

    /// Reads the records in use of every group's inode table (up to the highest inode
    /// the bitmap marks used) into memory.
    fn read_inode_tables(&mut self) -> Result<()> {
        let isz = self.core.geo.inode_size as usize;
        let bytes = self.table_bytes();
        for g in 0..self.core.geo.group_count {
            let used = self.inodes.high_water(g) as usize * isz;
            if used == 0 {
                continue;
            }
            let at = self.core.groups[g as usize].inode_table() << self.core.geo.block_size_log;
            let mut t = InodeTable::new(bytes);
            self.core
                .dev
                .read_at(t.record_mut(0, used), at)
                .map_err(Error::Io)?;
            self.itables[g as usize] = Some(t);
        }
        Ok(())
    }

    /// The shared core: device, superblock, geometry, descriptors, checksum seed.
    pub fn core(&self) -> &VolumeCore {
        &self.core
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.core.geo
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.core.geo.block_size
    }

    /// Is metadata_csum on?
    pub fn has_csum(&self) -> bool {
        self.core.csum_seed.is_some()
    }

    /// The device.
    pub fn device(&self) -> &dyn Device {
        self.core.dev.as_ref()
    }

    /// Does the file system use group-descriptor checksums (and so may leave groups
    /// uninitialised)?
    pub fn csum_flag(&self) -> bool {
        self.core
            .geo
            .features
            .has_ro_compat(ro_compat::METADATA_CSUM)
            || self.core.geo.features.has_ro_compat(ro_compat::GDT_CSUM)
    }

    /// Group of inode `ino`.
    pub fn inode_group(&self, ino: u32) -> u32 {
        (ino - 1) / self.core.geo.inodes_per_group
    }

    /// Allocates an inode of `kind` near `parent` and gives it a zeroed record with the
    /// extra fields sized.
    pub fn new_inode(&mut self, kind: InodeKind, parent: u32) -> Result<u32> {
        let pg = self.inode_group(parent);
        let gpf = self.groups_per_flex();
        let blocks = &self.blocks;
        let geo = &self.core.geo;
        let flex_total = |f: u32| -> u64 {
            let first = f * gpf;
            let last = (first + gpf).min(geo.group_count);
            (first..last).map(|g| geo.group_blocks(g) as u64).sum()
        };
        let ino = self
            .inodes
            .alloc(kind, pg, &|f| blocks.flex_free(f), &flex_total)
            .map_err(|e| no_space("inodes", e))?;
        self.init_inode(ino);
        Ok(ino)
    }

    /// Groups per flex group (1 without flex_bg).
    pub fn groups_per_flex(&self) -> u32 {
        self.core.groups_per_flex()
    }

    /// Zeroes inode `ino`'s record and sets `i_extra_isize`.
    pub fn init_inode(&mut self, ino: u32) {
        let mut i = self.inode_mut(ino);
        i.bytes_mut().fill(0);
        i.set_i_extra_isize(EXTRA_ISIZE);
    }

    /// The record of inode `ino`, writable (the group's table is mapped on first use).
    pub fn inode_mut(&mut self, ino: u32) -> Inode<&mut [u8]> {
        let isz = self.core.geo.inode_size as usize;
        let g = self.inode_group(ino) as usize;
        let idx = ((ino - 1) % self.core.geo.inodes_per_group) as usize;
        let bytes = self.table_bytes();
        let t = self.itables[g].get_or_insert_with(|| InodeTable::new(bytes));
        Inode::new(t.record_mut(idx, isz)).expect("inode records are >= 160 bytes")
    }

    /// The record of inode `ino` (zeros if never written).
    pub fn inode(&self, ino: u32) -> Inode<Vec<u8>> {
        let isz = self.core.geo.inode_size as usize;
        let g = self.inode_group(ino) as usize;
        let idx = ((ino - 1) % self.core.geo.inodes_per_group) as usize;
        match &self.itables[g] {
            Some(t) => Inode::from_raw(t.record(idx, isz)),
            None => Inode::from_raw(&vec![0u8; isz]),
        }
    }

    /// Adds `n` file-system blocks to inode `ino`'s block count.
    pub fn add_blocks(&mut self, ino: u32, n: u64) {
        let per = self.core.geo.block_size as u64 / 512;
        let huge = self.core.geo.features.has_ro_compat(ro_compat::HUGE_FILE);
        let mut i = self.inode_mut(ino);
        let cur = (i.l_i_blocks_high() as u64) << 32 | i.i_blocks_lo() as u64;
        let cur = if huge { cur } else { cur & 0xFFFF_FFFF };
        i.set_blocks_512(cur + n * per);
    }

    /// Allocates `len` contiguous blocks (or fewer if no run is long enough) for
    /// metadata near `goal`.
    pub fn alloc_meta(&mut self, goal: u64, len: u32) -> Result<(u64, u32)> {
        self.blocks
            .alloc(&Request {
                goal,
                len,
                purpose: Purpose::Metadata,
            })
            .map_err(|e: NoSpace| no_space("metadata blocks", e))
    }

    /// Allocates one block belonging to inode `ino` (an extent-tree or xattr block): it
    /// goes with the file's data, from the locality-group stream of its flex group.
    pub fn alloc_file_block(&mut self, ino: u32, goal: u64) -> Result<u64> {
        self.blocks
            .alloc(&Request {
                goal,
                len: 1,
                purpose: Purpose::Data {
                    owner: ino,
                    final_blocks: Some(1),
                },
            })
            .map(|(b, _)| b)
            .map_err(|e: NoSpace| no_space(&format!("inode {ino}"), e))
    }

    /// Where data of inode `ino` should start: the first block of its flex group (of its
    /// group without flex_bg). Directories and files share one stream there: the kernel
    /// puts files one group further, but for a file system written in one go a single
    /// stream leaves no free-space gap between the two areas. `is_dir` is kept for
    /// writers that want the kernel's split.
    pub fn data_goal(&self, ino: u32, is_dir: bool) -> u64 {
        let _ = is_dir;
        let gpf = self.groups_per_flex();
        let g = self.inode_group(ino);
        self.core.geo.group_first_block(g / gpf * gpf)
    }

    /// Writes `data` at block `block` (or keeps it for [`Writer::take_deferred`]).
    pub fn write_blocks(&self, block: u64, data: &[u8]) -> Result<()> {
        let at = block << self.core.geo.block_size_log;
        if let Ok(mut g) = self.deferred.lock() {
            if let Some(d) = g.as_mut() {
                d.push((at, data.to_vec()));
                return Ok(());
            }
        }
        self.core.dev.write_at(data, at).map_err(Error::Io)
    }

    /// From now on block writes are kept rather than written: the caller takes them
    /// with [`Writer::take_deferred`] and writes them itself (populate merges them with
    /// the file data around them into large writes). The writer never reads back what
    /// it wrote, so keeping them changes nothing it sees; [`Writer::finish`] writes
    /// whatever is still kept.
    pub fn defer_writes(&mut self) {
        if let Ok(mut g) = self.deferred.lock() {
            g.get_or_insert_with(Vec::new);
        }
    }

    /// The block writes kept since the last call, as `(byte offset, bytes)` in the order
    /// they were made.
    pub fn take_deferred(&mut self) -> Vec<BlockWrite> {
        match self.deferred.get_mut() {
            Ok(Some(d)) => std::mem::take(d),
            _ => Vec::new(),
        }
    }

    /// Writes the kept block writes and stops keeping them.
    pub fn stop_deferring(&mut self) -> Result<()> {
        let kept = match self.deferred.get_mut() {
            Ok(d) => d.take().unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        for (at, data) in kept {
            self.core.dev.write_at(&data, at).map_err(Error::Io)?;
        }
        Ok(())
    }

    /// Writes all metadata: preallocations are released, inode checksums computed,
    /// inode tables, xattr blocks, bitmaps, descriptors (and backups) and superblocks
    /// (and backups) written, then the device flushed.
    pub fn finish(mut self) -> Result<Box<dyn Device>> {
        self.stop_deferring()?;
        self.blocks.release_all();
        self.write_xattr_blocks()?;
        self.write_inode_tables()?;
        self.write_groups()?;
        self.core.dev.flush()?;
        Ok(self.core.dev)
    }

    /// Checksums and writes the inode tables, two groups at a time where there are two
    /// CPUs (one checksummed while another is written).
    fn write_inode_tables(&mut self) -> Result<()> {
        let layout = TableLayout {
            inode_size: self.core.geo.inode_size as usize,
            inodes_per_group: self.core.geo.inodes_per_group,
            first_ino: self.core.geo.first_ino,
            table_bytes: self.table_bytes(),
            csum_seed: self.core.csum_seed,
        };
        let bs_log = self.core.geo.block_size_log;
        let tables: Vec<_> = self
            .itables
            .iter_mut()
            .enumerate()
            .filter_map(|(g, t)| {
                let at = self.core.groups[g].inode_table() << bs_log;
                t.as_mut().map(|t| (g as u32, t, at))
            })
            .collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
        itable::write_tables(self.core.dev.as_ref(), &layout, tables, threads)
    }

    /// Bytes of one group's inode table.
    fn table_bytes(&self) -> usize {
        self.core.geo.inodes_per_group as usize * self.core.geo.inode_size as usize
    }

    /// Writes every group's bitmaps and brings its descriptor up to date, then the
    /// superblock counts, the superblock copies and the descriptor tables.
    fn write_groups(&mut self) -> Result<()> {
        for g in 0..self.core.geo.group_count {
            self.write_group(g)?;
        }
        let free_inodes = self.inodes.free_inodes();
        self.core
            .sb
            .set_free_blocks_count(self.blocks.free_blocks());
        self.core.sb.set_s_free_inodes_count(free_inodes as u32);
        self.core.write_superblocks_and_descriptors()
    }

    /// Writes group `g`'s bitmaps (none for an uninitialised part when descriptor
    /// checksums allow it) and sets its descriptor's locations' checksums, counts and
    /// flags.
    fn write_group(&mut self, g: u32) -> Result<()> {
        let geo = &self.core.geo;
        let (bs, ds) = (geo.block_size as usize, geo.desc_size as usize);
        let bpg_bytes = (geo.blocks_per_group / 8) as usize;
        let (ipg, ipg_bytes) = (geo.inodes_per_group, (geo.inodes_per_group / 8) as usize);
        let csum = self.csum_flag();
        let seed = self.core.csum_seed;
        if !csum {
            self.blocks.load(g);
        }
        let mut d = self.core.groups[g as usize].clone();
        let mut flags = 0u16;
        match self.blocks.bitmap_bytes(g, bs) {
            Some(bm) => {
                if let Some(seed) = seed {
                    d.set_block_bitmap_checksum(seed, &bm[..bpg_bytes], ds);
                }
                self.write_blocks(d.block_bitmap(), &bm)?;
            }
            None => flags |= BG_BLOCK_UNINIT,
        }
        let ibm = match (self.inodes.bitmap_bytes(g, bs), csum) {
            (Some(b), _) => Some(b),
            (None, false) => Some(crate::alloc::BitSet::new(ipg).to_bytes(bs, true)),
            (None, true) => None,
        };
        match ibm {
            Some(bm) => {
                if let Some(seed) = seed {
                    d.set_inode_bitmap_checksum(seed, &bm[..ipg_bytes], ds);
                }
                self.write_blocks(d.inode_bitmap(), &bm)?;
            }
            None => flags |= BG_INODE_UNINIT,
        }
        d.set_free_blocks_count(self.blocks.group_free(g));
        d.set_free_inodes_count(self.inodes.group_free(g));
        d.set_used_dirs_count(self.inodes.group_dirs(g));
        if csum {
            flags |= BG_INODE_ZEROED;
            d.set_itable_unused(ipg - self.inodes.high_water(g));
            d.set_bg_flags(flags);
        }
        d.update_checksum(g, ds, seed, self.core.sb.s_uuid());
        self.core.groups[g as usize] = d;
        Ok(())
    }
}

/// Refuses images the bulk writer cannot finish right: those the read-write volume
/// refuses, a journal needing recovery, and meta_bg (the descriptor table is written
/// whole).
fn check_bulk_features(f: &Features) -> Result<()> {
    crate::rw::check_write_features(f, true)?;
    if f.has_incompat(incompat::RECOVER) {
        return Err(Error::incompatible(
            "needs_recovery: the journal holds transactions not yet replayed",
        ));
    }
    if f.has_incompat(incompat::META_BG) {
        return Err(Error::incompatible("meta_bg"));
    }
    Ok(())
}
