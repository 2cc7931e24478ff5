//! The block and inode allocators, in the design of ext4's mballoc and flex_bg inode
//! allocator (Kumar et al., "Ext4 block and inode allocator improvements", OLS 2008).
//!
//! Blocks ([`BlockAllocator`]):
//! - Each block group keeps its bitmap (the truth, written to disk) and, built from it on
//!   first use, a buddy structure ([`buddy::Buddy`]): for every order `k` the maximal free
//!   aligned chunks of `2^k` blocks and a counter per order. Groups never touched stay
//!   unloaded (they are written with BLOCK_UNINIT).
//! - A request ([`Request`]) asks for one whole extent with a goal. The search tries the
//!   goal itself (extending the file's previous extent), then a stripe-aligned run for
//!   large requests when a RAID stripe is set, then the smallest buddy chunk holding the
//!   request in the goal group and the groups after it, then any run long enough, and
//!   only when the disk is fragmented or full the longest run there is (fewer blocks
//!   than asked; the caller asks again for the rest).
//! - Delayed allocation ([`delalloc`]): data goes through a buffer; blocks are chosen at
//!   flush, when the file's size is known. Then small files (< 16 blocks) are carved one
//!   after the other out of a locality-group preallocation (512 blocks per flex group),
//!   so they pack with no gaps, and large files get runs as long as the space allows (at
//!   most one extent per group, the largest extent ext4 has being 32768 blocks).
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

pub use bitset::BitSet;
pub use blocks::{AllocGeometry, AllocStats, BlockAllocator, NoSpace, Purpose, Request};
pub use delalloc::{plan_extents, DelayedFile, Mapping};
pub use inodes::{InodeAllocator, InodeKind, NoInodes};

#[cfg(test)]
mod tests;
