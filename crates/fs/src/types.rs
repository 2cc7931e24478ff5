//! Types shared by all back ends.

/// An inode number, as the back end numbers them (ext4: the on-disk inode number; EROFS:
/// the nid).
pub type Ino = u64;

/// The type of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    /// Regular file.
    Regular,
    /// Directory.
    Directory,
    /// Symbolic link.
    Symlink,
    /// Character device.
    CharDevice,
    /// Block device.
    BlockDevice,
    /// Named pipe.
    Fifo,
    /// Unix socket.
    Socket,
}

impl FileType {
    /// From the S_IFMT bits of a mode.
    pub fn from_mode(mode: u32) -> Option<FileType> {
        Some(match mode & 0o170000 {
            0o100000 => FileType::Regular,
            0o040000 => FileType::Directory,
            0o120000 => FileType::Symlink,
            0o020000 => FileType::CharDevice,
            0o060000 => FileType::BlockDevice,
            0o010000 => FileType::Fifo,
            0o140000 => FileType::Socket,
            _ => return None,
        })
    }

    /// The S_IFMT bits for this type.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Regular => 0o100000,
            FileType::Directory => 0o040000,
            FileType::Symlink => 0o120000,
            FileType::CharDevice => 0o020000,
            FileType::BlockDevice => 0o060000,
            FileType::Fifo => 0o010000,
            FileType::Socket => 0o140000,
        }
    }

    /// The d_type value readdir reports (DT_REG, ...).
    pub fn dirent_type(self) -> u8 {
        match self {
            FileType::Regular => 8,
            FileType::Directory => 4,
            FileType::Symlink => 10,
            FileType::CharDevice => 2,
            FileType::BlockDevice => 6,
            FileType::Fifo => 1,
            FileType::Socket => 12,
        }
    }

    /// One letter as `ls -l` prints it.
    pub fn ls_char(self) -> char {
        match self {
            FileType::Regular => '-',
            FileType::Directory => 'd',
            FileType::Symlink => 'l',
            FileType::CharDevice => 'c',
            FileType::BlockDevice => 'b',
            FileType::Fifo => 'p',
            FileType::Socket => 's',
        }
    }
}

/// A point in time: seconds since the epoch (may be negative) and nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Whole seconds since 1970-01-01 00:00:00 UTC.
    pub sec: i64,
    /// Nanoseconds, 0..1e9.
    pub nsec: u32,
}

impl Timestamp {
    /// The wall clock as the kernel stamps inodes of file systems without fine-grained
    /// timestamps (FUSE among them): CLOCK_REALTIME_COARSE, the time at the last tick.
    /// Stamping with it matters to `usfs mount`: a write in the same tick as the create
    /// then finds mtime already "now" in the kernel's copy of the inode, leaves it clean,
    /// and close sends no SETATTR of the times back (one round trip per new file).
    pub fn now() -> Timestamp {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into `ts`, which we own.
        if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } != 0 {
            return Timestamp::default();
        }
        Timestamp {
            sec: ts.tv_sec,
            nsec: ts.tv_nsec as u32,
        }
    }
}

/// Attributes of an inode, as stat(2) reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    /// Inode number.
    pub ino: Ino,
    /// File type.
    pub file_type: FileType,
    /// Permission bits including setuid/setgid/sticky (mode & 0o7777).
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Hard-link count.
    pub nlink: u64,
    /// Size in bytes.
    pub size: u64,
    /// Space used, in 512-byte units.
    pub blocks: u64,
    /// Device number for device nodes (Linux encoding, as makedev()).
    pub rdev: u64,
    /// Preferred I/O size (the block size).
    pub blksize: u32,
    /// Last access.
    pub atime: Timestamp,
    /// Last data modification.
    pub mtime: Timestamp,
    /// Last status change.
    pub ctime: Timestamp,
    /// Creation time, where the format records one.
    pub crtime: Option<Timestamp>,
    /// Inode generation number (0 where the format has none).
    pub generation: u32,
}

impl Metadata {
    /// Attributes of a node that exists on no disk (test trees, synthetic entries): the
    /// identity given, one link, a 4 KiB block size, every size and time zero.
    pub fn synthetic(ino: Ino, file_type: FileType, perm: u32, uid: u32, gid: u32) -> Metadata {
        Metadata {
            ino,
            file_type,
            perm,
            uid,
            gid,
            nlink: 1,
            size: 0,
            blocks: 0,
            rdev: 0,
            blksize: 4096,
            atime: Timestamp::default(),
            mtime: Timestamp::default(),
            ctime: Timestamp::default(),
            crtime: None,
            generation: 0,
        }
    }

    /// The full st_mode: type bits and permission bits.
    pub fn mode(&self) -> u32 {
        self.file_type.mode_bits() | self.perm
    }

    /// True for directories.
    pub fn is_dir(&self) -> bool {
        self.file_type == FileType::Directory
    }
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The name (raw bytes).
    pub name: Vec<u8>,
    /// The inode it names.
    pub ino: Ino,
    /// The type, if the directory records it (ext4 filetype feature, EROFS always).
    pub file_type: Option<FileType>,
}

/// Totals for statfs(2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    /// Block size.
    pub block_size: u32,
    /// Total blocks.
    pub blocks: u64,
    /// Free blocks.
    pub blocks_free: u64,
    /// Free blocks for unprivileged users.
    pub blocks_avail: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes.
    pub files_free: u64,
    /// Longest name.
    pub name_max: u32,
    /// The f_type magic statfs reports.
    pub magic: u64,
}

impl Timestamp {
    /// `YYYY-MM-DD HH:MM:SS.nnnnnnnnn +0000` (UTC, proleptic Gregorian calendar).
    pub fn to_utc_string(&self) -> String {
        let days = self.sec.div_euclid(86_400);
        let secs = self.sec.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:09} +0000",
            secs / 3600,
            secs / 60 % 60,
            secs % 60,
            self.nsec
        )
    }
}

/// Converts days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Formats a 16-byte UUID as 8-4-4-4-12 lowercase hex (as blkid, dumpe2fs and dump.erofs).
pub fn format_uuid(u: &[u8; 16]) -> String {
    let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

#[cfg(test)]
mod tests {
    use super::Timestamp;

    #[test]
    fn utc_strings() {
        let t = |sec, nsec| Timestamp { sec, nsec }.to_utc_string();
        assert_eq!(t(0, 0), "1970-01-01 00:00:00.000000000 +0000");
        assert_eq!(t(-1, 5), "1969-12-31 23:59:59.000000005 +0000");
        assert_eq!(t(951_782_400, 0), "2000-02-29 00:00:00.000000000 +0000");
        assert_eq!(t(2_208_988_800, 0), "2040-01-01 00:00:00.000000000 +0000");
    }
}
