//! Devices: where file-system images live.
//!
//! A [`Device`] is a byte-addressed store with positional reads and writes. Three back ends:
//! [`FileDevice`] (pread/pwrite on an image file or block device) and [`MmapDevice`]
//! (a shared memory mapping of the image, so readers can copy straight out of it) and
//! [`MemDevice`] (a byte vector, for tests and fuzzing).
//! [`Recorder`] wraps any of them and logs every write and flush, so tests can rebuild the
//! image a crash could have left (see [`record`]).
//! Every device counts the bytes and requests it serves ([`IoStats`]), which is how usfs
//! measures I/O amplification.

mod aligned;
mod file;
mod hash;
mod mem;
mod mmap;
mod overlay;
mod pages;
pub mod record;
mod runs;
mod stats;

pub use aligned::{AlignedBuf, ALIGN};
pub use file::FileDevice;
pub use hash::{BlockHasher, BlockMap};
pub use mem::MemDevice;
pub use mmap::MmapDevice;
pub use overlay::Overlay;
pub use pages::Pages;
pub use record::Recorder;
pub use runs::write_runs;
pub use stats::{IoSnapshot, IoStats};

use std::io;
use std::path::Path;

/// A byte-addressed store holding a file-system image.
///
/// Implementations are shared between threads (`&self` everywhere); positional I/O has no
/// cursor, so concurrent readers never race on a file offset.
pub trait Device: Send + Sync {
    /// Fills `buf` from byte `offset`. A read that would pass the end of the device fails
    /// with `UnexpectedEof`: callers ask only for bytes the image claims to have, so a short
    /// device means a truncated image.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Writes all of `buf` at byte `offset`. Read-only devices fail with `PermissionDenied`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Makes written data durable (fdatasync / msync).
    fn flush(&self) -> io::Result<()>;

    /// Size of the device in bytes.
    fn len(&self) -> u64;

    /// True when the device holds no bytes at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The I/O counters of this device.
    fn stats(&self) -> &IoStats;

    /// The whole device as memory, when it is memory-mapped: lets a reader copy file data
    /// without a system call per read (the SplitFS data path). `None` for other devices.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }

    /// Hints that the `len` bytes at `offset` will be read soon, so the operating system can
    /// start reading them now (readahead). Never waits and never fails: a hint the device
    /// cannot use is ignored.
    fn will_need(&self, _offset: u64, _len: u64) {}

    /// Hints that the `len` bytes written at `offset` will be flushed: the operating
    /// system may start writing them back now, so a later [`Device::flush`] waits less.
    /// Never waits for the disk and never fails; devices without write-back ignore it.
    fn start_writeback(&self, _offset: u64, _len: u64) {}

    /// Writes all of `buf` at byte `offset` past the operating system's cache (O_DIRECT)
    /// when the device can and `buf`'s address, `offset` and length are multiples of the
    /// page size (at least [`ALIGN`]); otherwise exactly [`Device::write_at`]. For bulk data nobody reads back
    /// soon: it saves the copy into the page cache and the write-back after it.
    /// [`Device::flush`] still makes it durable. Callers must not write the same pages
    /// through `write_at` at the same time.
    fn write_direct(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write_at(buf, offset)
    }

    /// As [`Device::write_at`] with the bytes in pieces, written one after the other from
    /// `offset` (a writev through the cache): no copy of the pieces into one buffer. The
    /// default writes them one by one.
    fn write_vectored(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let mut at = offset;
        for b in bufs {
            self.write_at(b, at)?;
            at += b.len() as u64;
        }
        Ok(())
    }
}

/// A shared device is a device: one owner can keep a handle (to put blocks into an
/// [`Overlay`], to replay a journal before a reader opens it) while another owns a box.
impl<T: Device + ?Sized> Device for std::sync::Arc<T> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        (**self).read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        (**self).flush()
    }
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn stats(&self) -> &IoStats {
        (**self).stats()
    }
    fn as_slice(&self) -> Option<&[u8]> {
        (**self).as_slice()
    }
    fn will_need(&self, offset: u64, len: u64) {
        (**self).will_need(offset, len)
    }
    fn start_writeback(&self, offset: u64, len: u64) {
        (**self).start_writeback(offset, len)
    }
    fn write_direct(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        (**self).write_direct(buf, offset)
    }
    fn write_vectored(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        (**self).write_vectored(bufs, offset)
    }
}

/// How to open an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OpenMode {
    /// pread/pwrite on the file.
    #[default]
    File,
    /// A shared mapping of the whole file.
    Mmap,
}

/// Opens the image at `path` read-only (`writable == false`) or read-write.
pub fn open(path: &Path, mode: OpenMode, writable: bool) -> io::Result<Box<dyn Device>> {
    Ok(match mode {
        OpenMode::File => Box::new(FileDevice::open(path, writable)?),
        OpenMode::Mmap => Box::new(MmapDevice::open(path, writable)?),
    })
}

/// Checks that `len` bytes at `offset` lie inside a device of `dev_len` bytes.
fn check_range(offset: u64, len: usize, dev_len: u64) -> io::Result<()> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= dev_len => Ok(()),
        _ => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("access of {len} bytes at offset {offset} passes the end of the device ({dev_len} bytes)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_image(bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir();
        let path = dir.join(format!(
            "usfs-dev-test-{}-{}",
            std::process::id(),
            bytes.len()
        ));
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(bytes).unwrap();
        path
    }

    #[test]
    fn file_and_mmap_read_the_same_and_count() {
        let data: Vec<u8> = (0..8192u32).map(|i| (i * 7) as u8).collect();
        let path = temp_image(&data);
        for mode in [OpenMode::File, OpenMode::Mmap] {
            let dev = open(&path, mode, false).unwrap();
            assert_eq!(dev.len(), 8192);
            let mut buf = [0u8; 100];
            dev.read_at(&mut buf, 4000).unwrap();
            assert_eq!(&buf[..], &data[4000..4100]);
            let s = dev.stats().snapshot();
            assert_eq!((s.reads, s.bytes_read), (1, 100));
            assert!(dev.read_at(&mut buf, 8150).is_err());
            assert!(dev.write_at(&buf, 0).is_err());
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn writes_land() {
        let path = temp_image(&[0u8; 4096]);
        for mode in [OpenMode::File, OpenMode::Mmap] {
            let dev = open(&path, mode, true).unwrap();
            dev.write_at(b"usfs", 10).unwrap();
            dev.flush().unwrap();
            let mut buf = [0u8; 4];
            dev.read_at(&mut buf, 10).unwrap();
            assert_eq!(&buf, b"usfs");
            assert_eq!(dev.stats().snapshot().bytes_written, 4);
        }
        std::fs::remove_file(path).unwrap();
    }

    /// Vectored writes land in order: more than one pwritev's worth of pieces, empty and
    /// odd-sized ones, on every device kind; and a direct write of an aligned buffer.
    #[test]
    fn vectored_and_direct_writes_land() {
        let pieces: Vec<Vec<u8>> = (0..1500u32)
            .map(|i| vec![(i % 253) as u8 + 1; 1 + (i as usize * 7) % 3000])
            .collect();
        let mut many: Vec<&[u8]> = pieces.iter().map(|b| &b[..]).collect();
        many.insert(3, b"");
        let mut aligned = AlignedBuf::with_capacity(4 * ALIGN);
        aligned.extend_from_slice(&[0x5a; 4 * ALIGN]);
        let path = temp_image(&vec![0u8; 1600 * ALIGN]);
        for mode in [OpenMode::File, OpenMode::Mmap] {
            let dev = open(&path, mode, true).unwrap();
            dev.write_vectored(&many, 3).unwrap();
            let at = (1500 * ALIGN) as u64;
            dev.write_direct(aligned.as_slice(), at).unwrap();
            dev.flush().unwrap();
            let want: Vec<u8> = many.concat();
            let mut got = vec![0u8; want.len()];
            dev.read_at(&mut got, 3).unwrap();
            assert!(got == want, "vectored pieces differ ({mode:?})");
            let mut got = vec![0u8; 4 * ALIGN];
            dev.read_at(&mut got, at).unwrap();
            assert!(got == aligned.as_slice(), "direct write differs ({mode:?})");
            let end = (1601 * ALIGN) as u64;
            assert!(dev.write_vectored(&many[..1], end).is_err());
        }
        std::fs::remove_file(path).unwrap();
    }
}
