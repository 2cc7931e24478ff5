//! The inode record: `s_inode_size` bytes (128 minimum) in the inode table of its group.
//! The first 128 bytes are fixed; `i_extra_isize` says how many of the following bytes
//! hold extra fields (checksum high half, nanosecond times, creation time); the rest of
//! the record holds in-inode extended attributes.

use super::checksum::crc32c_raw;
use usfs_fs::Timestamp;

/// Size of the fixed part (the original ext2 inode).
pub const GOOD_OLD_INODE_SIZE: usize = 128;
/// Offset of `l_i_checksum_lo`.
pub const CHECKSUM_LO_OFFSET: usize = 0x7C;
/// Offset of `i_checksum_hi`.
pub const CHECKSUM_HI_OFFSET: usize = 0x82;
/// Size of `i_block`.
pub const I_BLOCK_SIZE: usize = 60;

/// Root directory inode.
pub const ROOT_INO: u32 = 2;
/// Journal inode (usual).
pub const JOURNAL_INO: u32 = 8;

/// `i_flags` bits.
pub mod flags {
    /// Immutable file.
    pub const IMMUTABLE: u32 = 0x10;
    /// Writes may only append.
    pub const APPEND: u32 = 0x20;
    /// Directory uses hashed (htree) indexing.
    pub const INDEX: u32 = 0x1000;
    /// AFS directory ("imagic": an inode kept without links, with imagic_inodes).
    pub const IMAGIC: u32 = 0x2000;
    /// Encrypted inode.
    pub const ENCRYPT: u32 = 0x800;
    /// `i_blocks` counts file-system blocks, not 512-byte sectors.
    pub const HUGE_FILE: u32 = 0x40000;
    /// Extent-mapped inode.
    pub const EXTENTS: u32 = 0x80000;
    /// fs-verity file.
    pub const VERITY: u32 = 0x100000;
    /// Inode holds a large xattr value.
    pub const EA_INODE: u32 = 0x200000;
    /// Data stored inside the inode (and the system.data xattr).
    pub const INLINE_DATA: u32 = 0x10000000;
    /// Case-insensitive directory.
    pub const CASEFOLD: u32 = 0x40000000;
}

usfs_fs::layout! {
    /// An inode (struct ext4_inode), Linux flavour of the OS-dependent fields. The view
    /// always holds at least 160 bytes (zero-padded past the on-disk record), so extra
    /// fields read as zero unless `i_extra_isize` covers them ([`Inode::has_extra`]).
    pub struct Inode[160] {
        /// File type and permission bits.
        i_mode / set_i_mode: u16 @ 0x00,
        /// Owner uid, low 16 bits.
        i_uid / set_i_uid: u16 @ 0x02,
        /// Size in bytes, low 32 bits.
        i_size_lo / set_i_size_lo: u32 @ 0x04,
        /// Last access time (seconds, signed 32-bit base; see `i_atime_extra`).
        i_atime / set_i_atime: u32 @ 0x08,
        /// Last inode change time.
        i_ctime / set_i_ctime: u32 @ 0x0C,
        /// Last data modification time.
        i_mtime / set_i_mtime: u32 @ 0x10,
        /// Deletion time (or the next orphan inode while on the orphan list).
        i_dtime / set_i_dtime: u32 @ 0x14,
        /// Group id, low 16 bits.
        i_gid / set_i_gid: u16 @ 0x18,
        /// Hard-link count.
        i_links_count / set_i_links_count: u16 @ 0x1A,
        /// Block count, low 32 bits (512-byte units, or fs blocks with HUGE_FILE flag).
        i_blocks_lo / set_i_blocks_lo: u32 @ 0x1C,
        /// Inode flags ([`flags`]).
        i_flags / set_i_flags: u32 @ 0x20,
        /// Inode version (Linux: l_i_version).
        l_i_version / set_l_i_version: u32 @ 0x24,
        /// Block map, extent tree root, inline data, symlink target or device number.
        i_block / set_i_block: [60] @ 0x28,
        /// File version (NFS generation).
        i_generation / set_i_generation: u32 @ 0x64,
        /// Extended attribute block, low 32 bits.
        i_file_acl_lo / set_i_file_acl_lo: u32 @ 0x68,
        /// Size in bytes, high 32 bits.
        i_size_high / set_i_size_high: u32 @ 0x6C,
        /// Obsolete fragment address.
        i_obso_faddr / set_i_obso_faddr: u32 @ 0x70,
        /// Block count, high 16 bits.
        l_i_blocks_high / set_l_i_blocks_high: u16 @ 0x74,
        /// Extended attribute block, high 16 bits.
        l_i_file_acl_high / set_l_i_file_acl_high: u16 @ 0x76,
        /// Owner uid, high 16 bits.
        l_i_uid_high / set_l_i_uid_high: u16 @ 0x78,
        /// Group id, high 16 bits.
        l_i_gid_high / set_l_i_gid_high: u16 @ 0x7A,
        /// Inode checksum, low 16 bits.
        l_i_checksum_lo / set_l_i_checksum_lo: u16 @ 0x7C,
        /// Reserved.
        l_i_reserved / set_l_i_reserved: u16 @ 0x7E,
        /// Bytes of extra fields after the first 128.
        i_extra_isize / set_i_extra_isize: u16 @ 0x80,
        /// Inode checksum, high 16 bits.
        i_checksum_hi / set_i_checksum_hi: u16 @ 0x82,
        /// Extra change-time bits: epoch (2 bits) and nanoseconds << 2.
        i_ctime_extra / set_i_ctime_extra: u32 @ 0x84,
        /// Extra modification-time bits.
        i_mtime_extra / set_i_mtime_extra: u32 @ 0x88,
        /// Extra access-time bits.
        i_atime_extra / set_i_atime_extra: u32 @ 0x8C,
        /// Creation time, seconds.
        i_crtime / set_i_crtime: u32 @ 0x90,
        /// Extra creation-time bits.
        i_crtime_extra / set_i_crtime_extra: u32 @ 0x94,
        /// Inode version, high 32 bits.
        i_version_hi / set_i_version_hi: u32 @ 0x98,
        /// Project id.
        i_projid / set_i_projid: u32 @ 0x9C,
    }
}

impl Inode<Vec<u8>> {
    /// Copies an on-disk record into a view padded to at least [`Inode::SIZE`] bytes.
    pub fn from_raw(raw: &[u8]) -> Self {
        let mut b = raw.to_vec();
        if b.len() < Self::SIZE {
            b.resize(Self::SIZE, 0);
        }
        Inode(b)
    }
}

impl<B: AsRef<[u8]>> Inode<B> {
    /// Does `i_extra_isize` cover the field ending at byte `end` (offset + size)?
    pub fn has_extra(&self, end: usize, inode_size: usize) -> bool {
        inode_size > GOOD_OLD_INODE_SIZE
            && GOOD_OLD_INODE_SIZE + (self.i_extra_isize() as usize) >= end
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        (self.i_size_high() as u64) << 32 | self.i_size_lo() as u64
    }

    /// The copy of this (journal) inode the superblock keeps in `s_jnl_blocks`: its
    /// `i_block`, then `i_size_high` and `i_size_lo`, little-endian words (mke2fs's and
    /// e2fsck's EXT3_JNL_BACKUP_BLOCKS).
    pub fn journal_backup(&self) -> [u8; 68] {
        let mut jnl = [0u8; 68];
        jnl[..60].copy_from_slice(self.i_block());
        jnl[60..64].copy_from_slice(&self.i_size_high().to_le_bytes());
        jnl[64..68].copy_from_slice(&self.i_size_lo().to_le_bytes());
        jnl
    }

    /// Owner uid (32 bits).
    pub fn uid(&self) -> u32 {
        self.i_uid() as u32 | (self.l_i_uid_high() as u32) << 16
    }

    /// Group id (32 bits).
    pub fn gid(&self) -> u32 {
        self.i_gid() as u32 | (self.l_i_gid_high() as u32) << 16
    }

    /// Extended attribute block (48 bits).
    pub fn file_acl(&self) -> u64 {
        (self.l_i_file_acl_high() as u64) << 32 | self.i_file_acl_lo() as u64
    }

    /// The user, group and project ids quota charges the inode to (the project id 0
    /// where the record has no room for it).
    pub fn quota_ids(&self) -> [u32; 3] {
        let extra = self.i_extra_isize() as usize;
        let projid = if GOOD_OLD_INODE_SIZE + extra >= 0xA0 {
            self.i_projid()
        } else {
            0
        };
        [self.uid(), self.gid(), projid]
    }

    /// Extended attribute block as the kernel and e2fsprogs read it: the high half only
    /// with the 64bit feature (`bit64`).
    pub fn file_acl_block(&self, bit64: bool) -> u64 {
        if bit64 {
            self.file_acl()
        } else {
            self.i_file_acl_lo() as u64
        }
    }

    /// Is an `i_flags` bit set?
    pub fn has_flag(&self, flag: u32) -> bool {
        self.i_flags() & flag != 0
    }

    /// Space used in 512-byte units, given whether the huge_file feature is on.
    pub fn blocks_512(&self, huge_file_feature: bool, block_size: u32) -> u64 {
        let lo = self.i_blocks_lo() as u64;
        if !huge_file_feature {
            return lo;
        }
        let n = (self.l_i_blocks_high() as u64) << 32 | lo;
        if self.has_flag(flags::HUGE_FILE) {
            n * (block_size as u64 / 512)
        } else {
            n
        }
    }

    /// Access time.
    pub fn atime(&self, inode_size: usize) -> Timestamp {
        self.time(self.i_atime(), self.i_atime_extra(), 0x90, inode_size)
    }
    /// Modification time.
    pub fn mtime(&self, inode_size: usize) -> Timestamp {
        self.time(self.i_mtime(), self.i_mtime_extra(), 0x8C, inode_size)
    }
    /// Change time.
    pub fn ctime(&self, inode_size: usize) -> Timestamp {
        self.time(self.i_ctime(), self.i_ctime_extra(), 0x88, inode_size)
    }
    /// Creation time, when the inode is large enough to hold one.
    pub fn crtime(&self, inode_size: usize) -> Option<Timestamp> {
        if !self.has_extra(0x94, inode_size) {
            return None;
        }
        Some(self.time(self.i_crtime(), self.i_crtime_extra(), 0x98, inode_size))
    }

    /// Decodes a time: signed 32-bit seconds, plus (if the extra field exists) two epoch
    /// bits added as bits 32..33 and nanoseconds in the upper 30 bits.
    fn time(&self, base: u32, extra: u32, extra_end: usize, inode_size: usize) -> Timestamp {
        let mut sec = base as i32 as i64;
        let mut nsec = 0;
        if self.has_extra(extra_end, inode_size) {
            sec += ((extra & 3) as i64) << 32;
            nsec = extra >> 2;
            if nsec >= 1_000_000_000 {
                nsec = 0;
            }
        }
        Timestamp { sec, nsec }
    }

    /// The checksum the inode should carry: crc32c(seed, le32 ino || le32 generation ||
    /// record with both checksum halves zeroed). `inode_size` is `s_inode_size`.
    pub fn compute_checksum(&self, seed: u32, ino: u32, inode_size: usize) -> u32 {
        let b = &self.bytes()[..inode_size];
        let mut c = crc32c_raw(seed, &ino.to_le_bytes());
        c = crc32c_raw(c, &self.i_generation().to_le_bytes());
        c = crc32c_raw(c, &b[..CHECKSUM_LO_OFFSET]);
        c = crc32c_raw(c, &[0, 0]);
        c = crc32c_raw(c, &b[CHECKSUM_LO_OFFSET + 2..GOOD_OLD_INODE_SIZE]);
        if inode_size > GOOD_OLD_INODE_SIZE {
            if self.has_extra(CHECKSUM_HI_OFFSET + 2, inode_size) {
                c = crc32c_raw(c, &b[GOOD_OLD_INODE_SIZE..CHECKSUM_HI_OFFSET]);
                c = crc32c_raw(c, &[0, 0]);
                c = crc32c_raw(c, &b[CHECKSUM_HI_OFFSET + 2..]);
            } else {
                c = crc32c_raw(c, &b[GOOD_OLD_INODE_SIZE..]);
            }
        }
        c
    }

    /// The checksum stored in the inode, and how many bits of it are stored (16 or 32).
    pub fn stored_checksum(&self, inode_size: usize) -> (u32, u32) {
        let lo = self.l_i_checksum_lo() as u32;
        if self.has_extra(CHECKSUM_HI_OFFSET + 2, inode_size) {
            ((self.i_checksum_hi() as u32) << 16 | lo, 32)
        } else {
            (lo, 16)
        }
    }

    /// Does the stored checksum match?
    pub fn checksum_ok(&self, seed: u32, ino: u32, inode_size: usize) -> bool {
        let (stored, bits) = self.stored_checksum(inode_size);
        let calc = self.compute_checksum(seed, ino, inode_size);
        if bits == 32 {
            stored == calc
        } else {
            stored == calc & 0xFFFF
        }
    }

    /// The Linux device number of a device node, decoded from `i_block` (old 16-bit
    /// encoding in word 0, or the new 32-bit one in word 1), as glibc's makedev() encodes.
    pub fn rdev(&self) -> u64 {
        let b = self.i_block();
        let w0 = u32::from_le_bytes(b[0..4].try_into().unwrap());
        let w1 = u32::from_le_bytes(b[4..8].try_into().unwrap());
        let (major, minor) = if w0 != 0 {
            ((w0 >> 8) & 0xFF, w0 & 0xFF)
        } else {
            ((w1 & 0xFFF00) >> 8, (w1 & 0xFF) | ((w1 >> 12) & 0xFFF00))
        };
        makedev(major, minor)
    }
}

/// glibc's makedev().
pub fn makedev(major: u32, minor: u32) -> u64 {
    let (ma, mi) = (major as u64, minor as u64);
    ((ma & 0xFFFF_F000) << 32) | ((ma & 0xFFF) << 8) | ((mi & 0xFFFF_FF00) << 12) | (mi & 0xFF)
}

/// Encodes a time as ext4 stores it: the low 32 bits of the seconds in the base field;
/// in the extra field the epoch bits ((seconds - low32 as signed) >> 32, 2 bits) and the
/// nanoseconds << 2. Times outside 1901..2446 are clamped to that range.
pub fn encode_time(t: Timestamp) -> (u32, u32) {
    let sec = t.sec.clamp(-(1i64 << 31), (1i64 << 34) - (1i64 << 31) - 1);
    let base = sec as i32;
    let epoch = ((sec - base as i64) >> 32) as u32 & 3;
    let nsec = if t.nsec < 1_000_000_000 { t.nsec } else { 0 };
    (base as u32, epoch | nsec << 2)
}

/// Encodes a device number into `i_block` as the kernel does: the old 16-bit form in
/// word 0 when major and minor fit in a byte each, else the new form in word 1.
pub fn encode_rdev(major: u32, minor: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    if major < 256 && minor < 256 {
        b[0..4].copy_from_slice(&(major << 8 | minor).to_le_bytes());
    } else {
        let w = (minor & 0xFF) | ((major & 0xFFF) << 8) | ((minor & !0xFF) << 12);
        b[4..8].copy_from_slice(&w.to_le_bytes());
    }
    b
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Inode<B> {
    /// Sets the size (both halves).
    pub fn set_size(&mut self, size: u64) {
        self.set_i_size_lo(size as u32);
        self.set_i_size_high((size >> 32) as u32);
    }

    /// Sets the owner (both halves).
    pub fn set_uid(&mut self, uid: u32) {
        self.set_i_uid(uid as u16);
        self.set_l_i_uid_high((uid >> 16) as u16);
    }

    /// Sets the group (both halves).
    pub fn set_gid(&mut self, gid: u32) {
        self.set_i_gid(gid as u16);
        self.set_l_i_gid_high((gid >> 16) as u16);
    }

    /// Sets the xattr block (48 bits).
    pub fn set_file_acl(&mut self, block: u64) {
        self.set_i_file_acl_lo(block as u32);
        self.set_l_i_file_acl_high((block >> 32) as u16);
    }

    /// Sets the block count in 512-byte units (48 bits, huge_file; no HUGE_FILE flag).
    pub fn set_blocks_512(&mut self, n: u64) {
        self.set_i_blocks_lo(n as u32);
        self.set_l_i_blocks_high((n >> 32) as u16);
    }

    /// Sets access, modification, change and creation times (the extra fields only
    /// when `i_extra_isize` covers them).
    pub fn set_times(
        &mut self,
        atime: Timestamp,
        mtime: Timestamp,
        ctime: Timestamp,
        crtime: Timestamp,
        inode_size: usize,
    ) {
        let (a, ax) = encode_time(atime);
        let (m, mx) = encode_time(mtime);
        let (c, cx) = encode_time(ctime);
        let (cr, crx) = encode_time(crtime);
        self.set_i_atime(a);
        self.set_i_mtime(m);
        self.set_i_ctime(c);
        if self.has_extra(0x98, inode_size) {
            self.set_i_atime_extra(ax);
            self.set_i_mtime_extra(mx);
            self.set_i_ctime_extra(cx);
            self.set_i_crtime(cr);
            self.set_i_crtime_extra(crx);
        }
    }

    /// Stores the checksum of the current contents (both halves when the extra fields
    /// hold the high half).
    pub fn update_checksum(&mut self, seed: u32, ino: u32, inode_size: usize) {
        let c = self.compute_checksum(seed, ino, inode_size);
        self.set_l_i_checksum_lo(c as u16);
        if self.has_extra(CHECKSUM_HI_OFFSET + 2, inode_size) {
            self.set_i_checksum_hi((c >> 16) as u16);
        }
    }
}
