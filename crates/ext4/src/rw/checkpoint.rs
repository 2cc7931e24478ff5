//! Checkpoints, as jbd2's: a committed transaction's blocks are durable in the journal, so
//! they need not go home at once. They stay in the overlay ([`Volume::pinned`] keeps the
//! committed version of each, apart from any newer change of the running transaction) and
//! are written home, flushed, and the log marked empty when the log has no room for the
//! next transaction and when the volume closes. A crash in between leaves committed
//! transactions in the log, which every opener replays.
//!
//! A pinned block freed by a later transaction is dropped when that transaction commits:
//! its revoke record keeps replay off it, and writing it home could overwrite the file
//! data its block holds by then.

use super::volume::Volume;
use std::collections::BTreeMap;
use std::sync::Arc;
use usfs_fs::Result;

/// Committed metadata blocks not yet written home: block -> its committed contents.
pub(crate) type Pinned = BTreeMap<u64, Arc<[u8]>>;

impl Volume {
    /// After a commit to the journal: the transaction's blocks become pinned (their
    /// contents as committed); pinned blocks the transaction freed are dropped.
    pub(crate) fn pin_committed(&mut self) {
        for b in std::mem::take(&mut self.txn.revoked) {
            if self.pinned.remove(&b).is_some() {
                self.overlay.remove(b);
            }
        }
        for b in std::mem::take(&mut self.txn.dirty) {
            if let Some(d) = self.overlay.get(b) {
                self.pinned.insert(b, d);
            }
        }
        self.txn.groups.clear();
    }

    /// Writes every pinned block home as committed, flushes, and marks the log empty.
    /// Blocks the running transaction changed since stay in the overlay (their new
    /// contents are not committed yet); the others leave it.
    pub(crate) fn checkpoint(&mut self) -> Result<()> {
        let Some(j) = self.journal.as_mut() else {
            return Ok(());
        };
        if self.pinned.is_empty() && j.used_blocks() == 0 {
            return Ok(());
        }
        let base = self.overlay.base();
        let bs_log = self.fs.core.geo.block_size_log;
        usfs_dev::write_runs(
            base,
            self.pinned.iter().map(|(&b, d)| (b << bs_log, &d[..])),
        )?;
        base.flush()?;
        j.checkpointed(base)?;
        for (b, d) in std::mem::take(&mut self.pinned) {
            let newer = self
                .overlay
                .get(b)
                .is_some_and(|cur| !Arc::ptr_eq(&cur, &d));
            if !newer && !self.txn.dirty.contains(&b) {
                self.overlay.remove(b);
            }
        }
        Ok(())
    }
}
