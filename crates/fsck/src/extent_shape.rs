//! e2fsck's pass 1E decision (extents.c, e2fsck_should_rebuild_extents): an extent tree
//! whose levels hold fewer entries than they could is rebuilt compactly. Pass 1 counts,
//! per level (0: the root in the inode), the entries its nodes hold and the entries they
//! could hold (a node below the root that is not full counted one short: splitting when
//! appending leaves the old node one entry free, which is no reason to rebuild). A level
//! with more than a block's worth of free entries could be narrower; a level whose
//! entries would fit in a level above could be shorter; a tree deeper than e2fsck keeps
//! statistics for is collapsed. Not a fix by e2fsck's count (exit status), not done when
//! preening, not an error for -n.

use crate::ctx::Worker;
use crate::problem::{Code, Problem};

/// Levels e2fsck keeps statistics for (MAX_EXTENT_DEPTH_COUNT).
const LEVELS: usize = 5;
/// Size of an extent header and of an entry.
const ENTRY: u32 = 12;

/// Entries held and entries possible, per level of one extent tree.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Shape {
    /// (entries, capacity) per level.
    levels: [(u32, u32); LEVELS],
    /// The tree's depth (the root's eh_depth).
    depth: u16,
}

impl Shape {
    /// Counts a node at `level` holding `entries` of `max`.
    pub(crate) fn node(&mut self, level: usize, depth: u16, entries: u16, max: u16) {
        if level == 0 {
            self.depth = depth;
        }
        let Some(l) = self.levels.get_mut(level) else {
            return;
        };
        l.0 += entries as u32;
        l.1 += max as u32;
        if level > 0 && entries < max {
            l.1 -= 1;
        }
    }

    /// What e2fsck would say of the tree: (the level, could be shorter), or None.
    fn verdict(&self, block_size: u32) -> Option<(usize, bool)> {
        let per_block = (block_size - ENTRY) / ENTRY;
        if self.depth as usize > LEVELS - 1 {
            return Some((self.depth as usize, true));
        }
        let levels = &self.levels[..=self.depth as usize];
        for (i, &(num, max)) in levels.iter().enumerate() {
            if max.saturating_sub(num) > per_block {
                return Some((i, false));
            }
            if levels[..i].iter().any(|&(_, above)| num < above) {
                return Some((i, true));
            }
        }
        None
    }
}

/// Reports inode `ino`'s extent tree of shape `s` if e2fsck would rebuild it.
pub(crate) fn check(w: &mut Worker, ino: u32, s: &Shape, block_size: u32) {
    if let Some((level, shorter)) = s.verdict(block_size) {
        let what = if shorter { "shorter" } else { "narrower" };
        w.report(
            Problem::new(
                Code::ExtentOptimize,
                format!("{ino} extent tree (at level {level}) could be {what}"),
            )
            .with_ino(ino)
            .with_found(Some(level as u64)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_trees_are_left_and_sparse_ones_rebuilt() {
        // Four extents in the root: as compact as it gets.
        let mut s = Shape::default();
        s.node(0, 0, 4, 4);
        assert_eq!(s.verdict(4096), None);
        // One leaf holding 3 extents under a root of one index: they fit in the root.
        let mut s = Shape::default();
        s.node(0, 1, 1, 4);
        s.node(1, 0, 3, 340);
        assert_eq!(s.verdict(4096), Some((1, true)));
        // Two leaves, 300 and 200 extents: neither shorter nor narrower.
        let mut s = Shape::default();
        s.node(0, 1, 2, 4);
        s.node(1, 0, 300, 340);
        s.node(1, 0, 200, 340);
        assert_eq!(s.verdict(4096), None);
        // Three leaves of 10: 1017 - 30 free, more than a block's worth.
        let mut s = Shape::default();
        s.node(0, 1, 3, 4);
        for _ in 0..3 {
            s.node(1, 0, 10, 340);
        }
        assert_eq!(s.verdict(4096), Some((1, false)));
    }
}
