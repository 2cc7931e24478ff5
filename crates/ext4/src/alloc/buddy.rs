//! The buddy structure of one block group, built in memory from its block bitmap (as
//! mballoc does at mount): for every order `k`, a bit per aligned chunk of `2^k` blocks
//! that is free *and maximal* (its buddy, the other half of the parent chunk, is not
//! wholly free), and a counter of such chunks per order. It answers "where is a free,
//! aligned run of at least `2^k` blocks" in O(orders) without scanning the bitmap.
//!
//! Invariants (checked by [`Buddy::check`]): every free block lies in exactly one marked
//! chunk; marked chunks are wholly free; no two buddies of the same order are both
//! marked; `counters[k]` is the number of marked chunks of order `k`.

use super::bitset::BitSet;

/// Largest order kept (chunks of 2^16 blocks cover the largest group, 65528 blocks).
pub const MAX_ORDER: u32 = 16;

/// Buddy bitmaps of one group of `n` blocks (block indexes relative to the group).
#[derive(Clone, Debug)]
pub struct Buddy {
    n: u32,
    max_order: u32,
    /// `marks[k]` has `n >> k` bits: chunk `j` of order `k` is a maximal free chunk.
    marks: Vec<BitSet>,
    /// Marked chunks per order.
    counters: Vec<u32>,
}

impl Buddy {
    /// Builds the structure from `used` (a bit per block, set = in use).
    pub fn build(used: &BitSet) -> Buddy {
        let n = used.len();
        let max_order = if n == 0 {
            0
        } else {
            (31 - n.leading_zeros()).min(MAX_ORDER)
        };
        // full[k][j]: chunk j of order k is wholly free.
        let mut full: Vec<BitSet> = Vec::with_capacity(max_order as usize + 1);
        let mut f0 = BitSet::new(n);
        f0.fill(0, n, true);
        let mut i = 0;
        while let Some(u) = used.find(i, true) {
            f0.clear(u);
            i = u + 1;
        }
        full.push(f0);
        for k in 1..=max_order {
            let len = n >> k;
            let prev = &full[k as usize - 1];
            let mut f = BitSet::new(len);
            let mut j = 0;
            while let Some(a) = prev.find(j * 2, true) {
                let jj = a / 2;
                if jj >= len {
                    break;
                }
                if prev.get(jj * 2) && prev.get(jj * 2 + 1) {
                    f.set(jj);
                }
                j = jj + 1;
            }
            full.push(f);
        }
        let mut marks = Vec::with_capacity(full.len());
        let mut counters = vec![0u32; full.len()];
        for k in 0..=max_order as usize {
            let mut m = full[k].clone();
            if k < max_order as usize {
                let parent = &full[k + 1];
                let mut j = 0;
                while let Some(p) = parent.find(j, true) {
                    m.clear(p * 2);
                    m.clear(p * 2 + 1);
                    j = p + 1;
                }
            }
            counters[k] = m.count_ones(0, m.len());
            marks.push(m);
        }
        Buddy {
            n,
            max_order,
            marks,
            counters,
        }
    }

    /// Blocks covered.
    pub fn len(&self) -> u32 {
        self.n
    }

    /// True for a group of no blocks.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The highest order with a marked chunk (the largest aligned free run is at least
    /// `2^order` blocks), or `None` when the group is full.
    pub fn largest_order(&self) -> Option<u32> {
        (0..=self.max_order)
            .rev()
            .find(|&k| self.counters[k as usize] > 0)
    }

    /// Chunks of order `k`.
    pub fn counter(&self, k: u32) -> u32 {
        self.counters.get(k as usize).copied().unwrap_or(0)
    }

    /// The start of a maximal free chunk of order at least `order`, preferring the
    /// smallest such order and, within it, the first chunk at or after block `near`
    /// (wrapping). Returns (start block, chunk order).
    pub fn find_chunk(&self, order: u32, near: u32) -> Option<(u32, u32)> {
        for k in order..=self.max_order {
            if self.counters[k as usize] == 0 {
                continue;
            }
            let m = &self.marks[k as usize];
            let j = m.find(near >> k, true).or_else(|| m.find(0, true))?;
            return Some((j << k, k));
        }
        None
    }

    /// The maximal chunk holding free block `b`: (order, chunk index).
    fn chunk_of(&self, b: u32) -> Option<(u32, u32)> {
        (0..=self.max_order)
            .map(|k| (k, b >> k))
            .find(|&(k, j)| j < self.marks[k as usize].len() && self.marks[k as usize].get(j))
    }

    fn mark(&mut self, k: u32, j: u32) {
        self.marks[k as usize].set(j);
        self.counters[k as usize] += 1;
    }

    fn unmark(&mut self, k: u32, j: u32) {
        self.marks[k as usize].clear(j);
        self.counters[k as usize] -= 1;
    }

    /// Marks the free range `a..b`, lying inside a chunk whose rest is in use, as
    /// maximal chunks (greedy aligned decomposition: no two pieces are buddies).
    fn add_pieces(&mut self, mut a: u32, b: u32) {
        while a < b {
            let mut k = if a == 0 {
                self.max_order
            } else {
                a.trailing_zeros().min(self.max_order)
            };
            while a + (1 << k) > b {
                k -= 1;
            }
            self.mark(k, a >> k);
            a += 1 << k;
        }
    }

    /// Takes the free blocks `start..start+len` (all must be free).
    pub fn mark_used(&mut self, start: u32, len: u32) {
        let end = start + len;
        let mut p = start;
        while p < end {
            let (k, j) = self
                .chunk_of(p)
                .expect("buddy: marking a block used that is not free");
            self.unmark(k, j);
            let cs = j << k;
            let ce = cs + (1 << k);
            self.add_pieces(cs, p);
            if end < ce {
                self.add_pieces(end, ce);
            }
            p = ce.min(end);
        }
    }

    /// Returns the used blocks `start..start+len` (all must be in use) to the free pool,
    /// merging buddies.
    pub fn mark_free(&mut self, start: u32, len: u32) {
        let end = start + len;
        let mut a = start;
        while a < end {
            let mut k = if a == 0 {
                self.max_order
            } else {
                a.trailing_zeros().min(self.max_order)
            };
            while a + (1 << k) > end {
                k -= 1;
            }
            self.free_chunk(k, a >> k);
            a += 1 << k;
        }
    }

    fn free_chunk(&mut self, mut k: u32, mut j: u32) {
        loop {
            let b = j ^ 1;
            if k < self.max_order
                && b < self.marks[k as usize].len()
                && self.marks[k as usize].get(b)
            {
                self.unmark(k, b);
                j >>= 1;
                k += 1;
            } else {
                self.mark(k, j);
                return;
            }
        }
    }

    /// Checks every invariant against `used`; returns a description of the first
    /// violation.
    pub fn check(&self, used: &BitSet) -> Result<(), String> {
        let mut covered = BitSet::new(self.n);
        for k in 0..=self.max_order {
            let m = &self.marks[k as usize];
            if m.count_ones(0, m.len()) != self.counters[k as usize] {
                return Err(format!(
                    "order {k}: counter {} is wrong",
                    self.counters[k as usize]
                ));
            }
            let mut j = 0;
            while let Some(c) = m.find(j, true) {
                let (s, e) = (c << k, (c + 1) << k);
                if used.count_ones(s, e) != 0 {
                    return Err(format!("order {k} chunk {c} holds used blocks"));
                }
                if covered.count_ones(s, e) != 0 {
                    return Err(format!("order {k} chunk {c} overlaps another chunk"));
                }
                covered.fill(s, e, true);
                if k < self.max_order && c & 1 == 0 && (c ^ 1) < m.len() && m.get(c ^ 1) {
                    return Err(format!("order {k}: buddies {c} and {} both marked", c ^ 1));
                }
                j = c + 1;
            }
        }
        for b in 0..self.n {
            if covered.get(b) == used.get(b) {
                return Err(format!(
                    "block {b}: used {} but covered {}",
                    used.get(b),
                    covered.get(b)
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_mark_free_roundtrip() {
        let mut used = BitSet::new(1000);
        used.fill(0, 5, true);
        used.fill(300, 301, true);
        let mut b = Buddy::build(&used);
        b.check(&used).unwrap();
        b.mark_used(10, 100);
        used.fill(10, 110, true);
        b.check(&used).unwrap();
        b.mark_free(10, 100);
        used.fill(10, 110, false);
        b.check(&used).unwrap();
        let fresh = Buddy::build(&used);
        for k in 0..=b.max_order {
            assert_eq!(b.counter(k), fresh.counter(k), "order {k}");
        }
        assert_eq!(b.find_chunk(8, 0), Some((512, 8)));
        assert_eq!(
            b.find_chunk(9, 0),
            None,
            "no wholly free aligned 512-block chunk"
        );
    }
}
