//! What the block-map walkers find wrong, as values, and the visitor a whole-map walk
//! ([`extent::scan`](super::extent::scan), [`indirect::scan`](super::indirect::scan))
//! reports blocks and issues to. A strict user turns the first issue into an error
//! ([`MapIssue::into_error`]); the checker keeps going and turns each issue into a
//! problem code (erofs-utils' `erofs_iterate_dir(ctx, fsck)` model).

use std::fmt;
use std::ops::ControlFlow;
use usfs_fs::{Error, Structure};

/// How strictly a walk judges what it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The reader's and the writer's rules (the kernel's `ext4_ext_check`): a tree deeper
    /// than [`MAX_DEPTH`](crate::format::extent::MAX_DEPTH) is bad, an `eh_max` below
    /// the node's capacity is fine. Xattr values may overlap; dx children must lie
    /// inside the directory.
    Strict,
    /// The checker's rules (e2fsck's `ext2fs_extent_header_verify`): `eh_max` must be
    /// within 2 of the node's capacity; root depths up to
    /// [`LENIENT_MAX_DEPTH`](super::extent::LENIENT_MAX_DEPTH) are walked. Xattr values
    /// must keep clear of the entries and of each other and block entries carry their
    /// hash; dx children are left to the checker's certification.
    Lenient,
}

/// What is wrong with an extent tree node's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderIssue {
    /// `eh_magic` is not 0xF30A.
    Magic {
        /// The magic found.
        found: u16,
    },
    /// `eh_max` is 0 or more than the node holds.
    Max {
        /// `eh_max`.
        found: u16,
        /// Entries the node holds.
        capacity: u16,
    },
    /// `eh_max` is more than 2 below the node's capacity ([`Mode::Lenient`] only).
    ShortMax {
        /// `eh_max`.
        found: u16,
        /// Entries the node holds.
        capacity: u16,
    },
    /// `eh_entries` exceeds `eh_max`.
    Entries {
        /// `eh_entries`.
        found: u16,
        /// `eh_max`.
        max: u16,
    },
    /// `eh_depth` is not the depth the parent implies, or deeper than the mode allows.
    Depth {
        /// `eh_depth`.
        found: u16,
        /// The depth the parent implies (`None` at the root).
        expected: Option<u16>,
    },
}

/// One thing wrong in an extent tree or indirect block map. `blk` 0 names the root in
/// `i_block`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapIssue {
    /// A node's header is bad; the node is not walked.
    Header {
        /// The node's block (0: the root in `i_block`).
        blk: u64,
        /// What is wrong.
        issue: HeaderIssue,
    },
    /// An extent tree block's checksum does not match (or the block has no room for it);
    /// a lenient walk goes on into the node.
    Checksum {
        /// The tree block.
        blk: u64,
    },
    /// An index entry points outside the file system; the entry is skipped.
    IndexOutOfRange {
        /// The child block it names.
        child: u64,
    },
    /// An index entry's logical start differs from its child's first entry's; a lenient
    /// walk goes on.
    IndexKey {
        /// The child block.
        child: u64,
        /// `ei_block` of the index entry.
        index: u32,
        /// The logical start of the child's first entry.
        first: u32,
    },
    /// A leaf extent maps no blocks or blocks outside the file system; it is skipped.
    ExtentOutOfRange {
        /// `ee_block`.
        lblk: u64,
        /// Length in blocks.
        len: u64,
        /// First physical block.
        pblk: u64,
    },
    /// A leaf extent starts before the end of the previous one; it is visited anyway.
    ExtentOrder {
        /// `ee_block`.
        lblk: u64,
        /// Length in blocks.
        len: u64,
    },
    /// A tree node or indirect block could not be read; it is skipped.
    Unreadable {
        /// The block.
        blk: u64,
    },
    /// An indirect block pointer lies outside the file system; the subtree is skipped.
    IndirectOutOfRange {
        /// The pointer.
        blk: u64,
    },
    /// A data block pointer of a block map lies outside the file system; it is skipped.
    PointerOutOfRange {
        /// The pointer.
        blk: u64,
        /// The logical block it would map.
        lblk: u64,
    },
}

impl fmt::Display for HeaderIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            HeaderIssue::Magic { found } => write!(f, "bad magic {found:#06x}"),
            HeaderIssue::Max { found, capacity } | HeaderIssue::ShortMax { found, capacity } => {
                write!(f, "eh_max {found} (capacity {capacity})")
            }
            HeaderIssue::Entries { found, max } => write!(f, "{found} entries in a node of {max}"),
            HeaderIssue::Depth { found, expected } => {
                write!(f, "depth {found} where {expected:?} expected")
            }
        }
    }
}

impl fmt::Display for MapIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MapIssue::Header { blk: 0, issue } => write!(f, "extent tree root: {issue}"),
            MapIssue::Header { blk, issue } => write!(f, "extent block {blk}: {issue}"),
            MapIssue::Checksum { blk } => write!(f, "extent block {blk} checksum does not match"),
            MapIssue::IndexOutOfRange { child } => {
                write!(f, "extent index to block {child} outside the file system")
            }
            MapIssue::IndexKey {
                child,
                index,
                first,
            } => write!(
                f,
                "extent index starts at {index}, its block {child} at {first}"
            ),
            MapIssue::ExtentOutOfRange { lblk, len, pblk } => write!(
                f,
                "extent ({lblk}, {len}) at physical block {pblk} lies outside the file system"
            ),
            MapIssue::ExtentOrder { lblk, len } => {
                write!(f, "extent ({lblk}, {len}) overlaps the one before")
            }
            MapIssue::Unreadable { blk } => write!(f, "block {blk} cannot be read"),
            MapIssue::IndirectOutOfRange { blk } => {
                write!(f, "indirect block {blk} outside the file system")
            }
            MapIssue::PointerOutOfRange { blk, lblk } => {
                write!(f, "block {blk} at logical {lblk} outside the file system")
            }
        }
    }
}

impl MapIssue {
    /// The strict walkers' error for this issue in inode `ino`.
    pub fn into_error(self, ino: u32) -> Error {
        let e = Error::corrupt(self.structure(), format!("inode {ino}: {self}")).with_ino(ino);
        match self.block() {
            Some(blk) => e.with_block(blk),
            None => e,
        }
    }

    /// The damaged structure: the extent tree, or the indirect block map (an unreadable
    /// block is either; it is reported as the block map only by the indirect walker,
    /// which the strict walkers never turn into an error).
    fn structure(&self) -> Structure {
        match self {
            MapIssue::IndirectOutOfRange { .. } | MapIssue::PointerOutOfRange { .. } => {
                Structure::BlockMap
            }
            _ => Structure::ExtentTree,
        }
    }

    /// The physical block the issue names, if any (not the root in the inode).
    fn block(&self) -> Option<u64> {
        match *self {
            MapIssue::Header { blk: 0, .. } => None,
            MapIssue::Header { blk, .. }
            | MapIssue::Checksum { blk }
            | MapIssue::Unreadable { blk }
            | MapIssue::IndirectOutOfRange { blk }
            | MapIssue::PointerOutOfRange { blk, .. } => Some(blk),
            MapIssue::IndexOutOfRange { child } | MapIssue::IndexKey { child, .. } => Some(child),
            MapIssue::ExtentOutOfRange { pblk, .. } => Some(pblk),
            MapIssue::ExtentOrder { .. } => None,
        }
    }
}

/// Receives what a whole-map walk finds, in on-disk order (an indirect or index block
/// before the blocks it maps).
pub trait MapVisitor {
    /// `len` data blocks from physical `pblk` map logical `lblk..`; `unwritten` for a
    /// preallocated extent.
    fn data(&mut self, lblk: u64, pblk: u64, len: u64, unwritten: bool);
    /// An extent tree or indirect block at `blk` (inside the file system), before the
    /// walk reads it.
    fn node(&mut self, blk: u64);
    /// Something wrong; `Break` ends the walk (a strict user), `Continue` goes on where
    /// e2fsck goes on.
    fn issue(&mut self, issue: MapIssue) -> ControlFlow<()>;
    /// An extent tree node at `level` (0: the root in the inode) of a tree `depth` deep,
    /// holding `entries` of its header's `max`, before its entries are visited (for a
    /// checker judging the tree's shape).
    fn extent_node(&mut self, _level: usize, _depth: u16, _entries: u16, _max: u16) {}
}

/// Reusable block buffers for a whole-map walk, one per tree level, so that walking a
/// file allocates nothing once the buffers have grown.
#[derive(Debug, Default)]
pub struct Scratch {
    bufs: Vec<Vec<u8>>,
}

impl Scratch {
    /// Takes the buffer of `level`, `size` bytes long (give it back with [`Scratch::put`]).
    pub(super) fn take(&mut self, level: usize, size: usize) -> Vec<u8> {
        if self.bufs.len() <= level {
            self.bufs.resize_with(level + 1, Vec::new);
        }
        let mut b = std::mem::take(&mut self.bufs[level]);
        b.resize(size, 0);
        b
    }

    /// Gives back the buffer of `level`.
    pub(super) fn put(&mut self, level: usize, buf: Vec<u8>) {
        self.bufs[level] = buf;
    }
}
