//! Data checks, through the reader's mapping: every run of an uncompressed file lies in
//! the image (chunk indexes included); for a compressed file every lcluster index
//! decodes, the extents tile the file, each pcluster is within erofs-utils' limits and
//! decompresses to exactly its extent's length; plain extents are read, fragments
//! range-checked in the packed inode (whose data is checked on its own).

use super::Report;
use crate::format::chunk::{CHUNK_BLKBITS_MASK, CHUNK_INDEXES};
use crate::format::inode::layout;
use crate::read::{Extent, FlatRun, Inode, Stored};
use crate::Erofs;
use usfs_fs::{Error, Result, Structure};

/// Largest pcluster (`Z_EROFS_PCLUSTER_MAX_SIZE`).
const PCLUSTER_MAX: u64 = 1 << 20;
/// Largest decompressed extent (`Z_EROFS_PCLUSTER_MAX_DSIZE`).
const EXTENT_MAX: u64 = 12 << 20;
/// Bytes read at once from plain and fragment extents.
const PIECE: u64 = 1 << 20;

/// Checks the data of one inode; a problem is recorded and `false` returned.
pub(super) fn check(fs: &Erofs, report: &mut Report, ino: &Inode, path: &str) -> bool {
    let r = if ino.compressed() {
        compressed(fs, report, ino)
    } else {
        flat(fs, report, ino)
    };
    match r {
        Ok(()) => true,
        Err(e) => {
            report.push(path, Some(ino.nid), e);
            false
        }
    }
}

fn corrupt(ino: &Inode, s: Structure, m: String) -> Error {
    Error::corrupt(s, format!("inode {}: {m}", ino.nid)).with_ino(ino.nid)
}

fn flat(fs: &Erofs, report: &mut Report, ino: &Inode) -> Result<()> {
    if ino.layout == layout::CHUNK_BASED {
        chunk_table_fits(fs, ino)?;
    }
    let mut pos = 0;
    while pos < ino.size {
        let len = match fs.flat_run(ino, pos, ino.size - pos)? {
            FlatRun::Image(at, len) => {
                if at.checked_add(len).is_none_or(|e| e > fs.image_len()) {
                    return Err(corrupt(
                        ino,
                        Structure::ErofsInode,
                        format!("file bytes {pos}.. at image byte {at} pass the image end"),
                    ));
                }
                report.bytes += len;
                len
            }
            // (Bounded by the device's size in the device table when it was found.)
            FlatRun::Hole(len) | FlatRun::Device(_, _, len) => len,
        };
        if len == 0 {
            return Err(corrupt(
                ino,
                Structure::ErofsInode,
                format!("empty run at {pos}"),
            ));
        }
        pos += len;
    }
    Ok(())
}

/// The chunk index table of a chunk-based file fits in the image (which also bounds the
/// walk over it).
fn chunk_table_fits(fs: &Erofs, ino: &Inode) -> Result<()> {
    let fmt = (ino.i_u & 0xffff) as u16;
    let bits = fs.superblock().blkszbits() as u32 + u32::from(fmt & CHUNK_BLKBITS_MASK);
    let unit = if fmt & CHUNK_INDEXES != 0 { 8 } else { 4 };
    let chunks = ino.size.checked_shr(bits).unwrap_or(0).saturating_add(1);
    if bits > 48 || chunks.saturating_mul(unit) > fs.image_len() {
        return Err(corrupt(
            ino,
            Structure::ErofsInode,
            format!(
                "{} bytes in chunks of 2^{bits}: the chunk table does not fit",
                ino.size
            ),
        ));
    }
    Ok(())
}

fn compressed(fs: &Erofs, report: &mut Report, ino: &Inode) -> Result<()> {
    let zi = fs.zinfo(ino)?;
    if zi.whole_fragment.is_none() {
        // Compact indexes take at least 2 bytes per lcluster.
        if zi.total > fs.image_len() / 2 {
            return Err(corrupt(
                ino,
                Structure::CompressedIndex,
                format!("{} lclusters cannot fit in the image", zi.total),
            ));
        }
        for lcn in 0..zi.total {
            fs.lcluster(ino, &zi, lcn, false)?;
        }
    }
    let mut buf = Vec::new();
    let mut pos = 0;
    while pos < ino.size {
        let ext = fs.map_extent(ino, &zi, pos)?;
        if ext.llen == 0 || ext.la > pos || ext.la.saturating_add(ext.llen) <= pos {
            return Err(corrupt(
                ino,
                Structure::CompressedIndex,
                format!("extent {}+{} does not hold byte {pos}", ext.la, ext.llen),
            ));
        }
        let end = ext.la.saturating_add(ext.llen).min(ino.size);
        extent(fs, ino, &ext, pos, end, &mut buf)?;
        report.extents += u64::from(matches!(ext.stored, Stored::Compressed { .. }));
        report.bytes += end - pos;
        pos = end;
    }
    Ok(())
}

/// Checks one extent, of which file bytes `pos..end` are still unchecked.
fn extent(
    fs: &Erofs,
    ino: &Inode,
    ext: &Extent,
    pos: u64,
    end: u64,
    buf: &mut Vec<u8>,
) -> Result<()> {
    let plen = match ext.stored {
        Stored::Compressed { plen, .. } | Stored::Plain { plen, .. } => plen,
        Stored::Fragment { .. } => 0,
    };
    if plen > PCLUSTER_MAX || (ext.llen > EXTENT_MAX && plen > 0) {
        return Err(corrupt(
            ino,
            Structure::CompressedIndex,
            format!(
                "extent at {}: pcluster of {plen} bytes for {} bytes (limits {PCLUSTER_MAX} and {EXTENT_MAX})",
                ext.la, ext.llen
            ),
        ));
    }
    match ext.stored {
        Stored::Compressed {
            alg,
            pa,
            plen,
            padded,
        } => {
            buf.resize(ext.llen as usize, 0);
            // Without zero padding the stream's end is unknown: only partial decoding
            // (as the kernel does) is possible.
            if padded && ext.full {
                fs.decode_exact(ino, alg, pa, plen, buf)
            } else {
                fs.extent_bytes(ino, ext, 0, buf)
            }
        }
        Stored::Plain { .. } => {
            let mut p = pos;
            while p < end {
                let n = (end - p).min(PIECE);
                buf.resize(n as usize, 0);
                fs.extent_bytes(ino, ext, (p - ext.la) as usize, buf)?;
                p += n;
            }
            Ok(())
        }
        // The packed inode's data was checked with it: only the range is checked here
        // (its first and last byte are read), so a fragment costs nothing to check
        // whatever its size.
        Stored::Fragment { .. } => {
            buf.resize(1, 0);
            fs.extent_bytes(ino, ext, (pos - ext.la) as usize, buf)?;
            fs.extent_bytes(ino, ext, (end - 1 - ext.la) as usize, buf)
        }
    }
}
