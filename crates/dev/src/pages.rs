//! Zero-filled anonymous memory of whole pages, owned: buffers that start page-aligned
//! (what direct writes need) and cost nothing until touched. First touch is the
//! expensive part (the kernel zeroes each page, and on a virtual machine the host backs
//! it then): [`Pages::new`] with `populate` pays it in one call instead of a fault per
//! page; without it, pages never touched are never paid for.

use crate::ALIGN;
use std::io;
use std::ptr::NonNull;

/// One anonymous private mapping, zero-filled, owned (like a `Box<[u8]>`).
pub struct Pages {
    ptr: NonNull<u8>,
    /// Length of the mapping: a whole number of [`ALIGN`] units.
    len: usize,
}

// SAFETY: Pages owns its mapping exclusively (like a Box<[u8]>); shared access only
// hands out shared slices (or exclusive ones under `range_mut`'s contract).
unsafe impl Send for Pages {}
// SAFETY: as above.
unsafe impl Sync for Pages {}

impl Pages {
    /// Maps `len` bytes (rounded up to [`ALIGN`], at least one unit) of zeros; with
    /// `populate` every page is backed at once.
    pub fn new(len: usize, populate: bool) -> io::Result<Pages> {
        let len = len.max(1).div_ceil(ALIGN) * ALIGN;
        let flags =
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | if populate { libc::MAP_POPULATE } else { 0 };
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing
        // touches no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Pages { ptr, len })
    }

    /// Length in bytes (a multiple of [`ALIGN`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true (a mapping holds at least one unit); for symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// All the bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping lives as long as self, is initialised (zero-filled by the
        // kernel, then written through the methods below) and `len` long.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// All the bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice; &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Bytes `off..off + len` (panics past the end). The caller must not read a range
    /// another thread is writing through [`Pages::range_mut`].
    pub fn range(&self, off: usize, len: usize) -> &[u8] {
        assert!(off <= self.len && len <= self.len - off, "pages range");
        &self.as_slice()[off..off + len]
    }

    /// Bytes `off..off + len`, writable through a shared reference (panics past the end).
    ///
    /// # Safety
    /// Nobody else may read or write that range while the slice lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range_mut(&self, off: usize, len: usize) -> &mut [u8] {
        assert!(off <= self.len && len <= self.len - off, "pages range");
        // SAFETY: in bounds; exclusivity is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len) }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by Pages::new with this length and nothing
        // borrows it any more.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_aligned_and_writable() {
        for populate in [false, true] {
            let mut p = Pages::new(10_000, populate).unwrap();
            assert_eq!(p.len(), 12_288);
            assert_eq!(p.as_slice().as_ptr() as usize % ALIGN, 0);
            assert!(p.as_slice().iter().all(|&b| b == 0));
            p.as_mut_slice()[12_287] = 7;
            // SAFETY: nothing else uses the mapping.
            unsafe { p.range_mut(0, 1)[0] = 3 };
            assert_eq!(p.range(12_287, 1), [7]);
            assert_eq!(p.as_slice()[0], 3);
        }
    }
}
