//! The write half of the FUSE server (`usfs mount -o rw`): each request becomes one call
//! of [`usfs_fs::FileSystemWrite`]; the kernel checks permissions (default_permissions),
//! [`usfs_vfs::attrs`] applies the attribute rules (owners of new inodes, umask, what
//! chown, truncate and write take away), the back end keeps the format right. Here: the
//! conversions of FUSE's arguments.

use std::time::{SystemTime, UNIX_EPOCH};
use usfs_fs::{Error, Fallocate, FileType, Timestamp};

/// The file type in a mode's S_IFMT bits.
pub(crate) fn type_of_mode(mode: u32) -> Result<FileType, Error> {
    FileType::from_mode(mode).ok_or(Error::Invalid)
}

/// A FUSE time (or "now") as a timestamp.
pub(crate) fn timestamp(t: Option<fuser::TimeOrNow>) -> Option<Timestamp> {
    t.map(|t| {
        let st = match t {
            fuser::TimeOrNow::SpecificTime(s) => s,
            fuser::TimeOrNow::Now => SystemTime::now(),
        };
        match st.duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp {
                sec: d.as_secs() as i64,
                nsec: d.subsec_nanos(),
            },
            Err(e) => {
                let d = e.duration();
                let (mut sec, mut nsec) = (-(d.as_secs() as i64), d.subsec_nanos());
                if nsec > 0 {
                    sec -= 1;
                    nsec = 1_000_000_000 - nsec;
                }
                Timestamp { sec, nsec }
            }
        }
    })
}

/// fallocate(2)'s mode bits.
pub(crate) fn fallocate_mode(mode: i32) -> Result<Fallocate, Error> {
    let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
    match mode & !libc::FALLOC_FL_KEEP_SIZE {
        0 => Ok(Fallocate::Allocate { keep_size: keep }),
        libc::FALLOC_FL_PUNCH_HOLE if keep => Ok(Fallocate::PunchHole),
        libc::FALLOC_FL_ZERO_RANGE => Ok(Fallocate::ZeroRange { keep_size: keep }),
        _ => Err(Error::Io(std::io::Error::from_raw_os_error(
            libc::EOPNOTSUPP,
        ))),
    }
}
