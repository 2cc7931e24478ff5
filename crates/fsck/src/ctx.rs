//! Contexts: [`Ctx`] is what every thread reads (the file system, the shared state, the
//! queues); [`Worker`] is one thread's own state (buffers, problems found, counters,
//! intermediate results), merged only at the end: pFSCK's per-thread contexts.

use crate::chunked::Chunked;
use crate::ea_inode::{EaCharge, EaValue};
use crate::problem::{EntryAt, Problem};
use crate::sched::Queues;
use crate::state::Shared;
use std::collections::HashMap;
use usfs_ext4::format::dx_hash::HashVersion;
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::format::group_desc::BG_INODE_UNINIT;
use usfs_ext4::format::inode::Inode;
use usfs_ext4::Ext4;

/// A directory block found by pass 1, to be checked by pass 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirBlock {
    /// The directory's inode.
    pub dir: u32,
    /// The directory inode's generation (for checksums).
    pub generation: u32,
    /// Logical block within the directory.
    pub lblk: u32,
    /// Physical block.
    pub pblk: u64,
    /// The directory is htree-indexed.
    pub indexed: bool,
    /// The hash its names use (from its root block; indexed directories only), for the
    /// htree certification of leaf blocks.
    pub hash: Option<HashVersion>,
}

/// An entry naming a directory, as pass 3 weighs it: the first such entry in e2fsck's
/// pass-2 order makes its directory the parent, every later one is a hard link to a
/// directory. The order (of the derived `Ord`, after `child`): first blocks of
/// directories before the others, then by physical block, directory, logical block and
/// offset (e2fsck sorts its directory blocks so).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SubdirEntry {
    /// The directory named.
    pub child: u32,
    /// The physical block holding the entry, with bit 63 set when it is not a first
    /// block (see [`SubdirEntry::order`]).
    pub order: u64,
    /// The directory holding the entry.
    pub dir: u32,
    /// Where in it.
    pub at: EntryAt,
}

impl SubdirEntry {
    /// The order key of an entry in physical block `pblk`, logical block `lblk` of
    /// its directory: first blocks before the others, then by physical block.
    pub(crate) fn order(lblk: u32, pblk: u64) -> u64 {
        u64::from(lblk != 0) << 63 | pblk
    }
}

/// Read-only context shared by all threads.
pub(crate) struct Ctx<'a> {
    /// The file system (opened leniently).
    pub fs: &'a Ext4,
    /// Its geometry.
    pub geo: &'a Geometry,
    /// The shared bitmaps and per-inode arrays.
    pub shared: &'a Shared,
    /// Work queues.
    pub queues: &'a Queues,
    /// What the bad-blocks list says (inodes pass 1 must not read).
    pub bad: &'a crate::badblocks::BadBlocks,
}

impl Ctx<'_> {
    /// Does group `g`'s descriptor carry `flag` (BG_*_UNINIT)? (Trusted even when the
    /// descriptor's checksum fails, as e2fsck -n does.)
    pub(crate) fn group_flag(&self, g: u32, flag: u16) -> bool {
        self.fs.group(g).has_flag(flag)
    }

    /// Is group `g`'s bitmap (`flag`: BLOCK_UNINIT or INODE_UNINIT) uninitialised, as
    /// libext2fs reads bitmaps: the flag counts only with descriptor checksums, and only
    /// while the descriptor's checksum holds; a bitmap behind a bad checksum is read
    /// from the disk.
    pub(crate) fn bitmap_uninit(&self, g: u32, flag: u16) -> bool {
        let core = self.fs.core();
        let d = core.group(g);
        core.has_desc_checksums() && d.has_flag(flag) && core.desc_checksum_mismatch(g, d).is_none()
    }

    /// Inodes of group `g` in use as its descriptor says (the ones pass 1 reads): all of
    /// them unless the descriptors carry checksums (which make INODE_UNINIT and
    /// itable_unused trustworthy), then none with INODE_UNINIT, else all but the
    /// itable_unused tail.
    pub(crate) fn inodes_in_use_area(&self, g: u32) -> u32 {
        let ipg = self.geo.inodes_per_group;
        let trusted = self.fs.core().has_desc_checksums();
        if !trusted {
            ipg
        } else if self.group_flag(g, BG_INODE_UNINIT) {
            0
        } else {
            ipg.saturating_sub(self.fs.group(g).itable_unused())
        }
    }

    /// The group of inode `ino` when the inode lies past the area its descriptor says
    /// is in use ([`Self::inodes_in_use_area`]), with whether the group is INODE_UNINIT.
    pub(crate) fn in_unused_area(&self, ino: u32) -> Option<(u32, bool)> {
        let ipg = self.geo.inodes_per_group;
        let (g, idx) = ((ino.checked_sub(1)?) / ipg, (ino - 1) % ipg);
        (g < self.geo.group_count && idx >= self.inodes_in_use_area(g))
            .then(|| (g, self.group_flag(g, BG_INODE_UNINIT)))
    }
}

/// Counters of one thread, summed at the end.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    /// In-use inodes seen.
    pub inodes: u64,
    /// Directories.
    pub dirs: u64,
    /// Regular files.
    pub files: u64,
    /// Fragmented files (not directories).
    pub fragmented: u64,
    /// Fragmented directories.
    pub fragmented_dirs: u64,
    /// Directory blocks checked.
    pub dir_blocks: u64,
    /// Directory entries checked.
    pub entries: u64,
    /// Read requests pass 2 made for directory blocks (runs), and the blocks they read.
    pub dir_reads: u64,
    /// Blocks read by those requests (wanted ones and the gaps between them).
    pub dir_read_blocks: u64,
    /// Regular files of 2 GiB or more (they need the large_file feature).
    pub large_files: u64,
}

impl Counters {
    /// Adds another thread's counters.
    pub fn add(&mut self, o: &Counters) {
        self.inodes += o.inodes;
        self.dirs += o.dirs;
        self.files += o.files;
        self.fragmented += o.fragmented;
        self.fragmented_dirs += o.fragmented_dirs;
        self.dir_blocks += o.dir_blocks;
        self.entries += o.entries;
        self.dir_reads += o.dir_reads;
        self.dir_read_blocks += o.dir_read_blocks;
        self.large_files += o.large_files;
    }
}

/// One thread's state.
pub(crate) struct Worker {
    /// Problems found.
    pub problems: Vec<Problem>,
    /// Counters.
    pub counters: Counters,
    /// References to each xattr block (block -> inodes using it).
    pub xattr_refs: HashMap<u64, u32>,
    /// The xattr blocks keeping values in EA inodes: those values and, once found
    /// valid, what they charge each owner (the block's EA-inode references count once).
    pub xattr_ea: HashMap<u64, (Vec<EaValue>, Option<EaCharge>)>,
    /// EA inodes referenced by in-inode attributes, once per reference.
    pub ea_refs: Vec<u32>,
    /// References pass 2 counted past the shared nibble of their inode.
    pub many_refs: crate::refs::ManyRefs,
    /// (directory, its `..` entry), from pass 2.
    pub dotdots: Chunked<(u32, u32)>,
    /// Entries naming directories, from pass 2.
    pub parents: Chunked<SubdirEntry>,
    /// Directory blocks whose entries named inodes pass 1 had not reached yet: their
    /// reference checks run after pass 1 (deferred certification).
    pub revisit: Chunked<DirBlock>,
    /// Directory blocks found by pass 1, not yet handed to the queue.
    pub dir_batch: Vec<DirBlock>,
    /// (inode, i_links_count) of the inodes in use whose count is too large for the
    /// shared byte per inode, from pass 1 (see [`crate::state::LINKS_LISTED`]).
    pub links: Vec<(u32, u16)>,
    /// What pass 2 saw in the blocks of indexed directories (certified after pass 2).
    pub htree: Vec<crate::htree::HtreeFact>,
    /// Indexed directories and the number of blocks each maps, from pass 1.
    pub htree_dirs: Vec<(u32, u32)>,
    /// `/lost+found` if pass 2 saw it in the root.
    pub lost_found: Option<u32>,
    /// Inode table chunk buffer.
    pub table: Vec<u8>,
    /// The per-thread block cache of pass 2: a run of neighbouring directory blocks read
    /// with one request (see [`crate::dirio`]).
    pub window: Vec<u8>,
    /// A directory block pass 2 reads on its own (one block).
    pub dir_buf: Vec<u8>,
    /// An htree root or xattr block pass 1 reads (one block).
    pub meta_buf: Vec<u8>,
    /// The block-map walkers' buffers, one per tree level.
    pub walk: usfs_ext4::walk::Scratch,
    /// A padded inode view, reused.
    pub inode: Inode<Vec<u8>>,
    /// Busy nanoseconds per stage (pass 1, pass 2), for the trace and the scheduler.
    pub busy_ns: [u64; 2],
    /// (milliseconds since start, stage) each time this worker switched stage.
    pub timeline: Vec<(u32, u8)>,
    /// Quota usage counted by pass 1.
    pub quota: crate::quota::Usage,
    /// Inodes with the imagic flag on a file system with imagic inodes (pass 4 leaves
    /// them alone, as e2fsck does).
    pub imagic: Vec<u32>,
}

impl Worker {
    /// A worker with buffers for blocks of `block_size` bytes.
    pub(crate) fn new(block_size: usize) -> Worker {
        Worker {
            problems: Vec::new(),
            counters: Counters::default(),
            xattr_refs: HashMap::new(),
            xattr_ea: HashMap::new(),
            ea_refs: Vec::new(),
            many_refs: Default::default(),
            dotdots: Chunked::default(),
            parents: Chunked::default(),
            revisit: Chunked::default(),
            dir_batch: Vec::new(),
            links: Vec::new(),
            htree: Vec::new(),
            htree_dirs: Vec::new(),
            lost_found: None,
            table: Vec::new(),
            window: Vec::new(),
            dir_buf: vec![0u8; block_size],
            meta_buf: vec![0u8; block_size],
            walk: Default::default(),
            inode: Inode::from_raw(&[0u8; 1024]),
            busy_ns: [0; 2],
            timeline: Vec::new(),
            quota: Default::default(),
            imagic: Vec::new(),
        }
    }

    /// Records a problem.
    pub(crate) fn report(&mut self, p: Problem) {
        self.problems.push(p);
    }
}

impl Ctx<'_> {
    /// Reads block `blk` into `buf` (bounds already checked by the caller).
    pub(crate) fn read_block(&self, blk: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.fs
            .device()
            .read_at(buf, blk << self.geo.block_size_log)
    }

    /// Is `blk` a valid block number for file data or metadata?
    pub(crate) fn valid_block(&self, blk: u64) -> bool {
        blk >= self.geo.first_data_block.max(1) && blk < self.geo.blocks_count
    }
}
