//! The on-disk structures of an E2UNDO02 file (e2fsprogs' lib/ext2fs/undo_io.c).

/// The header's magic.
pub(super) const MAGIC: &[u8; 8] = b"E2UNDO02";
/// A key block's magic.
pub(super) const KEY_BLOCK_MAGIC: u32 = 0xCADE_CADE;
/// Header state: the undo file is complete.
pub(super) const STATE_FINISHED: u32 = 0x1;
/// A key maps at most this many blocks.
pub(super) const MAX_EXTENT_BLOCKS: u64 = 512;
/// Bytes of the header that its checksum covers (all but the checksum itself).
const HEADER_CRC_COVERS: usize = 508;

/// Keys in one key block: 16 bytes each after a 16-byte head.
pub(super) fn keys_per_block(block_size: u64) -> usize {
    (block_size / 16) as usize - 1
}

/// The header, in block 0 (512 bytes used).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Header {
    /// Keys in all key blocks (`num_keys`, le64 at 8).
    pub num_keys: u64,
    /// Block of the superblock copy (`super_offset`, le64 at 16).
    pub super_offset: u64,
    /// Block of the first key block (`key_offset`, le64 at 24).
    pub key_offset: u64,
    /// Block size of the undo file (`block_size`, le32 at 32).
    pub block_size: u32,
    /// Block size of the file system (`fs_block_size`, le32 at 36); keys count in it.
    pub fs_block_size: u32,
    /// crc32c of the superblock the changes left (`sb_crc`, le32 at 40).
    pub sb_crc: u32,
    /// `state` (le32 at 44) has [`STATE_FINISHED`].
    pub finished: bool,
}

impl Header {
    /// The 512 header bytes, with the checksum (`header_crc`, le32 at 508).
    pub(super) fn bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; 512];
        b[..8].copy_from_slice(MAGIC);
        b[8..16].copy_from_slice(&self.num_keys.to_le_bytes());
        b[16..24].copy_from_slice(&self.super_offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.key_offset.to_le_bytes());
        b[32..36].copy_from_slice(&self.block_size.to_le_bytes());
        b[36..40].copy_from_slice(&self.fs_block_size.to_le_bytes());
        b[40..44].copy_from_slice(&self.sb_crc.to_le_bytes());
        let state = if self.finished { STATE_FINISHED } else { 0 };
        b[44..48].copy_from_slice(&state.to_le_bytes());
        // f_compat, f_incompat, f_rocompat, pad, fs_offset: 0 (no fs_offset feature).
        let crc = crate::format::checksum::crc32c_raw(!0, &b[..HEADER_CRC_COVERS]);
        b[508..512].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and checks a header (magic, checksum, no unknown incompatible features).
    pub(super) fn parse(b: &[u8]) -> Result<Header, String> {
        if b.len() < 512 || &b[..8] != MAGIC {
            return Err("not an E2UNDO02 undo file".into());
        }
        let le32 = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let le64 = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        if crate::format::checksum::crc32c_raw(!0, &b[..HEADER_CRC_COVERS]) != le32(508) {
            return Err("undo file header checksum does not match".into());
        }
        if le32(52) != 0 || le64(64) != 0 {
            return Err("undo file uses features usfs does not know (fs_offset)".into());
        }
        Ok(Header {
            num_keys: le64(8),
            super_offset: le64(16),
            key_offset: le64(24),
            block_size: le32(32),
            fs_block_size: le32(36),
            sb_crc: le32(40),
            finished: le32(44) & STATE_FINISHED != 0,
        })
    }
}

/// One key: a run of file-system blocks saved in consecutive data blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Key {
    /// First file-system block (`fsblk`, le64).
    pub fsblk: u64,
    /// crc32c of the saved bytes (`blk_crc`, le32).
    pub crc: u32,
    /// Bytes saved (`size`, le32).
    pub size: u32,
}

impl Key {
    /// Stores the key in its 16 bytes.
    pub(super) fn put(&self, b: &mut [u8]) {
        b[..8].copy_from_slice(&self.fsblk.to_le_bytes());
        b[8..12].copy_from_slice(&self.crc.to_le_bytes());
        b[12..16].copy_from_slice(&self.size.to_le_bytes());
    }

    /// Reads a key from its 16 bytes.
    pub(super) fn get(b: &[u8]) -> Key {
        Key {
            fsblk: u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            crc: u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
            size: u32::from_le_bytes(b[12..16].try_into().expect("4 bytes")),
        }
    }
}
