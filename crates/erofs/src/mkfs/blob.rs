//! `--tar=i`: no file data is written. Each regular file refers to its bytes where they
//! are in the tar, the image's extra device 1, as one chunk (mkfs.erofs 1.9.3's
//! tarerofs_write_chunkes): the chunk size is the file size rounded up to a power of two
//! (at least a block), so one full chunk index names the device and the block.

use super::data::Written;
use super::inode::{Data, Ino};
use super::tree::Tree;
use super::BLOB_BLOCK_SIZE;
use crate::format::chunk::{ChunkIndex, CHUNK_BLKBITS_MASK, CHUNK_INDEXES};
use usfs_fs::{Error, FileType, Result};

/// Gives every non-empty regular file its chunk on device 1; an empty file keeps no
/// data. Fails on a file whose bytes do not lie whole in the tar (a sparse member, or a
/// stream that was spooled).
pub(super) fn map(tree: &Tree<'_>, inos: &mut [Ino]) -> Result<Written> {
    let mut r = tree.reader();
    let mut written = Written::default();
    let blkbits = BLOB_BLOCK_SIZE.trailing_zeros();
    for (i, n) in tree.nodes.iter().enumerate() {
        if n.file_type != FileType::Regular || n.size == 0 {
            continue;
        }
        let at = r.contiguous_at(n.src).ok_or_else(|| {
            Error::incompatible(format!(
                "{}: its data does not lie whole in the tar (a sparse member): --tar=i \
                 cannot refer to it",
                tree.path(i).display()
            ))
        })?;
        if at % u64::from(BLOB_BLOCK_SIZE) != 0 {
            return Err(Error::incompatible(format!(
                "{}: its data is not on a 512-byte boundary of the tar",
                tree.path(i).display()
            )));
        }
        let blkaddr = u32::try_from(at >> blkbits)
            .map_err(|_| Error::incompatible("a tar of 2 TiB or more (48-bit block addresses)"))?;
        let mut ci = ChunkIndex::new([0u8; 8]).expect("8 bytes");
        ci.set_device_id(1);
        ci.set_blkaddr(blkaddr);
        inos[i].data = Data::Chunks {
            format: CHUNK_INDEXES | chunk_bits(n.size, blkbits),
            table: ci.bytes().to_vec(),
        };
        written.plain_files += 1;
    }
    Ok(written)
}

/// The chunk format's size bits for one chunk of `size` bytes: log2 of the size rounded
/// up to a power of two, less the block bits (at least 0, at most the field's largest).
pub(super) fn chunk_bits(size: u64, blkbits: u32) -> u16 {
    let bits = (64 - (size - 1).leading_zeros()).max(blkbits);
    ((bits - blkbits) as u16).min(CHUNK_BLKBITS_MASK)
}

#[cfg(test)]
mod tests {
    use super::chunk_bits;

    #[test]
    fn one_chunk_covers_the_file() {
        // (1.9.3's formats: 0x20 for 1..512 bytes, 0x21 for 513, 0x24 for 5000.)
        assert_eq!(chunk_bits(1, 9), 0);
        assert_eq!(chunk_bits(512, 9), 0);
        assert_eq!(chunk_bits(513, 9), 1);
        assert_eq!(chunk_bits(5000, 9), 4);
        assert_eq!(chunk_bits(1 << 45, 9), 31);
    }
}
