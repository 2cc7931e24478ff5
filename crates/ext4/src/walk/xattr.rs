//! The xattr walker: the entry list of the in-inode area (after the extra fields and a
//! 4-byte magic) and of an xattr block (after its 32-byte header), each entry's name and
//! value found and checked against the bounds of its area, up to the four zero bytes
//! that end the list. The reader and the writer walk strictly ([`entries`],
//! [`block_entries`]: the first thing wrong is an error naming the inode); the checker
//! walks the same lists in [`Mode::Lenient`] ([`scan_entries`], [`scan_block`]) and gets
//! each thing wrong as an [`XattrIssue`], plus the checks only it makes: values that
//! overlap the entry table or each other, and block entries whose hash is wrong.

use super::Mode;
use crate::format::inode::GOOD_OLD_INODE_SIZE;
use crate::format::xattr::{
    self, XattrBlockHeader, XattrEntry, BLOCK_HEADER_SIZE, ENTRY_HEADER_SIZE, XATTR_MAGIC,
};
use std::fmt;
use std::ops::ControlFlow;
use usfs_fs::{Error, Result, Structure};

/// What a walk needs to know about the file system and the inode.
#[derive(Clone, Copy, Debug)]
pub struct XattrCtx {
    /// The inode whose attributes these are (named in errors).
    pub ino: u32,
    /// The ea_inode feature is on: values may live in EA inodes.
    pub ea_inode: bool,
    /// The metadata checksum seed when metadata_csum is on (xattr block checksums).
    pub seed: Option<u32>,
}

/// Which entry list a walk is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// The in-inode area after the extra fields.
    Inode,
    /// The xattr block at this block number.
    Block(u64),
}

/// Where an entry's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// In the entry's own area: these bytes (empty for an empty value).
    Here(&'a [u8]),
    /// In EA inode `ino`, `size` bytes long.
    Inode {
        /// The EA inode (`e_value_inum`).
        ino: u32,
        /// `e_value_size`.
        size: u32,
    },
    /// `e_value_offs`/`e_value_size` reach past the area: an issue when the value is not
    /// empty; an empty value there is read as empty (the kernel checks non-empty ones
    /// only).
    Outside,
}

/// One attribute entry as the walker finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Offset of the entry in its area.
    pub off: usize,
    /// Namespace index (`e_name_index`).
    pub index: u8,
    /// The name within the namespace.
    pub name: &'a [u8],
    /// The value.
    pub value: Value<'a>,
    /// `e_hash`.
    pub hash: u32,
}

/// One thing wrong in an xattr entry list or block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrIssue {
    /// A block's `h_magic` is not 0xEA020000; the block is not walked.
    Magic {
        /// The magic found.
        found: u32,
    },
    /// A block's `h_blocks` is not 1; the block is not walked.
    Blocks {
        /// `h_blocks`.
        found: u32,
    },
    /// A block's checksum does not match; a lenient walk goes on.
    Checksum,
    /// The list runs off the end of its area at `off` (no end marker, or an entry or its
    /// name past the end); the walk stops.
    Truncated {
        /// Offset of the entry (or missing end marker).
        off: usize,
    },
    /// An entry's value is in an EA inode but the file system has no ea_inode feature; a
    /// lenient walk visits the entry and goes on.
    EaInodeFeature {
        /// Offset of the entry.
        off: usize,
    },
    /// A non-empty value reaches past the area; a lenient walk visits the entry (its value
    /// [`Value::Outside`]) and goes on.
    ValueOutside {
        /// Offset of the entry.
        off: usize,
        /// `e_value_offs`.
        value_offs: u16,
        /// `e_value_size`.
        size: u32,
    },
    /// Values overlap the entry table or each other ([`Mode::Lenient`] only; found after
    /// the end marker).
    ValueOverlap,
    /// A block entry's `e_hash` is not 0 and matches neither variant of the hash of its
    /// name and value ([`Mode::Lenient`] only).
    Hash {
        /// Offset of the entry.
        off: usize,
    },
}

impl fmt::Display for XattrIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            XattrIssue::Magic { found } => write!(f, "bad magic {found:#010x}"),
            XattrIssue::Blocks { found } => write!(f, "bad header (h_blocks {found})"),
            XattrIssue::Checksum => write!(f, "checksum does not match"),
            XattrIssue::Truncated { off } => write!(f, "entry list runs off the end at {off}"),
            XattrIssue::EaInodeFeature { off } => write!(
                f,
                "entry at {off}: value in an inode without the ea_inode feature"
            ),
            XattrIssue::ValueOutside {
                off,
                value_offs,
                size,
            } => write!(
                f,
                "entry at {off}: value at {value_offs}+{size} outside its area"
            ),
            XattrIssue::ValueOverlap => write!(f, "values overlap the entries or each other"),
            XattrIssue::Hash { off } => write!(f, "entry at {off}: hash is invalid"),
        }
    }
}

impl XattrIssue {
    /// The strict walkers' error for this issue in `area` of inode `ino`.
    pub fn into_error(self, ino: u32, area: Area) -> Error {
        match area {
            Area::Inode => Error::corrupt(
                Structure::Xattr,
                format!("inode {ino}: in-inode xattrs: {self}"),
            )
            .with_ino(ino),
            Area::Block(blk) => Error::corrupt(
                Structure::Xattr,
                format!("inode {ino}: xattr block {blk}: {self}"),
            )
            .with_ino(ino)
            .with_block(blk),
        }
    }
}

/// Receives what a walk finds, in on-disk order.
pub trait XattrVisitor<'a> {
    /// An entry whose header and name lie inside the area.
    fn entry(&mut self, e: Entry<'a>);
    /// Something wrong; `Break` ends the walk (a strict user), `Continue` goes on where
    /// the issue says a lenient walk goes on.
    fn issue(&mut self, issue: XattrIssue) -> ControlFlow<()>;
}

/// The entry list of the in-inode area of inode record `raw` (its first `inode_size`
/// bytes; `i_extra_isize` = `extra_isize`): the bytes after the magic, or `None` when
/// the inode has no such area or no magic there.
pub fn ibody(raw: &[u8], inode_size: usize, extra_isize: u16) -> Option<&[u8]> {
    let start = GOOD_OLD_INODE_SIZE + extra_isize as usize;
    if inode_size <= GOOD_OLD_INODE_SIZE || start + 4 > inode_size {
        return None;
    }
    let bytes = &raw[..inode_size];
    let magic = u32::from_le_bytes(bytes[start..start + 4].try_into().expect("4 bytes"));
    (magic == XATTR_MAGIC).then(|| &bytes[start + 4..])
}

/// What is wrong with an xattr block's header (magic, then `h_blocks`).
pub fn header_issue(block: &[u8]) -> Option<XattrIssue> {
    let h = XattrBlockHeader::new(block).expect("block >= 32 bytes");
    if h.h_magic() != XATTR_MAGIC {
        Some(XattrIssue::Magic { found: h.h_magic() })
    } else if h.h_blocks() != 1 {
        Some(XattrIssue::Blocks {
            found: h.h_blocks(),
        })
    } else {
        None
    }
}

/// Does xattr block `blk`'s checksum match? True without metadata_csum.
pub fn checksum_ok(cx: &XattrCtx, blk: u64, block: &[u8]) -> bool {
    cx.seed.is_none_or(|seed| {
        XattrBlockHeader::new(block)
            .expect("block >= 32 bytes")
            .h_checksum()
            == xattr::block_checksum(seed, blk, block)
    })
}

/// Walks xattr block `blk`: its header (a bad one ends the walk), its checksum, then its
/// entries from [`BLOCK_HEADER_SIZE`] (value offsets from the block start); a lenient
/// walk also checks each entry's hash.
pub fn scan_block<'a>(
    block: &'a [u8],
    blk: u64,
    cx: &XattrCtx,
    mode: Mode,
    v: &mut dyn XattrVisitor<'a>,
) -> ControlFlow<()> {
    if let Some(issue) = header_issue(block) {
        return v.issue(issue);
    }
    if !checksum_ok(cx, blk, block) {
        v.issue(XattrIssue::Checksum)?;
    }
    scan(block, BLOCK_HEADER_SIZE, cx, mode, mode == Mode::Lenient, v)
}

/// Walks the entry list in `area` from offset `first` (value offsets are relative to
/// the start of `area`): each entry to `v.entry`, each thing wrong to `v.issue`.
pub fn scan_entries<'a>(
    area: &'a [u8],
    first: usize,
    cx: &XattrCtx,
    mode: Mode,
    v: &mut dyn XattrVisitor<'a>,
) -> ControlFlow<()> {
    scan(area, first, cx, mode, false, v)
}

/// [`scan_entries`], checking each entry's hash when `hashes`.
fn scan<'a>(
    area: &'a [u8],
    first: usize,
    cx: &XattrCtx,
    mode: Mode,
    hashes: bool,
    v: &mut dyn XattrVisitor<'a>,
) -> ControlFlow<()> {
    let mut off = first;
    // (start, end rounded up to 4) of each non-empty value in the area.
    let mut values: Vec<(usize, usize)> = Vec::new();
    loop {
        if off + 4 > area.len() {
            return v.issue(XattrIssue::Truncated { off });
        }
        if area[off..off + 4] == [0; 4] {
            break;
        }
        let Some(e) = XattrEntry::new(&area[off..]) else {
            return v.issue(XattrIssue::Truncated { off });
        };
        let nlen = e.e_name_len() as usize;
        let esize = xattr::entry_size(nlen);
        if off + esize > area.len() {
            return v.issue(XattrIssue::Truncated { off });
        }
        let name = &area[off + ENTRY_HEADER_SIZE..off + ENTRY_HEADER_SIZE + nlen];
        let value = entry_value(area, off, &e, cx, v, &mut values)?;
        if hashes {
            check_hash(off, name, value, e.e_hash(), v)?;
        }
        v.entry(Entry {
            off,
            index: e.e_name_index(),
            name,
            value,
            hash: e.e_hash(),
        });
        off += esize;
    }
    if mode == Mode::Lenient && !values_apart(&mut values, off + 4) {
        v.issue(XattrIssue::ValueOverlap)?;
    }
    ControlFlow::Continue(())
}

/// Finds the value of entry `e` at `off`, reporting what is wrong with it; a non-empty
/// value in the area is added to `values`.
fn entry_value<'a>(
    area: &'a [u8],
    off: usize,
    e: &XattrEntry<&[u8]>,
    cx: &XattrCtx,
    v: &mut dyn XattrVisitor<'a>,
    values: &mut Vec<(usize, usize)>,
) -> ControlFlow<(), Value<'a>> {
    let size = e.e_value_size();
    if e.e_value_inum() != 0 {
        if !cx.ea_inode {
            v.issue(XattrIssue::EaInodeFeature { off })?;
        }
        return ControlFlow::Continue(Value::Inode {
            ino: e.e_value_inum(),
            size,
        });
    }
    let value_offs = e.e_value_offs();
    let start = value_offs as usize;
    match area.get(start..start + size as usize) {
        Some(bytes) => {
            if size != 0 {
                values.push((start, start + (size as usize).next_multiple_of(4)));
            }
            ControlFlow::Continue(Value::Here(bytes))
        }
        None if size == 0 => ControlFlow::Continue(Value::Outside),
        None => {
            v.issue(XattrIssue::ValueOutside {
                off,
                value_offs,
                size,
            })?;
            ControlFlow::Continue(Value::Outside)
        }
    }
}

/// Does a block entry's non-zero `hash` match either variant of its name and value's
/// hash? Values elsewhere (EA inodes, outside the block) are not checked.
fn check_hash(
    off: usize,
    name: &[u8],
    value: Value<'_>,
    hash: u32,
    v: &mut dyn XattrVisitor<'_>,
) -> ControlFlow<()> {
    let Value::Here(bytes) = value else {
        return ControlFlow::Continue(());
    };
    if hash != 0
        && hash != xattr::entry_hash(name, bytes, false)
        && hash != xattr::entry_hash(name, bytes, true)
    {
        return v.issue(XattrIssue::Hash { off });
    }
    ControlFlow::Continue(())
}

/// Do the `values` (start, end) all begin at or past `table_end` and keep clear of each
/// other?
fn values_apart(values: &mut [(usize, usize)], table_end: usize) -> bool {
    values.sort_unstable();
    values.iter().all(|&(a, _)| a >= table_end) && values.windows(2).all(|p| p[0].1 <= p[1].0)
}

/// A strict walk's visitor: keeps the entries, stops at the first issue.
struct Strict<'a> {
    entries: Vec<Entry<'a>>,
    issue: Option<XattrIssue>,
}

impl<'a> XattrVisitor<'a> for Strict<'a> {
    fn entry(&mut self, e: Entry<'a>) {
        self.entries.push(e);
    }
    fn issue(&mut self, issue: XattrIssue) -> ControlFlow<()> {
        self.issue = Some(issue);
        ControlFlow::Break(())
    }
}

/// The entries of the list in `area` from `first`, walked strictly; `where_` names the
/// area in the error.
pub fn entries<'a>(
    area: &'a [u8],
    first: usize,
    cx: &XattrCtx,
    where_: Area,
) -> Result<Vec<Entry<'a>>> {
    let mut s = Strict {
        entries: Vec::new(),
        issue: None,
    };
    let _ = scan_entries(area, first, cx, Mode::Strict, &mut s);
    match s.issue {
        Some(issue) => Err(issue.into_error(cx.ino, where_)),
        None => Ok(s.entries),
    }
}

/// The entries of xattr block `blk`, walked strictly (header, checksum, entries).
pub fn block_entries<'a>(block: &'a [u8], blk: u64, cx: &XattrCtx) -> Result<Vec<Entry<'a>>> {
    let mut s = Strict {
        entries: Vec::new(),
        issue: None,
    };
    let _ = scan_block(block, blk, cx, Mode::Strict, &mut s);
    match s.issue {
        Some(issue) => Err(issue.into_error(cx.ino, Area::Block(blk))),
        None => Ok(s.entries),
    }
}
