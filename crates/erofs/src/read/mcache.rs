//! A small cache of metadata blocks (inodes, map headers, compression indexes): a reader
//! walking one file's indexes reads each of those blocks from the image once, as the
//! kernel's page cache would, instead of the same few bytes again on every request.
//!
//! Bounded: at most [`MAX_BLOCKS`] blocks, least recently used out first. Only small
//! reads inside one block go through it; data is read directly.

use std::sync::{Arc, Mutex};

/// Most blocks kept.
pub(super) const MAX_BLOCKS: usize = 16;

struct Entry {
    /// Block number.
    blk: u64,
    bytes: Arc<[u8]>,
    used: u64,
}

#[derive(Default)]
struct Inner {
    entries: Vec<Entry>,
    clock: u64,
}

/// The cache (one per open file system).
#[derive(Default)]
pub(super) struct MetaCache {
    inner: Mutex<Inner>,
}

impl MetaCache {
    /// The cached block `blk`, if any.
    pub(super) fn get(&self, blk: u64) -> Option<Arc<[u8]>> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.clock += 1;
        let now = g.clock;
        let e = g.entries.iter_mut().find(|e| e.blk == blk)?;
        e.used = now;
        Some(e.bytes.clone())
    }

    /// Keeps block `blk`, dropping the least recently used one when full.
    pub(super) fn insert(&self, blk: u64, bytes: Arc<[u8]>) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.clock += 1;
        let used = g.clock;
        if let Some(e) = g.entries.iter_mut().find(|e| e.blk == blk) {
            e.used = used;
            return;
        }
        if g.entries.len() >= MAX_BLOCKS {
            if let Some(k) = (0..g.entries.len()).min_by_key(|&k| g.entries[k].used) {
                g.entries.swap_remove(k);
            }
        }
        g.entries.push(Entry { blk, bytes, used });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_recent_blocks_within_bound() {
        let c = MetaCache::default();
        for b in 0..MAX_BLOCKS as u64 {
            c.insert(b, Arc::from(vec![b as u8; 4]));
        }
        // Touch block 0 so block 1 is the least recently used.
        assert_eq!(c.get(0).unwrap()[0], 0);
        c.insert(100, Arc::from(vec![7u8; 4]));
        assert!(c.get(1).is_none());
        assert!(c.get(0).is_some());
        assert_eq!(c.get(100).unwrap()[0], 7);
        assert_eq!(c.inner.lock().unwrap().entries.len(), MAX_BLOCKS);
    }
}
