//! Images accessed through a shared memory mapping.

use crate::file::device_len;
use crate::{check_range, Device, IoStats};
use memmap2::{Mmap, MmapMut, MmapOptions};
use std::fs::OpenOptions;
use std::io;
use std::path::Path;
use std::sync::Mutex;

/// The mapping: read-only, or writable (with the base pointer taken from the mutable
/// mapping once, so writes through `&self` never cast a shared borrow to a mutable one).
enum Map {
    Ro(Mmap),
    Rw(MmapMut, *mut u8),
    Empty,
}

// SAFETY: the raw pointer points into the mapping owned by the same value; all writes
// through it are serialised by `MmapDevice::write_lock`.
unsafe impl Send for Map {}
// SAFETY: see above.
unsafe impl Sync for Map {}

/// An image mapped into memory with `MAP_SHARED`: reads are memcpy, and callers may borrow
/// the whole image as a slice ([`Device::as_slice`]).
///
/// Concurrent writers to overlapping ranges race exactly as they would with pwrite; the
/// file-system layer above decides who writes what.
pub struct MmapDevice {
    map: Map,
    len: u64,
    stats: IoStats,
    /// Serialises writes so that `&self` writers never alias a `&mut` borrow.
    write_lock: Mutex<()>,
}

impl MmapDevice {
    /// Maps `path`; `writable` maps it read-write.
    pub fn open(path: &Path, writable: bool) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(writable).open(path)?;
        let len = device_len(&file)?;
        let map = if len == 0 {
            Map::Empty
        } else if writable {
            // SAFETY: the mapping is shared with the file; other processes changing the
            // image under us can change bytes we read, which the parsers treat as untrusted
            // input anyway (every field is bounds-checked), so no memory-safety issue arises.
            let mut m = unsafe { MmapOptions::new().len(len as usize).map_mut(&file)? };
            let ptr = m.as_mut_ptr();
            Map::Rw(m, ptr)
        } else {
            // SAFETY: as above; a read-only shared mapping.
            Map::Ro(unsafe { MmapOptions::new().len(len as usize).map(&file)? })
        };
        Ok(MmapDevice {
            map,
            len,
            stats: IoStats::default(),
            write_lock: Mutex::new(()),
        })
    }

    fn bytes(&self) -> &[u8] {
        match &self.map {
            Map::Ro(m) => m,
            // SAFETY: `ptr` is the base of the live mapping of `len` bytes.
            Map::Rw(_, ptr) => unsafe { std::slice::from_raw_parts(*ptr, self.len as usize) },
            Map::Empty => &[],
        }
    }
}

impl Device for MmapDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        check_range(offset, buf.len(), self.len)?;
        let start = offset as usize;
        buf.copy_from_slice(&self.bytes()[start..start + buf.len()]);
        self.stats.record_read(buf.len());
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let Map::Rw(_, base) = &self.map else {
            if buf.is_empty() {
                return Ok(());
            }
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "device is read-only",
            ));
        };
        check_range(offset, buf.len(), self.len)?;
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the range is inside the mapping (checked above); the mapping lives as long
        // as `self`; writes are serialised by `write_lock`. Readers holding slices from
        // `as_slice` may observe the bytes change, as with any shared file mapping.
        unsafe {
            let dst = base.add(offset as usize);
            std::ptr::copy_nonoverlapping(buf.as_ptr(), dst, buf.len());
        }
        self.stats.record_write(buf.len());
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        match &self.map {
            Map::Rw(m, _) => m.flush(),
            _ => Ok(()),
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn stats(&self) -> &IoStats {
        &self.stats
    }

    fn as_slice(&self) -> Option<&[u8]> {
        Some(self.bytes())
    }
}
