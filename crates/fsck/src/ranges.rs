//! Sets of block ranges, for marking metadata block by block (as libext2fs's
//! sub-cluster bitmaps do) without a bitmap of the whole file system.

/// Disjoint block ranges, start to end (exclusive), adjacent ones joined.
#[derive(Default)]
pub(crate) struct Ranges(std::collections::BTreeMap<u64, u64>);

impl Ranges {
    /// Does any block of `b..b + n` lie in a range?
    pub(crate) fn overlaps(&self, b: u64, n: u64) -> bool {
        self.0
            .range(..b + n)
            .next_back()
            .is_some_and(|(_, &end)| end > b)
    }

    /// Adds `b..b + n`, which overlaps no range.
    pub(crate) fn insert(&mut self, b: u64, n: u64) {
        let mut start = b;
        let mut end = b + n;
        if let Some((&s, &e)) = self.0.range(..b).next_back() {
            if e == b {
                start = s;
            }
        }
        if let Some(e) = self.0.remove(&end) {
            end = e;
        }
        self.0.insert(start, end);
    }
}

#[cfg(test)]
mod tests {
    use super::Ranges;

    #[test]
    fn ranges_join_and_find_overlaps() {
        let mut r = Ranges::default();
        r.insert(10, 5);
        r.insert(15, 1);
        r.insert(3, 1);
        assert_eq!(r.0.len(), 2, "15 joined 10..15");
        assert!(r.overlaps(15, 1) && r.overlaps(0, 4) && r.overlaps(14, 10));
        assert!(!r.overlaps(4, 6) && !r.overlaps(16, 100) && !r.overlaps(0, 3));
    }
}
