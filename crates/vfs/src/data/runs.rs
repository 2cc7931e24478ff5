//! A per-file map from file ranges to where their bytes lie in the memory-mapped image
//! (or to "not stored in the mapping": holes, inline or compressed data), filled lazily
//! from `FileSystem::mapped_data` / `next_data` and shared by every open-file description
//! of the file. A read that hits it is a binary search and a memcpy: no inode load, no
//! checksum, no extent-tree walk (SplitFS keeps the same per-file map of mmap'd extents).
//!
//! The image is read-only, so an entry never goes stale while the back end (and with it
//! the mapping the addresses point into) lives; the [`DataPath`](super::DataPath) that owns the
//! map keeps the back end alive.
//!
//! Bounded: at most [`MAX_RUNS`] entries per file; when full the map starts over (a file
//! that fragmented is still read correctly, just with more lookups).
//!
//! Never waits: a lookup that finds the map locked by a writer is a miss, and a run that
//! cannot be recorded at once is not recorded (the caller asks the back end). So a
//! thread never blocks behind another here, and a child forked while some thread held
//! the lock (which would then never be released in the child) still reads.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{RwLock, TryLockError};

/// Entries kept per file before the map starts over.
pub const MAX_RUNS: usize = 4096;

/// File bytes `start..start + len`: at address `addr` in the image mapping, or not in the
/// mapping at all when `addr` is 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Run {
    /// First file byte.
    pub start: u64,
    /// Bytes covered (0 = an empty, unused run).
    pub len: u64,
    /// Address of the first byte in the image mapping; 0 = not stored in the mapping.
    pub addr: usize,
    /// Not in the mapping because it is a hole (reads as zeros, nothing to cache).
    pub hole: bool,
}

impl Run {
    /// True when `pos` lies in the run.
    #[inline]
    pub fn contains(&self, pos: u64) -> bool {
        pos >= self.start && pos - self.start < self.len
    }

    /// True when the bytes are in the image mapping.
    #[inline]
    pub fn mapped(&self) -> bool {
        self.addr != 0
    }

    fn end(&self) -> u64 {
        self.start + self.len
    }

    /// The address of file byte `pos` (which may be one past the end) if this run maps it.
    fn addr_of(&self, pos: u64) -> usize {
        self.addr + (pos - self.start) as usize
    }

    /// True when `other` overlaps or touches this run and both say the same thing about
    /// the bytes they share (same address arithmetic, or both unmapped): they merge.
    fn agrees(&self, other: &Run) -> bool {
        if other.start > self.end() || self.start > other.end() {
            return false;
        }
        match (self.mapped(), other.mapped()) {
            (false, false) => self.hole == other.hole,
            (true, true) => {
                let (lo, hi) = if self.start <= other.start {
                    (self, other)
                } else {
                    (other, self)
                };
                lo.addr_of(hi.start) == hi.addr
            }
            _ => false,
        }
    }
}

/// The map of one file: disjoint runs sorted by `start`.
#[derive(Default)]
pub struct RunMap {
    runs: RwLock<Vec<Run>>,
}

impl RunMap {
    /// The run holding file byte `pos`, if known.
    pub fn find(&self, pos: u64) -> Option<Run> {
        let runs = match self.runs.try_read() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let i = runs.partition_point(|r| r.start <= pos);
        let r = *runs.get(i.checked_sub(1)?)?;
        r.contains(pos).then_some(r)
    }

    /// Records `run` (merged with the runs it overlaps or touches when they agree;
    /// replacing them otherwise). Returns the run now holding `run.start` (`run` itself
    /// when the map is busy and it was not recorded).
    pub fn insert(&self, run: Run) -> Run {
        if run.len == 0 {
            return run;
        }
        let mut runs = match self.runs.try_write() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return run,
        };
        if runs.len() >= MAX_RUNS {
            runs.clear();
        }
        // Walk the runs that overlap or touch `run`, from the first whose end reaches it.
        let mut i = runs.partition_point(|r| r.end() < run.start);
        let mut merged = run;
        while i < runs.len() && runs[i].start <= merged.end() {
            let r = runs[i];
            if merged.agrees(&r) {
                let start = merged.start.min(r.start);
                let end = merged.end().max(r.end());
                let addr = match (merged.mapped(), merged.start <= r.start) {
                    (false, _) => 0,
                    (true, true) => merged.addr,
                    (true, false) => r.addr,
                };
                merged = Run {
                    start,
                    len: end - start,
                    addr,
                    hole: merged.hole,
                };
            } else if r.end() == merged.start || r.start == merged.end() {
                // A neighbour of another kind: kept as it is.
                i += 1;
                continue;
            }
            // Merged, or overlapping and disagreeing (the image changed under us: the new
            // answer wins): either way the old entry goes.
            runs.remove(i);
        }
        let at = runs.partition_point(|r| r.start < merged.start);
        runs.insert(at, merged);
        merged
    }

    /// How many runs are recorded.
    pub fn len(&self) -> usize {
        self.runs.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, len: u64, addr: usize) -> Run {
        Run {
            start,
            len,
            addr,
            hole: false,
        }
    }

    #[test]
    fn run_cells_are_never_read_half_written() {
        // Writers store runs whose fields all derive from one number; readers, running
        // until both writers are done, must see whole runs (or nothing), never fields of
        // two different ones.
        let cell = RunCell::default();
        assert_eq!(cell.get(), None);
        let whole = |r: &Run| {
            r.len == r.start + 1 && r.addr == (r.start as usize) * 2 && r.hole == (r.start % 2 == 1)
        };
        let run = |v: u64| Run {
            start: v,
            len: v + 1,
            addr: v as usize * 2,
            hole: v % 2 == 1,
        };
        cell.set(run(1000));
        let writing = std::sync::atomic::AtomicUsize::new(2);
        std::thread::scope(|s| {
            for w in 0..2u64 {
                let (cell, writing) = (&cell, &writing);
                s.spawn(move || {
                    for k in 0..200_000u64 {
                        cell.set(run(k * 2 + w));
                    }
                    writing.fetch_sub(1, Ordering::Release);
                });
            }
            for _ in 0..2 {
                let (cell, writing) = (&cell, &writing);
                s.spawn(move || {
                    let mut seen = 0u64;
                    loop {
                        let last = writing.load(Ordering::Acquire) == 0;
                        if let Some(r) = cell.get() {
                            assert!(whole(&r), "torn run {r:?}");
                            seen += 1;
                        }
                        if last {
                            break;
                        }
                    }
                    // After the writers, a whole run is there to read.
                    assert!(seen > 0);
                });
            }
        });
        let last = cell.get().expect("a run is held");
        assert!(whole(&last));
    }

    #[test]
    fn finds_what_was_inserted_and_nothing_else() {
        let map = RunMap::default();
        assert_eq!(map.find(0), None);
        map.insert(m(100, 50, 0x1000));
        map.insert(m(300, 10, 0));
        assert_eq!(map.find(99), None);
        assert_eq!(map.find(100), Some(m(100, 50, 0x1000)));
        assert_eq!(map.find(149), Some(m(100, 50, 0x1000)));
        assert_eq!(map.find(150), None);
        assert_eq!(map.find(305), Some(m(300, 10, 0)));
        assert_eq!(map.find(310), None);
        assert_eq!(map.len(), 2);
    }

    #[test]
    fn overlapping_agreeing_runs_merge() {
        let map = RunMap::default();
        map.insert(m(100, 50, 0x1000));
        // Same extent seen from a later offset, reaching further.
        let r = map.insert(m(120, 100, 0x1000 + 20));
        assert_eq!(r, m(100, 120, 0x1000));
        // Touching from below with contiguous addresses.
        let r = map.insert(m(40, 60, 0x1000 - 60));
        assert_eq!(r, m(40, 180, 0x1000 - 60));
        assert_eq!(map.len(), 1);
        assert_eq!(map.find(219), Some(m(40, 180, 0x1000 - 60)));
    }

    #[test]
    fn touching_runs_of_other_kinds_stay_apart() {
        let map = RunMap::default();
        map.insert(m(0, 100, 0x1000));
        map.insert(m(200, 100, 0x9000));
        // A hole between them, touching both.
        map.insert(m(100, 100, 0));
        assert_eq!(map.len(), 3);
        assert_eq!(map.find(99), Some(m(0, 100, 0x1000)));
        assert_eq!(map.find(100), Some(m(100, 100, 0)));
        assert_eq!(map.find(199), Some(m(100, 100, 0)));
        assert_eq!(map.find(200), Some(m(200, 100, 0x9000)));
        // Touching but discontiguous addresses: two runs.
        map.insert(m(300, 10, 0x20000));
        assert_eq!(map.len(), 4);
        assert_eq!(map.find(305), Some(m(300, 10, 0x20000)));
        assert_eq!(map.find(299), Some(m(200, 100, 0x9000)));
    }

    #[test]
    fn disagreeing_overlap_replaces() {
        let map = RunMap::default();
        map.insert(m(0, 100, 0x1000));
        map.insert(m(50, 100, 0x5000));
        assert_eq!(map.find(60), Some(m(50, 100, 0x5000)));
        assert_eq!(map.find(10), None);
        assert_eq!(map.len(), 1);
    }

    #[test]
    fn stays_bounded() {
        let map = RunMap::default();
        for i in 0..(MAX_RUNS as u64 * 3) {
            map.insert(m(i * 10, 5, 0x1000 + i as usize * 100));
        }
        assert!(map.len() <= MAX_RUNS);
        let last = MAX_RUNS as u64 * 3 - 1;
        assert_eq!(
            map.find(last * 10 + 1),
            Some(m(last * 10, 5, 0x1000 + last as usize * 100))
        );
    }

    #[test]
    fn many_disjoint_runs_in_any_order_are_all_found() {
        let map = RunMap::default();
        let n = 500u64;
        // Insert in a scrambled order.
        for k in 0..n {
            let i = (k * 7919) % n;
            map.insert(m(i * 10, 4, 0x10000 + i as usize * 1000));
        }
        assert_eq!(map.len(), n as usize);
        for i in 0..n {
            assert_eq!(
                map.find(i * 10 + 3),
                Some(m(i * 10, 4, 0x10000 + i as usize * 1000))
            );
            assert_eq!(map.find(i * 10 + 4), None);
        }
    }
}

/// One [`Run`] that threads read without writing anything they share (a sequence lock:
/// a read is a few plain loads, checked against a version the writer makes odd while
/// it changes the run). A read that meets a change in progress is a miss, and a write
/// that meets another is dropped: neither ever waits.
#[derive(Default)]
pub struct RunCell {
    /// Even: the fields below are a whole run; odd: being changed.
    seq: AtomicU64,
    start: AtomicU64,
    len: AtomicU64,
    addr: AtomicUsize,
    hole: AtomicBool,
}

impl RunCell {
    /// The run held, unless it is empty or being changed.
    #[inline]
    pub fn get(&self) -> Option<Run> {
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 != 0 {
            return None;
        }
        let r = Run {
            start: self.start.load(Ordering::Relaxed),
            len: self.len.load(Ordering::Relaxed),
            addr: self.addr.load(Ordering::Relaxed),
            hole: self.hole.load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == s1 && r.len != 0).then_some(r)
    }

    /// Replaces the run held (dropped if another thread is replacing it right now).
    pub fn set(&self, r: Run) {
        let s = self.seq.load(Ordering::Relaxed);
        if s & 1 != 0
            || self
                .seq
                .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        fence(Ordering::Release);
        self.start.store(r.start, Ordering::Relaxed);
        self.len.store(r.len, Ordering::Relaxed);
        self.addr.store(r.addr, Ordering::Relaxed);
        self.hole.store(r.hole, Ordering::Relaxed);
        self.seq.store(s + 2, Ordering::Release);
    }
}
