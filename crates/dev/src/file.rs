//! Images accessed with pread/pwrite.

use crate::{check_range, Device, IoStats};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// An image file (or block device) read and written with positional system calls.
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    len: u64,
    writable: bool,
    stats: IoStats,
}

impl FileDevice {
    /// Opens `path`; `writable` asks for read-write access.
    pub fn open(path: &Path, writable: bool) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(writable).open(path)?;
        Self::from_file(file, writable)
    }

    /// Wraps an open file. Block devices report their size through seeking to the end.
    pub fn from_file(file: File, writable: bool) -> io::Result<Self> {
        let len = device_len(&file)?;
        Ok(FileDevice {
            file,
            len,
            writable,
            stats: IoStats::default(),
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

impl Device for FileDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len(), self.len)?;
        self.file.read_exact_at(buf, offset)?;
        self.stats.record_read(buf.len());
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "device is read-only",
            ));
        }
        check_range(offset, buf.len(), self.len)?;
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
        use std::os::fd::AsRawFd;
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
        use std::os::fd::AsRawFd;
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
}
