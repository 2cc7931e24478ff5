//! Applying an undo file to its image, as `e2undo FILE IMAGE` does: the header must pass
//! its checksum and the superblock copy must be the image's as the changes left it, every key block and
//! saved block must pass its checksum (all are checked before anything is written), then
//! the saved blocks are written back.

use super::format::{keys_per_block, Header, Key, KEY_BLOCK_MAGIC};
use crate::format::checksum::crc32c_raw;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use usfs_dev::Device;

/// What an undo file put back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Keys (runs of blocks) applied.
    pub keys: u64,
    /// Bytes written back.
    pub bytes: u64,
}

/// Puts back the blocks saved in the undo file at `path` onto `image`. Refuses an
/// unfinished undo file unless `force`, and one whose superblock copy is not the image's.
pub fn apply(path: &Path, image: &dyn Device, force: bool) -> Result<Applied, String> {
    let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let read = |buf: &mut [u8], at: u64| {
        file.read_exact_at(buf, at)
            .map_err(|e| format!("{}: reading at {at}: {e}", path.display()))
    };
    let mut hb = vec![0u8; 512];
    read(&mut hb, 0)?;
    let h = Header::parse(&hb)?;
    if !h.finished && !force {
        return Err("the undo file is not finished (the program writing it stopped); use -f to apply what it holds".into());
    }
    let bs = h.block_size as u64;
    if !(1024..=1 << 20).contains(&bs) || h.fs_block_size == 0 {
        return Err(format!("undo file: block size {bs} out of range"));
    }
    let mut sb = vec![0u8; 1024];
    image
        .read_at(&mut sb, 1024)
        .map_err(|e| format!("image superblock: {e}"))?;
    // As e2undo: the saved superblock (magic inverted) must be the image's, byte for
    // byte, and pass the header's checksum.
    let mut copy = vec![0u8; 1024];
    read(&mut copy, h.super_offset * bs)?;
    let magic = u16::from_le_bytes([copy[0x38], copy[0x39]]);
    copy[0x38..0x3A].copy_from_slice(&(!magic).to_le_bytes());
    if (copy != sb || crc32c_raw(!0, &copy) != h.sb_crc) && !force {
        return Err("the image's superblock is not the one the undo file was made for (another image, or changed since)".into());
    }
    let runs = keys(&read, &h)?;
    let mut data = Vec::with_capacity(runs.len());
    for (k, at) in &runs {
        let mut b = vec![0u8; k.size as usize];
        read(&mut b, at * bs)?;
        if crc32c_raw(!0, &b) != k.crc {
            return Err(format!(
                "undo file: saved bytes of block {} fail their checksum",
                k.fsblk
            ));
        }
        data.push(b);
    }
    let fbs = h.fs_block_size as u64;
    let mut bytes = 0;
    for ((k, _), b) in runs.iter().zip(&data) {
        image
            .write_at(b, k.fsblk * fbs)
            .map_err(|e| format!("writing block {}: {e}", k.fsblk))?;
        bytes += b.len() as u64;
    }
    image.flush().map_err(|e| format!("flush: {e}"))?;
    Ok(Applied {
        keys: runs.len() as u64,
        bytes,
    })
}

/// Reads the undo file's bytes at an offset.
type ReadAt<'a> = dyn Fn(&mut [u8], u64) -> Result<(), String> + 'a;

/// Every key of the file with the undo-file block its data starts at, key blocks checked.
fn keys(read: &ReadAt<'_>, h: &Header) -> Result<Vec<(Key, u64)>, String> {
    let bs = h.block_size as u64;
    let per = keys_per_block(bs);
    let mut out = Vec::new();
    let mut blk = h.key_offset;
    let mut kb = vec![0u8; bs as usize];
    while (out.len() as u64) < h.num_keys {
        read(&mut kb, blk * bs)?;
        let magic = u32::from_le_bytes(kb[..4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(kb[4..8].try_into().expect("4 bytes"));
        kb[4..8].fill(0);
        if magic != KEY_BLOCK_MAGIC || crc32c_raw(!0, &kb) != crc {
            return Err(format!("undo file: key block {blk} is damaged"));
        }
        blk += 1;
        let mut in_block = 0;
        for i in 0..per {
            let k = Key::get(&kb[16 + i * 16..32 + i * 16]);
            if k.size == 0 || out.len() as u64 == h.num_keys {
                break;
            }
            out.push((k, blk));
            blk += (k.size as u64).div_ceil(bs);
            in_block += 1;
        }
        if in_block == 0 {
            return Err(format!("undo file: key block {} holds no keys", blk - 1));
        }
    }
    Ok(out)
}
