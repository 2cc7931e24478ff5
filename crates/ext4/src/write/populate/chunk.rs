//! Memory for the bytes of kept files: anonymous mappings of [`CHUNK_BYTES`] asked to be
//! backed by transparent huge pages, so filling them costs a page fault per 2 MiB rather
//! than per 4 KiB (and no zeroing pass: fresh pages are zero).

use std::io;
use std::ptr::NonNull;

/// Size of one chunk (a multiple of the 2 MiB huge page).
pub const CHUNK_BYTES: usize = 4 << 20;

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
    /// Maps a new zeroed chunk.
    pub fn new() -> io::Result<Chunk> {
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing
        // touches no existing memory.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CHUNK_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: p is the mapping just made, CHUNK_BYTES long; the advice is only a
        // hint (refused where huge pages are off, which is harmless).
        unsafe { libc::madvise(p, CHUNK_BYTES, libc::MADV_HUGEPAGE) };
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave NULL"))?;
        Ok(Chunk { ptr })
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is CHUNK_BYTES long, readable, zero-initialised by the
        // kernel and lives as long as self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), CHUNK_BYTES) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice, and &mut self makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), CHUNK_BYTES) }
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
        let mut c = Chunk::new().unwrap();
        assert!(c.as_slice().iter().all(|&b| b == 0));
        c.as_mut_slice()[CHUNK_BYTES - 1] = 7;
        assert_eq!(c.as_slice()[CHUNK_BYTES - 1], 7);
    }
}
