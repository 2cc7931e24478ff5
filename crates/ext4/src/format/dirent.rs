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
        inode: u32 @ 0,
        /// Distance to the next entry (4-byte aligned); 64 KiB blocks use an encoding
        /// ([`decode_rec_len`]).
        rec_len: u16 @ 4,
        /// Length of the name.
        name_len: u8 @ 6,
        /// File type (with the filetype feature; else the high byte of a 16-bit name_len).
        file_type: u8 @ 7,
    }
}

usfs_fs::layout! {
    /// The 12-byte checksum tail of a directory leaf block with metadata_csum, shaped like
    /// an unused entry so old readers skip it.
    pub struct DirTail[12] {
        /// Always 0.
        det_reserved_zero1: u32 @ 0,
        /// Always 12.
        det_rec_len: u16 @ 4,
        /// Always 0.
        det_reserved_zero2: u8 @ 6,
        /// Always 0xDE.
        det_reserved_ft: u8 @ 7,
        /// crc32c(seed, le32 ino || le32 gen || block[0..bs-12]).
        det_checksum: u32 @ 8,
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
