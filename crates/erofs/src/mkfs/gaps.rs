//! Free gaps in the metadata area (left where an inline tail had to start a new block),
//! searched first-fit: the first gap, in the order they were made, that is large enough
//! and where the candidate fits. A max-segment tree over gap sizes finds the next large
//! enough gap in O(log n), so placing every inode of a large tree stays fast.

/// The gaps, in the order they were made.
pub(super) struct Gaps {
    /// (start, end) byte positions; a used-up gap keeps its slot with start == end.
    spans: Vec<(u64, u64)>,
    /// Max-segment tree over the gap sizes: leaves at `cap..2 * cap`.
    tree: Vec<u64>,
    cap: usize,
}

impl Gaps {
    pub(super) fn new() -> Gaps {
        Gaps {
            spans: Vec::new(),
            tree: vec![0; 2],
            cap: 1,
        }
    }

    /// Adds a gap after all others.
    pub(super) fn push(&mut self, start: u64, end: u64) {
        if self.spans.len() == self.cap {
            self.grow();
        }
        self.spans.push((start, end));
        self.set(self.spans.len() - 1, end - start);
    }

    /// Takes `len` bytes from the start of the first gap of at least `len` bytes whose
    /// start satisfies `fits`; returns that start.
    pub(super) fn take_first(&mut self, len: u64, fits: impl Fn(u64) -> bool) -> Option<u64> {
        let mut from = 0;
        while let Some(i) = self.first_at_least(from, len) {
            let (s, e) = self.spans[i];
            if fits(s) {
                let ns = crate::format::round_up(s + len, 32).min(e);
                self.spans[i].0 = ns;
                // Gaps smaller than the smallest inode are of no more use.
                self.set(i, if e - ns >= 32 { e - ns } else { 0 });
                return Some(s);
            }
            from = i + 1;
        }
        None
    }

    fn grow(&mut self) {
        let cap = self.cap * 2;
        let mut tree = vec![0u64; 2 * cap];
        tree[cap..cap + self.spans.len()]
            .copy_from_slice(&self.tree[self.cap..self.cap + self.spans.len()]);
        for k in (1..cap).rev() {
            tree[k] = tree[2 * k].max(tree[2 * k + 1]);
        }
        self.tree = tree;
        self.cap = cap;
    }

    fn set(&mut self, i: usize, size: u64) {
        let mut k = self.cap + i;
        self.tree[k] = size;
        while k > 1 {
            k /= 2;
            self.tree[k] = self.tree[2 * k].max(self.tree[2 * k + 1]);
        }
    }

    /// The first gap at index >= `from` of at least `len` bytes.
    fn first_at_least(&self, from: usize, len: u64) -> Option<usize> {
        self.descend(1, 0, self.cap, from, len)
    }

    fn descend(&self, k: usize, lo: usize, hi: usize, from: usize, len: u64) -> Option<usize> {
        if hi <= from || self.tree[k] < len {
            return None;
        }
        if hi - lo == 1 {
            return (lo < self.spans.len()).then_some(lo);
        }
        let mid = (lo + hi) / 2;
        self.descend(2 * k, lo, mid, from, len)
            .or_else(|| self.descend(2 * k + 1, mid, hi, from, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain first-fit scan the tree must agree with.
    fn naive(spans: &mut Vec<(u64, u64)>, len: u64, fits: impl Fn(u64) -> bool) -> Option<u64> {
        let g = spans.iter_mut().find(|g| g.1 - g.0 >= len && fits(g.0))?;
        let s = g.0;
        g.0 = crate::format::round_up(s + len, 32).min(g.1);
        spans.retain(|g| g.1 - g.0 >= 32);
        Some(s)
    }

    #[test]
    fn agrees_with_a_linear_first_fit() {
        let mut x = 0x1234_5678_9abc_def1_u64;
        let mut rnd = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let (mut g, mut v) = (Gaps::new(), Vec::new());
        let mut pos = 0u64;
        for _ in 0..5000 {
            if rnd(3) == 0 {
                let len = 32 * (1 + rnd(100));
                g.push(pos, pos + len);
                v.push((pos, pos + len));
                pos += len + 32 * rnd(10);
            } else {
                let len = 1 + rnd(3000);
                let keep = rnd(2) * rnd(len + 1);
                let fits = |at: u64| keep == 0 || (at + len - keep) % 4096 + keep <= 4096;
                assert_eq!(g.take_first(len, fits), naive(&mut v, len, fits));
            }
        }
    }
}
