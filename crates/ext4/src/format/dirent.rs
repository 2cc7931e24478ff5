//! Linear directory entries (struct ext4_dir_entry_2) and the checksum tail of leaf blocks.

use super::checksum::crc32c_raw;
use usfs_fs::FileType;

/// Size of the fixed part of an entry.
pub const DIRENT_HEADER: usize = 8;
/// Size of the checksum tail (a fake entry) at the end of a leaf block.
pub const TAIL_SIZE: usize = 12;
/// `file_type` of the checksum tail.
pub const TAIL_FILE_TYPE: u8 = 0xDE;

usfs_fs::layout! {
    /// The fixed part of a directory entry; `name_len` name bytes follow.
    pub struct DirEntryHeader[8] {
        /// Inode number, 0 for an unused entry.
        inode / set_inode: u32 @ 0,
        /// Distance to the next entry (4-byte aligned); 64 KiB blocks use an encoding
        /// ([`decode_rec_len`]).
        rec_len / set_rec_len: u16 @ 4,
        /// Length of the name.
        name_len / set_name_len: u8 @ 6,
        /// File type (with the filetype feature; else the high byte of a 16-bit name_len).
        file_type / set_file_type: u8 @ 7,
    }
}

usfs_fs::layout! {
    /// The 12-byte checksum tail of a directory leaf block with metadata_csum, shaped like
    /// an unused entry so old readers skip it.
    pub struct DirTail[12] {
        /// Always 0.
        det_reserved_zero1 / set_det_reserved_zero1: u32 @ 0,
        /// Always 12.
        det_rec_len / set_det_rec_len: u16 @ 4,
        /// Always 0.
        det_reserved_zero2 / set_det_reserved_zero2: u8 @ 6,
        /// Always 0xDE.
        det_reserved_ft / set_det_reserved_ft: u8 @ 7,
        /// crc32c(seed, le32 ino || le32 gen || block[0..bs-12]).
        det_checksum / set_det_checksum: u32 @ 8,
    }
}

/// Decodes an on-disk rec_len for a block of `block_size` bytes (64 KiB blocks store
/// 65536 as 0 or 65535, and use the low two bits as bits 16..17).
pub fn decode_rec_len(raw: u16, block_size: u32) -> u32 {
    let len = raw as u32;
    if block_size < 65536 {
        return len;
    }
    if len == 65535 || len == 0 {
        return block_size;
    }
    (len & 65532) | ((len & 3) << 16)
}

/// Encodes a rec_len for a block of `block_size` bytes.
pub fn encode_rec_len(len: u32, block_size: u32) -> u16 {
    if block_size < 65536 {
        return len as u16;
    }
    if len == block_size {
        return if block_size == 65536 { 65535 } else { 0 };
    }
    ((len & 65532) | ((len >> 16) & 3)) as u16
}

/// The file type recorded in an entry (filetype feature).
pub fn file_type_from_dirent(ft: u8) -> Option<FileType> {
    Some(match ft {
        1 => FileType::Regular,
        2 => FileType::Directory,
        3 => FileType::CharDevice,
        4 => FileType::BlockDevice,
        5 => FileType::Fifo,
        6 => FileType::Socket,
        7 => FileType::Symlink,
        _ => return None,
    })
}

/// The entry type code for a file type.
pub fn dirent_file_type(t: FileType) -> u8 {
    match t {
        FileType::Regular => 1,
        FileType::Directory => 2,
        FileType::CharDevice => 3,
        FileType::BlockDevice => 4,
        FileType::Fifo => 5,
        FileType::Socket => 6,
        FileType::Symlink => 7,
    }
}

/// Checksum of a directory leaf block (everything before the tail).
pub fn leaf_checksum(seed: u32, ino: u32, generation: u32, block: &[u8]) -> u32 {
    let c = crc32c_raw(seed, &ino.to_le_bytes());
    let c = crc32c_raw(c, &generation.to_le_bytes());
    crc32c_raw(c, &block[..block.len() - TAIL_SIZE])
}

/// The tail of a leaf block if the block ends with one.
pub fn find_tail(block: &[u8]) -> Option<DirTail<&[u8]>> {
    let t = DirTail::new(block.get(block.len().checked_sub(TAIL_SIZE)?..)?)?;
    (t.det_reserved_zero1() == 0
        && t.det_rec_len() == TAIL_SIZE as u16
        && t.det_reserved_zero2() == 0
        && t.det_reserved_ft() == TAIL_FILE_TYPE)
        .then_some(t)
}

/// What is wrong with a leaf block's checksum tail (metadata_csum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailFault {
    /// The block does not end in a well-formed tail.
    Missing,
    /// The tail's checksum does not match the block.
    Checksum {
        /// The checksum in the tail.
        stored: u32,
        /// The checksum of the block.
        computed: u32,
    },
}

impl std::fmt::Display for TailFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TailFault::Missing => write!(f, "no checksum tail"),
            TailFault::Checksum { .. } => write!(f, "checksum does not match"),
        }
    }
}

/// Checks the checksum tail of leaf `block` of directory `ino` (i_generation
/// `generation`) with the metadata checksum `seed`: the one tail check of the reader,
/// the writer and the checker.
pub fn check_tail(seed: u32, ino: u32, generation: u32, block: &[u8]) -> Result<(), TailFault> {
    let stored = find_tail(block).ok_or(TailFault::Missing)?.det_checksum();
    let computed = leaf_checksum(seed, ino, generation, block);
    if stored != computed {
        return Err(TailFault::Checksum { stored, computed });
    }
    Ok(())
}

/// Is `block`, a block past the first of an indexed directory, an interior dx node: one
/// unused entry spanning the whole block (the htree's fake dirent)?
pub fn is_dx_node(block: &[u8]) -> bool {
    DirEntryHeader::new(block).is_some_and(|h| {
        h.inode() == 0 && decode_rec_len(h.rec_len(), block.len() as u32) as usize == block.len()
    })
}

/// Space an entry with an `name_len`-byte name takes when packed (header + name, rounded up
/// to 4 bytes): the kernel's EXT4_DIR_REC_LEN.
pub fn entry_size(name_len: usize) -> usize {
    (DIRENT_HEADER + name_len + 3) & !3
}

/// One entry of a directory block as [`Dirents`] yields it, unused entries included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dirent<'a> {
    /// Byte offset of the entry in the walked area.
    pub off: usize,
    /// Its rec_len (decoded): the entry owns `off..off + rec_len`.
    pub rec_len: usize,
    /// Inode number; 0 for an unused entry.
    pub ino: u32,
    /// The name (may be empty for unused entries).
    pub name: &'a [u8],
    /// File type code (0 without the filetype feature).
    pub file_type: u8,
}

/// Why an entry of a directory block cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirentFault {
    /// Fewer than 8 bytes left for the header.
    TruncatedHeader,
    /// rec_len below 8 (12 in a block: [`Dirents::in_block`]), not a multiple of 4, or
    /// past the end of the area.
    RecLen {
        /// Stored rec_len (decoded).
        rec_len: usize,
        /// Stored name length.
        name_len: usize,
    },
    /// The name does not fit in rec_len.
    NameLen {
        /// Stored name length.
        name_len: usize,
        /// Stored rec_len.
        rec_len: usize,
    },
    /// A live entry with an inode number out of range or an empty name.
    Inode {
        /// Stored inode number.
        ino: u32,
        /// Stored name length.
        name_len: usize,
    },
}

impl std::fmt::Display for DirentFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            DirentFault::TruncatedHeader => write!(f, "truncated entry header"),
            DirentFault::RecLen { rec_len, .. } => write!(f, "rec_len {rec_len} invalid"),
            DirentFault::NameLen { name_len, rec_len } => {
                write!(f, "name_len {name_len} exceeds rec_len {rec_len}")
            }
            DirentFault::Inode { ino, name_len } => {
                write!(f, "inode {ino} / name length {name_len} invalid")
            }
        }
    }
}

/// The one walker over a chain of directory entries (a leaf block without its checksum
/// tail, a dx root's `.`/`..`, an inline area): yields every entry in disk order, unused
/// ones included, and stops after the first fault, which it yields as `Err((offset, fault))`.
/// The reader ([`crate::Ext4`]) and the directory mutator (`rw::dir_edit`) both use it.
#[derive(Clone, Debug)]
pub struct Dirents<'a> {
    area: &'a [u8],
    off: usize,
    block_size: u32,
    has_filetype: bool,
    /// Live entries must point at 1..=this and have a name; `None` leaves both to the
    /// caller ([`Dirents::lenient`]).
    inodes_count: Option<u32>,
    /// The smallest rec_len: 8 (a bare header), or 12 in directory blocks checked as
    /// e2fsck and the kernel check them ([`Dirents::in_block`]).
    min_rec_len: usize,
}

impl<'a> Dirents<'a> {
    /// Walks `area` of a file system with `block_size`-byte blocks (for rec_len decoding),
    /// the filetype feature as given, and `inodes_count` inodes (live entries must point
    /// at 1..=inodes_count).
    pub fn new(area: &'a [u8], block_size: u32, has_filetype: bool, inodes_count: u32) -> Self {
        Dirents {
            area,
            off: 0,
            block_size,
            has_filetype,
            inodes_count: Some(inodes_count),
            min_rec_len: DIRENT_HEADER,
        }
    }

    /// The checker's walk of `area`: only the chain rules (header, rec_len, name_len) are
    /// faults; a live entry's inode number and an empty name are the caller's to judge
    /// (e2fsck reports them and goes on to the next entry).
    pub fn lenient(area: &'a [u8], block_size: u32, has_filetype: bool) -> Self {
        Dirents {
            area,
            off: 0,
            block_size,
            has_filetype,
            inodes_count: None,
            min_rec_len: DIRENT_HEADER,
        }
    }

    /// The same walk with the rule of directory blocks (not inline areas): a rec_len
    /// below 12 (the space of a one-byte name) is a fault, as e2fsck's pass 2 and the
    /// kernel's ext4_check_dir_entry have it.
    pub fn in_block(self) -> Self {
        Dirents {
            min_rec_len: entry_size(1),
            ..self
        }
    }

    fn parse(&self) -> Result<Dirent<'a>, DirentFault> {
        let (area, off) = (self.area, self.off);
        if area.len() - off < DIRENT_HEADER {
            return Err(DirentFault::TruncatedHeader);
        }
        let h = DirEntryHeader::new(&area[off..]).expect("checked length");
        let rec_len = decode_rec_len(h.rec_len(), self.block_size) as usize;
        let name_len = if self.has_filetype {
            h.name_len() as usize
        } else {
            h.name_len() as usize | (h.file_type() as usize) << 8
        };
        if rec_len < self.min_rec_len || !rec_len.is_multiple_of(4) || rec_len > area.len() - off {
            return Err(DirentFault::RecLen { rec_len, name_len });
        }
        if DIRENT_HEADER + name_len > rec_len {
            return Err(DirentFault::NameLen { name_len, rec_len });
        }
        let ino = h.inode();
        let strict = self.inodes_count;
        if ino != 0 && strict.is_some_and(|n| ino > n || name_len == 0) {
            return Err(DirentFault::Inode { ino, name_len });
        }
        Ok(Dirent {
            off,
            rec_len,
            ino,
            name: &area[off + DIRENT_HEADER..off + DIRENT_HEADER + name_len],
            file_type: if self.has_filetype { h.file_type() } else { 0 },
        })
    }
}

impl<'a> Iterator for Dirents<'a> {
    type Item = Result<Dirent<'a>, (usize, DirentFault)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.off >= self.area.len() {
            return None;
        }
        match self.parse() {
            Ok(e) => {
                self.off += e.rec_len;
                Some(Ok(e))
            }
            Err(fault) => {
                let at = self.off;
                self.off = self.area.len();
                Some(Err((at, fault)))
            }
        }
    }
}
