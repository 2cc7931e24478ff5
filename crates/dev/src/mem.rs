//! Images held in memory (tests, fuzzing, small scratch images).

use crate::{check_range, Device, IoStats};
use std::io;
use std::sync::RwLock;

/// A device backed by a byte vector.
#[derive(Debug, Default)]
pub struct MemDevice {
    data: RwLock<Vec<u8>>,
    writable: bool,
    stats: IoStats,
}

impl MemDevice {
    /// A device holding `data`; `writable` allows writes.
    pub fn new(data: Vec<u8>, writable: bool) -> Self {
        MemDevice {
            data: RwLock::new(data),
            writable,
            stats: IoStats::default(),
        }
    }

    /// The current contents.
    pub fn into_inner(self) -> Vec<u8> {
        self.data.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl Device for MemDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let d = self.data.read().unwrap_or_else(|e| e.into_inner());
        check_range(offset, buf.len(), d.len() as u64)?;
        buf.copy_from_slice(&d[offset as usize..offset as usize + buf.len()]);
        self.stats.record_read(buf.len());
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "device is read-only",
            ));
        }
        let mut d = self.data.write().unwrap_or_else(|e| e.into_inner());
        check_range(offset, buf.len(), d.len() as u64)?;
        d[offset as usize..offset as usize + buf.len()].copy_from_slice(buf);
        self.stats.record_write(buf.len());
        Ok(())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn len(&self) -> u64 {
        self.data.read().unwrap_or_else(|e| e.into_inner()).len() as u64
    }

    fn stats(&self) -> &IoStats {
        &self.stats
    }
}
