//! Memory for the bytes of kept files: anonymous mappings of [`CHUNK_BYTES`]. First touch
//! is the expensive part (the kernel zeroes the pages, and on a virtual machine the host
//! backs them then), which is why [`crate::hold`] recycles chunks instead of mapping new
//! ones.

use std::io;
use usfs_dev::Pages;

/// Size of one chunk: small enough that the partly filled chunks of all scan workers
/// are a small part of the memory budget.
pub(crate) const CHUNK_BYTES: usize = 256 << 10;

/// One zero-filled chunk of [`CHUNK_BYTES`], owned.
pub(crate) struct Chunk {
    pages: Pages,
}

impl Chunk {
    /// Maps a new zeroed chunk, populated at once (one call instead of a fault per
    /// page).
    pub(crate) fn new() -> io::Result<Chunk> {
        Ok(Chunk {
            pages: Pages::new(CHUNK_BYTES, true)?,
        })
    }

    /// Bytes `off..off + len` (panics past the chunk). The caller must not read a range
    /// another thread is writing through [`Chunk::range_mut`].
    pub(crate) fn range(&self, off: usize, len: usize) -> &[u8] {
        self.pages.range(off, len)
    }

    /// Bytes `off..off + len`, writable through a shared chunk (panics past the chunk).
    ///
    /// # Safety
    /// Nobody else may read or write that range while the slice lives: the chunk's
    /// users hand ranges out exclusively ([`crate::hold`]).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn range_mut(&self, off: usize, len: usize) -> &mut [u8] {
        // SAFETY: exclusivity is the caller's promise, passed on.
        unsafe { self.pages.range_mut(off, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_zeroed_and_writable() {
        let c = Chunk::new().unwrap();
        assert!(c.range(0, CHUNK_BYTES).iter().all(|&b| b == 0));
        // SAFETY: nothing else uses the chunk.
        unsafe { c.range_mut(CHUNK_BYTES - 1, 1)[0] = 7 };
        assert_eq!(c.range(CHUNK_BYTES - 1, 1), [7]);
    }
}
