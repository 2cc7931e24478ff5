//! The host directory source's system calls (the scanner's OS boundary). A directory is opened once
//! and everything in it is reached relative to its descriptor, so each call walks one
//! path component: entries come from getdents64 (with their types), other entries are
//! stat-ed with fstatat, regular files are opened with openat and then stat-ed, listed
//! for xattrs and read through their descriptor. Sources are opened O_NOATIME where
//! allowed, so reading them leaves their access times alone.

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Open flags every source descriptor gets.
const BASE_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW;

/// Calls `open` with O_NOATIME first; without it when that is refused (EPERM: the
/// caller owns neither the file nor CAP_FOWNER).
fn open_noatime(open: impl Fn(libc::c_int) -> libc::c_int) -> io::Result<OwnedFd> {
    let mut fd = open(libc::O_NOATIME);
    if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
        fd = open(0);
    }
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by open/openat and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `path` as a C string (an error when it holds a NUL byte).
pub(crate) fn path_cstr(path: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// A `struct stat` to be filled in.
fn zeroed_stat() -> libc::stat {
    // SAFETY: struct stat is plain old data; all zeros is a valid value.
    unsafe { std::mem::zeroed() }
}

/// `fstat` of an open descriptor.
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    let mut st = zeroed_stat();
    // SAFETY: fd is open for the duration of the call; st is a writable struct stat.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// A source directory, open for reading its entries and reaching them.
pub(crate) struct Dir {
    fd: OwnedFd,
}

/// One directory entry: its name and its `d_type` (`DT_UNKNOWN` when the file system
/// does not say).
pub(crate) struct DirEnt {
    /// The name (no NUL).
    pub(crate) name: Vec<u8>,
    /// `DT_*`.
    pub(crate) d_type: u8,
}

impl Dir {
    /// Opens the directory at `path` (not following a final symlink).
    pub(crate) fn open(path: &Path) -> io::Result<Dir> {
        let c = path_cstr(path)?;
        let fd = open_noatime(|extra| {
            // SAFETY: c is a valid NUL-terminated path.
            unsafe { libc::open(c.as_ptr(), BASE_FLAGS | libc::O_DIRECTORY | extra) }
        })?;
        Ok(Dir { fd })
    }

    /// The directory's descriptor.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Appends the entries (without `.` and `..`) to `out`, reading with `buf` as the
    /// getdents64 buffer.
    pub(crate) fn entries(&self, buf: &mut [u8], out: &mut Vec<DirEnt>) -> io::Result<()> {
        loop {
            // SAFETY: the descriptor is an open directory; buf is writable for its length.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr(),
                    buf.len(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Ok(());
            }
            parse_dirents(&buf[..n as usize], out)?;
        }
    }

    /// `fstatat` of entry `name`, not following a symlink.
    pub(crate) fn stat_at(&self, name: &CStr) -> io::Result<libc::stat> {
        let mut st = zeroed_stat();
        // SAFETY: valid descriptor and C string; st is a writable struct stat.
        let r = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }

    /// Opens entry `name` for reading, not following a symlink and never blocking (a
    /// fifo that replaced a file opens without waiting for a writer; the caller checks
    /// the type with [`fstat`]).
    pub(crate) fn open_file(&self, name: &CStr) -> io::Result<File> {
        let fd = open_noatime(|extra| {
            // SAFETY: valid descriptor and C string.
            unsafe {
                libc::openat(
                    self.fd.as_raw_fd(),
                    name.as_ptr(),
                    BASE_FLAGS | libc::O_NONBLOCK | extra,
                )
            }
        })?;
        Ok(File::from(fd))
    }

    /// The target of symlink `name`.
    pub(crate) fn read_link(&self, name: &CStr) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; 256];
        loop {
            // SAFETY: valid descriptor and C string; buf is writable for its length.
            let n = unsafe {
                libc::readlinkat(
                    self.fd.as_raw_fd(),
                    name.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let n = n as usize;
            if n < buf.len() {
                buf.truncate(n);
                return Ok(buf);
            }
            if buf.len() >= 1 << 16 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "symlink target longer than 64 KiB",
                ));
            }
            buf.resize(buf.len() * 4, 0);
        }
    }
}

/// Parses a getdents64 buffer: records of `d_ino` (8), `d_off` (8), `d_reclen` (2),
/// `d_type` (1) and a NUL-terminated name.
fn parse_dirents(mut b: &[u8], out: &mut Vec<DirEnt>) -> io::Result<()> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed getdents64 record");
    while !b.is_empty() {
        if b.len() < 19 {
            return Err(bad());
        }
        let reclen = u16::from_ne_bytes([b[16], b[17]]) as usize;
        if reclen < 20 || reclen > b.len() {
            return Err(bad());
        }
        let d_type = b[18];
        let raw = &b[19..reclen];
        let len = raw.iter().position(|&c| c == 0).ok_or_else(bad)?;
        let name = &raw[..len];
        if name != b"." && name != b".." {
            out.push(DirEnt {
                name: name.to_vec(),
                d_type,
            });
        }
        b = &b[reclen..];
    }
    Ok(())
}

/// Data ranges `(start, end)` in bytes of a file with holes, by SEEK_DATA / SEEK_HOLE
/// (the whole file when the file system cannot tell).
pub(crate) fn data_ranges(f: &File, size: u64) -> Vec<(u64, u64)> {
    let fd = f.as_raw_fd();
    let mut out = Vec::new();
    let mut pos: i64 = 0;
    while (pos as u64) < size {
        // SAFETY: fd is an open descriptor owned by `f` for the duration of the call.
        let d = unsafe { libc::lseek(fd, pos, libc::SEEK_DATA) };
        if d < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
                break;
            }
            return vec![(0, size)];
        }
        // SAFETY: as above.
        let h = unsafe { libc::lseek(fd, d, libc::SEEK_HOLE) };
        let h = if h < 0 { size as i64 } else { h };
        out.push((d as u64, (h as u64).min(size)));
        pos = h.max(d + 1);
    }
    out
}

/// Reads `f` from byte `off` until `buf` is full or the file ends (retrying interrupted
/// reads); returns the bytes read.
pub fn read_full(f: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], off + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// How much less CPU priority (nice) scan workers take than the threads consuming the
/// tree.
const SCAN_NICENESS: i32 = 5;

/// Lowers the calling thread's CPU priority by [`SCAN_NICENESS`]. The scan feeds its
/// consumers (mkfs.ext4: placement, one thread, and the copy): when the CPUs are busy,
/// those should run first, or placement falls behind the many scan workers and finishes
/// alone after them (and kept files wait longer for the copy). A failure leaves the
/// priority as it was.
pub(crate) fn lower_priority() {
    // SAFETY: gettid, getpriority and setpriority take integers only; on Linux
    // PRIO_PROCESS with a thread id applies to that thread alone.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let cur = libc::getpriority(libc::PRIO_PROCESS, tid);
        if *libc::__errno_location() == 0 {
            libc::setpriority(libc::PRIO_PROCESS, tid, (cur + SCAN_NICENESS).min(19));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirents_parse_and_reject_bad_records() {
        let mut rec = vec![0u8; 24];
        rec[16..18].copy_from_slice(&24u16.to_ne_bytes());
        rec[18] = libc::DT_REG;
        rec[19..22].copy_from_slice(b"abc");
        let mut dot = vec![0u8; 24];
        dot[16..18].copy_from_slice(&24u16.to_ne_bytes());
        dot[19] = b'.';
        let mut buf = dot.clone();
        buf.extend_from_slice(&rec);
        let mut out = Vec::new();
        parse_dirents(&buf, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].name, b"abc");
        assert_eq!(out[0].d_type, libc::DT_REG);
        // A record length past the buffer, or too small, is refused.
        rec[16..18].copy_from_slice(&200u16.to_ne_bytes());
        assert!(parse_dirents(&rec, &mut Vec::new()).is_err());
        rec[16..18].copy_from_slice(&4u16.to_ne_bytes());
        assert!(parse_dirents(&rec, &mut Vec::new()).is_err());
    }

    #[test]
    fn reads_a_directory_relative_to_its_descriptor() {
        let d = std::env::temp_dir().join(format!("usfs-source-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("f"), b"hello").unwrap();
        std::os::unix::fs::symlink("f", d.join("l")).unwrap();
        let dir = Dir::open(&d).unwrap();
        let mut ents = Vec::new();
        dir.entries(&mut [0u8; 4096], &mut ents).unwrap();
        let mut names: Vec<_> = ents.iter().map(|e| e.name.clone()).collect();
        names.sort();
        assert_eq!(names, [b"f".to_vec(), b"l".to_vec(), b"sub".to_vec()]);
        let f = dir.open_file(c"f").unwrap();
        assert_eq!(fstat(f.as_fd()).unwrap().st_size, 5);
        let mut b = [0u8; 16];
        assert_eq!(read_full(&f, &mut b, 0).unwrap(), 5);
        assert!(dir.open_file(c"l").is_err(), "a symlink is not followed");
        assert_eq!(dir.read_link(c"l").unwrap(), b"f");
        let st = dir.stat_at(c"l").unwrap();
        assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFLNK);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
