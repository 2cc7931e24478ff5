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
#[cfg(test)]
mod blockmap_tests;
mod checkpoint;
mod commit;
mod data;
mod delalloc;
mod dir_dups;
pub mod dir_edit;
mod dir_htree;
mod dir_leaf;
#[cfg(test)]
mod dir_oracle_tests;
mod dir_rehash;
mod dir_salvage;
#[cfg(test)]
mod dir_tests;
mod entry_fix;
mod extent_edit;
pub(crate) mod fast_commit;
mod indirect_edit;
mod inline;
mod inline_repair;
mod inode;
mod journal_make;
mod map_rebuild;
pub mod meta;
mod namespace;
mod orphan;
mod quota;
pub mod repair;
mod seams;
mod shared;
mod state;
mod undo;
mod volume;
mod xattr;

pub use blockmap::{BlockMap, Run};
pub use delalloc::FLUSH_BYTES;
pub use dir_edit::{check_name, DirEdit, HashParams};
pub use inode::InodeRec;
pub use meta::{DirFile, Freed, MemMeta, Meta};
pub use orphan::ReleasedOrphan;
pub use shared::{Ext4Rw, COMMIT_BLOCKS};
pub(crate) use volume::check_write_features;
pub use volume::{check_repair_features, Volume};
