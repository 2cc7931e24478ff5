//! Inodes being built: how each stores its data ([`Data`]), how many bytes it takes in the
//! metadata area, and its bytes (compact or extended inode, xattr ibody, then the inline
//! tail or compression indexes), serialised into block 0 and the metadata area once every
//! inode has its place.

use super::image::Cfg;
use super::tree::{Node, Tree};
use super::xattrs::Shared;
use crate::format::chunk::CHUNK_INDEXES;
use crate::format::inode::{encode_dev, layout, CompactInode, ExtendedInode};
use crate::format::round_up;
use usfs_fs::FileType;

/// How an inode's data is stored.
pub(super) enum Data {
    /// No data (devices, fifos, sockets, empty files).
    None,
    /// Uncompressed: `blocks` full blocks at `blkaddr`, then `tail` inline (FLAT_INLINE) or,
    /// when `tail` is empty, nothing more (FLAT_PLAIN).
    Flat {
        blkaddr: u32,
        tail: Vec<u8>,
        inline: bool,
    },
    /// Compressed: the bytes after the inode's xattrs (map header, indexes, inline
    /// pcluster), the layout, and the data blocks.
    Z {
        blob: Vec<u8>,
        layout: u8,
        blocks: u32,
        /// Bytes of the inline pcluster at the end of `blob` (0: none). Only it must not
        /// cross a block (the kernel's rule), so the inode may start in the block before.
        inline: u64,
    },
    /// Chunk-based (`--chunksize`, `--tar=i`): the chunk format (i_u) and the chunk
    /// table that follows the xattrs (full 8-byte indexes, 8-byte aligned, with
    /// [`CHUNK_INDEXES`]; else 4-byte block addresses, 4-byte aligned).
    Chunks { format: u16, table: Vec<u8> },
    /// Directory or long symlink: content written after the metadata area.
    Late {
        content: Vec<u8>,
        inline: bool,
        blkaddr: u32,
    },
}

/// One inode of the image.
pub(super) struct Ino {
    /// Its node in the tree (`usize::MAX`: the packed inode).
    pub(super) node: usize,
    /// i_size.
    pub(super) size: u64,
    /// The xattr ibody and its `i_xattr_icount`.
    pub(super) ibody: Vec<u8>,
    pub(super) icount: u16,
    /// An extended (64-byte) inode rather than a compact one.
    pub(super) extended: bool,
    pub(super) data: Data,
    /// Byte position in the image (its nid times 32), once placed.
    pub(super) pos: u64,
}

impl Ino {
    /// Its nid (meta_blkaddr is 0: nids are absolute).
    pub(super) fn nid(&self) -> u64 {
        self.pos / 32
    }

    /// Bytes of the inode and its xattrs, before any data.
    pub(super) fn head_len(&self) -> u64 {
        isize_of(self.extended) + self.ibody.len() as u64
    }
}

fn isize_of(extended: bool) -> u64 {
    if extended {
        64
    } else {
        32
    }
}

/// The inode of node `i`, without data yet.
pub(super) fn make_ino(i: usize, n: &Node, shared: &Shared, cfg: &Cfg<'_>) -> Ino {
    let (ibody, icount) = shared.ibody(&n.xattrs);
    let extended = n.size > u64::from(u32::MAX)
        || n.uid > 0xffff
        || n.gid > 0xffff
        || n.nlink > 0xffff
        || n.mtime != cfg.build_time
        || n.mtime_nsec != cfg.build_nsec;
    Ino {
        node: i,
        size: n.size,
        ibody,
        icount,
        extended,
        data: Data::None,
        pos: 0,
    }
}

/// The alignment of a chunk table of `format`: its entry size.
fn table_align(format: u16) -> u64 {
    if format & CHUNK_INDEXES != 0 {
        8
    } else {
        4
    }
}

/// Can `len` bytes go inline after this inode and its xattrs (all in one block)?
pub(super) fn fits_inline(ino: &Ino, len: u64, bs: u64) -> bool {
    ino.head_len() + len <= bs
}

/// (bytes the inode takes in the metadata area, how many of its last bytes must not cross
/// a block: the inline tail or inline pcluster, the kernel's only rule).
pub(super) fn meta_size(ino: &Ino, bs: u64) -> (u64, u64) {
    let base = ino.head_len();
    match &ino.data {
        Data::None => (base, 0),
        Data::Flat { tail, inline, .. } => (
            base + tail.len() as u64,
            if *inline { tail.len() as u64 } else { 0 },
        ),
        Data::Z { blob, inline, .. } => (round_up(base, 8) + blob.len() as u64, *inline),
        Data::Chunks { format, table } => {
            (round_up(base, table_align(*format)) + table.len() as u64, 0)
        }
        Data::Late {
            content, inline, ..
        } => {
            let tail = content.len() as u64 % bs;
            (base + tail, if *inline { tail } else { 0 })
        }
    }
}

/// Every inode's bytes: (the metadata area from `meta_start` to `meta_end`, the head
/// blocks with the inodes placed there and room for the superblock).
pub(super) fn serialize(
    cfg: &Cfg<'_>,
    tree: &Tree<'_>,
    inos: &[Ino],
    meta_start: u64,
    meta_end: u64,
) -> (Vec<u8>, Vec<u8>) {
    let mut meta = vec![0u8; (meta_end - meta_start) as usize];
    let mut block0 = vec![0u8; cfg.head as usize];
    for (k, ino) in inos.iter().enumerate() {
        let n = (ino.node != usize::MAX).then(|| &tree.nodes[ino.node]);
        let bytes = inode_bytes(ino, n, k as u32 + 1, cfg);
        let (buf, at) = if ino.pos < cfg.head {
            (&mut block0, ino.pos as usize)
        } else {
            (&mut meta, (ino.pos - meta_start) as usize)
        };
        buf[at..at + bytes.len()].copy_from_slice(&bytes);
    }
    (meta, block0)
}

/// What the inode says about its data: (layout, i_size, i_u, bytes after the xattrs).
fn data_fields(ino: &Ino, ft: FileType, rdev: u64, bs: u64) -> (u8, u64, u32, Vec<u8>) {
    match &ino.data {
        Data::None => {
            let i_u = match ft {
                FileType::CharDevice | FileType::BlockDevice => encode_dev(rdev),
                _ => 0,
            };
            (layout::FLAT_PLAIN, 0, i_u, Vec::new())
        }
        Data::Flat {
            blkaddr,
            tail,
            inline,
        } => {
            let lay = if *inline {
                layout::FLAT_INLINE
            } else {
                layout::FLAT_PLAIN
            };
            (lay, ino.size, *blkaddr, tail.clone())
        }
        Data::Z {
            blob,
            layout,
            blocks,
            ..
        } => {
            let mut t = vec![0u8; (round_up(ino.head_len(), 8) - ino.head_len()) as usize];
            t.extend_from_slice(blob);
            (*layout, ino.size, *blocks, t)
        }
        Data::Chunks { format, table } => {
            let pad = round_up(ino.head_len(), table_align(*format)) - ino.head_len();
            let mut t = vec![0u8; pad as usize];
            t.extend_from_slice(table);
            (layout::CHUNK_BASED, ino.size, u32::from(*format), t)
        }
        Data::Late {
            content,
            inline,
            blkaddr,
        } => {
            let tail = if *inline {
                content[content.len() / bs as usize * bs as usize..].to_vec()
            } else {
                Vec::new()
            };
            let lay = if *inline {
                layout::FLAT_INLINE
            } else {
                layout::FLAT_PLAIN
            };
            (lay, content.len() as u64, *blkaddr, tail)
        }
    }
}

/// The bytes of inode number `seq` (node `n`; `None`: the packed inode).
fn inode_bytes(ino: &Ino, n: Option<&Node>, seq: u32, cfg: &Cfg<'_>) -> Vec<u8> {
    let (ft, perm, uid, gid, nlink, mtime, nsec, rdev) = match n {
        Some(n) => (
            n.file_type,
            n.perm,
            n.uid,
            n.gid,
            n.nlink,
            n.mtime,
            n.mtime_nsec,
            n.rdev,
        ),
        None => (
            FileType::Regular,
            0o600,
            0,
            0,
            1,
            cfg.build_time,
            cfg.build_nsec,
            0,
        ),
    };
    let (lay, size, i_u, tail) = data_fields(ino, ft, rdev, cfg.bs);
    let mut v = Vec::new();
    let mode = (ft.mode_bits() | perm) as u16;
    let format = (u16::from(lay) << 1) | u16::from(ino.extended);
    if ino.extended {
        let mut d = ExtendedInode::new(vec![0u8; 64]).expect("64");
        d.set_i_format(format);
        d.set_i_xattr_icount(ino.icount);
        d.set_i_mode(mode);
        d.set_i_size(size);
        d.set_i_u(i_u);
        d.set_i_ino(seq);
        d.set_i_uid(uid);
        d.set_i_gid(gid);
        d.set_i_mtime(mtime as u64);
        d.set_i_mtime_nsec(nsec);
        d.set_i_nlink(nlink);
        v.extend_from_slice(d.bytes());
    } else {
        let mut d = CompactInode::new(vec![0u8; 32]).expect("32");
        d.set_i_format(format);
        d.set_i_xattr_icount(ino.icount);
        d.set_i_mode(mode);
        d.set_i_nlink(nlink as u16);
        d.set_i_size(size as u32);
        d.set_i_u(i_u);
        d.set_i_ino(seq);
        d.set_i_uid(uid as u16);
        d.set_i_gid(gid as u16);
        v.extend_from_slice(d.bytes());
    }
    v.extend_from_slice(&ino.ibody);
    v.extend_from_slice(&tail);
    v
}
