//! The FUSE wire format (Linux `include/uapi/linux/fuse.h`, protocol 7.40) as this server
//! uses it: the request header, the per-operation argument structs it reads and the reply
//! structs it writes. Everything is little-endian on the machines FUSE runs on here (x86-64,
//! aarch64); fields are read and written at their C offsets.
//!
//! A request is a header, an operation header (`op`: a fixed struct per opcode, possibly
//! empty) and a payload (names, xattr values, written data). On /dev/fuse the three arrive
//! back to back; over io_uring the kernel puts them in three separate buffers. The
//! dispatcher takes them apart, so both transports hand it the same pieces.

/// Operation codes (`enum fuse_opcode`) this server answers or must know about.
pub(crate) mod op {
    pub(crate) const LOOKUP: u32 = 1;
    pub(crate) const FORGET: u32 = 2;
    pub(crate) const GETATTR: u32 = 3;
    pub(crate) const SETATTR: u32 = 4;
    pub(crate) const READLINK: u32 = 5;
    pub(crate) const SYMLINK: u32 = 6;
    pub(crate) const MKNOD: u32 = 8;
    pub(crate) const MKDIR: u32 = 9;
    pub(crate) const UNLINK: u32 = 10;
    pub(crate) const RMDIR: u32 = 11;
    pub(crate) const RENAME: u32 = 12;
    pub(crate) const LINK: u32 = 13;
    pub(crate) const OPEN: u32 = 14;
    pub(crate) const READ: u32 = 15;
    pub(crate) const WRITE: u32 = 16;
    pub(crate) const STATFS: u32 = 17;
    pub(crate) const RELEASE: u32 = 18;
    pub(crate) const FSYNC: u32 = 20;
    pub(crate) const SETXATTR: u32 = 21;
    pub(crate) const GETXATTR: u32 = 22;
    pub(crate) const LISTXATTR: u32 = 23;
    pub(crate) const REMOVEXATTR: u32 = 24;
    pub(crate) const FLUSH: u32 = 25;
    pub(crate) const OPENDIR: u32 = 27;
    pub(crate) const READDIR: u32 = 28;
    pub(crate) const RELEASEDIR: u32 = 29;
    pub(crate) const FSYNCDIR: u32 = 30;
    pub(crate) const ACCESS: u32 = 34;
    pub(crate) const CREATE: u32 = 35;
    pub(crate) const INTERRUPT: u32 = 36;
    pub(crate) const DESTROY: u32 = 38;
    pub(crate) const BATCH_FORGET: u32 = 42;
    pub(crate) const FALLOCATE: u32 = 43;
    pub(crate) const READDIRPLUS: u32 = 44;
    pub(crate) const RENAME2: u32 = 45;
    pub(crate) const LSEEK: u32 = 46;
}

/// Size of the operation header of `opcode` (the first argument the kernel sends; zero
/// when the operation has none). Everything after it is payload. `None`: an opcode this
/// server does not take apart (answered ENOSYS).
pub(crate) fn op_header_len(opcode: u32) -> Option<usize> {
    Some(match opcode {
        op::LOOKUP | op::READLINK | op::SYMLINK | op::UNLINK | op::RMDIR | op::STATFS => 0,
        op::REMOVEXATTR | op::DESTROY => 0,
        op::FORGET | op::MKDIR | op::RENAME | op::LINK | op::OPEN | op::OPENDIR => 8,
        op::GETXATTR | op::LISTXATTR | op::ACCESS | op::INTERRUPT | op::BATCH_FORGET => 8,
        // fuse_setxattr_in without FUSE_SETXATTR_EXT (not negotiated): size, flags.
        op::SETXATTR => 8,
        op::GETATTR | op::MKNOD | op::FSYNC | op::FSYNCDIR | op::CREATE | op::RENAME2 => 16,
        op::RELEASE | op::RELEASEDIR | op::FLUSH | op::LSEEK => 24,
        op::FALLOCATE => 32,
        op::READ | op::WRITE | op::READDIR | op::READDIRPLUS => 40,
        op::SETATTR => 88,
        _ => return None,
    })
}

/// `struct fuse_in_header` (40 bytes): what every request starts with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InHeader {
    /// Operation code.
    pub opcode: u32,
    /// Request id, echoed in the reply.
    pub unique: u64,
    /// The inode the operation is on (FUSE's node id).
    pub nodeid: u64,
    /// Caller's file-system uid.
    pub uid: u32,
    /// Caller's file-system gid.
    pub gid: u32,
}

/// Size of `struct fuse_in_header`.
pub(crate) const IN_HEADER_LEN: usize = 40;
/// Size of `struct fuse_out_header`.
pub(crate) const OUT_HEADER_LEN: usize = 16;

impl InHeader {
    /// Parses the first 40 bytes of `b`.
    pub(crate) fn parse(b: &[u8]) -> Option<InHeader> {
        let r = Args(b.get(..IN_HEADER_LEN)?);
        Some(InHeader {
            opcode: r.u32(4),
            unique: r.u64(8),
            nodeid: r.u64(16),
            uid: r.u32(24),
            gid: r.u32(28),
        })
    }
}

/// `struct fuse_out_header`: length of the reply (header included), negative errno or 0,
/// the request's id.
pub(crate) fn out_header(len: usize, error: i32, unique: u64) -> [u8; OUT_HEADER_LEN] {
    let mut h = [0u8; OUT_HEADER_LEN];
    h[0..4].copy_from_slice(&(len as u32).to_le_bytes());
    h[4..8].copy_from_slice(&error.to_le_bytes());
    h[8..16].copy_from_slice(&unique.to_le_bytes());
    h
}

/// Fixed-offset little-endian reads from an operation header; a field past the end reads
/// as zero (the header was checked to be long enough before dispatch).
#[derive(Clone, Copy)]
pub(crate) struct Args<'a>(pub &'a [u8]);

impl Args<'_> {
    pub(crate) fn u32(&self, at: usize) -> u32 {
        self.0
            .get(at..at + 4)
            .map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }
    pub(crate) fn u64(&self, at: usize) -> u64 {
        self.0
            .get(at..at + 8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }
}

/// The `N` NUL-terminated names at the front of a payload, in order (LOOKUP's name;
/// RENAME's old and new names; SYMLINK's name and target; SETXATTR's name, then the
/// value in the rest).
pub(crate) fn names<const N: usize>(payload: &[u8]) -> Option<([&[u8]; N], &[u8])> {
    let mut rest = payload;
    let mut out: [&[u8]; N] = [&[]; N];
    for slot in &mut out {
        let end = rest.iter().position(|&c| c == 0)?;
        *slot = &rest[..end];
        rest = &rest[end + 1..];
    }
    Some((out, rest))
}

/// `struct fuse_attr` (88 bytes), the attributes in every entry and attr reply.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Attr {
    /// Inode number shown as st_ino.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte blocks.
    pub blocks: u64,
    /// Access time (seconds, nanoseconds).
    pub atime: (i64, u32),
    /// Modification time.
    pub mtime: (i64, u32),
    /// Change time.
    pub ctime: (i64, u32),
    /// st_mode: type and permission bits.
    pub mode: u32,
    /// Link count.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Device number (new_encode_dev form).
    pub rdev: u32,
    /// Preferred I/O size.
    pub blksize: u32,
}

impl Attr {
    /// Appends the 88-byte struct.
    pub(crate) fn put(&self, out: &mut Vec<u8>) {
        for v in [self.ino, self.size, self.blocks] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for t in [self.atime, self.mtime, self.ctime] {
            out.extend_from_slice(&(t.0 as u64).to_le_bytes());
        }
        for v in [
            self.atime.1,
            self.mtime.1,
            self.ctime.1,
            self.mode,
            self.nlink,
            self.uid,
            self.gid,
            self.rdev,
            self.blksize,
            0, // flags
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// Appends `struct fuse_entry_out` (128 bytes): node id, generation, how long the name
/// and the attributes may be cached (seconds), the attributes.
pub(crate) fn put_entry(out: &mut Vec<u8>, nodeid: u64, generation: u64, ttl: u64, a: &Attr) {
    for v in [nodeid, generation, ttl, ttl] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&[0u8; 8]); // entry_valid_nsec, attr_valid_nsec
    a.put(out);
}

/// Appends `struct fuse_attr_out` (104 bytes).
pub(crate) fn put_attr(out: &mut Vec<u8>, ttl: u64, a: &Attr) {
    out.extend_from_slice(&ttl.to_le_bytes());
    out.extend_from_slice(&[0u8; 8]); // attr_valid_nsec, dummy
    a.put(out);
}

/// Appends `struct fuse_open_out` (16 bytes): file handle, FOPEN_* flags.
pub(crate) fn put_open(out: &mut Vec<u8>, fh: u64, flags: u32) {
    out.extend_from_slice(&fh.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&[0u8; 4]); // backing_id
}

/// Appends a u32 and four bytes of padding (`fuse_write_out`, `fuse_getxattr_out`).
pub(crate) fn put_u32_pad(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
    out.extend_from_slice(&[0u8; 4]);
}

/// FOPEN_DIRECT_IO: bypass the page cache for this open file.
pub(crate) const FOPEN_DIRECT_IO: u32 = 1 << 0;
/// FOPEN_KEEP_CACHE: keep cached data at open.
pub(crate) const FOPEN_KEEP_CACHE: u32 = 1 << 1;

/// setattr's `valid` bits.
pub(crate) mod fattr {
    pub(crate) const MODE: u32 = 1 << 0;
    pub(crate) const UID: u32 = 1 << 1;
    pub(crate) const GID: u32 = 1 << 2;
    pub(crate) const SIZE: u32 = 1 << 3;
    pub(crate) const ATIME: u32 = 1 << 4;
    pub(crate) const MTIME: u32 = 1 << 5;
    pub(crate) const ATIME_NOW: u32 = 1 << 7;
    pub(crate) const MTIME_NOW: u32 = 1 << 8;
}

/// FUSE_WRITE_KILL_SUIDGID in `fuse_write_in.write_flags`.
pub(crate) const WRITE_KILL_SUIDGID: u32 = 1 << 2;

/// Appends one `struct fuse_dirent` (ino, next offset, name length, type, name, padded
/// to 8 bytes) if it fits in `max` bytes; false when it does not.
pub(crate) fn put_dirent(
    out: &mut Vec<u8>,
    max: usize,
    ino: u64,
    off: u64,
    typ: u32,
    name: &[u8],
) -> bool {
    let len = (24 + name.len()).next_multiple_of(8);
    if out.len() + len > max {
        return false;
    }
    out.extend_from_slice(&ino.to_le_bytes());
    out.extend_from_slice(&off.to_le_bytes());
    out.extend_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&typ.to_le_bytes());
    out.extend_from_slice(name);
    out.resize(out.len() + (len - 24 - name.len()), 0);
    true
}

/// Size of one `struct fuse_direntplus` for `name` (entry_out, then the dirent).
pub(crate) fn direntplus_len(name: &[u8]) -> usize {
    128 + (24 + name.len()).next_multiple_of(8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_structs_have_the_c_sizes() {
        let mut v = Vec::new();
        Attr::default().put(&mut v);
        assert_eq!(v.len(), 88);
        v.clear();
        put_entry(&mut v, 1, 2, 3, &Attr::default());
        assert_eq!(v.len(), 128);
        v.clear();
        put_attr(&mut v, 1, &Attr::default());
        assert_eq!(v.len(), 104);
        v.clear();
        assert!(put_dirent(&mut v, 4096, 5, 6, 8, b"abc"));
        assert_eq!(v.len(), 32);
        assert!(!put_dirent(&mut v, 40, 5, 6, 8, b"abc"));
        assert_eq!(direntplus_len(b"abc"), 160);
    }

    #[test]
    fn names_split_at_nul() {
        let (n, rest) = names::<2>(b"old\0new\0tail").unwrap();
        assert_eq!(n, [&b"old"[..], &b"new"[..]]);
        assert_eq!(rest, b"tail");
        assert!(names::<1>(b"unterminated").is_none());
    }
}
