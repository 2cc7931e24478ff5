//! The htree index walker: one dx node at a time, the root (block 0, after `.`, `..`
//! and the root info) or an interior node (a block disguised as one empty entry). A
//! node is judged in a fixed order: the root info (reserved zero, length 8, depth below
//! the limit, a known hash version), the count/limit header, the tail checksum
//! (metadata_csum), the order of the hashes, and, strictly, the range of the children.
//! The reader's lookups and the mutator's edits descend through [`read_node`] (strict:
//! the first thing wrong is an error naming the directory and the block); the checker
//! judges each dx block with [`scan_node`] in [`Mode::Lenient`], getting each thing
//! wrong as a [`DxIssue`], and certifies the children itself, across blocks.

use super::Mode;
use crate::format::dx::{self, DxHeaderFault, DxRootInfo, NODE_COUNT_OFFSET, ROOT_COUNT_OFFSET};
use crate::format::dx_hash::HashVersion;
use std::fmt;
use std::ops::ControlFlow;
use usfs_fs::{Error, Result, Structure};

/// Offset of the dx_root_info in block 0.
pub const ROOT_INFO_OFFSET: usize = 0x18;

/// Which kind of dx node a block holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DxKind {
    /// The root in block 0: count/limit at [`ROOT_COUNT_OFFSET`].
    Root,
    /// An interior node: count/limit at [`NODE_COUNT_OFFSET`].
    Node,
}

impl DxKind {
    /// Offset of the count/limit header.
    pub fn count_offset(self) -> usize {
        match self {
            DxKind::Root => ROOT_COUNT_OFFSET,
            DxKind::Node => NODE_COUNT_OFFSET,
        }
    }
}

/// What a walk needs to know about the file system and the directory.
#[derive(Clone, Copy, Debug)]
pub struct DxCtx {
    /// The directory (named in errors, part of the checksum).
    pub ino: u32,
    /// Its i_generation (part of the checksum).
    pub generation: u32,
    /// The metadata checksum seed when metadata_csum is on (nodes then end in a tail).
    pub seed: Option<u32>,
    /// The large_dir feature is on: the root may have 3 levels below it, not 2.
    pub large_dir: bool,
    /// Blocks in the directory: a strict walk rejects children at 0 or past this.
    pub nblocks: u64,
}

/// The checked fields of the root info.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootInfo {
    /// `hash_version` (0..=6), as stored.
    pub hash_version: u8,
    /// `indirect_levels`: dx-node levels between the root and the leaves.
    pub levels: u8,
}

impl RootInfo {
    /// The hash version names are hashed with.
    pub fn version(&self) -> HashVersion {
        HashVersion::from_u8(self.hash_version).expect("checked by root_info")
    }
}

/// One dx node, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DxNode {
    /// The root's info (`None` for an interior node).
    pub root: Option<RootInfo>,
    /// Capacity in entries (`limit`).
    pub limit: usize,
    /// (hash, child logical block) of each entry in use; entry 0's hash is 0.
    pub entries: Vec<(u32, u32)>,
}

/// One thing wrong in a dx node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DxIssue {
    /// The root info fails its checks; the node is not walked.
    RootInfo {
        /// `indirect_levels`.
        levels: u8,
        /// `info_length`.
        info_length: u8,
        /// `hash_version`.
        hash_version: u8,
    },
    /// The count/limit header is bad; the node is not walked.
    Header(DxHeaderFault),
    /// The tail checksum does not match; a lenient walk goes on.
    Checksum,
    /// Entry `at`'s hash is below its predecessor's; the node is not used.
    Unordered {
        /// The entry.
        at: usize,
    },
    /// An entry names block 0 or a block past the directory's end ([`Mode::Strict`]
    /// only: the checker certifies children across blocks).
    Child {
        /// The child named.
        child: u32,
        /// Blocks in the directory.
        nblocks: u64,
    },
}

impl fmt::Display for DxIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DxIssue::RootInfo {
                levels,
                info_length,
                hash_version,
            } => write!(
                f,
                "bad htree root (levels {levels}, info length {info_length}, hash {hash_version})"
            ),
            DxIssue::Header(fault) => write!(f, "htree node: {fault}"),
            DxIssue::Checksum => write!(f, "htree node checksum does not match"),
            DxIssue::Unordered { at } => write!(f, "htree hashes out of order at entry {at}"),
            DxIssue::Child { child, nblocks } => {
                write!(f, "htree points at block {child} of {nblocks}")
            }
        }
    }
}

impl DxIssue {
    /// The strict walker's error for this issue in block `lblk` of directory `ino`.
    pub fn into_error(self, ino: u32, lblk: u64) -> Error {
        Error::corrupt(
            Structure::Htree,
            format!("directory {ino} block {lblk}: {self}"),
        )
        .with_ino(ino)
        .with_block(lblk)
    }
}

/// The root info of root block `block`, checked: reserved zero, length 8, fewer levels
/// than the limit (2, 3 with large_dir), a known hash version.
pub fn root_info(block: &[u8], large_dir: bool) -> std::result::Result<RootInfo, DxIssue> {
    let info = DxRootInfo::new(&block[ROOT_INFO_OFFSET..]).expect("in block");
    let hash_version = info.hash_version();
    if !dx::root_info_ok(&info, large_dir) || HashVersion::from_u8(hash_version).is_none() {
        return Err(DxIssue::RootInfo {
            levels: info.indirect_levels(),
            info_length: info.info_length(),
            hash_version,
        });
    }
    Ok(RootInfo {
        hash_version,
        levels: info.indirect_levels(),
    })
}

/// Judges the dx node of `kind` in `block` by `mode`, each thing wrong to `issue`;
/// returns the node unless it is unusable (bad root info or header, unordered hashes,
/// or an issue the caller answered with `Break`).
pub fn scan_node(
    block: &[u8],
    kind: DxKind,
    cx: &DxCtx,
    mode: Mode,
    issue: &mut dyn FnMut(DxIssue) -> ControlFlow<()>,
) -> Option<DxNode> {
    let root = match kind {
        DxKind::Root => match root_info(block, cx.large_dir) {
            Ok(info) => Some(info),
            Err(i) => {
                let _ = issue(i);
                return None;
            }
        },
        DxKind::Node => None,
    };
    let co = kind.count_offset();
    let (count, limit) = match dx::check_header(block, co, cx.seed.is_some()) {
        Ok(h) => h,
        Err(fault) => {
            let _ = issue(DxIssue::Header(fault));
            return None;
        }
    };
    if let Some(seed) = cx.seed {
        if !dx::tail_checksum_ok(seed, cx.ino, cx.generation, block, co, count, limit) {
            issue(DxIssue::Checksum).continue_value()?;
        }
    }
    if let Some(at) = dx::first_unordered(block, co, count) {
        let _ = issue(DxIssue::Unordered { at });
        return None;
    }
    let entries: Vec<(u32, u32)> = (0..count).map(|i| dx::entry(block, co, i)).collect();
    if mode == Mode::Strict {
        let bad = entries
            .iter()
            .find(|&&(_, b)| b == 0 || b as u64 >= cx.nblocks);
        if let Some(&(_, child)) = bad {
            let nblocks = cx.nblocks;
            issue(DxIssue::Child { child, nblocks }).continue_value()?;
        }
    }
    Some(DxNode {
        root,
        limit,
        entries,
    })
}

/// The dx node of `kind` in `block` (logical block `lblk` of the directory), walked
/// strictly.
pub fn read_node(block: &[u8], lblk: u64, kind: DxKind, cx: &DxCtx) -> Result<DxNode> {
    let mut first = None;
    let node = scan_node(block, kind, cx, Mode::Strict, &mut |i| {
        first = Some(i);
        ControlFlow::Break(())
    });
    match first {
        Some(i) => Err(i.into_error(cx.ino, lblk)),
        None => node.ok_or_else(|| {
            Error::corrupt(
                Structure::Htree,
                format!("directory {} block {lblk}", cx.ino),
            )
            .with_ino(cx.ino)
            .with_block(lblk)
        }),
    }
}
