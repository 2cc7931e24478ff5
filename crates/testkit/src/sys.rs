//! Thin wrappers over the system calls std does not offer: device numbers, mknod,
//! utimensat without following links, directory listing and file opening without
//! touching atime, and SEEK_DATA.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A timestamp: seconds since the epoch (negative before 1970) and nanoseconds (0..1e9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespec {
    /// Whole seconds since 1970-01-01T00:00:00Z; negative before it.
    pub sec: i64,
    /// Nanoseconds added to `sec`, in `0..1_000_000_000`.
    pub nsec: u32,
}

impl Timespec {
    /// A timestamp from seconds and nanoseconds (nanoseconds are reduced modulo 1e9).
    pub const fn new(sec: i64, nsec: u32) -> Timespec {
        Timespec {
            sec,
            nsec: nsec % 1_000_000_000,
        }
    }

    /// Nanoseconds since the epoch.
    pub fn as_nanos(self) -> i128 {
        i128::from(self.sec) * 1_000_000_000 + i128::from(self.nsec)
    }
}

/// The Linux (glibc) encoding of a device number from major and minor.
pub fn makedev(major: u32, minor: u32) -> u64 {
    let (ma, mi) = (u64::from(major), u64::from(minor));
    ((ma & 0xffff_f000) << 32) | ((ma & 0xfff) << 8) | ((mi & 0xffff_ff00) << 12) | (mi & 0xff)
}

/// The major number of a device number.
pub fn major(dev: u64) -> u32 {
    (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff)) as u32
}

/// The minor number of a device number.
pub fn minor(dev: u64) -> u32 {
    (((dev >> 12) & 0xffff_ff00) | (dev & 0xff)) as u32
}

/// `path` as a C string; a NUL byte in it is an `InvalidInput` error.
pub fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Creates a special file (`kind` is one of `S_IFCHR`, `S_IFBLK`, `S_IFIFO`, `S_IFSOCK`).
pub fn mknod(path: &Path, kind: u32, perm: u32, rdev: u64) -> io::Result<()> {
    let c = cpath(path)?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    check(unsafe {
        libc::mknod(
            c.as_ptr(),
            (kind | (perm & 0o7777)) as libc::mode_t,
            rdev as libc::dev_t,
        )
    })
}

/// Sets atime and mtime of `path` without following a final symbolic link.
pub fn set_times(path: &Path, atime: Timespec, mtime: Timespec) -> io::Result<()> {
    let c = cpath(path)?;
    let ts = [
        libc::timespec {
            tv_sec: atime.sec as libc::time_t,
            tv_nsec: atime.nsec as _,
        },
        libc::timespec {
            tv_sec: mtime.sec as libc::time_t,
            tv_nsec: mtime.nsec as _,
        },
    ];
    // SAFETY: `c` is NUL-terminated and `ts` is an array of two timespecs, both valid for
    // the duration of the call.
    check(unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
}

/// Opens `path` read-only without following a final symlink, with `O_NOATIME` where the
/// caller may use it (owner or root), so reading does not change the access time.
pub fn open_noatime(path: &Path, extra_flags: i32) -> io::Result<File> {
    let open = |flags: i32| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags | extra_flags | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    };
    match open(libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(0),
        r => r,
    }
}

/// The names in directory `path` (without `.` and `..`), read without updating the
/// directory's access time where permitted. `follow` allows `path` itself to be a
/// symbolic link to a directory.
pub fn read_dir_names(path: &Path, follow: bool) -> io::Result<Vec<Vec<u8>>> {
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    let flags = libc::O_DIRECTORY | nofollow;
    let file = match open_dir(path, flags | libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open_dir(path, flags)?,
        r => r?,
    };
    let fd = OwnedFd::from(file);
    // SAFETY: `fd` is an open directory descriptor; on success fdopendir takes ownership
    // of it (released from `fd` below), on failure `fd` still owns and closes it.
    let dir = unsafe { libc::fdopendir(fd.as_raw_fd()) };
    if dir.is_null() {
        return Err(io::Error::last_os_error());
    }
    let _ = fd.into_raw_fd();
    let guard = DirGuard(dir);
    let mut names = Vec::new();
    loop {
        // SAFETY: errno is thread-local; resetting it lets us tell end-of-directory from an
        // error after readdir returns NULL.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `guard.0` is a valid open DIR stream owned by this function.
        let ent = unsafe { libc::readdir64(guard.0) };
        if ent.is_null() {
            let err = io::Error::last_os_error();
            if err.raw_os_error().unwrap_or(0) != 0 {
                return Err(err);
            }
            break;
        }
        // SAFETY: `ent` points to a dirent valid until the next readdir on this stream;
        // d_name is NUL-terminated. The bytes are copied before the next call.
        let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
        if name != b"." && name != b".." {
            names.push(name.to_vec());
        }
    }
    Ok(names)
}

fn open_dir(path: &Path, flags: i32) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags | libc::O_CLOEXEC)
        .open(path)
}

struct DirGuard(*mut libc::DIR);

impl Drop for DirGuard {
    fn drop(&mut self) {
        // SAFETY: the stream was opened by fdopendir and is closed exactly once, here.
        unsafe { libc::closedir(self.0) };
    }
}

/// The start of the first data at or after `pos` (`SEEK_DATA`): `Ok(None)` when only a
/// hole follows, an error when the file system cannot tell.
pub fn seek_data(file: &File, pos: u64) -> io::Result<Option<u64>> {
    let off = i64::try_from(pos).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain syscall on a descriptor owned by `file`.
    let r = unsafe { libc::lseek64(file.as_raw_fd(), off, libc::SEEK_DATA) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENXIO) {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(r as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_round_trip() {
        for &(ma, mi) in &[
            (0, 0),
            (1, 3),
            (8, 16),
            (255, 255),
            (256, 0),
            (4095, 1_048_575),
            (259, 65536),
        ] {
            let d = makedev(ma, mi);
            assert_eq!((major(d), minor(d)), (ma, mi));
        }
        assert_eq!(makedev(1, 3), 0x103);
    }

    #[test]
    fn timespec_nanos() {
        assert_eq!(Timespec::new(-1, 500_000_000).as_nanos(), -500_000_000);
        assert_eq!(Timespec::new(0, 2_000_000_001).nsec, 1);
    }
}
