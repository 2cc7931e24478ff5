//! One block group as the allocator sees it: the block bitmap (the truth, written to
//! disk), the buddy structure built from it on first use, and the free count.

use super::bitset::BitSet;
use super::buddy::Buddy;

/// A loaded block group (block indexes relative to the group's first block).
#[derive(Clone, Debug)]
pub struct Group {
    /// Bit per block of the group, set = in use.
    pub used: BitSet,
    /// Built lazily from `used` by the first search.
    buddy: Option<Buddy>,
    /// Free blocks (always equal to the clear bits of `used`).
    free: u32,
}

impl Group {
    /// A group of `blocks` blocks whose first `head` blocks are in use (superblock
    /// backup and descriptor table copy).
    pub fn new(blocks: u32, head: u32) -> Group {
        let mut used = BitSet::new(blocks);
        used.fill(0, head.min(blocks), true);
        Group::from_bitmap(used)
    }

    /// A group from its bitmap.
    pub fn from_bitmap(used: BitSet) -> Group {
        let free = used.len() - used.count_ones(0, used.len());
        Group {
            used,
            buddy: None,
            free,
        }
    }

    /// Free blocks.
    pub fn free(&self) -> u32 {
        self.free
    }

    /// Blocks in the group.
    pub fn len(&self) -> u32 {
        self.used.len()
    }

    /// True for a group of no blocks.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    fn buddy(&mut self) -> &mut Buddy {
        let used = &self.used;
        self.buddy.get_or_insert_with(|| Buddy::build(used))
    }

    /// Marks `start..start+len` used; every block must be free.
    pub fn take(&mut self, start: u32, len: u32) {
        debug_assert_eq!(
            self.used.count_ones(start, start + len),
            0,
            "double allocation"
        );
        self.used.fill(start, start + len, true);
        self.free -= len;
        if let Some(b) = self.buddy.as_mut() {
            b.mark_used(start, len);
        }
    }

    /// Marks `start..start+len` free; every block must be in use.
    pub fn give(&mut self, start: u32, len: u32) {
        debug_assert_eq!(self.used.count_ones(start, start + len), len, "double free");
        self.used.fill(start, start + len, false);
        self.free += len;
        if let Some(b) = self.buddy.as_mut() {
            b.mark_free(start, len);
        }
    }

    /// Free blocks starting exactly at `at`, at most `max`.
    pub fn free_run_at(&self, at: u32, max: u32) -> u32 {
        if at >= self.len() {
            return 0;
        }
        self.used.run_len(at, false, max)
    }

    /// A free aligned chunk of at least `len` blocks (the smallest order that holds
    /// `len`, first at or after `near`), through the buddy structure. Returns its start.
    pub fn find_buddy(&mut self, len: u32, near: u32) -> Option<u32> {
        if len == 0 || len > self.free {
            return None;
        }
        let order = 32 - (len - 1).leading_zeros();
        let order = if len == 1 { 0 } else { order };
        self.buddy().find_chunk(order, near).map(|(s, _)| s)
    }

    /// First free run of at least `len` blocks at or after `near` whose absolute start
    /// (`base + start`) is a multiple of `align` (the RAID stripe).
    pub fn find_aligned(&self, len: u32, near: u32, base: u64, align: u32) -> Option<u32> {
        let mut i = near;
        while let Some(s) = self.used.find(i, false) {
            let abs = base + s as u64;
            let pad = ((align as u64 - abs % align as u64) % align as u64) as u32;
            let a = s + pad;
            let run = self.used.run_len(s, false, u32::MAX);
            if pad < run && run - pad >= len {
                return Some(a);
            }
            i = s + run;
            if i >= self.len() {
                break;
            }
        }
        None
    }

    /// The first free run of at least `len` blocks starting at or after `near`.
    pub fn first_fit(&self, len: u32, near: u32) -> Option<u32> {
        let mut i = near;
        while let Some(s) = self.used.find(i, false) {
            let run = self.used.run_len(s, false, len);
            if run >= len {
                return Some(s);
            }
            i = s + run;
        }
        None
    }

    /// The longest free run (start, length) at or after `near`, wrapping; the first of
    /// equal length.
    pub fn longest_run(&self, near: u32) -> Option<(u32, u32)> {
        let mut best: Option<(u32, u32)> = None;
        for (from, to) in [(near, self.len()), (0, near)] {
            let mut i = from;
            while let Some(s) = self.used.find(i, false) {
                if s >= to {
                    break;
                }
                let run = self.used.run_len(s, false, to - s);
                if best.is_none_or(|(_, l)| run > l) {
                    best = Some((s, run));
                }
                i = s + run;
            }
        }
        best
    }

    /// Checks the buddy (if built) against the bitmap and the free count.
    pub fn check(&self) -> Result<(), String> {
        let free = self.len() - self.used.count_ones(0, self.len());
        if free != self.free {
            return Err(format!("free count {} but bitmap says {free}", self.free));
        }
        match &self.buddy {
            Some(b) => b.check(&self.used),
            None => Ok(()),
        }
    }
}
