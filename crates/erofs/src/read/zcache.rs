//! A small cache of decompressed extents that readers used only in part, with queued
//! decompression: when several threads need the same extent, one decompresses it and the
//! others wait for that result instead of decompressing it again.
//!
//! Bounded: at most [`MAX_ENTRIES`] extents and [`MAX_BYTES`] bytes (least recently used
//! entries leave first); extents larger than [`MAX_EXTENT`] are never cached.

use std::sync::{Arc, Mutex, OnceLock};
use usfs_fs::Corruption;

/// Most extents kept.
pub(super) const MAX_ENTRIES: usize = 16;
/// Most bytes kept.
pub(super) const MAX_BYTES: usize = 2 << 20;
/// Largest extent worth caching.
pub(super) const MAX_EXTENT: usize = 1 << 20;

/// Identifies a decompressed extent: image byte of its pcluster and decompressed length.
pub(super) type Key = (u64, u64);

/// A decompressed extent, or the damage that stopped it (shared by every waiter).
type Outcome = Result<Arc<[u8]>, Corruption>;

struct Slot {
    data: OnceLock<Outcome>,
}

struct Entry {
    key: Key,
    slot: Arc<Slot>,
    used: u64,
    bytes: usize,
}

#[derive(Default)]
struct Inner {
    entries: Vec<Entry>,
    clock: u64,
}

/// The cache (one per open file system).
#[derive(Default)]
pub(super) struct ZCache {
    inner: Mutex<Inner>,
}

impl ZCache {
    /// An empty cache.
    pub(super) fn new() -> ZCache {
        ZCache::default()
    }

    /// The decompressed extent `key` if it is cached and ready (a reader finishing an
    /// extent it began reading earlier); does not add an entry.
    pub(super) fn peek(&self, key: Key) -> Option<Arc<[u8]>> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.clock += 1;
        let now = g.clock;
        let e = g.entries.iter_mut().find(|e| e.key == key)?;
        e.used = now;
        e.slot.data.get()?.as_ref().ok().cloned()
    }

    /// The decompressed extent `key`, made by `make` if nobody has it yet; concurrent callers
    /// for the same key wait for the first one's result.
    pub(super) fn get(&self, key: Key, make: impl FnOnce() -> Outcome) -> Outcome {
        let slot = {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            g.clock += 1;
            let now = g.clock;
            if let Some(e) = g.entries.iter_mut().find(|e| e.key == key) {
                e.used = now;
                e.slot.clone()
            } else {
                let slot = Arc::new(Slot {
                    data: OnceLock::new(),
                });
                g.entries.push(Entry {
                    key,
                    slot: slot.clone(),
                    used: now,
                    bytes: key.1 as usize,
                });
                evict(&mut g);
                slot
            }
        };
        let out = slot.data.get_or_init(make).clone();
        if out.is_err() {
            let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            g.entries.retain(|e| !Arc::ptr_eq(&e.slot, &slot));
        }
        out
    }
}

/// Drops least recently used entries until the bounds hold (the newest entry stays).
fn evict(g: &mut Inner) {
    loop {
        let bytes: usize = g.entries.iter().map(|e| e.bytes).sum();
        if g.entries.len() <= MAX_ENTRIES && (bytes <= MAX_BYTES || g.entries.len() <= 1) {
            return;
        }
        let oldest = g
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.used)
            .map(|(i, _)| i)
            .expect("non-empty");
        g.entries.swap_remove(oldest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn peek_sees_only_ready_entries() {
        let c = ZCache::new();
        assert!(c.peek((1, 4)).is_none());
        let v = c.get((1, 4), || Ok(Arc::from(vec![7u8; 4]))).unwrap();
        assert_eq!(&c.peek((1, 4)).unwrap()[..], &v[..]);
        assert!(c.peek((2, 4)).is_none());
        // A failed decompression is not cached.
        let bad = || Err(Corruption::new(usfs_fs::Structure::CompressedData, "bad"));
        assert!(c.get((3, 4), bad).is_err());
        assert!(c.peek((3, 4)).is_none());
    }

    #[test]
    fn one_decompression_for_concurrent_readers() {
        let c = ZCache::new();
        let calls = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let v = c
                        .get((4096, 10), || {
                            calls.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            Ok(Arc::from(vec![7u8; 10]))
                        })
                        .unwrap();
                    assert_eq!(&v[..], &[7u8; 10]);
                });
            }
        });
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn bounded() {
        let c = ZCache::new();
        for i in 0..100u64 {
            c.get((i, 300_000), || Ok(Arc::from(vec![0u8; 300_000])))
                .unwrap();
        }
        let g = c.inner.lock().unwrap();
        assert!(g.entries.len() <= MAX_ENTRIES);
        assert!(g.entries.iter().map(|e| e.bytes).sum::<usize>() <= MAX_BYTES);
    }
}
