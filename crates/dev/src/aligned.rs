//! Page-aligned byte buffers: what writes that bypass the page cache (O_DIRECT) need.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Alignment of every [`AlignedBuf`]: 4 KiB, which satisfies the direct-I/O alignment of
/// the devices and file systems images live on (512-byte or 4 KiB logical blocks) and is
/// a page on x86-64 (where pages are larger, direct writes need page alignment and fall
/// back to buffered writes otherwise).
pub const ALIGN: usize = 4096;

/// A growable byte buffer of fixed capacity whose storage starts on an [`ALIGN`]
/// boundary.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
}

// SAFETY: the buffer owns its allocation exclusively, like a Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only read, like &Vec<u8>.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// An empty buffer holding up to `cap` bytes (rounded up to [`ALIGN`]).
    pub fn with_capacity(cap: usize) -> AlignedBuf {
        let cap = cap.max(1).div_ceil(ALIGN) * ALIGN;
        let layout = Layout::from_size_align(cap, ALIGN).expect("buffer size fits a layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, len: 0, cap }
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no byte is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the buffer can hold.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Forgets the bytes held.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Grows the buffer by `n` zero bytes and returns them. Panics past the capacity
    /// (a caller bug, like indexing out of bounds).
    pub fn extend_zeroed(&mut self, n: usize) -> &mut [u8] {
        assert!(n <= self.cap - self.len, "aligned buffer overflow");
        let at = self.len;
        // SAFETY: at + n <= cap, inside the allocation.
        unsafe { self.ptr.as_ptr().add(at).write_bytes(0, n) };
        self.len += n;
        &mut self.as_mut_slice()[at..]
    }

    /// Appends `data`. Panics past the capacity.
    pub fn extend_from_slice(&mut self, data: &[u8]) {
        assert!(data.len() <= self.cap - self.len, "aligned buffer overflow");
        // SAFETY: len + data.len() <= cap, inside the allocation, which `data` (borrowed
        // while we hold &mut self) cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.ptr.as_ptr().add(self.len),
                data.len(),
            )
        };
        self.len += data.len();
    }

    /// The bytes held.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the first len bytes are initialised (written by extend_*).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes held, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in with_capacity with this very layout.
        unsafe {
            alloc::dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.cap, ALIGN),
            )
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zero_filled() {
        let mut b = AlignedBuf::with_capacity(10_000);
        assert_eq!(b.capacity(), 12_288);
        assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
        b.extend_from_slice(b"abc");
        b.extend_zeroed(5)[0] = 7;
        assert_eq!(b.as_slice(), b"abc\x07\0\0\0\0");
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.extend_zeroed(2), &[0, 0]);
    }
}
