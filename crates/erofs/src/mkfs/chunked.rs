//! `--chunksize`: regular files stored uncompressed as chunk-based inodes, as
//! mkfs.erofs 1.9.3's blobchunk stores them. Each file is cut into chunks of the chunk
//! size (the last one short); a chunk byte-identical to one written before shares its
//! blocks (dedupe), an all-zero chunk is a hole; then runs of chunks that lie one after
//! another are merged into larger chunks (erofs_blob_mergechunks: the chunk size becomes
//! the largest power of two that every run's length in blocks is a multiple of), so a
//! file written whole takes one table entry. The table holds 4-byte block addresses.

use super::data::Written;
use super::image::Cfg;
use super::inode::{Data, Ino};
use super::out::{pad_to, Out};
use super::tree::Tree;
use crate::format::chunk::{CHUNK_BLKBITS_MASK, NULL_ADDR};
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::io;
use usfs_fs::{FileType, Result};

/// One chunk of a file: where its blocks start (None: a hole) and its length in bytes.
type Chunk = (Option<u32>, u64);

/// The chunks written so far, by content hash: (first block, length) of each.
#[derive(Default)]
struct Chunks {
    by_hash: HashMap<u64, Vec<(u32, u64)>>,
}

/// Writes every non-empty regular file of `tree` as chunks of `1 << chunkbits` bytes
/// (at least a block) and gives its inode the chunk table.
pub(super) fn write(
    cfg: &Cfg<'_>,
    tree: &Tree<'_>,
    out: &mut Out<'_>,
    inos: &mut [Ino],
    chunkbits: u32,
) -> Result<Written> {
    let blkbits = cfg.bs.trailing_zeros();
    let mut r = tree.reader();
    let mut seen = Chunks::default();
    let mut written = Written::default();
    let mut buf = Vec::new();
    for (i, n) in tree.nodes.iter().enumerate() {
        if n.file_type != FileType::Regular || n.size == 0 {
            continue;
        }
        let bits = chunkbits.min(blkbits + u32::from(CHUNK_BLKBITS_MASK));
        let csize = 1u64 << bits;
        let mut chunks: Vec<Chunk> = Vec::with_capacity(n.size.div_ceil(csize) as usize);
        let mut pos = 0;
        while pos < n.size {
            let len = (n.size - pos).min(csize);
            buf.clear();
            if r.read_vec(n.src, pos, len, &mut buf)? as u64 != len {
                return Err(io::Error::other(format!(
                    "{}: changed size while reading",
                    tree.path(i).display()
                ))
                .into());
            }
            let at = match buf.iter().all(|&b| b == 0) {
                true => None,
                false => Some(seen.put(out, &buf)?),
            };
            chunks.push((at, len));
            pos += len;
        }
        let (bits, table) = table(chunks, bits, n.size, blkbits);
        inos[i].data = Data::Chunks {
            format: (bits - blkbits) as u16,
            table,
        };
        written.plain_files += 1;
    }
    Ok(written)
}

impl Chunks {
    /// The first block of a chunk with the bytes of `chunk`: one written before, or
    /// `chunk` written now at the cursor (padded to whole blocks).
    fn put(&mut self, out: &mut Out<'_>, chunk: &[u8]) -> Result<u32> {
        let h = BuildHasherDefault::<DefaultHasher>::default().hash_one(chunk);
        let len = chunk.len() as u64;
        // (The buffer for reading a candidate back exists only when there is one.)
        let mut old = Vec::new();
        for &(at, l) in self.by_hash.get(&h).into_iter().flatten() {
            if l == len {
                old.resize(chunk.len(), 0);
                out.dev.read_at(&mut old, u64::from(at) * out.bs)?;
                if old == chunk {
                    return Ok(at);
                }
            }
        }
        let at = out.put_blocks(&pad_to(chunk, out.bs))?;
        self.by_hash.entry(h).or_default().push((at, len));
        Ok(at)
    }
}

/// The chunk size bits and table of a file of `size` bytes cut into `chunks` of
/// `1 << bits` bytes: all holes make one hole chunk (as a fully sparse file does in
/// 1.9.3); else runs that lie one after another are merged as far as every run allows.
fn table(chunks: Vec<Chunk>, bits: u32, size: u64, blkbits: u32) -> (u32, Vec<u8>) {
    let max_bits = blkbits + u32::from(CHUNK_BLKBITS_MASK);
    if chunks.iter().all(|c| c.0.is_none()) {
        let whole = blkbits + u32::from(super::blob::chunk_bits(size, blkbits));
        return (whole, NULL_ADDR.to_le_bytes().to_vec());
    }
    let new_bits = (ilog2(min_run_blocks(&chunks, size, blkbits)) + blkbits).min(max_bits);
    let (bits, step) = match new_bits > bits {
        true => (new_bits, 1usize << (new_bits - bits)),
        false => (bits, 1),
    };
    let count = size.div_ceil(1 << bits) as usize;
    let table = (0..count)
        .flat_map(|k| chunks[k * step].0.unwrap_or(NULL_ADDR).to_le_bytes())
        .collect();
    (bits, table)
}

/// The smallest lowest set bit of the lengths in blocks of the runs of chunks that can
/// merge (holes after holes, or blocks right after the previous chunk's bytes), starting
/// from the file's length in blocks (erofs_update_minextblks).
fn min_run_blocks(chunks: &[Chunk], size: u64, blkbits: u32) -> u64 {
    let bs = 1u64 << blkbits;
    let mut min = size.div_ceil(bs);
    let mut update = |start: u64, end: u64| {
        let n = (end - start) >> blkbits;
        let low = n & n.wrapping_neg();
        if low != 0 && low < min {
            min = low;
        }
    };
    let (mut start, mut pos) = (0u64, 0u64);
    let mut last: Option<Chunk> = None;
    for &c in chunks {
        let merges = match (last, c.0) {
            (None, _) => true,
            (Some((None, _)), None) => true,
            (Some((Some(a), l)), Some(b)) => u64::from(a) * bs + l == u64::from(b) * bs,
            _ => false,
        };
        if !merges {
            update(start, pos);
            start = pos;
        }
        last = Some(c);
        pos += c.1;
    }
    update(start, pos);
    min
}

fn ilog2(n: u64) -> u32 {
    63 - n.max(1).leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::table;
    use crate::format::chunk::NULL_ADDR;

    fn addrs(t: &[u8]) -> Vec<u32> {
        t.chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn contiguous_chunks_merge_into_one() {
        // 4 chunks of 4 KiB, one after another from block 10: one 16 KiB chunk.
        let c = (0..4).map(|k| (Some(10 + k), 4096)).collect();
        let (bits, t) = table(c, 12, 16384, 12);
        assert_eq!((bits, addrs(&t)), (14, vec![10]));
    }

    #[test]
    fn a_shared_chunk_breaks_the_run() {
        // Blocks 10, 11, then 5 (shared), then 12: runs of 2, 1, 1 blocks: no merge.
        let c = vec![
            (Some(10), 4096),
            (Some(11), 4096),
            (Some(5), 4096),
            (Some(12), 100),
        ];
        let (bits, t) = table(c, 12, 3 * 4096 + 100, 12);
        assert_eq!((bits, addrs(&t)), (12, vec![10, 11, 5, 12]));
        // Runs of 2 and 2: chunks of 8 KiB.
        let c = vec![
            (Some(10), 4096),
            (Some(11), 4096),
            (None, 4096),
            (None, 4096),
        ];
        let (bits, t) = table(c, 12, 4 * 4096, 12);
        assert_eq!((bits, addrs(&t)), (13, vec![10, NULL_ADDR]));
    }

    #[test]
    fn all_holes_make_one_hole_chunk() {
        let c = vec![(None, 4096), (None, 1000)];
        let (bits, t) = table(c, 12, 5096, 12);
        assert_eq!((bits, addrs(&t)), (13, vec![NULL_ADDR]));
    }
}
