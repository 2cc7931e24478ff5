//! A block overlay over a device: whole blocks held in memory that reads see in place of
//! the device's bytes.
//!
//! Two users, one mechanism: a read-only open of an ext4 image whose journal needs
//! recovery puts the replayed blocks here (the image file is never touched, yet every
//! reader sees what the kernel sees after mount), and the read-write volume puts the
//! metadata blocks its running transaction changed here until they are committed to the
//! journal and written home (so the reader code, reading through the overlay, always sees
//! the newest state).
//!
//! Writes through [`Device::write_at`] go to the base device and update any overlay block
//! they cover, so the overlay never hides newer bytes.

use crate::{BlockMap, Device, IoStats};
use std::io;
use std::sync::{Arc, RwLock};

/// A device whose blocks may be replaced by in-memory copies.
pub struct Overlay {
    base: Box<dyn Device>,
    block_size: u32,
    blocks: RwLock<BlockMap<Arc<[u8]>>>,
    stats: IoStats,
}

impl Overlay {
    /// An empty overlay of `block_size`-byte blocks (a power of two) over `base`.
    pub fn new(base: Box<dyn Device>, block_size: u32) -> Overlay {
        assert!(
            block_size.is_power_of_two(),
            "block size must be a power of two"
        );
        Overlay {
            base,
            block_size,
            blocks: RwLock::new(BlockMap::default()),
            stats: IoStats::default(),
        }
    }

    /// The device under the overlay.
    pub fn base(&self) -> &dyn Device {
        &*self.base
    }

    /// The block size of the overlay.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Makes block `blk` read as `data` (exactly one block long).
    pub fn put(&self, blk: u64, data: Arc<[u8]>) {
        assert_eq!(
            data.len(),
            self.block_size as usize,
            "overlay blocks are whole blocks"
        );
        self.write_map().insert(blk, data);
    }

    /// The in-memory copy of block `blk`, if any.
    pub fn get(&self, blk: u64) -> Option<Arc<[u8]>> {
        self.read_map().get(&blk).cloned()
    }

    /// Drops the copy of block `blk` (reads go to the device again).
    pub fn remove(&self, blk: u64) -> Option<Arc<[u8]>> {
        self.write_map().remove(&blk)
    }

    /// Brings the copies of held blocks that `buf`, written at `offset`, overlaps up to
    /// date (the device has it already).
    fn update_held(&self, buf: &[u8], offset: u64) {
        let mut map = self.write_map();
        if !map.is_empty() {
            self.split(offset, buf.len(), |blk, in_blk, r| {
                if let Some(d) = map.get_mut(&blk) {
                    let mut copy = d.to_vec();
                    copy[in_blk..in_blk + r.len()].copy_from_slice(&buf[r]);
                    *d = copy.into();
                }
            });
        }
    }

    /// Number of blocks held.
    pub fn held(&self) -> usize {
        self.read_map().len()
    }

    /// Every block held, sorted by block number.
    pub fn snapshot(&self) -> Vec<(u64, Arc<[u8]>)> {
        let mut v: Vec<_> = self
            .read_map()
            .iter()
            .map(|(b, d)| (*b, d.clone()))
            .collect();
        v.sort_unstable_by_key(|(b, _)| *b);
        v
    }

    fn read_map(&self) -> std::sync::RwLockReadGuard<'_, BlockMap<Arc<[u8]>>> {
        self.blocks.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_map(&self) -> std::sync::RwLockWriteGuard<'_, BlockMap<Arc<[u8]>>> {
        self.blocks.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls `f(block, offset in block, range in buf)` for each block `len` bytes at
    /// `offset` touch.
    fn split(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(u64, usize, std::ops::Range<usize>),
    ) {
        let bs = self.block_size as u64;
        let mut done = 0usize;
        while done < len {
            let pos = offset + done as u64;
            let in_blk = (pos % bs) as usize;
            let n = (bs as usize - in_blk).min(len - done);
            f(pos / bs, in_blk, done..done + n);
            done += n;
        }
    }
}

impl Device for Overlay {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.stats.record_read(buf.len());
        let map = self.read_map();
        if map.is_empty() {
            drop(map);
            return self.base.read_at(buf, offset);
        }
        // Runs of device bytes are read in one request each.
        let mut pending: Option<std::ops::Range<usize>> = None;
        let mut result = Ok(());
        self.split(offset, buf.len(), |blk, in_blk, r| {
            if result.is_err() {
                return;
            }
            if let Some(d) = map.get(&blk) {
                if let Some(p) = pending.take() {
                    result = self
                        .base
                        .read_at(&mut buf[p.clone()], offset + p.start as u64);
                }
                buf[r.clone()].copy_from_slice(&d[in_blk..in_blk + r.len()]);
            } else {
                pending = Some(match pending.take() {
                    Some(p) => p.start..r.end,
                    None => r,
                });
            }
        });
        result?;
        if let Some(p) = pending {
            self.base
                .read_at(&mut buf[p.clone()], offset + p.start as u64)?;
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.stats.record_write(buf.len());
        self.base.write_at(buf, offset)?;
        self.update_held(buf, offset);
        Ok(())
    }

    /// As [`Overlay::write_at`], the base written past its cache when it can.
    fn write_direct(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.stats.record_write(buf.len());
        self.base.write_direct(buf, offset)?;
        self.update_held(buf, offset);
        Ok(())
    }

    /// As [`Overlay::write_at`], in pieces.
    fn write_vectored(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.stats.record_write(bufs.iter().map(|b| b.len()).sum());
        self.base.write_vectored(bufs, offset)?;
        let mut at = offset;
        for b in bufs {
            self.update_held(b, at);
            at += b.len() as u64;
        }
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        self.base.flush()
    }

    fn len(&self) -> u64 {
        self.base.len()
    }

    fn stats(&self) -> &IoStats {
        &self.stats
    }

    /// The base's mapping only while no block is held (a held block would be bypassed).
    fn as_slice(&self) -> Option<&[u8]> {
        if self.read_map().is_empty() {
            self.base.as_slice()
        } else {
            None
        }
    }

    fn will_need(&self, offset: u64, len: u64) {
        self.base.will_need(offset, len)
    }

    fn start_writeback(&self, offset: u64, len: u64) {
        self.base.start_writeback(offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemDevice;

    #[test]
    fn held_blocks_read_in_place_and_writes_update_them() {
        let base: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        let ov = Overlay::new(Box::new(MemDevice::new(base.clone(), true)), 1024);
        ov.put(1, vec![0xAA; 1024].into());
        let mut buf = vec![0u8; 3000];
        ov.read_at(&mut buf, 500).unwrap();
        assert_eq!(&buf[..524], &base[500..1024]);
        assert!(buf[524..1548].iter().all(|&b| b == 0xAA));
        assert_eq!(&buf[1548..], &base[2048..3500]);
        ov.write_at(&[1, 2, 3], 1023).unwrap();
        let held = ov.get(1).unwrap();
        assert_eq!(&held[..2], &[2, 3]);
        ov.read_at(&mut buf[..4], 1022).unwrap();
        assert_eq!(&buf[..4], &[base[1022], 1, 2, 3]);
        assert_eq!(ov.remove(1).unwrap()[0], 2);
        ov.read_at(&mut buf[..2], 1024).unwrap();
        assert_eq!(&buf[..2], &[2, 3]);
    }

    #[test]
    fn direct_writes_update_held_blocks_too() {
        let ov = Overlay::new(Box::new(MemDevice::new(vec![0u8; 8192], true)), 1024);
        ov.put(2, vec![0xAA; 1024].into());
        ov.write_direct(&[7u8; 1500], 2500).unwrap();
        let mut buf = vec![0u8; 1024];
        ov.read_at(&mut buf, 2048).unwrap();
        assert!(buf[..452].iter().all(|&b| b == 0xAA));
        assert!(buf[452..].iter().all(|&b| b == 7), "held block not updated");
    }
}
