//! The block and inode allocators, in the design of ext4's mballoc and flex_bg inode
//! allocator (Kumar et al., "Ext4 block and inode allocator improvements", OLS 2008).
//!
//! Blocks ([`BlockAllocator`]):
//! - Each block group keeps its bitmap (the truth, written to disk) and, built from it on
//!   first use, a buddy structure ([`buddy::Buddy`]): for every order `k` the maximal free
//!   aligned chunks of `2^k` blocks and a counter per order. Groups never touched stay
//!   unloaded (they are written with BLOCK_UNINIT).
//! - A request ([`Request`]) asks for one whole extent with a goal. Metadata requests try
//!   the goal itself, then (large requests, RAID) a stripe-aligned run, then the smallest
//!   buddy chunk holding the request in the goal group and the groups after it, then any
//!   run long enough, and only when the disk is fragmented or full the longest run there
//!   is (fewer blocks than asked; the caller asks again for the rest).
//! - Delayed allocation ([`delalloc`]): data goes through a buffer; blocks are chosen at
//!   flush, when the file's size is known. Then no request needs normalising and the
//!   allocator keeps one locality-group stream per flex group (a preallocation of 512
//!   blocks, extended in place): small files (< 16 blocks) are carved from it one after
//!   the other, and a large file takes the head of the stream (extended as far as it
//!   needs) when it can, so small and large files follow each other with no gap. A large
//!   file that cannot continue the stream gets the first run holding it whole (at most one
//!   extent per group, the largest ext4 extent being 32768 blocks); a gap smaller than a
//!   stream left before the next used block is kept for small files, as are stream
//!   remainders that cannot be extended (best fit). The aim: free space left in as few
//!   pieces as a sequential writer leaves it, with every file contiguous
//!   (`bench/mkfs-ext4.sh` measures both against `mke2fs -d`).
//! - Files still growing (size unknown) get normalised requests (rounded up to a power of
//!   two, up to 2048 blocks) and the surplus stays as the inode's preallocation for its
//!   next write; [`BlockAllocator::release_inode`] gives it back when the file closes.
//! - Free counts are exact at all times ([`BlockAllocator::check`]); running out of space
//!   is the [`NoSpace`] error, never a panic.
//!
//! Inodes ([`InodeAllocator`]): flex_bg-aware. Top-level directories are spread over flex
//! groups with Orlov's rule (at least average free inodes and blocks, fewest
//! directories); other inodes go to their parent's flex group while it has inodes and at
//! least 10% free blocks, then to the next flex group.

mod bitset;
pub mod blocks;
pub mod buddy;
pub mod delalloc;
mod group;
pub mod inodes;
pub(crate) mod seed;

pub use bitset::BitSet;
pub use blocks::{AllocGeometry, AllocStats, BlockAllocator, NoSpace, Purpose, Request};
pub use delalloc::{plan_extents, DelayedFile, Mapping};
pub use inodes::{InodeAllocator, InodeKind, NoInodes};

#[cfg(test)]
mod tests;
