//! A per-file cache of file bytes the back end had to produce (decompressed EROFS data,
//! inline data, holes): small sequential reads of such data then cost one back-end call
//! per chunk, not one per read (random reads use cached chunks but do not load new ones:
//! a whole chunk for one small random read would cost more than it saves). Bounded per open file ([`CHUNKS`] chunks of [`CHUNK`] bytes, least
//! recently used out first) and dropped with the file's [`DataPath`](super::DataPath).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Bytes per chunk (aligned in the file).
pub const CHUNK: usize = 64 << 10;
/// Chunks kept per open file.
pub const CHUNKS: usize = 64;

/// The cache of one file.
#[derive(Default)]
pub struct ChunkCache {
    /// (chunk index, bytes) with the most recently used last.
    lru: Mutex<VecDeque<(u64, Arc<[u8]>)>>,
}

impl ChunkCache {
    /// The bytes of chunk `idx` if cached.
    pub fn cached(&self, idx: u64) -> Option<Arc<[u8]>> {
        let lru = self.lru.lock().unwrap_or_else(|p| p.into_inner());
        lru.iter()
            .rev()
            .find(|(k, _)| *k == idx)
            .map(|(_, d)| Arc::clone(d))
    }

    /// The bytes of chunk `idx`, produced by `load` on a miss (outside the lock, so two
    /// threads may load the same chunk; both results are equal).
    pub fn get<E>(
        &self,
        idx: u64,
        load: impl FnOnce() -> Result<Vec<u8>, E>,
    ) -> Result<Arc<[u8]>, E> {
        {
            let mut lru = self.lru.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = lru.iter().rposition(|(k, _)| *k == idx) {
                let e = lru.remove(i).expect("index from rposition");
                let data = Arc::clone(&e.1);
                lru.push_back(e);
                return Ok(data);
            }
        }
        let data: Arc<[u8]> = load()?.into();
        let mut lru = self.lru.lock().unwrap_or_else(|p| p.into_inner());
        if lru.len() >= CHUNKS {
            lru.pop_front();
        }
        lru.push_back((idx, Arc::clone(&data)));
        Ok(data)
    }
}
