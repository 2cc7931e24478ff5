//! Images accessed with pread/pwrite.

use crate::{check_range, Device, IoStats, ALIGN};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// An image file (or block device) read and written with positional system calls.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    len: u64,
    writable: bool,
    stats: IoStats,
    /// A second descriptor on the same file opened with O_DIRECT, made on the first
    /// [`Device::write_direct`]; `None` when the file cannot be opened so.
    direct: OnceLock<Option<File>>,
    /// Cleared when a direct write was refused (EINVAL: an alignment the file's file
    /// system does not take): later direct writes go through the page cache.
    direct_ok: AtomicBool,
}

impl FileDevice {
    /// Opens `path`; `writable` asks for read-write access.
    pub fn open(path: &Path, writable: bool) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(writable).open(path)?;
        Self::from_file(file, writable)
    }

    /// A writable regular file that grows as it is written, up to `limit` bytes: its
    /// [`Device::len`] is that limit (how far it may be written), while the file itself is
    /// only as long as what was written (pwrite past the end extends it; the gaps read
    /// as zeros). For outputs whose size is known only at the end (an EROFS image); a
    /// write the file system cannot take fails (EFBIG, ENOSPC).
    pub fn growable(file: File, limit: u64) -> io::Result<Self> {
        let mut d = Self::from_file(file, true)?;
        d.len = d.len.max(limit);
        Ok(d)
    }

    /// Wraps an open file. Block devices report their size through seeking to the end.
    pub fn from_file(file: File, writable: bool) -> io::Result<Self> {
        let len = device_len(&file)?;
        Ok(FileDevice {
            file,
            len,
            writable,
            stats: IoStats::default(),
            direct: OnceLock::new(),
            direct_ok: AtomicBool::new(true),
        })
    }
}

/// Size in bytes of a regular file or a block device.
pub(crate) fn device_len(file: &File) -> io::Result<u64> {
    let meta = file.metadata()?;
    if meta.is_file() {
        return Ok(meta.len());
    }
    use std::io::Seek;
    let mut f = file;
    let len = f.seek(io::SeekFrom::End(0))?;
    f.seek(io::SeekFrom::Start(0))?;
    Ok(len)
}

impl FileDevice {
    /// Fails a write of `len` bytes at `offset` that this device cannot take: it is
    /// read-only, or the range passes its end.
    fn check_write(&self, offset: u64, len: usize) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "device is read-only",
            ));
        }
        check_range(offset, len, self.len)
    }
}

impl Device for FileDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len(), self.len)?;
        self.file.read_exact_at(buf, offset)?;
        self.stats.record_read(buf.len());
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_write(offset, buf.len())?;
        self.file.write_all_at(buf, offset)?;
        self.stats.record_write(buf.len());
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        if self.writable {
            self.file.sync_data()?;
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn will_need(&self, offset: u64, len: u64) {
        let (Ok(off), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: posix_fadvise only takes the descriptor and two integers; a failure is
        // harmless (the hint is dropped).
        unsafe {
            libc::posix_fadvise(self.file.as_raw_fd(), off, len, libc::POSIX_FADV_WILLNEED);
        }
    }

    fn start_writeback(&self, offset: u64, len: u64) {
        let (Ok(off), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: sync_file_range only takes the descriptor and integers; with
        // SYNC_FILE_RANGE_WRITE alone it starts write-back of dirty pages without waiting
        // for it, and a failure only loses the hint (flush still syncs everything).
        unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), off, len, libc::SYNC_FILE_RANGE_WRITE);
        }
    }

    fn stats(&self) -> &IoStats {
        &self.stats
    }

    fn write_vectored(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let total = bufs.iter().map(|b| b.len()).sum();
        self.check_write(offset, total)?;
        pwritev_all(&self.file, bufs, offset)?;
        self.stats.record_write(total);
        Ok(())
    }

    fn write_direct(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_write(offset, buf.len())?;
        // Whole pages only (at least ALIGN): a direct write must never share a page of
        // the file's cache with a buffered write made at the same time.
        let align = page_size().max(ALIGN);
        let aligned = (buf.as_ptr() as usize | buf.len()).is_multiple_of(align)
            && offset.is_multiple_of(align as u64);
        let direct = if aligned && self.direct_ok.load(Ordering::Relaxed) {
            self.direct
                .get_or_init(|| reopen_direct(&self.file))
                .as_ref()
        } else {
            None
        };
        match direct.map(|d| d.write_all_at(buf, offset)) {
            Some(Ok(())) => {}
            // Refused before anything was written (alignment): the page cache takes it.
            Some(Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => {
                self.direct_ok.store(false, Ordering::Relaxed);
                self.file.write_all_at(buf, offset)?;
            }
            Some(Err(e)) => return Err(e),
            None => self.file.write_all_at(buf, offset)?,
        }
        self.stats.record_write(buf.len());
        Ok(())
    }
}

/// Writes all of `bufs`, one after the other, at byte `offset` of `file`: pwritev in
/// batches of at most IOV_MAX pieces, going on after a short write.
fn pwritev_all(file: &File, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
    const IOV_MAX: usize = 1024;
    let mut at = offset;
    // bufs[i][skip..] is the first byte not yet written.
    let (mut i, mut skip) = (0usize, 0usize);
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(IOV_MAX.min(bufs.len()));
    while i < bufs.len() {
        iov.clear();
        iov.extend(bufs[i..].iter().take(IOV_MAX).enumerate().map(|(k, b)| {
            let b = if k == 0 { &b[skip..] } else { b };
            libc::iovec {
                iov_base: b.as_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            }
        }));
        let off = i64::try_from(at).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
        // SAFETY: every iovec points into a slice of `bufs`, borrowed for this call;
        // pwritev only reads them.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), iov.len() as i32, off) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let total: usize = iov.iter().map(|v| v.iov_len).sum();
        if n == 0 && total > 0 {
            return Err(io::Error::from(io::ErrorKind::WriteZero));
        }
        at += n as u64;
        let mut n = n as usize;
        // Step past what was written (whole pieces, then part of one).
        while i < bufs.len() && n >= bufs[i].len() - skip {
            n -= bufs[i].len() - skip;
            i += 1;
            skip = 0;
        }
        skip += n;
    }
    Ok(())
}

/// The memory page size (4096 if unknown).
fn page_size() -> usize {
    // SAFETY: sysconf only reads system configuration.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// A new descriptor on the file behind `file`, opened for writing with O_DIRECT through
/// /proc/self/fd; `None` when that is impossible (no /proc, or a file system without
/// direct I/O).
fn reopen_direct(file: &File) -> Option<File> {
    OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .ok()
}
