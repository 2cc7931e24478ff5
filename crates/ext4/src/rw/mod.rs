//! The read-write ext4 volume: changes to an existing image, each in a journaled
//! transaction (see DESIGN.md, "The read-write ext4 volume").
//!
//! Layers, bottom up:
//! - [`meta`]: the [`Meta`] and [`DirFile`] traits every mutator is written against
//!   (metadata blocks inside the running transaction, allocation, freeing).
//! - mutators, one per on-disk structure: block maps (extent trees and indirect maps),
//!   directories (linear and htree), xattrs, inodes.
//! - the volume: the overlay of the running transaction over the device, the journal
//!   commit, the allocators seeded from the bitmaps, and the operations.

pub mod blockmap;
mod extent_edit;
mod indirect_edit;
pub mod meta;

#[cfg(test)]
mod blockmap_tests;

pub use blockmap::{BlockMap, Run};
pub use meta::{DirFile, Freed, MemMeta, Meta};
