//! Reading compressed files. For each extent the request touches:
//! - a request that covers the whole extent decompresses straight into the caller's
//!   buffer: no copy;
//! - a request that ends where the extent ends (a reader moving on) decompresses into a
//!   per-thread scratch buffer and copies the part it wants;
//! - a request that stops inside an extent (the reader will be back for the rest) goes
//!   through the [`ZCache`](super::zcache::ZCache): decompressed once, shared by
//!   concurrent readers, kept for the next piece.

use super::zcache::{self, Key};
use super::zmap::{Extent, Stored};
use super::{Erofs, Inode};
use crate::compress::{alg_label, decompress_exact, decompress_partial};
use std::cell::RefCell;
use std::sync::Arc;
use usfs_fs::{Corruption, Error, Result, Structure};

thread_local! {
    /// Per-thread decompression scratch (its capacity is trimmed after large extents).
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Scratch capacity kept between calls.
const SCRATCH_KEEP: usize = 1 << 20;

impl Erofs {
    /// Reads compressed file data (`buf` does not pass the end of the file).
    pub(crate) fn read_compressed(&self, ino: &Inode, off: u64, buf: &mut [u8]) -> Result<usize> {
        let zi = self.zinfo(ino)?;
        let end = off + buf.len() as u64;
        let mut pos = off;
        while pos < end {
            let ext = self.map_extent(ino, &zi, pos)?;
            if ext.llen == 0 || ext.la > pos || ext.la + ext.llen <= pos {
                return Err(Error::corrupt(
                    Structure::CompressedIndex,
                    format!(
                        "inode {}: extent {}+{} does not hold byte {pos}",
                        ino.nid, ext.la, ext.llen
                    ),
                )
                .with_ino(ino.nid));
            }
            let lo = (pos - ext.la) as usize;
            let hi = ((end - ext.la).min(ext.llen)) as usize;
            let dst = &mut buf[(pos - off) as usize..(pos - off) as usize + (hi - lo)];
            self.extent_bytes(ino, &ext, lo, dst)?;
            pos += (hi - lo) as u64;
        }
        Ok(buf.len())
    }

    /// Fills `dst` with the extent's decompressed bytes from `lo`.
    pub(crate) fn extent_bytes(
        &self,
        ino: &Inode,
        ext: &Extent,
        lo: usize,
        dst: &mut [u8],
    ) -> Result<()> {
        let hi = lo + dst.len();
        match ext.stored {
            Stored::Fragment { off } => self.read_fragment(ino, off + lo as u64, dst),
            Stored::Plain {
                pa,
                plen,
                interlaced,
            } => {
                if ext.llen > plen {
                    return Err(Error::corrupt(
                        Structure::CompressedIndex,
                        format!(
                            "inode {}: plain extent of {} bytes in a {plen}-byte pcluster",
                            ino.nid, ext.llen
                        ),
                    )
                    .with_ino(ino.nid));
                }
                if interlaced {
                    let shift = ext.la % self.bs();
                    for (k, d) in dst.iter_mut().enumerate() {
                        let at = (shift + (lo + k) as u64) % plen;
                        self.read_image(pa + at, std::slice::from_mut(d))?;
                    }
                    Ok(())
                } else {
                    self.read_image(pa + lo as u64, dst)
                }
            }
            Stored::Compressed {
                alg,
                pa,
                plen,
                padded,
            } => {
                self.check_z_extent(ino, ext, alg, plen)?;
                if lo == 0 && (hi as u64 == ext.llen || ext.llen as usize > zcache::MAX_EXTENT) {
                    // In place: the caller's buffer is the output (the whole extent, or a
                    // prefix of one too large to cache).
                    return self.decode(ino, alg, pa, plen, padded, dst);
                }
                let key: Key = (pa, ext.llen);
                if let Some(data) = self.zcache.peek(key) {
                    dst.copy_from_slice(&data[lo..hi]);
                    return Ok(());
                }
                if hi as u64 == ext.llen || ext.llen as usize > zcache::MAX_EXTENT {
                    return SCRATCH.with(|s| {
                        let mut s = s.borrow_mut();
                        s.resize(hi, 0);
                        let r = self.decode(ino, alg, pa, plen, padded, &mut s[..hi]);
                        if r.is_ok() {
                            dst.copy_from_slice(&s[lo..hi]);
                        }
                        if s.capacity() > SCRATCH_KEEP {
                            *s = Vec::new();
                        }
                        r
                    });
                }
                let data = self
                    .zcache
                    .get(key, || {
                        let mut v = vec![0u8; ext.llen as usize];
                        self.decode(ino, alg, pa, plen, padded, &mut v)
                            .map(|()| Arc::from(v))
                            .map_err(|e| cached_failure(e, ino, pa))
                    })
                    .map_err(Error::from)?;
                dst.copy_from_slice(&data[lo..hi]);
                Ok(())
            }
        }
    }

    fn check_z_extent(&self, ino: &Inode, ext: &Extent, alg: u8, plen: u64) -> Result<()> {
        // LZ4 expands at most about 255 times; the others are held to the kernel's
        // largest decompressed extent (12 MiB). Anything more is a corrupt map.
        let max = if alg == 0 {
            plen.saturating_mul(256) + 4096
        } else {
            12 << 20
        };
        if ext.llen > max {
            return Err(Error::corrupt(
                Structure::CompressedIndex,
                format!(
                    "inode {}: extent of {} bytes from a {plen}-byte pcluster",
                    ino.nid, ext.llen
                ),
            )
            .with_ino(ino.nid));
        }
        Ok(())
    }

    /// Decompresses the first `dst.len()` bytes of the pcluster at `pa` (algorithm `alg`).
    fn decode(
        &self,
        ino: &Inode,
        alg: u8,
        pa: u64,
        plen: u64,
        padded: bool,
        dst: &mut [u8],
    ) -> Result<()> {
        let src = self.meta(pa, plen)?;
        let mut s = &src[..];
        if padded {
            let skip = s.iter().position(|&b| b != 0).unwrap_or(s.len());
            s = &s[skip..];
        }
        match decompress_partial(alg, &self.dcfg, s, dst) {
            Some(n) if n == dst.len() => Ok(()),
            Some(n) => Err(Error::corrupt(
                Structure::CompressedData,
                format!(
                    "inode {}: {} pcluster at byte {pa} decompresses to {n} bytes, {} expected",
                    ino.nid,
                    alg_label(alg),
                    dst.len()
                ),
            )
            .with_ino(ino.nid)
            .with_offset(pa)),
            None => Err(Error::corrupt(
                Structure::CompressedData,
                format!(
                    "inode {}: pcluster at byte {pa} is not valid {} data",
                    ino.nid,
                    alg_label(alg)
                ),
            )
            .with_ino(ino.nid)
            .with_offset(pa)),
        }
    }

    /// Decodes the whole pcluster at `pa` (leading zero padding skipped), which must give
    /// exactly `dst.len()` bytes: how fsck.erofs checks an extent that is neither trimmed
    /// nor a partial reference.
    pub(crate) fn decode_exact(
        &self,
        ino: &Inode,
        alg: u8,
        pa: u64,
        plen: u64,
        dst: &mut [u8],
    ) -> Result<()> {
        let src = self.meta(pa, plen)?;
        let skip = src.iter().position(|&b| b != 0).unwrap_or(src.len());
        match decompress_exact(alg, &self.dcfg, &src[skip..], dst) {
            Some(n) if n == dst.len() => Ok(()),
            r => Err(Error::corrupt(
                Structure::CompressedData,
                format!(
                    "inode {}: {} pcluster at byte {pa} does not decode to exactly {} bytes ({})",
                    ino.nid,
                    alg_label(alg),
                    dst.len(),
                    r.map_or("invalid data".into(), |n| format!("{n} bytes"))
                ),
            )
            .with_ino(ino.nid)
            .with_offset(pa)),
        }
    }

    /// Reads bytes of the packed inode (fragments).
    fn read_fragment(&self, ino: &Inode, off: u64, dst: &mut [u8]) -> Result<()> {
        let packed = self.sb.packed_nid();
        if packed == 0 || packed == ino.nid {
            return Err(Error::corrupt(
                Structure::CompressedIndex,
                format!("inode {}: fragment without a packed inode", ino.nid),
            )
            .with_ino(ino.nid));
        }
        let p = self.inode(packed)?;
        if off.checked_add(dst.len() as u64).is_none_or(|e| e > p.size) {
            return Err(Error::corrupt(
                Structure::CompressedIndex,
                format!(
                    "inode {}: fragment at {off} passes the end of the packed inode",
                    ino.nid
                ),
            )
            .with_ino(ino.nid));
        }
        if p.compressed() {
            let zi = self.zinfo(&p)?;
            if zi.whole_fragment.is_some() || zi.fragment_off.is_some() {
                return Err(Error::corrupt(
                    Structure::CompressedIndex,
                    "the packed inode has fragments itself",
                )
                .with_ino(packed));
            }
            self.read_compressed(&p, off, dst)?;
        } else {
            self.read_flat(&p, off, dst)?;
        }
        Ok(())
    }
}

/// A failed decompression as the cache keeps it for every waiter: a corruption as it
/// was found; any other error as damage of the pcluster, with the error's text.
fn cached_failure(e: Error, ino: &Inode, pa: u64) -> Corruption {
    match e {
        Error::Corrupt(c) => *c,
        e => Corruption {
            detail: e.to_string(),
            ino: Some(ino.nid),
            offset: Some(pa),
            ..Corruption::new(Structure::CompressedData, "")
        },
    }
}
