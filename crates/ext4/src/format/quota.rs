//! Quota files (the kernel's and quota-tools' "vfsv1" format, QFMT_VFS_V1): the usage and
//! limits per user, group or project id that ext4's quota feature keeps in hidden inodes
//! (3 and 4 for users and groups, `s_prj_quota_inum` for projects).
//!
//! A file is a sequence of 1 KiB blocks whatever the file system's block size. Block 0
//! holds the header and the info; block 1 is the root of a radix tree four levels deep
//! indexed by the bytes of the id, most significant first; each tree block is 256
//! little-endian block numbers (0 = none). The last level points at data blocks: a header,
//! then fixed-size entries ([`Dquot`]), all-zero ones unused. [`read`] scans a file as
//! e2fsprogs' `qtree_scan_dquots` does; [`build`] writes one from scratch, inserting the
//! entries in id order as `quota_write_inode` does, so the layout is e2fsck's.

use std::collections::HashSet;

/// Bytes in a quota-file block (QT_BLKSIZE).
pub const QT_BLOCK: usize = 1024;
/// The tree's root block (QT_TREEOFF).
const TREE_ROOT: u32 = 1;
/// Levels of the tree (QT_TREEDEPTH).
const TREE_DEPTH: usize = 4;
/// The header's magic per quota type (user, group, project).
pub const MAGICS: [u32; 3] = [0xd9c0_1f11, 0xd9c0_1927, 0xd9c0_3f14];
/// The format version with 64-bit limits ([`DQBLK_R1_SIZE`] entries).
const VERSION_R1: u32 = 1;
/// The old version with 32-bit limits (48-byte entries), still read.
const VERSION_R0: u32 = 0;
/// Grace period new files get for both limits: a week, as quota-tools and e2fsprogs.
pub const DEFAULT_GRACE: u32 = 7 * 24 * 60 * 60;
/// Bytes of a data block's header.
const DATA_HEADER: usize = 16;
/// Bytes of a version-1 entry.
const DQBLK_R1_SIZE: usize = 72;
/// Bytes of a version-0 entry.
const DQBLK_R0_SIZE: usize = 48;
/// Files larger than this are refused, as e2fsprogs refuses them (2 GiB).
const MAX_FILE: u64 = 1 << 31;

usfs_fs::layout! {
    /// Block 0 of a quota file: `struct v2_disk_dqheader` then `struct v2_disk_dqinfo`.
    pub struct QuotaHeader[32] {
        /// Magic identifying the file and its quota type ([`MAGICS`]).
        dqh_magic / set_dqh_magic: u32 @ 0x00,
        /// Format version: 1 (64-bit entries) or 0 (32-bit).
        dqh_version / set_dqh_version: u32 @ 0x04,
        /// Seconds a block soft limit may be exceeded before it acts as the hard one.
        dqi_bgrace / set_dqi_bgrace: u32 @ 0x08,
        /// Seconds an inode soft limit may be exceeded before it acts as the hard one.
        dqi_igrace / set_dqi_igrace: u32 @ 0x0C,
        /// Flags of the file (none are defined on disk).
        dqi_flags / set_dqi_flags: u32 @ 0x10,
        /// Blocks in the file, counting block 0.
        dqi_blocks / set_dqi_blocks: u32 @ 0x14,
        /// First block of the list of free blocks (0 = none).
        dqi_free_blk / set_dqi_free_blk: u32 @ 0x18,
        /// First data block with a free entry (0 = none).
        dqi_free_entry / set_dqi_free_entry: u32 @ 0x1C,
    }
}

usfs_fs::layout! {
    /// The header of a data block (`struct qt_disk_dqdbheader`).
    pub struct DataHeader[16] {
        /// Next block on the free-entry (or free-block) list.
        dqdh_next_free / set_dqdh_next_free: u32 @ 0x00,
        /// Previous block on the free-entry list.
        dqdh_prev_free / set_dqdh_prev_free: u32 @ 0x04,
        /// Entries in use in this block.
        dqdh_entries / set_dqdh_entries: u16 @ 0x08,
    }
}

usfs_fs::layout! {
    /// A version-1 entry (`struct v2r1_disk_dqblk`): one id's limits and usage.
    pub struct DiskDquot[72] {
        /// The user, group or project id.
        dqb_id / set_dqb_id: u32 @ 0x00,
        /// Hard limit on inodes (0 = none).
        dqb_ihardlimit / set_dqb_ihardlimit: u64 @ 0x08,
        /// Soft limit on inodes (0 = none).
        dqb_isoftlimit / set_dqb_isoftlimit: u64 @ 0x10,
        /// Inodes in use.
        dqb_curinodes / set_dqb_curinodes: u64 @ 0x18,
        /// Hard limit on space, in 1 KiB units (0 = none).
        dqb_bhardlimit / set_dqb_bhardlimit: u64 @ 0x20,
        /// Soft limit on space, in 1 KiB units (0 = none).
        dqb_bsoftlimit / set_dqb_bsoftlimit: u64 @ 0x28,
        /// Space in use, in bytes.
        dqb_curspace / set_dqb_curspace: u64 @ 0x30,
        /// When the block soft limit turns hard (seconds since the epoch; 0 = not over).
        dqb_btime / set_dqb_btime: u64 @ 0x38,
        /// When the inode soft limit turns hard (seconds since the epoch; 0 = not over).
        dqb_itime / set_dqb_itime: u64 @ 0x40,
    }
}

/// One id's entry, in memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dquot {
    /// The id.
    pub id: u32,
    /// Inode hard limit.
    pub ihardlimit: u64,
    /// Inode soft limit.
    pub isoftlimit: u64,
    /// Inodes in use.
    pub curinodes: u64,
    /// Space hard limit (1 KiB units).
    pub bhardlimit: u64,
    /// Space soft limit (1 KiB units).
    pub bsoftlimit: u64,
    /// Space in use (bytes).
    pub curspace: u64,
    /// Block grace deadline.
    pub btime: u64,
    /// Inode grace deadline.
    pub itime: u64,
}

/// A quota file as read: its grace periods and entries (in tree order: by id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaFile {
    /// Block grace period (seconds).
    pub bgrace: u32,
    /// Inode grace period (seconds).
    pub igrace: u32,
    /// The entries.
    pub dquots: Vec<Dquot>,
}

/// Reads 1 KiB block `n` of a quota file into the buffer, or says why it cannot.
pub type BlockReader<'a> = dyn FnMut(u32, &mut [u8]) -> Result<(), String> + 'a;

/// Reads the quota file of type `qtype` (0 user, 1 group, 2 project) of `size` bytes,
/// whose 1 KiB block `n` `block(n, buf)` reads. Checks as e2fsprogs does (magic, version,
/// the info against the size, every reference within the file) and refuses a tree block
/// met twice (so a crafted file costs at most one read per block); the error says why.
pub fn read(qtype: usize, size: u64, block: &mut BlockReader<'_>) -> Result<QuotaFile, String> {
    if size > MAX_FILE {
        return Err(format!("file size {size} too large"));
    }
    let mut buf = vec![0u8; QT_BLOCK];
    block(0, &mut buf)?;
    let h = QuotaHeader::new(&buf[..32]).expect("32 bytes");
    if h.dqh_magic() != MAGICS[qtype] {
        return Err(format!("bad magic {:#x}", h.dqh_magic()));
    }
    let entry_size = match h.dqh_version() {
        VERSION_R1 => DQBLK_R1_SIZE,
        VERSION_R0 => DQBLK_R0_SIZE,
        v => return Err(format!("unknown version {v}")),
    };
    let blocks = h.dqi_blocks();
    if blocks as u64 > size.div_ceil(QT_BLOCK as u64) {
        return Err(format!("file size {size}; dqi_blocks {blocks}"));
    }
    if h.dqi_free_blk() >= blocks || h.dqi_free_entry() >= blocks {
        return Err(format!("free lists past dqi_blocks {blocks}"));
    }
    let mut scan = Scan {
        block,
        blocks,
        entry_size,
        seen: HashSet::new(),
        dquots: Vec::new(),
    };
    scan.tree(TREE_ROOT, 0)?;
    Ok(QuotaFile {
        bgrace: h.dqi_bgrace(),
        igrace: h.dqi_igrace(),
        dquots: scan.dquots,
    })
}

/// A scan of a quota file's tree.
struct Scan<'a> {
    /// Reads a block.
    block: &'a mut BlockReader<'a>,
    /// dqi_blocks: references must be below it.
    blocks: u32,
    /// Bytes per entry.
    entry_size: usize,
    /// Blocks visited (tree and data).
    seen: HashSet<u32>,
    /// Entries found.
    dquots: Vec<Dquot>,
}

impl Scan<'_> {
    /// Visits tree block `blk` at `depth` (0 = the root).
    fn tree(&mut self, blk: u32, depth: usize) -> Result<(), String> {
        if blk >= self.blocks {
            return Err(format!(
                "reference to block {blk} past dqi_blocks {}",
                self.blocks
            ));
        }
        if !self.seen.insert(blk) {
            if depth == TREE_DEPTH {
                return Ok(()); // a data block named again: read once
            }
            return Err(format!("block {blk} referenced twice"));
        }
        let mut buf = vec![0u8; QT_BLOCK];
        (self.block)(blk, &mut buf)?;
        if depth == TREE_DEPTH {
            self.data(&buf);
            return Ok(());
        }
        for r in buf.chunks_exact(4) {
            let next = u32::from_le_bytes(r.try_into().unwrap());
            if next != 0 {
                self.tree(next, depth + 1)?;
            }
        }
        Ok(())
    }

    /// Takes the entries of data block `buf`.
    fn data(&mut self, buf: &[u8]) {
        let per_block = (QT_BLOCK - DATA_HEADER) / self.entry_size;
        for i in 0..per_block {
            let at = DATA_HEADER + i * self.entry_size;
            let e = &buf[at..at + self.entry_size];
            if e.iter().all(|&b| b == 0) {
                continue;
            }
            self.dquots.push(if self.entry_size == DQBLK_R1_SIZE {
                from_r1(e)
            } else {
                from_r0(e)
            });
        }
    }
}

/// An entry of version 1.
fn from_r1(e: &[u8]) -> Dquot {
    let d = DiskDquot::new(e).expect("72 bytes");
    let mut q = Dquot {
        id: d.dqb_id(),
        ihardlimit: d.dqb_ihardlimit(),
        isoftlimit: d.dqb_isoftlimit(),
        curinodes: d.dqb_curinodes(),
        bhardlimit: d.dqb_bhardlimit(),
        bsoftlimit: d.dqb_bsoftlimit(),
        curspace: d.dqb_curspace(),
        btime: d.dqb_btime(),
        itime: d.dqb_itime(),
    };
    // An all-zero entry is written with itime 1 so as not to read as unused.
    if q == (Dquot {
        itime: 1,
        ..Dquot::default()
    }) {
        q.itime = 0;
    }
    q
}

/// An entry of version 0: id, then 32-bit limits and counts, then 64-bit space and times.
fn from_r0(e: &[u8]) -> Dquot {
    let u32_at = |o: usize| u32::from_le_bytes(e[o..o + 4].try_into().unwrap()) as u64;
    let u64_at = |o: usize| u64::from_le_bytes(e[o..o + 8].try_into().unwrap());
    let mut q = Dquot {
        id: u32_at(0) as u32,
        ihardlimit: u32_at(4),
        isoftlimit: u32_at(8),
        curinodes: u32_at(12),
        bhardlimit: u32_at(16),
        bsoftlimit: u32_at(20),
        curspace: u64_at(24),
        btime: u64_at(32),
        itime: u64_at(40),
    };
    if q == (Dquot {
        itime: 1,
        ..Dquot::default()
    }) {
        q.itime = 0;
    }
    q
}

/// A new version-1 file of type `qtype` holding `dquots` (sorted by id, each id once)
/// with grace periods `bgrace` and `igrace`: its bytes (a whole number of 1 KiB blocks).
/// The entries are inserted in order as e2fsprogs inserts them: tree blocks allocated
/// as the path of each id first needs them, data blocks filled in turn.
pub fn build(qtype: usize, bgrace: u32, igrace: u32, dquots: &[Dquot]) -> Vec<u8> {
    let mut b = Builder {
        file: vec![0u8; 2 * QT_BLOCK],
        free_entry: 0,
    };
    for q in dquots {
        b.insert(q);
    }
    let blocks = (b.file.len() / QT_BLOCK) as u32;
    let mut h = QuotaHeader::new(&mut b.file[..32]).expect("32 bytes");
    h.set_dqh_magic(MAGICS[qtype]);
    h.set_dqh_version(VERSION_R1);
    h.set_dqi_bgrace(bgrace);
    h.set_dqi_igrace(igrace);
    h.set_dqi_blocks(blocks);
    h.set_dqi_free_entry(b.free_entry);
    b.file
}

/// A file being built.
struct Builder {
    /// Its blocks so far.
    file: Vec<u8>,
    /// The data block with free entries (0 = none).
    free_entry: u32,
}

impl Builder {
    /// A new zeroed block at the end: its number.
    fn new_block(&mut self) -> u32 {
        let n = (self.file.len() / QT_BLOCK) as u32;
        self.file.resize(self.file.len() + QT_BLOCK, 0);
        n
    }

    /// Reference `i` of tree block `blk`.
    fn slot(&mut self, blk: u32, i: usize) -> &mut [u8] {
        let at = blk as usize * QT_BLOCK + i * 4;
        &mut self.file[at..at + 4]
    }

    /// Inserts `q` into the tree and a data block.
    fn insert(&mut self, q: &Dquot) {
        let mut blk = TREE_ROOT;
        for depth in 0..TREE_DEPTH {
            let i = ((q.id >> ((TREE_DEPTH - depth - 1) * 8)) & 0xff) as usize;
            let next = u32::from_le_bytes(self.slot(blk, i).try_into().unwrap());
            let next = if next != 0 {
                next
            } else {
                let n = if depth + 1 == TREE_DEPTH {
                    self.data_block()
                } else {
                    self.new_block()
                };
                self.slot(blk, i).copy_from_slice(&n.to_le_bytes());
                n
            };
            blk = next;
        }
        self.put_entry(blk, q);
    }

    /// The data block with room for the next entry (a new one when none has room).
    fn data_block(&mut self) -> u32 {
        if self.free_entry == 0 {
            self.free_entry = self.new_block();
        }
        self.free_entry
    }

    /// Writes `q` into the first unused entry of data block `blk`; a block that fills
    /// up leaves the free-entry list.
    fn put_entry(&mut self, blk: u32, q: &Dquot) {
        let per_block = (QT_BLOCK - DATA_HEADER) / DQBLK_R1_SIZE;
        let base = blk as usize * QT_BLOCK;
        let mut h = DataHeader::new(&mut self.file[base..base + DATA_HEADER]).expect("16");
        let entries = h.dqdh_entries() as usize;
        h.set_dqdh_entries(entries as u16 + 1);
        if entries + 1 >= per_block {
            self.free_entry = 0;
        }
        let at = base + DATA_HEADER + entries * DQBLK_R1_SIZE;
        let mut d = DiskDquot::new(&mut self.file[at..at + DQBLK_R1_SIZE]).expect("72");
        d.set_dqb_id(q.id);
        d.set_dqb_ihardlimit(q.ihardlimit);
        d.set_dqb_isoftlimit(q.isoftlimit);
        d.set_dqb_curinodes(q.curinodes);
        d.set_dqb_bhardlimit(q.bhardlimit);
        d.set_dqb_bsoftlimit(q.bsoftlimit);
        d.set_dqb_curspace(q.curspace);
        d.set_dqb_btime(q.btime);
        d.set_dqb_itime(q.itime);
        if d.bytes().iter().all(|&b| b == 0) {
            d.set_dqb_itime(1);
        }
    }
}

/// `q`'s grace deadlines as e2fsprogs sets them when it writes (`update_grace_times`): a
/// soft limit exceeded gets `now + grace` unless it had a deadline, one not exceeded
/// none.
pub fn update_grace(q: &mut Dquot, now: u64, bgrace: u32, igrace: u32) {
    let over_blocks = q.bsoftlimit != 0 && q.curspace.div_ceil(1024) > q.bsoftlimit;
    q.btime = match (over_blocks, q.btime) {
        (true, 0) => now + bgrace as u64,
        (true, t) => t,
        (false, _) => 0,
    };
    let over_inodes = q.isoftlimit != 0 && q.curinodes > q.isoftlimit;
    q.itime = match (over_inodes, q.itime) {
        (true, 0) => now + igrace as u64,
        (true, t) => t,
        (false, _) => 0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(file: &[u8]) -> impl FnMut(u32, &mut [u8]) -> Result<(), String> + '_ {
        move |n, buf| {
            let at = n as usize * QT_BLOCK;
            let src = file.get(at..at + QT_BLOCK).ok_or("past the end")?;
            buf.copy_from_slice(src);
            Ok(())
        }
    }

    fn dq(id: u32, space: u64, inodes: u64) -> Dquot {
        Dquot {
            id,
            curspace: space,
            curinodes: inodes,
            ..Dquot::default()
        }
    }

    #[test]
    fn a_built_file_reads_back() {
        let mut qs: Vec<Dquot> = (0..40)
            .map(|i| dq(i * 1000, i as u64 * 4096, i as u64))
            .collect();
        qs.push(Dquot {
            id: 1 << 31,
            bhardlimit: 7,
            ..dq(1 << 31, 0, 0)
        });
        let file = build(1, 60, 70, &qs);
        let got = read(1, file.len() as u64, &mut reader(&file)).unwrap();
        assert_eq!((got.bgrace, got.igrace), (60, 70));
        assert_eq!(got.dquots, qs, "an all-zero id 0 entry reads back as zero");
        assert!(
            read(0, file.len() as u64, &mut reader(&file)).is_err(),
            "wrong type's magic"
        );
    }

    #[test]
    fn layout_is_e2fsprogs_one_id() {
        // mke2fs -O quota: root's entry only: root, three tree levels, one data block.
        let file = build(0, DEFAULT_GRACE, DEFAULT_GRACE, &[dq(0, 2048, 2)]);
        assert_eq!(file.len(), 6 * QT_BLOCK);
        let h = QuotaHeader::new(&file[..32]).unwrap();
        assert_eq!((h.dqi_blocks(), h.dqi_free_entry()), (6, 5));
        for (blk, next) in [(1, 2), (2, 3), (3, 4), (4, 5)] {
            assert_eq!(
                &file[blk * QT_BLOCK..blk * QT_BLOCK + 4],
                &(next as u32).to_le_bytes()
            );
        }
    }

    #[test]
    fn corrupt_files_are_refused() {
        let mut file = build(0, 1, 1, &[dq(5, 1, 1)]);
        let n = file.len() as u64;
        assert!(
            read(0, n - QT_BLOCK as u64, &mut reader(&file)).is_err(),
            "short file"
        );
        // A reference past dqi_blocks.
        file[QT_BLOCK..QT_BLOCK + 4].copy_from_slice(&99u32.to_le_bytes());
        assert!(read(0, n, &mut reader(&file)).is_err());
        // A tree that names its root again.
        let mut loopy = build(0, 1, 1, &[]);
        loopy[QT_BLOCK..QT_BLOCK + 4].copy_from_slice(&1u32.to_le_bytes());
        assert!(read(0, loopy.len() as u64, &mut reader(&loopy)).is_err());
    }

    #[test]
    fn full_data_blocks_leave_the_free_list() {
        let qs: Vec<Dquot> = (1..=14).map(|i| dq(i, 1, 1)).collect();
        let file = build(0, 1, 1, &qs);
        let h = QuotaHeader::new(&file[..32]).unwrap();
        assert_eq!(h.dqi_free_entry(), 0, "14 entries fill the block");
        let qs: Vec<Dquot> = (1..=15).map(|i| dq(i, 1, 1)).collect();
        let file = build(0, 1, 1, &qs);
        assert_eq!(QuotaHeader::new(&file[..32]).unwrap().dqi_free_entry(), 6);
    }
}

#[cfg(test)]
mod mutation_tests {
    use super::*;

    /// Bytes of a built file flipped at random (a fixed seed): reading never panics,
    /// and what it reads back builds into a file that reads the same.
    #[test]
    fn mutated_files_read_or_fail_cleanly() {
        let qs: Vec<Dquot> = (0..60u32)
            .map(|i| Dquot {
                id: i * 977,
                curspace: i as u64,
                curinodes: 1,
                ..Dquot::default()
            })
            .collect();
        let good = build(2, 10, 20, &qs);
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..3000 {
            let mut file = good.clone();
            for _ in 0..1 + (x % 8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x as usize >> 8) % file.len();
                file[at] = (x & 0xff) as u8;
            }
            let mut block = |n: u32, buf: &mut [u8]| {
                let at = n as usize * QT_BLOCK;
                let src = file.get(at..at + QT_BLOCK).ok_or("past the end")?;
                buf.copy_from_slice(src);
                Ok(())
            };
            if let Ok(f) = read(2, file.len() as u64, &mut block) {
                assert!(f.dquots.len() <= file.len() / DQBLK_R0_SIZE);
            }
        }
    }
}
