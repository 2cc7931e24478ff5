//! Entries naming each inode, counted by pass 2 for pass 4: four bits per inode in
//! [`crate::state::Shared`] (0 to 14, or 15 and more), and, per worker, the references
//! counted past a full nibble. Nearly every inode is named by fewer than 15 entries, so the
//! counts cost half a byte per inode; e2fsck's icount keeps the same split (a bit for the
//! common count, a list for the rest).

/// Compacting starts at this many listed references.
const COMPACT_MIN: usize = 4096;

/// References one worker counted for inodes whose nibble was full: (inode, count), kept
/// compact (sorted, one pair per inode) whenever the list doubles, so it grows with the
/// inodes named 15 times or more, not with their entries.
#[derive(Default)]
pub(crate) struct ManyRefs {
    /// (inode, references), compacted up to `compacted`, one pair per reference after it.
    pairs: Vec<(u32, u32)>,
    /// Pairs at the last compaction.
    compacted: usize,
}

impl ManyRefs {
    /// Counts one more reference to `ino`.
    pub(crate) fn add(&mut self, ino: u32) {
        self.pairs.push((ino, 1));
        if self.pairs.len() >= (2 * self.compacted).max(COMPACT_MIN) {
            self.compact();
        }
    }

    /// Moves `other`'s counts into this list.
    pub(crate) fn absorb(&mut self, other: &mut ManyRefs) {
        self.pairs.append(&mut other.pairs);
        other.compacted = 0;
        self.compact();
    }

    /// The counts, sorted by inode, one pair per inode.
    pub(crate) fn into_sorted(mut self) -> Vec<(u32, u32)> {
        self.compact();
        self.pairs
    }

    /// Sorts the pairs and sums those of the same inode.
    fn compact(&mut self) {
        self.pairs.sort_unstable_by_key(|p| p.0);
        self.pairs.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 = kept.1.saturating_add(later.1);
            }
            same
        });
        self.pairs.shrink_to(2 * self.pairs.len());
        self.compacted = self.pairs.len();
    }
}

/// The sorted lists of [`ManyRefs::into_sorted`], looked up in ascending order of inode.
pub(crate) struct ManyRefsCursor<'a>(std::iter::Peekable<std::slice::Iter<'a, (u32, u32)>>);

impl<'a> ManyRefsCursor<'a> {
    /// A cursor at the start of `sorted`.
    pub(crate) fn new(sorted: &'a [(u32, u32)]) -> Self {
        ManyRefsCursor(sorted.iter().peekable())
    }

    /// The references listed for `ino` (0 if none); asked in ascending order of `ino`.
    pub(crate) fn of(&mut self, ino: u32) -> u32 {
        while self.0.next_if(|p| p.0 < ino).is_some() {}
        self.0.peek().filter(|p| p.0 == ino).map_or(0, |p| p.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_survive_compaction_and_merging() {
        let mut a = ManyRefs::default();
        let mut b = ManyRefs::default();
        for k in 0..20_000u32 {
            a.add(k % 7 + 100);
            b.add(k % 3 + 105);
        }
        assert!(a.pairs.len() < COMPACT_MIN, "compacted as it grew");
        a.absorb(&mut b);
        let sorted = a.into_sorted();
        let mut c = ManyRefsCursor::new(&sorted);
        assert_eq!(c.of(99), 0);
        // 20000 = 7 * 2857 + 1: inode 100 got one more; 20000 = 3 * 6666 + 2.
        assert_eq!(c.of(100), 2858);
        assert_eq!(c.of(104), 2857);
        assert_eq!(c.of(105), 2857 + 6667);
        assert_eq!(c.of(106), 2857 + 6667);
        assert_eq!(c.of(107), 6666);
        assert_eq!(c.of(200), 0);
    }
}
