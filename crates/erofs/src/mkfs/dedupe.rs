//! `-E dedupe`: whole-pcluster deduplication. A pcluster (compressed or stored plain) whose
//! blocks are byte-identical to one already written is not written again; its lcluster
//! head points at the earlier copy. Both extents then decode the same bytes to the same
//! output, so no partial-reference flag or new feature bit is needed, but the block
//! addresses are no longer in file order, so such files usually take full indexes.
//!
//! Candidates are found by a hash of the bytes and their length, and every hit is confirmed
//! by reading the earlier copy back from the image and comparing, so a hash collision can
//! only cost a comparison, never a wrong block.

use std::collections::hash_map::{DefaultHasher, Entry};
use std::collections::HashMap;
use std::hash::Hasher;
use std::io;
use usfs_dev::Device;

/// The pclusters written so far, by content.
#[derive(Default)]
pub(super) struct Dedupe {
    /// (hash, length in bytes) -> block addresses of pclusters with that hash.
    seen: HashMap<(u64, u32), Vec<u32>>,
    /// Pclusters that were not written again.
    pub shared_pclusters: u64,
    /// Blocks saved by sharing.
    pub shared_blocks: u64,
}

fn digest(bytes: &[u8]) -> u64 {
    // SipHash with fixed keys: deterministic across runs and worker counts.
    let mut h = DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

impl Dedupe {
    /// The block address of an earlier pcluster equal to `bytes`, if any (confirmed by
    /// reading it back from `image`, `bs`-byte blocks).
    pub(super) fn find(
        &mut self,
        image: &dyn Device,
        bs: u64,
        bytes: &[u8],
    ) -> io::Result<Option<u32>> {
        let key = (digest(bytes), bytes.len() as u32);
        let Some(addrs) = self.seen.get(&key) else {
            return Ok(None);
        };
        let mut old = vec![0u8; bytes.len()];
        for &a in addrs {
            image.read_at(&mut old, u64::from(a) * bs)?;
            if old == bytes {
                self.shared_pclusters += 1;
                self.shared_blocks += bytes.len() as u64 / bs;
                return Ok(Some(a));
            }
        }
        Ok(None)
    }

    /// Remembers that `bytes` were written at block `addr`.
    pub(super) fn insert(&mut self, bytes: &[u8], addr: u32) {
        match self.seen.entry((digest(bytes), bytes.len() as u32)) {
            Entry::Occupied(mut e) => e.get_mut().push(addr),
            Entry::Vacant(e) => {
                e.insert(vec![addr]);
            }
        }
    }
}
