//! On-disk inodes: compact (32 bytes) and extended (64 bytes), 32-byte aligned in the
//! metadata area; `nid` = (byte offset - meta_blkaddr * bs) / 32.

/// Inodes are addressed in units of this many bytes.
pub const NID_UNIT: u64 = 32;

/// `i_format` bit 0: 0 = compact, 1 = extended.
pub const I_VERSION_EXTENDED: u16 = 1;

/// Data layouts (`i_format` bits 1..3).
pub mod layout {
    /// Data in consecutive blocks from `raw_blkaddr`.
    pub const FLAT_PLAIN: u8 = 0;
    /// Compressed with full (8-byte) lcluster indexes.
    pub const COMPRESSED_FULL: u8 = 1;
    /// Like FLAT_PLAIN, but the last partial block lives inline after the inode.
    pub const FLAT_INLINE: u8 = 2;
    /// Compressed with compact (2- and 4-byte) lcluster indexes.
    pub const COMPRESSED_COMPACT: u8 = 3;
    /// Data addressed by a chunk index table.
    pub const CHUNK_BASED: u8 = 4;
}

/// Bytes of the inline xattr area for `i_xattr_icount`.
pub fn xattr_ibody_size(icount: u16) -> u64 {
    if icount == 0 {
        0
    } else {
        12 + 4 * (u64::from(icount) - 1)
    }
}

usfs_fs::layout! {
    /// `struct erofs_inode_compact`: 32 bytes, used when size < 4 GiB, uid/gid and nlink fit
    /// in 16 bits and the mtime equals the superblock build time.
    pub struct CompactInode[32] {
        /// Bit 0: version (0); bits 1..3: data layout.
        i_format / set_i_format: u16 @ 0,
        /// Inline xattr size: 0, or 12 + 4 * (count - 1) bytes.
        i_xattr_icount / set_i_xattr_icount: u16 @ 2,
        /// File type and permission bits.
        i_mode / set_i_mode: u16 @ 4,
        /// Hard-link count.
        i_nlink / set_i_nlink: u16 @ 6,
        /// File size in bytes.
        i_size / set_i_size: u32 @ 8,
        /// Reserved (newer formats: mtime after build time with COMPAT_MTIME).
        i_mtime / set_i_mtime: u32 @ 12,
        /// raw_blkaddr (flat), compressed_blocks (compressed), rdev (devices) or chunk info.
        i_u / set_i_u: u32 @ 16,
        /// Inode number for 32-bit stat.
        i_ino / set_i_ino: u32 @ 20,
        /// Owner.
        i_uid / set_i_uid: u16 @ 24,
        /// Group.
        i_gid / set_i_gid: u16 @ 26,
        /// Reserved.
        i_reserved2 / set_i_reserved2: u32 @ 28,
    }
}

usfs_fs::layout! {
    /// `struct erofs_inode_extended`: 64 bytes with 64-bit size, 32-bit ids and an mtime.
    pub struct ExtendedInode[64] {
        /// Bit 0: version (1); bits 1..3: data layout.
        i_format / set_i_format: u16 @ 0,
        /// Inline xattr size: 0, or 12 + 4 * (count - 1) bytes.
        i_xattr_icount / set_i_xattr_icount: u16 @ 2,
        /// File type and permission bits.
        i_mode / set_i_mode: u16 @ 4,
        /// Reserved.
        i_reserved / set_i_reserved: u16 @ 6,
        /// File size in bytes.
        i_size / set_i_size: u64 @ 8,
        /// raw_blkaddr (flat), compressed_blocks (compressed), rdev (devices) or chunk info.
        i_u / set_i_u: u32 @ 16,
        /// Inode number for 32-bit stat.
        i_ino / set_i_ino: u32 @ 20,
        /// Owner.
        i_uid / set_i_uid: u32 @ 24,
        /// Group.
        i_gid / set_i_gid: u32 @ 28,
        /// Modification time, seconds (atime and ctime read the same).
        i_mtime / set_i_mtime: u64 @ 32,
        /// Modification time, nanoseconds.
        i_mtime_nsec / set_i_mtime_nsec: u32 @ 40,
        /// Hard-link count.
        i_nlink / set_i_nlink: u32 @ 44,
        /// Reserved.
        i_reserved2 / set_i_reserved2: [16] @ 48,
    }
}

/// Linux `new_encode_dev`: the rdev encoding EROFS stores.
pub fn encode_dev(rdev: u64) -> u32 {
    let major = ((rdev >> 8) & 0xfff) as u32 | (((rdev >> 32) & !0xfff) as u32);
    let minor = (rdev & 0xff) as u32 | (((rdev >> 12) & !0xff) as u32);
    (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
}

/// Linux `new_decode_dev` into a glibc `makedev` value.
pub fn decode_dev(v: u32) -> u64 {
    let major = u64::from((v & 0xfff00) >> 8);
    let minor = u64::from((v & 0xff) | ((v >> 12) & 0xfff00));
    ((major & 0xfff) << 8) | ((major & !0xfff) << 32) | (minor & 0xff) | ((minor & !0xff) << 12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_roundtrip() {
        for (maj, min) in [(0u64, 0u64), (8, 1), (259, 70000), (4095, 1048575)] {
            let glibc = ((maj & 0xfff) << 8)
                | ((maj & !0xfff) << 32)
                | (min & 0xff)
                | ((min & !0xff) << 12);
            assert_eq!(decode_dev(encode_dev(glibc)), glibc);
        }
    }
}
