//! Memory for the bytes of kept files: anonymous mappings of [`CHUNK_BYTES`]. First touch
//! is the expensive part (the kernel zeroes the pages, and on a virtual machine the host
//! backs them then), which is why [`super::hold`] recycles chunks instead of mapping new
//! ones.

use std::io;
use std::ptr::NonNull;

/// Size of one chunk: small enough that the partly filled chunks of all scan workers
/// are a small part of the memory budget.
pub const CHUNK_BYTES: usize = 256 << 10;

/// One anonymous private mapping of [`CHUNK_BYTES`], zero-filled, owned.
pub struct Chunk {
    ptr: NonNull<u8>,
}

// SAFETY: a Chunk owns its mapping exclusively (like a Box<[u8]>); shared access only
// hands out shared slices.
unsafe impl Send for Chunk {}
// SAFETY: as above.
unsafe impl Sync for Chunk {}

impl Chunk {
    /// Maps a new zeroed chunk, populated at once (one call instead of a fault per
    /// page).
    pub fn new() -> io::Result<Chunk> {
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing
        // touches no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CHUNK_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Chunk { ptr })
    }

    /// Bytes `off..off + len` (panics past the chunk). The caller must not read a range
    /// another thread is writing through [`Chunk::range_mut`].
    pub fn range(&self, off: usize, len: usize) -> &[u8] {
        assert!(
            off <= CHUNK_BYTES && len <= CHUNK_BYTES - off,
            "chunk range"
        );
        // SAFETY: in bounds of the mapping, which lives as long as self and is
        // initialised (zero-filled by the kernel, then written through range_mut).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) }
    }

    /// Bytes `off..off + len`, writable through a shared chunk (panics past the chunk).
    ///
    /// # Safety
    /// Nobody else may read or write that range while the slice lives: the chunk's
    /// users hand ranges out exclusively ([`super::hold`]).
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range_mut(&self, off: usize, len: usize) -> &mut [u8] {
        assert!(
            off <= CHUNK_BYTES && len <= CHUNK_BYTES - off,
            "chunk range"
        );
        // SAFETY: in bounds; exclusivity is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(off), len) }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by Chunk::new with this length and nothing
        // borrows it any more.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), CHUNK_BYTES) };
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
