//! State shared by the worker threads: the few structures the design needs shared
//! (pFSCK's "global metadata update"), all lock-free. Everything else is per thread.

use crate::refs::ManyRefs;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use usfs_fs::FileType;

/// A bitmap updated with atomic or: concurrent markers never lose a bit, and a marker
/// learns whether the bit was already set (a block claimed twice).
pub(crate) struct AtomicBitmap {
    words: Vec<AtomicU64>,
    len: u64,
}

impl AtomicBitmap {
    /// `len` clear bits.
    pub(crate) fn new(len: u64) -> Self {
        AtomicBitmap {
            words: zeroed(len.div_ceil(64) as usize),
            len,
        }
    }

    /// Sets bit `i`; returns whether it was already set. Out-of-range bits are ignored
    /// (and reported as not set).
    pub(crate) fn set(&self, i: u64) -> bool {
        if i >= self.len {
            return false;
        }
        let m = 1u64 << (i % 64);
        self.words[(i / 64) as usize].fetch_or(m, Relaxed) & m != 0
    }

    /// Is bit `i` set?
    pub(crate) fn get(&self, i: u64) -> bool {
        i < self.len && self.words[(i / 64) as usize].load(Relaxed) & (1u64 << (i % 64)) != 0
    }
}

/// The per-inode facts later passes need, one byte each: unused, or the file type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InodeKind {
    /// Not in use (links 0) or cleared.
    Unused,
    /// In use, of this type.
    Used(FileType),
    /// Stored in a bad inode-table block: counted as in use, never read.
    InBadBlock,
}

impl InodeKind {
    fn encode(self) -> u8 {
        match self {
            InodeKind::Unused => 0,
            InodeKind::Used(t) => 1 + t.dirent_type(),
            InodeKind::InBadBlock => 0x0f,
        }
    }

    fn decode(b: u8) -> InodeKind {
        let t = match b {
            0 => return InodeKind::Unused,
            0x0f => return InodeKind::InBadBlock,
            b => b - 1,
        };
        InodeKind::Used(match t {
            8 => FileType::Regular,
            4 => FileType::Directory,
            10 => FileType::Symlink,
            2 => FileType::CharDevice,
            6 => FileType::BlockDevice,
            1 => FileType::Fifo,
            _ => FileType::Socket,
        })
    }
}

/// Atomics whose all-zero bit pattern is the value zero.
trait ZeroIsZero {}
impl ZeroIsZero for AtomicU8 {}
impl ZeroIsZero for AtomicU64 {}

/// `n` zero-valued atomics in zeroed memory. Large zeroed allocations come as fresh pages
/// from the OS, and a page never written costs no memory: maps indexed by inode or block
/// are mostly untouched (unused inodes, blocks never claimed twice), so the checker's peak
/// RSS stays near what it really uses.
fn zeroed<T: ZeroIsZero>(n: usize) -> Vec<T> {
    if n == 0 || std::mem::size_of::<T>() == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<T>(n).expect("map size fits in memory");
    // SAFETY: the memory is allocated with T's own layout for exactly n elements (so
    // Vec::from_raw_parts' requirements on pointer, capacity and alignment hold), and every
    // T here is an atomic integer, valid when all bytes are zero (ZeroIsZero).
    unsafe {
        let p = std::alloc::alloc_zeroed(layout) as *mut T;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(p, n, n)
    }
}

/// A full reference nibble: the worker lists further references.
const REFS_FULL: u64 = 15;

/// Link counts from this value up are listed apart, not kept in [`Shared::kinds`].
pub(crate) const LINKS_LISTED: u8 = 15;

/// Shared state of one check.
pub(crate) struct Shared {
    /// Clusters found in use (metadata and every inode's blocks), one bit per cluster
    /// (per block without bigalloc): see [`Shared::claim_block`].
    blocks: AtomicBitmap,
    /// Clusters claimed twice (the pass 1B input): a second bitmap, set on collision.
    dup_blocks: AtomicBitmap,
    /// log2 of blocks per cluster (0 without bigalloc).
    cluster_shift: u32,
    /// Were duplicates found at all?
    pub any_dup: AtomicBool,
    /// One byte per inode (index ino - 1), written by pass 1: its kind in the low nibble,
    /// its i_links_count in the high one when below [`LINKS_LISTED`] (nearly every file
    /// and directory). Larger counts are listed by the workers
    /// ([`crate::ctx::Worker::links`]) and merged for pass 4 — e2fsck's icount idea,
    /// a byte per inode instead of a counter.
    kinds: Vec<AtomicU8>,
    /// References from directory entries (including `.` and `..`), counted by pass 2:
    /// four bits per inode (index ino - 1), 16 to a word; a full nibble (15) stops
    /// counting, the worker lists the rest ([`crate::refs::ManyRefs`]).
    refs: Vec<AtomicU64>,
    /// Pass 1 finished group g.
    group_done: Vec<AtomicBool>,
    /// Chunks of group g pass 1 has not finished.
    group_pending: Vec<AtomicU32>,
    /// Inodes holding xattr values (ea_inode): referenced by xattrs, not by entries.
    pub ea_inodes: AtomicBitmap,
    /// Directories with the htree INDEX flag (their link count may be 1).
    pub indexed_dirs: AtomicBitmap,
    /// The encryption policies of encrypted inodes.
    pub policies: crate::encrypt::Policies,
}

impl Shared {
    /// State for `inodes` inodes, `blocks` blocks in clusters of `1 << cluster_shift`
    /// and `groups` groups.
    pub(crate) fn new(inodes: u32, blocks: u64, cluster_shift: u32, groups: u32) -> Shared {
        let n = inodes as usize;
        let clusters = blocks.div_ceil(1 << cluster_shift);
        Shared {
            blocks: AtomicBitmap::new(clusters),
            dup_blocks: AtomicBitmap::new(clusters),
            cluster_shift,
            any_dup: AtomicBool::new(false),
            kinds: zeroed(n),
            refs: zeroed(n.div_ceil(16)),
            group_done: (0..groups).map(|_| AtomicBool::new(false)).collect(),
            group_pending: (0..groups).map(|_| AtomicU32::new(0)).collect(),
            ea_inodes: AtomicBitmap::new(inodes as u64 + 1),
            indexed_dirs: AtomicBitmap::new(inodes as u64 + 1),
            policies: Default::default(),
        }
    }

    /// Marks block `b`'s cluster in use; a second claim is recorded as a duplicate
    /// (the blocks of one file that share a cluster claim it once: pass 1's concern).
    pub(crate) fn claim_block(&self, b: u64) {
        let c = b >> self.cluster_shift;
        if self.blocks.set(c) {
            self.dup_blocks.set(c);
            self.any_dup.store(true, Relaxed);
        }
    }

    /// Is block `b`'s cluster in use?
    pub(crate) fn block_used(&self, b: u64) -> bool {
        self.blocks.get(b >> self.cluster_shift)
    }

    /// Is block `b`'s cluster claimed more than once?
    pub(crate) fn block_dup(&self, b: u64) -> bool {
        self.dup_blocks.get(b >> self.cluster_shift)
    }

    /// Records what pass 1 found for `ino`. Returns false when `links` is too large to
    /// be kept here: the caller lists it (see [`Shared::kinds`]).
    pub(crate) fn set_inode(&self, ino: u32, kind: InodeKind, links: u16) -> bool {
        let kept = links < LINKS_LISTED as u16;
        let nib = if kept { links as u8 } else { LINKS_LISTED };
        self.kinds[(ino - 1) as usize].store(kind.encode() | nib << 4, Relaxed);
        kept
    }

    /// Marks `ino` unused again (pass 1 found it unusable).
    #[allow(dead_code, reason = "only the tests use it until repair does")]
    pub(crate) fn clear_inode(&self, ino: u32) {
        let _ = self.kinds[(ino - 1) as usize].fetch_and(0xf0, Relaxed);
    }

    /// What pass 1 found for `ino` (valid once its group is done).
    pub(crate) fn kind(&self, ino: u32) -> InodeKind {
        InodeKind::decode(self.kinds[(ino - 1) as usize].load(Relaxed) & 0x0f)
    }

    /// `ino`'s i_links_count if it is kept here (below [`LINKS_LISTED`]), else `None`.
    pub(crate) fn small_links(&self, ino: u32) -> Option<u16> {
        let nib = self.kinds[(ino - 1) as usize].load(Relaxed) >> 4;
        (nib < LINKS_LISTED).then_some(nib as u16)
    }

    /// Counts one directory entry naming `ino`, in `many` once its nibble is full.
    pub(crate) fn add_ref(&self, ino: u32, many: &mut ManyRefs) {
        let i = (ino - 1) as usize;
        let shift = (i % 16) * 4;
        let full = self.refs[i / 16]
            .fetch_update(Relaxed, Relaxed, |v| {
                ((v >> shift) & 0xf < REFS_FULL).then_some(v + (1 << shift))
            })
            .is_err();
        if full {
            many.add(ino);
        }
    }

    /// Entries naming `ino` counted here: below [`REFS_FULL`] the count, at it the count
    /// less those the workers listed.
    pub(crate) fn small_refs(&self, ino: u32) -> u32 {
        let i = (ino - 1) as usize;
        ((self.refs[i / 16].load(Relaxed) >> ((i % 16) * 4)) & 0xf) as u32
    }

    /// Pass 1 will scan group `g` in `chunks` chunks (0: the group is done already).
    pub(crate) fn plan_group(&self, g: u32, chunks: u32) {
        self.group_pending[g as usize].store(chunks, Relaxed);
        if chunks == 0 {
            self.finish_group(g);
        }
    }

    /// One chunk of group `g` is done; the last one finishes the group.
    pub(crate) fn chunk_done(&self, g: u32) {
        if self.group_pending[g as usize].fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            self.finish_group(g);
        }
    }

    /// Pass 1 is done with group `g`.
    fn finish_group(&self, g: u32) {
        self.group_done[g as usize].store(true, std::sync::atomic::Ordering::Release);
    }

    /// Has pass 1 finished the group of `ino`?
    pub(crate) fn inode_checked(&self, ino: u32, inodes_per_group: u32) -> bool {
        self.group_done[((ino - 1) / inodes_per_group) as usize]
            .load(std::sync::atomic::Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip() {
        for t in [
            FileType::Regular,
            FileType::Directory,
            FileType::Symlink,
            FileType::CharDevice,
            FileType::BlockDevice,
            FileType::Fifo,
            FileType::Socket,
        ] {
            assert_eq!(
                InodeKind::decode(InodeKind::Used(t).encode()),
                InodeKind::Used(t)
            );
        }
        assert_eq!(InodeKind::decode(0), InodeKind::Unused);
    }

    #[test]
    fn neighbouring_kinds_are_independent() {
        let s = Shared::new(5, 10, 0, 1);
        assert!(s.set_inode(1, InodeKind::Used(FileType::Directory), 14));
        assert!(!s.set_inode(2, InodeKind::Used(FileType::Socket), 15));
        assert!(s.set_inode(5, InodeKind::Used(FileType::Regular), 0));
        assert_eq!(s.kind(1), InodeKind::Used(FileType::Directory));
        assert_eq!(s.kind(2), InodeKind::Used(FileType::Socket));
        assert_eq!(s.kind(3), InodeKind::Unused);
        assert_eq!(
            (s.small_links(1), s.small_links(2), s.small_links(5)),
            (Some(14), None, Some(0))
        );
        s.clear_inode(1);
        assert_eq!(s.kind(1), InodeKind::Unused);
        assert_eq!(s.small_links(1), Some(14));
        assert_eq!(s.kind(2), InodeKind::Used(FileType::Socket));
    }

    #[test]
    fn full_reference_nibbles_list_the_rest() {
        let s = Shared::new(40, 10, 0, 1);
        let mut many = ManyRefs::default();
        for _ in 0..20 {
            s.add_ref(17, &mut many);
        }
        for _ in 0..3 {
            s.add_ref(16, &mut many);
            s.add_ref(18, &mut many);
        }
        assert_eq!(
            (s.small_refs(16), s.small_refs(17), s.small_refs(18)),
            (3, 15, 3)
        );
        assert_eq!(s.small_refs(33), 0);
        assert_eq!(many.into_sorted(), vec![(17, 5)]);
    }

    #[test]
    fn bitmap_reports_second_claims() {
        let s = Shared::new(10, 100, 0, 1);
        s.claim_block(5);
        assert!(!s.any_dup.load(Relaxed));
        s.claim_block(5);
        assert!(s.any_dup.load(Relaxed) && s.block_dup(5) && !s.block_dup(6));
    }

    #[test]
    fn with_bigalloc_a_claim_is_a_cluster_s() {
        let s = Shared::new(10, 100, 2, 1);
        s.claim_block(5);
        assert!(s.block_used(4) && s.block_used(7) && !s.block_used(8));
        s.claim_block(6);
        assert!(s.block_dup(4) && !s.block_dup(8));
    }
}
