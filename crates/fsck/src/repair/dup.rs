//! Pass 1D's fix: blocks claimed by more than one inode (or by an inode and the file
//! system's metadata) are cloned as e2fsck clones them. The inodes are taken in order;
//! each copies the shared blocks that someone else still claims to new blocks of its own
//! and gives up its claim on them, so that the last claimant keeps the originals (and
//! metadata, which is never moved, always keeps them). An inode whose blocks are no
//! longer shared by the time its turn comes is left alone ("already reassigned or
//! cloned").

use crate::problem::Problem;
use std::collections::HashMap;
use usfs_ext4::rw::Volume;
use usfs_fs::{Error, Result};

/// The claims on each multiply-claimed block not yet given up, over one round.
pub(super) struct Dups {
    /// Block -> claims left (each inode's claims, plus one for metadata).
    left: HashMap<u64, u32>,
}

impl Dups {
    /// The claims the round's multiply-claimed problems list.
    pub(super) fn of(problems: &[Problem]) -> Dups {
        let mut left = HashMap::new();
        for c in problems.iter().filter_map(|p| p.claims()) {
            for &b in c.blocks.iter().chain(&c.metadata) {
                *left.entry(b).or_insert(0) += 1;
            }
        }
        Dups { left }
    }

    /// Gives up one claim on `b` if another claimant remains: the caller copies it.
    fn take(&mut self, b: u64) -> bool {
        match self.left.get_mut(&b) {
            Some(n) if *n > 1 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// Blocks a clone of `c`'s inode copies: each shared block another claimant still
    /// holds.
    fn copies(&self, c: &crate::problem::Claims) -> u64 {
        let mut left = self.left.clone();
        let mut n = 0u64;
        for b in &c.blocks {
            if let Some(k) = left.get_mut(b).filter(|k| **k > 1) {
                *k -= 1;
                n += 1;
            }
        }
        n
    }

    /// Clones the shared blocks of `p`'s inode, if `p` lists any; deletes the inode (all
    /// but the shared blocks freed) when the file system has no room for the copies.
    pub(super) fn apply(&mut self, v: &mut Volume, p: &Problem) -> Result<()> {
        let Some(c) = p.claims() else {
            return Ok(());
        };
        let ino = p.ino().ok_or(Error::Invalid)?;
        let shared = |b: &u64| self.left.get(b).is_some_and(|&n| n > 1);
        let in_map = c
            .blocks
            .iter()
            .filter(|&&b| Some(b) != c.xattr_block)
            .any(shared);
        if in_map && !v.rebuild_fits(ino, self.copies(c))? {
            // e2fsck: "Couldn't clone file: Could not allocate block", "Delete file? yes".
            return v.delete_sharing(ino, &mut |b| self.take(b));
        }
        if in_map {
            v.rebuild_map(ino, &mut |b| self.take(b))?;
        }
        if let Some(x) = c.xattr_block {
            if self.take(x) {
                v.clone_xattr_block(ino)?;
            }
        }
        Ok(())
    }
}
