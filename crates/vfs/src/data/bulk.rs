//! Large reads of stored data by pread(2) from the image file instead of memcpy from its
//! mapping: off by default, `USFS_BULK_MIN=BYTES` turns it on for reads of that size and
//! more (for experiments). A process's first touch of each mapped page costs a page fault;
//! with the mapping advised MADV_HUGEPAGE a fault maps a whole 2 MiB folio, and then
//! memcpy from the mapping beats pread (measured, warm 256 MiB file, wall time, best of
//! 5: 64 KiB reads 22.8 GB/s memcpy vs 13.9 pread, 1 MiB 17.7 vs 11.2; the kernel
//! mount 20.7 and 20.8). When the image's page cache holds small folios (an image just
//! written by a copy or mkfs) the two are about equal (64 KiB: 9.6 vs 10.4 GB/s; 1 MiB:
//! 6.9 vs 6.5). The descriptor opened here also reads the image's identity for the shared
//! decompressed-data cache ([`super::shared`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

/// Where the image is mapped and how to read it with pread.
pub struct BulkImage {
    path: CString,
    /// Address and length of the image mapping (what `mapped_data` slices point into).
    base: usize,
    len: usize,
    /// Our descriptor of the image with its (st_dev, st_ino), opened on first use.
    fd: Mutex<Option<(i32, u64, u64)>>,
    /// Reads of at least this many bytes use pread (`usize::MAX`: none, the default).
    pub min: usize,
    /// Where this image's shared decompressed-data cache lives and the image's identity
    /// (found on first use).
    shared: std::sync::OnceLock<Option<(super::shared::CacheDir, super::shared::ImageId)>>,
}

/// Descriptors below this are left to the program (shells use 0..9 and 10+).
const FD_FLOOR: i32 = 512;

impl BulkImage {
    /// The image at `path`, mapped at `base..base + len`.
    pub fn new(path: &std::path::Path, base: usize, len: usize) -> Option<BulkImage> {
        Some(BulkImage {
            path: CString::new(path.as_os_str().as_encoded_bytes()).ok()?,
            base,
            len,
            fd: Mutex::new(None),
            min: std::env::var("USFS_BULK_MIN")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(usize::MAX),
            shared: std::sync::OnceLock::new(),
        })
    }

    /// Forgets our descriptor if its number is in `first..=last` (the program closes or
    /// replaces those numbers: the preload library calls this from close, close_range,
    /// dup2 and dup3), so that the next read opens the image anew rather than read
    /// whatever the number names then.
    pub fn forget_in(&self, first: u32, last: u32) {
        let mut g = self.fd.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((fd, _, _)) = *g {
            if (fd as u32) >= first && (fd as u32) <= last {
                *g = None;
            }
        }
    }

    /// The shared cache directory and this image's identity, if the cache is on.
    /// Made outside the once-cell, then offered to it (as [`super::DataPath::shared`]).
    pub fn shared_key(&self) -> Option<&(super::shared::CacheDir, super::shared::ImageId)> {
        if let Some(k) = self.shared.get() {
            return k.as_ref();
        }
        let made = (|| {
            let dir = super::shared::CacheDir::default_for_user()?;
            let path = std::path::Path::new(std::ffi::OsStr::from_bytes(self.path.as_bytes()));
            // SAFETY: the start of the live image mapping `base..base + len`, which
            // the back end keeps for as long as this mount exists.
            let head = unsafe {
                std::slice::from_raw_parts(
                    self.base as *const u8,
                    self.len.min(super::shared::HEAD_HASHED),
                )
            };
            Some((dir, super::shared::ImageId::of(path, head)?))
        })();
        let _ = self.shared.set(made);
        self.shared.get().and_then(Option::as_ref)
    }

    /// Our descriptor, opened on first use (and again after [`forget_in`](Self::forget_in)).
    fn fd(&self) -> Option<i32> {
        let mut g = self.fd.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((fd, _, _)) = *g {
            return Some(fd);
        }
        // SAFETY: openat with a NUL-terminated path; raw system calls, so no libc hook
        // of ours is involved.
        let raw = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                self.path.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        } as i32;
        if raw < 0 {
            return None;
        }
        // Out of the way of the program's low descriptor numbers.
        // SAFETY: fcntl/close on the descriptor just opened.
        let fd =
            unsafe { libc::syscall(libc::SYS_fcntl, raw, libc::F_DUPFD_CLOEXEC, FD_FLOOR) } as i32;
        let fd = if fd >= 0 {
            // SAFETY: as above.
            unsafe { libc::syscall(libc::SYS_close, raw) };
            fd
        } else {
            raw
        };
        let id = fstat_id(fd)?;
        *g = Some((fd, id.0, id.1));
        Some(fd)
    }

    /// Reads the image bytes that `src` (a slice of the mapping) shows into `dst` (of the
    /// same length) with pread; `None` when that is not possible (the caller copies from
    /// the mapping instead).
    pub fn read(&self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        let off = (src.as_ptr() as usize).checked_sub(self.base)?;
        if off + src.len() > self.len || dst.len() != src.len() {
            return None;
        }
        let fd = self.fd()?;
        match crate::sysio::pread_full(fd, dst, off as u64) {
            0 => None,
            n => Some(n),
        }
    }
}

/// (st_dev, st_ino) of a descriptor.
fn fstat_id(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: plain old data; fstat fills it.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat into a local struct.
    let r = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut sb as *mut libc::stat) };
    (r == 0).then_some((sb.st_dev, sb.st_ino))
}
