//! Uncompressed data: FLAT_PLAIN (consecutive blocks), FLAT_INLINE (blocks, then the tail
//! right after the inode and its xattrs) and CHUNK_BASED (a chunk index table).

use super::{Erofs, Inode};
use crate::format::chunk::{ChunkIndex, CHUNK_BLKBITS_MASK, CHUNK_INDEXES, NULL_ADDR};
use crate::format::inode::layout;
use crate::format::round_up;
use usfs_fs::{Error, Result, Structure};

/// Where a run of file bytes lives.
pub(crate) enum FlatRun {
    /// At this image byte, for this many bytes.
    Image(u64, u64),
    /// A hole of this many bytes.
    Hole(u64),
    /// On extra device `id` (1 = the first of the device table), at this byte, for this
    /// many bytes.
    Device(u16, u64, u64),
}

impl Erofs {
    /// Where the bytes of an uncompressed file at `off` (< size) are, and how many follow
    /// contiguously (at most `want`).
    pub(crate) fn flat_run(&self, ino: &Inode, off: u64, want: u64) -> Result<FlatRun> {
        let bs = self.bs();
        let size = ino.size;
        let want = want.min(size - off);
        match ino.layout {
            layout::FLAT_PLAIN | layout::FLAT_INLINE => {
                let tail_start = if ino.layout == layout::FLAT_INLINE {
                    size / bs * bs
                } else {
                    size
                };
                if off >= tail_start {
                    // The tail lives right after the inode and its xattrs, in one block.
                    let at = ino.meta_end();
                    let tail_len = size - tail_start;
                    if at % bs + tail_len > bs {
                        return Err(Error::corrupt(
                            Structure::InlineData,
                            format!("inode {}: inline data crosses a block boundary", ino.nid),
                        )
                        .with_ino(ino.nid)
                        .with_offset(at));
                    }
                    return Ok(FlatRun::Image(at + (off - tail_start), want));
                }
                let start = (u64::from(ino.i_u) << self.blkbits)
                    .checked_add(off)
                    .ok_or_else(|| {
                        Error::corrupt(
                            Structure::ErofsInode,
                            format!("inode {}: block address overflow", ino.nid),
                        )
                        .with_ino(ino.nid)
                    })?;
                Ok(FlatRun::Image(start, want.min(tail_start - off)))
            }
            layout::CHUNK_BASED => self.chunk_run(ino, off, want),
            _ => Err(Error::corrupt(
                Structure::ErofsInode,
                format!("inode {}: not a flat layout", ino.nid),
            )
            .with_ino(ino.nid)),
        }
    }

    fn chunk_run(&self, ino: &Inode, off: u64, want: u64) -> Result<FlatRun> {
        let fmt = (ino.i_u & 0xffff) as u16;
        if fmt & !(CHUNK_BLKBITS_MASK | CHUNK_INDEXES) != 0 {
            return Err(Error::incompatible(format!(
                "chunk format {fmt:#x} of inode {}",
                ino.nid
            )));
        }
        let chunkbits = self.blkbits + u32::from(fmt & CHUNK_BLKBITS_MASK);
        if chunkbits > 48 {
            return Err(Error::corrupt(
                Structure::ErofsInode,
                format!("inode {}: chunk size 2^{chunkbits}", ino.nid),
            )
            .with_ino(ino.nid));
        }
        let chunk = off >> chunkbits;
        let in_chunk = off & ((1 << chunkbits) - 1);
        let len = want.min((1 << chunkbits) - in_chunk);
        let (device, blkaddr) = if fmt & CHUNK_INDEXES != 0 {
            let pos = round_up(ino.meta_end(), 8) + chunk * 8;
            let raw = self.meta_cached(pos, 8)?;
            let ci = ChunkIndex::new(&raw[..]).expect("8 bytes");
            (ci.device_id(), ci.blkaddr())
        } else {
            let pos = round_up(ino.meta_end(), 4) + chunk * 4;
            let raw = self.meta_cached(pos, 4)?;
            (0, u32::from_le_bytes(raw[..].try_into().unwrap()))
        };
        if blkaddr == NULL_ADDR {
            return Ok(FlatRun::Hole(len));
        }
        let at = (u64::from(blkaddr) << self.blkbits) + in_chunk;
        match device {
            0 => Ok(FlatRun::Image(at, len)),
            id => self.device_run(ino, id, at, len),
        }
    }

    /// A chunk's run on extra device `id`: read from the device when it was given, else
    /// from the image file, where the device follows the image (its unified address).
    fn device_run(&self, ino: &Inode, id: u16, at: u64, len: u64) -> Result<FlatRun> {
        let bad = |m: String| {
            Error::corrupt(Structure::ErofsInode, format!("inode {}: {m}", ino.nid))
                .with_ino(ino.nid)
        };
        let d = self.devices.get(usize::from(id) - 1).ok_or_else(|| {
            bad(format!(
                "a chunk on device {id}, but the image has {} extra devices",
                self.devices.len()
            ))
        })?;
        if at
            .checked_add(len)
            .is_none_or(|e| e > d.blocks << self.blkbits)
        {
            return Err(bad(format!(
                "bytes {at}..+{len} of device {id} pass its {} blocks",
                d.blocks
            )));
        }
        if d.dev.is_some() {
            return Ok(FlatRun::Device(id, at, len));
        }
        let flat = (d.uniaddr << self.blkbits) + at;
        if flat + len > self.image_len {
            return Err(Error::incompatible(format!(
                "inode {}: its data is on extra device {id} (the tar of a --tar=i image): \
                 name the device with --device",
                ino.nid
            )));
        }
        Ok(FlatRun::Image(flat, len))
    }

    /// Reads bytes of extra device `id` (given) at `at` into `buf`.
    pub(crate) fn read_device(&self, id: u16, at: u64, buf: &mut [u8]) -> Result<()> {
        let dev = self.devices[usize::from(id) - 1]
            .dev
            .as_deref()
            .expect("a FlatRun::Device names a given device");
        let end = at + buf.len() as u64;
        if end > dev.len() {
            return Err(Error::corrupt(
                Structure::Image,
                format!("extra device {id} ends before byte {end}"),
            )
            .with_offset(at));
        }
        Ok(dev.read_at(buf, at)?)
    }

    /// Reads uncompressed file data.
    pub(crate) fn read_flat(&self, ino: &Inode, off: u64, buf: &mut [u8]) -> Result<usize> {
        let mut done = 0usize;
        while done < buf.len() {
            let pos = off + done as u64;
            match self.flat_run(ino, pos, (buf.len() - done) as u64)? {
                FlatRun::Image(at, len) => {
                    let n = len as usize;
                    self.read_image(at, &mut buf[done..done + n])?;
                    done += n;
                }
                FlatRun::Hole(len) => {
                    let n = len as usize;
                    buf[done..done + n].fill(0);
                    done += n;
                }
                FlatRun::Device(id, at, len) => {
                    let n = len as usize;
                    self.read_device(id, at, &mut buf[done..done + n])?;
                    done += n;
                }
            }
        }
        Ok(done)
    }
}
