//! Checkpoints, as jbd2's, with the home writes issued at once: once a transaction's
//! commit block is durable its blocks are written home (no flush of their own) and leave
//! memory; the log is only marked empty (a flush, then the journal superblock) when it
//! has no room for the next transaction and when the volume closes. A crash in between
//! leaves committed transactions in the log, which every opener replays over whatever
//! part of the home writes reached the disk. So a commit costs two flushes, and memory
//! holds the running transaction only, however large the log.
//!
//! The numbers of the blocks logged since the last checkpoint are kept: a later
//! transaction freeing one revokes it, so that replay does not write the logged copy over
//! what the block holds next (file data, once the freeing transaction has committed).

use super::volume::Volume;
use std::collections::BTreeSet;
use usfs_fs::Result;

/// Blocks logged since the last checkpoint (the log may hold copies of them).
pub(crate) type Logged = BTreeSet<u64>;

impl Volume {
    /// After a commit to the journal (its commit block durable): logged blocks the
    /// transaction freed are forgotten (their revoke records are in the log), and its
    /// blocks are written home, unflushed (the next flush, at the latest the
    /// checkpoint's, makes them durable), leaving the overlay; `logged` remembers them.
    pub(crate) fn write_behind(&mut self) -> Result<()> {
        for b in std::mem::take(&mut self.txn.revoked) {
            self.logged.remove(&b);
        }
        self.send_home(false)
    }

    /// Makes the home writes of every committed transaction durable (a flush) and marks
    /// the log empty.
    pub(crate) fn checkpoint(&mut self) -> Result<()> {
        let Some(j) = self.journal.as_mut() else {
            return Ok(());
        };
        if j.used_blocks() == 0 {
            return Ok(());
        }
        let base = self.overlay.base();
        base.flush()?;
        j.checkpointed(base)?;
        self.logged.clear();
        Ok(())
    }
}
