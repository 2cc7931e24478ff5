//! The writer's state: superblock, descriptors, allocators and the inode tables being
//! filled, on a device. [`Writer::finish`] writes every piece of metadata.

use super::itable::{self, InodeTable, TableLayout};
use super::xattr::XattrBlocks;
use crate::alloc::{BlockAllocator, InodeAllocator, InodeKind, NoSpace, Purpose, Request};
use crate::format::features::{incompat, ro_compat};
use crate::format::geometry::Geometry;
use crate::format::group_desc::{GroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT, BG_INODE_ZEROED};
use crate::format::inode::{Inode, ROOT_INO};
use crate::format::superblock::{Superblock, SUPERBLOCK_OFFSET};
use std::io;
use usfs_dev::Device;
use usfs_fs::{Error, Result, Timestamp};

/// Size of `i_extra_isize` the writer gives every inode (all fields through i_projid).
pub const EXTRA_ISIZE: u16 = 32;

/// An ext4 file system being written.
pub struct Writer {
    pub(crate) dev: Box<dyn Device>,
    /// The superblock (counts are filled in by [`Writer::finish`]).
    pub sb: Superblock<Vec<u8>>,
    /// The geometry derived from it.
    pub geo: Geometry,
    pub(crate) descs: Vec<GroupDesc<[u8; 64]>>,
    /// The block allocator.
    pub blocks: BlockAllocator,
    /// The inode allocator.
    pub inodes: InodeAllocator,
    /// Inode tables of the groups that have inodes (mapped on first use).
    itables: Vec<Option<InodeTable>>,
    /// Metadata checksum seed (metadata_csum), else `None`.
    pub(crate) csum_seed: Option<u32>,
    pub(crate) xattr_blocks: XattrBlocks,
    /// Creation time of the file system (also the times of lost+found and the root).
    pub now: Timestamp,
    /// Has the root directory's content been written?
    pub(crate) root_written: bool,
    /// An owner for the root directory that overrides the source's (-E root_owner).
    pub root_owner: Option<(u32, u32)>,
    /// While `Some`, [`Writer::write_blocks`] collects `(byte offset, bytes)` here instead
    /// of writing, so populate can send them along with file data in image order (see
    /// [`Writer::defer_writes`]).
    deferred: std::sync::Mutex<Option<Vec<BlockWrite>>>,
}

/// A block write kept by [`Writer::defer_writes`]: image byte offset and bytes.
pub type BlockWrite = (u64, Vec<u8>);

/// The no-space error every write path returns: errno ENOSPC with a message.
pub fn no_space(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Io(io::Error::new(
        io::ErrorKind::StorageFull,
        format!("{what}: {e}"),
    ))
}

impl Writer {
    pub(crate) fn new(
        dev: Box<dyn Device>,
        sb: Superblock<Vec<u8>>,
        geo: Geometry,
        blocks: BlockAllocator,
        groups_per_flex: u32,
        now: Timestamp,
    ) -> Writer {
        let metadata_csum = geo.features.has_ro_compat(ro_compat::METADATA_CSUM);
        let csum_seed = metadata_csum.then(|| {
            if geo.features.has_incompat(incompat::CSUM_SEED) {
                sb.s_checksum_seed()
            } else {
                crate::format::checksum::crc32c_raw(!0, sb.s_uuid())
            }
        });
        let n = geo.group_count as usize;
        Writer {
            dev,
            inodes: InodeAllocator::new(geo.group_count, geo.inodes_per_group, groups_per_flex),
            descs: vec![GroupDesc::from_raw(&[0u8; 64]); n],
            itables: (0..n).map(|_| None).collect(),
            sb,
            geo,
            blocks,
            csum_seed,
            xattr_blocks: XattrBlocks::default(),
            now,
            root_written: false,
            root_owner: None,
            deferred: std::sync::Mutex::new(None),
        }
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.geo.block_size
    }

    /// Is metadata_csum on?
    pub fn has_csum(&self) -> bool {
        self.csum_seed.is_some()
    }

    /// The device.
    pub fn device(&self) -> &dyn Device {
        self.dev.as_ref()
    }

    /// Does the file system use group-descriptor checksums (and so may leave groups
    /// uninitialised)?
    pub fn csum_flag(&self) -> bool {
        self.geo.features.has_ro_compat(ro_compat::METADATA_CSUM)
            || self.geo.features.has_ro_compat(ro_compat::GDT_CSUM)
    }

    /// Group of inode `ino`.
    pub fn inode_group(&self, ino: u32) -> u32 {
        (ino - 1) / self.geo.inodes_per_group
    }

    /// Allocates an inode of `kind` near `parent` and gives it a zeroed record with the
    /// extra fields sized.
    pub fn new_inode(&mut self, kind: InodeKind, parent: u32) -> Result<u32> {
        let pg = self.inode_group(parent);
        let gpf = self.groups_per_flex();
        let blocks = &self.blocks;
        let geo = &self.geo;
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
        if self.geo.features.has_incompat(incompat::FLEX_BG) {
            1 << self.sb.s_log_groups_per_flex()
        } else {
            1
        }
    }

    /// Zeroes inode `ino`'s record and sets `i_extra_isize`.
    pub fn init_inode(&mut self, ino: u32) {
        let mut i = self.inode_mut(ino);
        i.bytes_mut().fill(0);
        i.set_i_extra_isize(EXTRA_ISIZE);
    }

    /// The record of inode `ino`, writable (the group's table is mapped on first use).
    pub fn inode_mut(&mut self, ino: u32) -> Inode<&mut [u8]> {
        let isz = self.geo.inode_size as usize;
        let g = self.inode_group(ino) as usize;
        let idx = ((ino - 1) % self.geo.inodes_per_group) as usize;
        let bytes = self.table_bytes();
        let t = self.itables[g].get_or_insert_with(|| InodeTable::new(bytes));
        Inode::new(t.record_mut(idx, isz)).expect("inode records are >= 160 bytes")
    }

    /// The record of inode `ino` (zeros if never written).
    pub fn inode(&self, ino: u32) -> Inode<Vec<u8>> {
        let isz = self.geo.inode_size as usize;
        let g = self.inode_group(ino) as usize;
        let idx = ((ino - 1) % self.geo.inodes_per_group) as usize;
        match &self.itables[g] {
            Some(t) => Inode::from_raw(t.record(idx, isz)),
            None => Inode::from_raw(&vec![0u8; isz]),
        }
    }

    /// Adds `n` file-system blocks to inode `ino`'s block count.
    pub fn add_blocks(&mut self, ino: u32, n: u64) {
        let per = self.geo.block_size as u64 / 512;
        let huge = self.geo.features.has_ro_compat(ro_compat::HUGE_FILE);
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
        self.geo.group_first_block(g / gpf * gpf)
    }

    /// Writes `data` at block `block` (or keeps it for [`Writer::take_deferred`]).
    pub fn write_blocks(&self, block: u64, data: &[u8]) -> Result<()> {
        let at = block << self.geo.block_size_log;
        if let Ok(mut g) = self.deferred.lock() {
            if let Some(d) = g.as_mut() {
                d.push((at, data.to_vec()));
                return Ok(());
            }
        }
        self.dev.write_at(data, at).map_err(Error::Io)
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
            self.dev.write_at(&data, at).map_err(Error::Io)?;
        }
        Ok(())
    }

    /// Writes all metadata: preallocations are released, inode checksums computed,
    /// inode tables, xattr blocks, bitmaps, descriptors (and backups) and superblocks
    /// (and backups) written, then the device flushed.
    pub fn finish(mut self) -> Result<Box<dyn Device>> {
        if !self.root_written {
            let lf = super::format::lost_found_entry();
            self.write_dir(ROOT_INO, ROOT_INO, &[lf], 1, false)?;
        }
        self.stop_deferring()?;
        self.blocks.release_all();
        self.write_xattr_blocks()?;
        self.write_inode_tables()?;
        self.write_groups()?;
        self.dev.flush()?;
        Ok(self.dev)
    }

    /// Checksums and writes the inode tables, two groups at a time where there are two
    /// CPUs (one checksummed while another is written).
    fn write_inode_tables(&mut self) -> Result<()> {
        let layout = TableLayout {
            inode_size: self.geo.inode_size as usize,
            inodes_per_group: self.geo.inodes_per_group,
            first_ino: self.geo.first_ino,
            table_bytes: self.table_bytes(),
            csum_seed: self.csum_seed,
        };
        let bs_log = self.geo.block_size_log;
        let tables: Vec<_> = self
            .itables
            .iter_mut()
            .enumerate()
            .filter_map(|(g, t)| {
                let at = self.descs[g].inode_table() << bs_log;
                t.as_mut().map(|t| (g as u32, t, at))
            })
            .collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
        itable::write_tables(self.dev.as_ref(), &layout, tables, threads)
    }

    /// Bytes of one group's inode table.
    fn table_bytes(&self) -> usize {
        self.geo.inodes_per_group as usize * self.geo.inode_size as usize
    }

    fn write_groups(&mut self) -> Result<()> {
        let bs = self.geo.block_size as usize;
        let ds = self.geo.desc_size as usize;
        let csum = self.csum_flag();
        let uuid = *self.sb.s_uuid();
        let bpg_bytes = (self.geo.blocks_per_group / 8) as usize;
        let ipg_bytes = (self.geo.inodes_per_group / 8) as usize;
        let mut free_blocks = 0u64;
        let mut free_inodes = 0u64;
        for g in 0..self.geo.group_count {
            if !csum {
                self.blocks.load(g);
            }
            let mut d = self.descs[g as usize].clone();
            let mut flags = 0u16;
            match self.blocks.bitmap_bytes(g, bs) {
                Some(bm) => {
                    if let Some(seed) = self.csum_seed {
                        d.set_block_bitmap_checksum(seed, &bm[..bpg_bytes], ds);
                    }
                    self.write_blocks(d.block_bitmap(), &bm)?;
                }
                None => flags |= BG_BLOCK_UNINIT,
            }
            let ibm = self.inodes.bitmap_bytes(g, bs);
            let ibm = match (ibm, csum) {
                (Some(b), _) => Some(b),
                (None, false) => {
                    Some(crate::alloc::BitSet::new(self.geo.inodes_per_group).to_bytes(bs, true))
                }
                (None, true) => None,
            };
            match ibm {
                Some(bm) => {
                    if let Some(seed) = self.csum_seed {
                        d.set_inode_bitmap_checksum(seed, &bm[..ipg_bytes], ds);
                    }
                    self.write_blocks(d.inode_bitmap(), &bm)?;
                }
                None => flags |= BG_INODE_UNINIT,
            }
            let bfree = self.blocks.group_free(g);
            let ifree = self.inodes.group_free(g);
            free_blocks += bfree as u64;
            free_inodes += ifree as u64;
            d.set_free_blocks_count(bfree);
            d.set_free_inodes_count(ifree);
            d.set_used_dirs_count(self.inodes.group_dirs(g));
            if csum {
                flags |= BG_INODE_ZEROED;
                d.set_itable_unused(self.geo.inodes_per_group - self.inodes.high_water(g));
                d.set_bg_flags(flags);
            }
            d.update_checksum(g, ds, self.csum_seed, &uuid);
            self.descs[g as usize] = d;
        }
        // The descriptor table, written after every superblock copy.
        let mut gdt = vec![0u8; self.geo.gdt_blocks() as usize * bs];
        for (g, d) in self.descs.iter().enumerate() {
            gdt[g * ds..(g + 1) * ds].copy_from_slice(&d.bytes()[..ds]);
        }
        self.sb.set_free_blocks_count(free_blocks);
        self.sb.set_s_free_inodes_count(free_inodes as u32);
        for g in 0..self.geo.group_count {
            if !self.geo.group_has_super(g) {
                continue;
            }
            let mut sb = self.sb.clone();
            sb.set_s_block_group_nr(g as u16);
            if g != 0 {
                // Backups say nothing about the journal's recovery state.
                sb.set_s_feature_incompat(sb.s_feature_incompat() & !incompat::RECOVER);
            }
            sb.update_checksum();
            let first = self.geo.group_first_block(g);
            let sb_off = if g == 0 {
                SUPERBLOCK_OFFSET
            } else {
                first << self.geo.block_size_log
            };
            self.dev.write_at(sb.bytes(), sb_off)?;
            let (gdt_block, _) = self.geo.desc_location(0);
            let gdt_at = if g == 0 { gdt_block } else { first + 1 };
            self.write_blocks(gdt_at, &gdt)?;
        }
        Ok(())
    }
}
