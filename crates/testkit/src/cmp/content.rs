//! Byte-exact comparison of two regular files, streamed in chunks; ranges that are holes in
//! both files (SEEK_DATA) are skipped without reading.

use std::fs::File;
use std::io;

use super::entry::Side;
use crate::sys;
use usfs_source::read_full;

/// Chunk size of the streamed comparison.
pub(crate) const CHUNK: usize = 256 * 1024;

/// Where two files first differ.
pub(crate) struct Mismatch {
    pub offset: u64,
    /// The byte in A and in B (`None`: that file ended early).
    pub a: Option<u8>,
    pub b: Option<u8>,
}

/// Reusable buffers for comparing contents.
pub(crate) struct Comparer {
    a: Vec<u8>,
    b: Vec<u8>,
    /// Bytes read from each side and compared.
    pub bytes_compared: u64,
    /// Bytes skipped as holes on both sides.
    pub bytes_skipped: u64,
}

impl Comparer {
    pub(super) fn new() -> Comparer {
        Comparer {
            a: vec![0; CHUNK],
            b: vec![0; CHUNK],
            bytes_compared: 0,
            bytes_skipped: 0,
        }
    }

    /// Compares the first `size` bytes of `fa` and `fb` (both files have that size).
    pub(super) fn compare(
        &mut self,
        fa: &File,
        fb: &File,
        size: u64,
    ) -> Result<Option<Mismatch>, (Side, io::Error)> {
        let mut holes = true;
        let mut pos = 0u64;
        while pos < size {
            if holes {
                match (next_data(fa, pos, size), next_data(fb, pos, size)) {
                    (Some(na), Some(nb)) => {
                        let next = na.min(nb);
                        self.bytes_skipped += next - pos;
                        pos = next;
                        if pos >= size {
                            break;
                        }
                    }
                    _ => holes = false,
                }
            }
            let n = (size - pos).min(CHUNK as u64) as usize;
            let ra = read_full(fa, &mut self.a[..n], pos).map_err(|e| (Side::A, e))?;
            let rb = read_full(fb, &mut self.b[..n], pos).map_err(|e| (Side::B, e))?;
            let common = ra.min(rb);
            if let Some(i) = (0..common).find(|&i| self.a[i] != self.b[i]) {
                let (pa, pb) = (&self.a[..common], &self.b[..common]);
                return Ok(Some(Mismatch {
                    offset: pos + i as u64,
                    a: Some(pa[i]),
                    b: Some(pb[i]),
                }));
            }
            self.bytes_compared += common as u64;
            if ra != rb || ra < n {
                let off = pos + common as u64;
                let a = (ra > common).then(|| self.a[common]);
                let b = (rb > common).then(|| self.b[common]);
                return Ok(Some(Mismatch { offset: off, a, b }));
            }
            pos += n as u64;
        }
        Ok(None)
    }
}

/// The next data offset at or after `pos` (`size` when only a hole remains); `None` when
/// the file system cannot say.
fn next_data(f: &File, pos: u64, size: u64) -> Option<u64> {
    match sys::seek_data(f, pos) {
        Ok(Some(off)) => Some(off.clamp(pos, size)),
        Ok(None) => Some(size),
        Err(_) => None,
    }
}
