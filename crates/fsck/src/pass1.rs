//! Pass 1: every inode in the used part of each inode table. Checks the record
//! (checksum, mode, dtime, extra size, flags), walks its blocks (claiming them in the
//! shared bitmap, counting them for i_blocks, measuring fragmentation, checking i_size),
//! its extended attributes, and queues directory blocks for pass 2 as they are found.

use crate::blocks::{walk_extents, walk_indirect, BlockKind, Visit};
use crate::ctx::{Ctx, DirBlock, Worker};
use crate::ea_inode::{EaCharge, EaValue};
use crate::problem::{Code, Problem};
use crate::state::InodeKind;
use std::collections::HashMap;
use std::ops::ControlFlow;
use usfs_ext4::format::features::{compat, incompat, ro_compat};
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::format::inode::{flags, Inode, GOOD_OLD_INODE_SIZE};
use usfs_ext4::walk::{
    self,
    xattr::{Entry, XattrCtx, XattrIssue, XattrVisitor},
    Mode,
};
use usfs_fs::FileType;

/// A run of inodes of one group: the unit of pass-1 work.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InodeChunk {
    /// The group.
    pub group: u32,
    /// First index within the group.
    pub start: u32,
    /// Inodes in the chunk.
    pub count: u32,
}

/// The resize inode, whose blocks are the reserved GDT blocks (metadata, marked in pass 0).
const RESIZE_INO: u32 = 7;
/// The bad-blocks inode.
const BAD_BLOCKS_INO: u32 = 1;
/// The journal's inode (when the superblock names it).
const JOURNAL_INO: u32 = 8;
/// Files this large need the large_file feature.
pub(crate) const LARGE_FILE_SIZE: u64 = 1 << 31;

/// Checks one chunk of inodes.
pub(crate) fn check_chunk(ctx: &Ctx, w: &mut Worker, chunk: InodeChunk) {
    let geo = ctx.geo;
    let isz = geo.inode_size as usize;
    let desc = ctx.fs.group(chunk.group);
    let offset = (desc.inode_table() << geo.block_size_log) + chunk.start as u64 * isz as u64;
    let len = chunk.count as usize * isz;
    let itable_blocks = (geo.inodes_per_group as u64 * isz as u64).div_ceil(geo.block_size as u64);
    if !ctx.valid_block(desc.inode_table())
        || !ctx.valid_block(desc.inode_table() + itable_blocks - 1)
    {
        // A table outside the file system (pass 0 said so): its inodes are unread and
        // count as unused, as they will be in the zeroed table the repair puts in place.
        return;
    }
    let mut table = std::mem::take(&mut w.table);
    table.resize(len, 0);
    if let Err(e) = ctx.fs.device().read_at(&mut table, offset) {
        w.report(
            Problem::new(
                Code::GroupMetadataLocation,
                format!("Error reading inode table of group {}: {e}", chunk.group),
            )
            .with_group(chunk.group),
        );
    } else {
        for i in 0..chunk.count {
            let ino = chunk.group * geo.inodes_per_group + chunk.start + i + 1;
            if ctx.bad.holds(ino) {
                ctx.shared.set_inode(ino, InodeKind::InBadBlock, 0);
                continue;
            }
            let rec = &table[i as usize * isz..(i as usize + 1) * isz];
            check_inode(ctx, w, ino, rec);
        }
    }
    w.table = table;
    flush_dir_batch(ctx, w);
}

/// Does `dtime` hold an inode number rather than a time: left by an orphan list that
/// broke, where dtime links the list (e2fsck's low-dtime check, off when the superblock's
/// own times are that low)?
fn low_dtime(ctx: &Ctx, dtime: u32) -> bool {
    let sb = ctx.fs.superblock();
    let n = sb.s_inodes_count();
    let low = |t: u32| t != 0 && t < n;
    low(dtime) && !(low(sb.s_wtime()) || low(sb.s_mtime()) || low(sb.s_mkfs_time()))
}

/// Hints the kernel to read a chunk's part of the inode table, when reads miss the cache.
pub(crate) fn readahead_chunk(ctx: &Ctx, chunk: &InodeChunk) {
    if !ctx.queues.read_cost.cold() {
        return;
    }
    let geo = ctx.geo;
    let isz = geo.inode_size as u64;
    let offset =
        (ctx.fs.group(chunk.group).inode_table() << geo.block_size_log) + chunk.start as u64 * isz;
    ctx.fs.device().will_need(offset, chunk.count as u64 * isz);
}

/// Hands the directory blocks found so far to pass 2.
pub(crate) fn flush_dir_batch(ctx: &Ctx, w: &mut Worker) {
    if !w.dir_batch.is_empty() {
        crate::dirio::sort_batch(&mut w.dir_batch);
        crate::dirio::readahead(ctx, &w.dir_batch);
        ctx.queues.push_dir_blocks(std::mem::take(&mut w.dir_batch));
    }
}

fn check_inode(ctx: &Ctx, w: &mut Worker, ino: u32, rec: &[u8]) {
    let geo = ctx.geo;
    let isz = geo.inode_size as usize;
    let links = u16::from_le_bytes([rec[0x1A], rec[0x1B]]);
    let mode = u16::from_le_bytes([rec[0], rec[1]]);
    let dtime = u32::from_le_bytes(rec[0x14..0x18].try_into().unwrap());
    let reserved = ino < geo.first_ino;
    if ino == JOURNAL_INO && ctx.fs.superblock().s_journal_inum() != JOURNAL_INO {
        // Not the journal: data there is a deleted journal's, cleared (its blocks left
        // unclaimed, so pass 5 frees them).
        let word = |at: usize| u32::from_le_bytes(rec[at..at + 4].try_into().unwrap());
        if links != 0 || word(0x1C) != 0 || word(0x28) != 0 {
            w.report(Problem::new(Code::JournalInodeNotClear, "").with_ino(ino));
        }
        ctx.shared.set_inode(ino, InodeKind::Unused, 0);
        return;
    }
    let low_dtime = low_dtime(ctx, dtime);
    if low_dtime {
        let p = Problem::new(Code::OrphanListRefugee, "").with_ino(ino);
        w.report(
            p.with_found(Some(dtime as u64))
                .with_expected((links != 0).then_some(0)),
        );
    }
    // (Reserved inodes with a mode are in use without links, but for the root: e2fsck
    // takes a root without links for a missing one, to be made again in pass 3.)
    if links == 0 && !(reserved && ino != BAD_BLOCKS_INO && ino != 2 && mode != 0) {
        // A deleted inode's record is still checksummed (an all-zero record never was).
        if let Some(seed) = ctx.fs.csum_seed() {
            if !reserved && rec.iter().any(|&b| b != 0) && !inode_checksum_ok(rec, seed, ino, isz) {
                w.report(Problem::new(Code::InodeChecksum, ino.to_string()).with_ino(ino));
            }
        }
        // Not in use. A deleted inode should carry its deletion time (unless it is on
        // the orphan list, where dtime links the list; e2fsck checks those separately).
        if mode != 0 && dtime == 0 && !reserved && ctx.fs.superblock().s_last_orphan() == 0 {
            w.report(Problem::new(Code::InodeZeroDtime, ino.to_string()).with_ino(ino));
        }
        return;
    }
    // Copy into the padded view (no allocation).
    {
        let b = w.inode.bytes_mut();
        b[..isz].copy_from_slice(rec);
        if isz < Inode::<Vec<u8>>::SIZE {
            b[isz..Inode::<Vec<u8>>::SIZE].fill(0);
        }
    }
    let inode = &w.inode;
    let extra = inode.i_extra_isize() as usize;
    let bad_extra = isz > GOOD_OLD_INODE_SIZE
        && (GOOD_OLD_INODE_SIZE + extra > isz
            || !extra.is_multiple_of(4)
            || (extra != 0 && extra < 4));
    let bad_csum = ctx
        .fs
        .csum_seed()
        .is_some_and(|seed| !inode.checksum_ok(seed, ino, isz));
    let iflags = inode.i_flags();
    let dind = u32::from_le_bytes(inode.i_block()[13 * 4..14 * 4].try_into().unwrap()) as u64;
    if bad_extra {
        w.report(Problem::new(Code::BadExtraIsize, ino.to_string()).with_ino(ino));
    }
    if bad_csum {
        w.report(Problem::new(Code::InodeChecksum, ino.to_string()).with_ino(ino));
    }
    crate::iflags::casefold(ctx, w, ino, mode);
    let ft = match FileType::from_mode(mode as u32) {
        Some(ft) => ft,
        None if ino == BAD_BLOCKS_INO || (reserved && ino != 2) => {
            ctx.shared.set_inode(ino, InodeKind::Unused, links);
            return;
        }
        // (A mode without a type whose data is a directory's becomes a directory's.)
        None if !reserved && crate::special::treat_as_dir(ctx, w, ino, None, links) => {
            FileType::Directory
        }
        None => {
            w.report(Problem::new(Code::InodeBadMode, ino.to_string()).with_ino(ino));
            return;
        }
    };
    if ino == 2 && ft != FileType::Directory {
        w.report(Problem::new(Code::ReservedInode, "Root inode is not a directory").with_ino(ino));
    }
    if !reserved && !crate::iflags::check(ctx, w, ino, ft) {
        // Cleared by the fix: left unused, so entries naming it go in the same round.
        return;
    }
    let ft = if reserved {
        ft
    } else {
        crate::special::check(ctx, w, ino, ft, links)
    };
    if w.inode.i_flags() & flags::ENCRYPT != 0 && !crate::encrypt::check_inode(ctx, w, ino) {
        // Cleared by the fix: left unused, so entries naming it go in the same round.
        return;
    }
    // (The root too: old mke2fs set its dtime; e2fsck clears it.)
    if dtime != 0 && !low_dtime && (!reserved || ino == 2) && links != 0 {
        w.report(Problem::new(Code::InodeDtimeSet, "").with_ino(ino));
    }
    // The obsolete fragment address must be zero (e2fsck marks the inode bad in pass 1
    // and clears the field in pass 2).
    let faddr = u32::from_le_bytes(rec[0x70..0x74].try_into().unwrap());
    if faddr != 0 && (!reserved || ino == 2) {
        w.report(
            Problem::new(Code::InodeFaddr, format!("for inode {ino} is {faddr}"))
                .with_ino(ino)
                .values(faddr as u64, 0),
        );
    }
    let f = &geo.features;
    check_high_fields(ctx, w, ino);
    if !reserved || ino == 2 {
        crate::iflags::imagic(ctx, w, ino);
    }
    if iflags & flags::INDEX != 0 && (ft != FileType::Directory || !f.has_compat(compat::DIR_INDEX))
    {
        w.report(
            Problem::new(
                Code::BadFlags,
                format!("{ino} has INDEX_FL flag set but is not a htree directory"),
            )
            .with_ino(ino)
            .values(u64::from(iflags), u64::from(flags::INDEX)),
        );
    }
    if ft == FileType::Directory && crate::dirmap::zero_length(ctx, &w.inode) {
        // Cleared by the fix: left unused, so entries naming it go in the same round.
        w.report(Problem::new(Code::ZeroLengthDir, ino.to_string()).with_ino(ino));
        return;
    }
    if !ctx.shared.set_inode(ino, InodeKind::Used(ft), links) {
        w.links.push((ino, links));
    }
    if iflags & flags::EA_INODE != 0 {
        ctx.shared.ea_inodes.set(ino as u64);
    }
    if iflags & flags::INDEX != 0 {
        ctx.shared.indexed_dirs.set(ino as u64);
    }
    w.counters.inodes += 1;
    match ft {
        FileType::Directory => w.counters.dirs += 1,
        FileType::Regular => w.counters.files += 1,
        _ => {}
    }
    if ino == RESIZE_INO {
        // Its indirect blocks are the reserved GDT blocks, marked as metadata in pass 0;
        // only the double-indirect block is its own.
        if dind != 0 && ctx.valid_block(dind) {
            ctx.shared.claim_block(dind);
        }
        return;
    }
    // A valid symlink with inline data: e2fsck looks no further (its xattr block and
    // i_blocks go unchecked and uncounted).
    if ft == FileType::Symlink
        && w.inode.i_flags() & flags::INLINE_DATA != 0
        && crate::special::symlink_ok(ctx, &w.inode, ino)
    {
        return;
    }
    check_inode_blocks(ctx, w, ino, ft);
}

/// Fields of inode `ino` (in `w.inode`) only a feature gives meaning: i_blocks_hi without
/// huge_file and i_file_acl_hi without 64bit must be zero (e2fsck marks the inode bad in
/// pass 1 and clears them in pass 2).
fn check_high_fields(ctx: &Ctx, w: &mut Worker, ino: u32) {
    let f = &ctx.geo.features;
    let blocks_hi = w.inode.l_i_blocks_high();
    if blocks_hi != 0 && !f.has_ro_compat(ro_compat::HUGE_FILE) {
        w.report(
            Problem::new(Code::BlocksHi, format!("for inode {ino} is {blocks_hi}"))
                .with_ino(ino)
                .values(blocks_hi as u64, 0),
        );
    }
    let acl_hi = w.inode.l_i_file_acl_high();
    if acl_hi != 0 && !f.has_incompat(incompat::BIT64) {
        w.report(
            Problem::new(Code::FileAclHi, format!("for inode {ino} is {acl_hi}"))
                .with_ino(ino)
                .values(acl_hi as u64, 0),
        );
    }
}

fn inode_checksum_ok(rec: &[u8], seed: u32, ino: u32, isz: usize) -> bool {
    let mut b = [0u8; 1024];
    b[..isz.min(1024)].copy_from_slice(&rec[..isz.min(1024)]);
    Inode::new(&b[..])
        .expect("1024 bytes")
        .checksum_ok(seed, ino, isz)
}

/// Pass-1 visitor: claims blocks, counts them, tracks fragmentation and the last block.
struct Claim<'a> {
    ctx: &'a Ctx<'a>,
    /// Clusters claimed (blocks without bigalloc).
    blocks: u64,
    /// The last data block visited (0: none yet).
    previous: u64,
    /// The last logical block of the previous data run (u64::MAX: none), for the
    /// bigalloc alignment rule.
    run_end: u64,
    /// The data run being visited breaks bigalloc's rule (see [`misaligned`]).
    misaligned: bool,
    /// The last logical block of a directory's previous extent.
    dir_run_end: Option<u64>,
    /// The inode.
    ino: u32,
    /// Problems found while claiming (misaligned clusters), reported after the walk.
    report: Vec<Problem>,
    fragmented: bool,
    /// Last logical block mapped (any extent), and last written one.
    last_lblk: Option<u64>,
    last_init_lblk: Option<u64>,
    /// Directory blocks: (lblk, pblk).
    dir: Option<Vec<(u64, u64)>>,
    /// The inode is block-mapped: its indirect blocks take part in the contiguity check
    /// (e2fsck reports them in pre-order with the data blocks); extent tree blocks do not.
    indirect: bool,
    /// A directory's first logical block past e2fsck's size limit (u64::MAX: none).
    dir_end: u64,
    /// The first directory block found at or past `dir_end`.
    too_big: Option<u64>,
    /// The first directory block in an uninitialized extent.
    dir_uninit: Option<u64>,
    /// The extent tree's entries per level (e2fsck's pass 1E decision).
    shape: crate::extent_shape::Shape,
}

impl Visit for Claim<'_> {
    fn extent_node(&mut self, level: usize, depth: u16, entries: u16, max: u16) {
        self.shape.node(level, depth, entries, max);
    }

    fn data_run(&mut self, lblk: u64, pblk: u64, len: u64) {
        let shift = self.ctx.geo.cluster_shift;
        if self.dir.is_some() && !self.indirect {
            // An extent past the block after the one before (e2fsck's
            // PR_1_COLLAPSE_DBLOCK; with bigalloc at the same offset in its cluster).
            let mut next = self.dir_run_end.map_or(0, |l| l + 1);
            if shift > 0 {
                let mask = (1u64 << shift) - 1;
                next = ((next + mask) & !mask) | (pblk & mask);
            }
            if lblk > next {
                self.report.push(
                    Problem::new(Code::DirCollapse, "")
                        .with_ino(self.ino)
                        .values(lblk, next),
                );
            }
            self.dir_run_end = Some(lblk + len.max(1) - 1);
        }
        self.misaligned = misaligned(shift, (self.previous, self.run_end), pblk, lblk);
        self.run_end = lblk + len.max(1) - 1;
    }

    fn block(&mut self, pblk: u64, kind: BlockKind) {
        if let (BlockKind::Data { lblk, init }, Some(_)) = (kind, &self.dir) {
            // A directory block past e2fsck's limit is cleared, not claimed; an
            // uninitialized one is a directory block all the same.
            if lblk >= self.dir_end {
                self.too_big.get_or_insert(lblk);
                return;
            }
            if !init {
                self.dir_uninit.get_or_insert(lblk);
            }
        }
        let claims = match kind {
            BlockKind::Data { lblk, .. } => self.claims_data(pblk, lblk),
            BlockKind::Meta => true,
        };
        if claims {
            self.ctx.shared.claim_block(pblk);
            self.blocks += 1;
        }
        if let BlockKind::Data { lblk, init } = kind {
            if self.previous != 0 && pblk != self.previous + 1 {
                self.fragmented = true;
            }
            self.previous = pblk;
            self.last_lblk = Some(self.last_lblk.map_or(lblk, |l| l.max(lblk)));
            if init {
                self.last_init_lblk = Some(self.last_init_lblk.map_or(lblk, |l| l.max(lblk)));
            }
            if let Some(d) = &mut self.dir {
                d.push((lblk, pblk));
            }
        } else if self.indirect {
            // Indirect blocks take part in the contiguity check (e2fsck reports them in
            // pre-order with the data blocks); extent tree blocks do not.
            if self.previous != 0 && pblk != self.previous + 1 {
                self.fragmented = true;
            }
            self.previous = pblk;
        }
    }
}

impl Claim<'_> {
    /// Does data block `pblk` (at `lblk`) claim a cluster? Always without bigalloc; with
    /// it, unless it shares the cluster of the block before it (e2fsck counts a file's
    /// clusters so). A block of a misaligned run is reported and claimed twice more
    /// (a duplicate for pass 1B to settle, as e2fsck does).
    fn claims_data(&mut self, pblk: u64, lblk: u64) -> bool {
        let shift = self.ctx.geo.cluster_shift;
        if shift == 0 {
            return true;
        }
        if self.misaligned {
            self.report.push(
                Problem::new(
                    Code::MisalignedCluster,
                    format!("{} logical block {lblk} (physical block {pblk})", self.ino),
                )
                .with_ino(self.ino),
            );
            self.ctx.shared.claim_block(pblk);
            self.ctx.shared.claim_block(pblk);
        }
        self.previous == 0 || self.previous >> shift != pblk >> shift
    }
}

/// Does a data run at `lblk` on `pblk` break bigalloc's rule (e2fsck's
/// has_unaligned_cluster_map): a logical cluster maps to one physical cluster, at the
/// same offsets? `last` is the last data block before it and the last logical block of
/// the run before it.
fn misaligned(shift: u32, (last_pblk, last_lblk): (u64, u64), pblk: u64, lblk: u64) -> bool {
    if shift == 0 {
        return false;
    }
    let mask = (1u64 << shift) - 1;
    if lblk & mask != pblk & mask {
        return true;
    }
    last_pblk != 0
        && lblk & mask != 0
        && last_lblk != u64::MAX
        && lblk >> shift == last_lblk >> shift
        && pblk >> shift != last_pblk >> shift
}

/// What pass 1 reads off an inode (in `w.inode`) to check its blocks.
struct BlockFacts {
    /// The inode.
    ino: u32,
    /// Its file type.
    ft: FileType,
    /// i_flags.
    iflags: u32,
    /// i_size.
    size: u64,
    /// i_generation (for block checksums).
    generation: u32,
    /// i_block: the extent root, block map or inline data.
    i_block: [u8; 60],
    /// The xattr block (0 if none, or if the ext_attr feature is off).
    file_acl: u64,
    /// i_blocks, in 512-byte units.
    stored_blocks: u64,
    /// The inode is a directory.
    is_dir: bool,
    /// The data is inline (INLINE_DATA_FL).
    inline: bool,
    /// The inode maps blocks (extents or a block map) to walk.
    has_blocks: bool,
}

impl BlockFacts {
    /// The facts of inode `ino` (file type `ft`) from its record `inode`.
    fn of(geo: &Geometry, inode: &Inode<Vec<u8>>, ino: u32, ft: FileType) -> BlockFacts {
        let iflags = inode.i_flags();
        let file_acl = inode.file_acl_block(geo.features.has_incompat(incompat::BIT64));
        let huge = geo.features.has_ro_compat(ro_compat::HUGE_FILE);
        let stored_blocks = inode.blocks_512(huge, geo.block_size);
        let inline = iflags & flags::INLINE_DATA != 0;
        let has_blocks = !inline && crate::special::has_valid_blocks(inode, ft);
        BlockFacts {
            ino,
            ft,
            iflags,
            size: inode.size(),
            generation: inode.i_generation(),
            i_block: *inode.i_block(),
            file_acl,
            stored_blocks,
            is_dir: ft == FileType::Directory,
            inline,
            has_blocks,
        }
    }
}

/// Checks inode `ino`'s blocks (its record is in `w.inode`, its file type `ft`): walks
/// and claims them, checks its xattrs, i_blocks and i_size, and queues a directory's
/// blocks for pass 2.
fn check_inode_blocks(ctx: &Ctx, w: &mut Worker, ino: u32, ft: FileType) {
    let mut f = BlockFacts::of(ctx.geo, &w.inode, ino, ft);
    let mut claim = Claim {
        ctx,
        blocks: 0,
        previous: 0,
        run_end: u64::MAX,
        misaligned: false,
        dir_run_end: None,
        ino,
        report: Vec::new(),
        fragmented: false,
        last_lblk: None,
        last_init_lblk: None,
        dir: f.is_dir.then(Vec::new),
        indirect: f.iflags & flags::EXTENTS == 0,
        dir_end: crate::dirmap::end(ctx, &w.inode, f.is_dir),
        too_big: None,
        dir_uninit: None,
        shape: Default::default(),
    };
    // Inline data and xattrs first (they borrow the inode view).
    let ibody = check_in_inode_xattrs(ctx, w, ino);
    let reported = w.problems.len();
    walk_blocks(ctx, w, &f, &mut claim);
    w.problems.append(&mut claim.report);
    // (A map with problems is built again by their fixes anyway.)
    let extents = f.has_blocks && f.iflags & flags::EXTENTS != 0;
    if extents && w.problems.len() == reported {
        crate::extent_shape::check(w, ino, &claim.shape, ctx.geo.block_size);
    }
    crate::dirmap::report(w, ino, claim.dir_end, claim.too_big, claim.dir_uninit);
    // (In clusters, as e2fsck converts the charges: EXT2FS_B2C.)
    claim.blocks += ibody.charge.blocks >> ctx.geo.cluster_shift;
    let block_ea_inodes = check_file_acl(ctx, w, &mut f, &mut claim);
    check_block_count(ctx, w, &f, &claim);
    let ea_inodes = (ibody.charge.inodes.len() + block_ea_inodes) as u64;
    crate::quota::charge(ctx, w, ino, claim.blocks, ea_inodes);
    if f.ft == FileType::Regular && f.size >= LARGE_FILE_SIZE {
        w.counters.large_files += 1;
    }
    check_size(ctx, w, &f, &claim);
    if f.is_dir && f.inline {
        crate::pass2::check_inline_dir(ctx, w, ino);
    } else if let Some(blocks) = claim.dir.take() {
        queue_dir_blocks(ctx, w, &f, blocks);
    }
}

/// Walks the inode's extent tree or block map into `claim` (a fast symlink's target
/// was checked with its type, in `special`).
fn walk_blocks(ctx: &Ctx, w: &mut Worker, f: &BlockFacts, claim: &mut Claim) {
    let (ino, i_block) = (f.ino, &f.i_block);
    if f.has_blocks {
        if f.iflags & flags::EXTENTS != 0 {
            walk_extents(ctx, w, ino, f.generation, i_block, true, claim);
        } else {
            walk_indirect(ctx, w, ino, i_block, true, claim);
        }
    }
}

/// Checks the inode's xattr block, if it has one (dropping it from `f` when the ext_attr
/// feature is off), and counts it in `claim` with the values it keeps in EA inodes;
/// returns how many EA inodes those are.
fn check_file_acl(ctx: &Ctx, w: &mut Worker, f: &mut BlockFacts, claim: &mut Claim) -> usize {
    let (ino, file_acl) = (f.ino, f.file_acl);
    if file_acl != 0 && !ctx.geo.features.has_compat(compat::EXT_ATTR) {
        w.report(
            Problem::new(
                Code::BadXattrBlock,
                format!("{ino} (i_file_acl {file_acl} set without the ext_attr feature)"),
            )
            .with_ino(ino),
        );
        f.file_acl = 0;
    }
    if f.file_acl == 0 {
        return 0;
    }
    match check_xattr_block(ctx, w, (ino, f.generation), f.file_acl) {
        Some((blocks, ea_inodes)) => {
            // (The block is a cluster of its own with bigalloc.)
            claim.blocks += 1 + ((blocks - 1) >> ctx.geo.cluster_shift);
            ea_inodes
        }
        None => 0,
    }
}

/// Counts a fragmented inode (as e2fsck does: not contiguous and smaller than a group)
/// and checks i_blocks against the blocks claimed.
fn check_block_count(ctx: &Ctx, w: &mut Worker, f: &BlockFacts, claim: &Claim) {
    let geo = ctx.geo;
    if claim.fragmented && claim.blocks < geo.blocks_per_group as u64 {
        if f.is_dir {
            w.counters.fragmented_dirs += 1;
        } else {
            w.counters.fragmented += 1;
        }
    }
    let counted = (claim.blocks << geo.cluster_shift) * (geo.block_size as u64 / 512);
    let (ino, stored) = (f.ino, f.stored_blocks);
    if counted != stored {
        w.report(
            Problem::new(Code::BadIBlocks, "")
                .with_ino(ino)
                .values(stored, counted),
        );
    }
}

/// Checks i_size against the blocks mapped: a directory's must cover them (up to the
/// preallocated blocks), a regular file's must reach its last written block.
fn check_size(ctx: &Ctx, w: &mut Worker, f: &BlockFacts, claim: &Claim) {
    let (ino, size) = (f.ino, f.size);
    let bs = ctx.geo.block_size as u64;
    let inline_fs = ctx.geo.features.has_incompat(incompat::INLINE_DATA);
    if f.is_dir && f.inline && inline_fs {
        // i_size must be the inline data's: i_block and the system.data value (a
        // damaged area or a missing value is another problem's).
        let want = crate::special::inline_size(ctx, &w.inode, ino).map(|n| n as u64);
        if let Some(want) = want.filter(|&n| n != size) {
            w.report(
                Problem::new(Code::BadISize, "")
                    .with_ino(ino)
                    .values(size, want),
            );
        }
    } else if f.is_dir && f.has_blocks {
        let nblock = size / bs;
        let last = claim.last_lblk.map_or(0, |l| l + 1);
        let prealloc = ctx.fs.superblock().s_prealloc_dir_blocks() as u64;
        if !size.is_multiple_of(bs) || nblock > last || (nblock < last && last - nblock > prealloc)
        {
            w.report(
                Problem::new(Code::BadISize, "")
                    .with_ino(ino)
                    .values(size, last * bs),
            );
        }
    } else if f.ft == FileType::Regular && f.has_blocks && f.iflags & flags::VERITY == 0 {
        // (fs-verity keeps its Merkle tree past i_size.)
        let short = claim.last_init_lblk.filter(|&l| size < l * bs);
        if let Some(l) = short {
            w.report(
                Problem::new(Code::BadISize, "")
                    .with_ino(ino)
                    .values(size, (l + 1) * bs),
            );
        } else if size > max_file_size(ctx, f.iflags) {
            // Past what the map can address: e2fsck sets it from the last block.
            let want = claim.last_lblk.map_or(0, |l| l + 1) * bs;
            w.report(
                Problem::new(Code::BadISize, "")
                    .with_ino(ino)
                    .values(size, want),
            );
        }
    }
}

/// The largest i_size a regular file with flags `iflags` can have (e2fsck's limits): what
/// 32-bit extent logical blocks address, or the 12 direct, single, double and triple
/// indirect blocks of a block map.
fn max_file_size(ctx: &Ctx, iflags: u32) -> u64 {
    let bits = ctx.geo.block_size.trailing_zeros();
    if iflags & flags::EXTENTS != 0 && ctx.geo.features.has_incompat(incompat::EXTENTS) {
        return (1u64 << (32 + bits)) - 1;
    }
    let per = 1u64 << (bits - 2);
    (12 + per + per * per + per * per * per) << bits
}

/// Queues a directory's blocks, (lblk, pblk) in logical order, for pass 2, reporting
/// holes; notes an indexed directory (and the hash its root names) for the htree check.
fn queue_dir_blocks(ctx: &Ctx, w: &mut Worker, f: &BlockFacts, blocks: Vec<(u64, u64)>) {
    let ino = f.ino;
    let indexed = f.iflags & flags::INDEX != 0;
    let mut hash = None;
    if indexed {
        if let Some(&(_, root)) = blocks.iter().find(|b| b.0 == 0) {
            let mut buf = std::mem::take(&mut w.meta_buf);
            hash = crate::htree::root_hash_version(ctx, root, &mut buf);
            w.meta_buf = buf;
        }
        let nblocks = blocks.last().map_or(0, |b| b.0 + 1);
        w.htree_dirs
            .push((ino, nblocks.min(u32::MAX as u64) as u32));
    } else if ctx.geo.features.has_compat(compat::DIR_INDEX)
        && f.size / ctx.geo.block_size as u64 >= 3
    {
        // (e2fsck's pass 1 queues such a directory for pass 3A, which indexes it.)
        w.report(Problem::new(Code::DirOptimize, ino.to_string()).with_ino(ino));
    }
    if blocks.is_empty() && f.iflags & flags::EXTENTS == 0 {
        // e2fsck always visits block 0 of a block-mapped directory.
        w.report(
            Problem::new(Code::DirHole, format!("{ino} (block #0)"))
                .with_ino(ino)
                .values(0, 1),
        );
    }
    let mut expect = 0u64;
    for (lblk, pblk) in blocks {
        if lblk != expect && lblk > expect {
            w.report(
                Problem::new(Code::DirHole, format!("{ino} (block #{expect})"))
                    .with_ino(ino)
                    .values(expect, lblk),
            );
        }
        expect = lblk + 1;
        // Every block is checked, also past i_size (as e2fsck does).
        w.dir_batch.push(DirBlock {
            dir: ino,
            generation: f.generation,
            lblk: lblk as u32,
            pblk,
            indexed,
            hash,
        });
    }
    if w.dir_batch.len() >= 256 {
        flush_dir_batch(ctx, w);
    }
}

/// The xattr walker's view of inode `ino` on this file system.
pub(crate) fn xattr_ctx(ctx: &Ctx, ino: u32) -> XattrCtx {
    XattrCtx {
        ino,
        ea_inode: ctx.geo.features.has_incompat(incompat::EA_INODE),
        seed: ctx.fs.csum_seed(),
    }
}

/// What a lenient walk of an inode's in-inode xattrs finds.
struct Ibody {
    /// Something is wrong (e2fsck's "extended attribute in inode has a problem").
    bad: bool,
    /// The entries whose values live in EA inodes.
    values: Vec<EaValue>,
    /// What those charge the owner (i_blocks and inode quota), once checked: nothing
    /// when the area is to be cleared.
    charge: EaCharge,
}

impl<'a> XattrVisitor<'a> for Ibody {
    fn entry(&mut self, e: Entry<'a>) {
        self.values.extend(EaValue::of(&e));
    }
    fn issue(&mut self, _: XattrIssue) -> ControlFlow<()> {
        self.bad = true;
        ControlFlow::Continue(())
    }
}

/// Walks the in-inode xattr area of the inode in `w.inode` (if it has one), reporting
/// a damaged one; returns what the walk found.
fn check_in_inode_xattrs(ctx: &Ctx, w: &mut Worker, ino: u32) -> Ibody {
    let mut found = Ibody {
        bad: false,
        values: Vec::new(),
        charge: EaCharge::default(),
    };
    let isz = ctx.geo.inode_size as usize;
    if let Some(area) = walk::xattr::ibody(w.inode.bytes(), isz, w.inode.i_extra_isize()) {
        let cx = xattr_ctx(ctx, ino);
        let _ = walk::xattr::scan_entries(area, 0, &cx, Mode::Lenient, &mut found);
    }
    // (A bad area is cleared whole: its EA inodes are neither charged nor referenced.)
    if found.bad {
        w.report(Problem::new(Code::BadXattrInInode, ino.to_string()).with_ino(ino));
    } else if !found.values.is_empty() {
        let owner = (ino, w.inode.i_generation());
        match crate::ea_inode::check(ctx, w, owner, None, &found.values) {
            Ok(charge) => {
                w.ea_refs.extend_from_slice(&charge.inodes);
                found.charge = charge;
            }
            Err(p) => w.report(p),
        }
    }
    found
}

/// What a lenient walk of an xattr block finds.
#[derive(Default)]
struct BlockFindings {
    /// The block is unusable: unreadable, bad header or entries.
    bad: bool,
    /// An entry's hash is wrong.
    hash: bool,
    /// The checksum does not match.
    checksum: bool,
    /// The entries whose values live in EA inodes.
    values: Vec<EaValue>,
}

impl<'a> XattrVisitor<'a> for BlockFindings {
    fn entry(&mut self, e: Entry<'a>) {
        self.values.extend(EaValue::of(&e));
    }
    fn issue(&mut self, issue: XattrIssue) -> ControlFlow<()> {
        match issue {
            XattrIssue::Hash { .. } => self.hash = true,
            XattrIssue::Checksum => self.checksum = true,
            _ => self.bad = true,
        }
        ControlFlow::Continue(())
    }
}

/// Checks the xattr block `blk` of inode `owner` (number, generation) and counts the
/// reference; returns what it charges the inode (blocks: its own and those of the
/// values it keeps in EA inodes; the number of EA inodes), None when it does not count.
fn check_xattr_block(
    ctx: &Ctx,
    w: &mut Worker,
    owner: (u32, u32),
    blk: u64,
) -> Option<(u64, usize)> {
    let ino = owner.0;
    if !ctx.valid_block(blk) {
        w.report(Problem::new(Code::BadXattrBlock, format!("{ino} ({blk})")).with_ino(ino));
        return None;
    }
    let first = {
        let c = w.xattr_refs.entry(blk).or_insert(0);
        *c += 1;
        *c == 1
    };
    // Each block is validated and claimed once per thread; the merge catches a block
    // claimed by two threads (fine) and compares refcounts.
    if !first {
        let values = w.xattr_ea.get(&blk).map(|m| m.0.clone());
        return match values {
            None => Some((1, 0)),
            Some(values) => ea_block_charge(ctx, w, owner, blk, values),
        };
    }
    let mut buf = std::mem::take(&mut w.meta_buf);
    let mut found = BlockFindings::default();
    if ctx.read_block(blk, &mut buf).is_ok() {
        let cx = xattr_ctx(ctx, ino);
        let _ = walk::xattr::scan_block(&buf, blk, &cx, Mode::Lenient, &mut found);
    } else {
        found.bad = true;
    }
    w.meta_buf = buf;
    let report = |w: &mut Worker, what: &str| {
        w.report(Problem::new(Code::BadXattrBlock, format!("{ino} ({blk}){what}")).with_ino(ino));
    };
    if found.bad {
        report(w, "");
        return Some((1, 0));
    }
    if found.hash {
        report(w, ": an entry's hash is invalid");
    }
    if found.checksum && !found.hash {
        w.report(
            Problem::new(Code::XattrBlockChecksum, format!("{ino} ({blk})"))
                .with_ino(ino)
                .with_block(blk),
        );
    }
    if found.values.is_empty() {
        return Some((1, 0));
    }
    ea_block_charge(ctx, w, owner, blk, found.values)
}

/// What xattr block `blk`, whose entries keep `values` in EA inodes, charges `owner`
/// (as [`check_xattr_block`]): checked once per worker while valid (the result kept
/// in `w.xattr_ea`), again for each owner while not (an old Lustre EA inode is valid
/// for its owner only). An invalid one is reported, its reference taken back: the fix
/// lets go of the block, as e2fsck's.
fn ea_block_charge(
    ctx: &Ctx,
    w: &mut Worker,
    owner: (u32, u32),
    blk: u64,
    values: Vec<EaValue>,
) -> Option<(u64, usize)> {
    if let Some((_, Some(c))) = w.xattr_ea.get(&blk) {
        return Some((1 + c.blocks, c.inodes.len()));
    }
    let checked = crate::ea_inode::check(ctx, w, owner, Some(blk), &values);
    let charge = match checked {
        Ok(c) => c,
        Err(p) => {
            w.report(p);
            *w.xattr_refs.entry(blk).or_insert(1) -= 1;
            w.xattr_ea.insert(blk, (values, None));
            return None;
        }
    };
    let r = (1 + charge.blocks, charge.inodes.len());
    w.xattr_ea.insert(blk, (values, Some(charge)));
    Some(r)
}

/// Compares each xattr block's reference count with the inodes using it (`refs`, merged
/// from the workers' counts of [`check_xattr_block`]), and claims it.
pub(crate) fn check_xattr_refcounts(ctx: &Ctx, w: &mut Worker, refs: &HashMap<u64, u32>) {
    use usfs_ext4::format::xattr::XattrBlockHeader;
    use usfs_ext4::walk::xattr::header_issue;
    let mut buf = vec![0u8; ctx.geo.block_size as usize];
    let mut blocks: Vec<_> = refs.iter().collect();
    blocks.sort();
    for (&b, &n) in blocks {
        // (No user left: those it had let go of it, as e2fsck's fix of a bad entry
        // does; the block is free.)
        if n == 0 {
            continue;
        }
        ctx.shared.claim_block(b);
        if ctx.read_block(b, &mut buf).is_err() {
            continue;
        }
        // Any block with the magic has a refcount (a bad h_blocks is pass 1's).
        let magic = !matches!(header_issue(&buf), Some(XattrIssue::Magic { .. }));
        let h = XattrBlockHeader::new(&buf[..]).expect("block >= 32");
        if magic && h.h_refcount() != n {
            w.report(
                Problem::new(
                    Code::XattrRefcount,
                    format!("{b}, reference count is {}, should be {n}", h.h_refcount()),
                )
                .with_block(b)
                .values(h.h_refcount() as u64, n as u64),
            );
        }
    }
}
