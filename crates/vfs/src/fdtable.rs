//! Descriptor table: which descriptor numbers are virtual and which open-file description
//! each names. `dup` makes two numbers share one [`OpenFile`] (and so one offset).
//!
//! The question "is this descriptor ours?" is asked on every read, write and close a
//! program makes, so it is one atomic load for descriptors below [`FAST_FDS`]; the map
//! behind a lock is touched only for virtual descriptors, and not even then when the
//! thread looks up the same descriptor as last time and the table has not changed since
//! (a per-thread cache checked against the table's generation: threads reading their own
//! descriptors never write a cache line they share).

use crate::file::OpenFile;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

/// Tells tables apart in the per-thread cache (a counter, never reused).
static NEXT_TABLE_ID: AtomicU64 = AtomicU64::new(1);

/// A thread's last lookup: table id, table generation, descriptor, description.
type Last = Option<(u64, u64, i32, Arc<OpenFile>)>;

thread_local! {
    /// This thread's last lookup ([`FdTable::get`]).
    static LAST: RefCell<Last> = const { RefCell::new(None) };
}

/// Descriptors below this have a bit in the fast bitmap.
pub(crate) const FAST_FDS: usize = 1 << 16;

/// Virtual descriptors of a process.
pub struct FdTable {
    /// One bit per descriptor below [`FAST_FDS`]: set when the descriptor is virtual.
    bits: Box<[AtomicU64]>,
    /// Set when some virtual descriptor is at or above [`FAST_FDS`].
    any_high: AtomicU64,
    /// Descriptions of descriptors below [`FAST_FDS`], indexed by descriptor (grown on
    /// demand): a lookup is an index, no hashing.
    low: RwLock<Vec<Option<Arc<OpenFile>>>>,
    /// Descriptions of descriptors at or above [`FAST_FDS`].
    map: RwLock<HashMap<i32, Arc<OpenFile>>>,
    /// This table's id in the per-thread cache.
    id: u64,
    /// Bumped after every change: a cached lookup is good while this has not moved.
    generation: AtomicU64,
}

impl Default for FdTable {
    fn default() -> Self {
        FdTable {
            bits: (0..FAST_FDS / 64).map(|_| AtomicU64::new(0)).collect(),
            any_high: AtomicU64::new(0),
            low: RwLock::new(Vec::new()),
            map: RwLock::new(HashMap::new()),
            id: NEXT_TABLE_ID.fetch_add(1, Ordering::Relaxed),
            generation: AtomicU64::new(0),
        }
    }
}

impl FdTable {
    /// True when `fd` is a virtual descriptor.
    #[inline]
    pub fn is_virtual(&self, fd: i32) -> bool {
        if fd < 0 {
            return false;
        }
        let fd = fd as usize;
        if fd < FAST_FDS {
            return self.bits[fd / 64].load(Ordering::Acquire) & (1 << (fd % 64)) != 0;
        }
        self.any_high.load(Ordering::Acquire) != 0 && self.read().contains_key(&(fd as i32))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<i32, Arc<OpenFile>>> {
        self.map.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<i32, Arc<OpenFile>>> {
        self.map.write().unwrap_or_else(|p| p.into_inner())
    }

    fn set_bit(&self, fd: i32, on: bool) {
        let fd = fd as usize;
        if fd < FAST_FDS {
            let mask = 1u64 << (fd % 64);
            if on {
                self.bits[fd / 64].fetch_or(mask, Ordering::Release);
            } else {
                self.bits[fd / 64].fetch_and(!mask, Ordering::Release);
            }
        } else if on {
            self.any_high.store(1, Ordering::Release);
        }
    }

    /// Records a change (after making it).
    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The description behind `fd`, if virtual.
    pub fn get(&self, fd: i32) -> Option<Arc<OpenFile>> {
        self.with(fd, Arc::clone)
    }

    /// Runs `f` on the description behind `fd`, if virtual. When the thread's cache
    /// holds it, `f` runs on the cached reference: no reference is taken (no locked
    /// instruction), which matters on the read path. `f` may look up descriptors itself
    /// (those lookups are then not cached).
    #[inline]
    pub fn with<R>(&self, fd: i32, f: impl FnOnce(&Arc<OpenFile>) -> R) -> Option<R> {
        if !self.is_virtual(fd) {
            return None;
        }
        let gen = self.generation.load(Ordering::Acquire);
        let mut f = Some(f);
        let hit = LAST
            .try_with(|c| match c.try_borrow().as_deref() {
                Ok(Some((id, g, d, file))) if *id == self.id && *g == gen && *d == fd => {
                    f.take().map(|f| f(file))
                }
                _ => None,
            })
            .ok()
            .flatten();
        if hit.is_some() {
            return hit;
        }
        let file = self.get_locked(fd)?;
        // Stamped with the generation read before the lookup: a change in between makes
        // the entry stale at once.
        let old = LAST
            .try_with(|c| {
                // Borrowed when called from inside `with` on this thread: not cached then.
                c.try_borrow_mut()
                    .ok()
                    .and_then(|mut b| b.replace((self.id, gen, fd, Arc::clone(&file))))
            })
            .ok()
            .flatten();
        drop(old);
        f.take().map(|f| f(&file))
    }

    /// [`get`](Self::get) through the locks.
    fn get_locked(&self, fd: i32) -> Option<Arc<OpenFile>> {
        if (fd as usize) < FAST_FDS {
            let low = self.low.read().unwrap_or_else(|p| p.into_inner());
            return low.get(fd as usize).and_then(Clone::clone);
        }
        self.read().get(&fd).cloned()
    }

    fn low_write(&self) -> RwLockWriteGuard<'_, Vec<Option<Arc<OpenFile>>>> {
        self.low.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `fd` name `file` (replacing what it named); returns the old description.
    pub fn insert(&self, fd: i32, file: Arc<OpenFile>) -> Option<Arc<OpenFile>> {
        if fd < 0 {
            return None;
        }
        if (fd as usize) < FAST_FDS {
            let mut low = self.low_write();
            if low.len() <= fd as usize {
                low.resize(fd as usize + 1, None);
            }
            let old = low[fd as usize].replace(file);
            self.set_bit(fd, true);
            self.changed();
            return old;
        }
        let mut map = self.write();
        let old = map.insert(fd, file);
        self.set_bit(fd, true);
        self.changed();
        old
    }

    /// Forgets `fd`; returns its description if it was virtual.
    pub fn remove(&self, fd: i32) -> Option<Arc<OpenFile>> {
        if !self.is_virtual(fd) {
            return None;
        }
        if (fd as usize) < FAST_FDS {
            let mut low = self.low_write();
            self.set_bit(fd, false);
            let old = low.get_mut(fd as usize).and_then(Option::take);
            self.changed();
            return old;
        }
        let mut map = self.write();
        self.set_bit(fd, false);
        let old = map.remove(&fd);
        self.changed();
        old
    }

    /// Forgets every virtual descriptor in `first..=last` (close_range).
    pub fn remove_range(&self, first: u32, last: u32) -> Vec<Arc<OpenFile>> {
        let mut gone = Vec::new();
        {
            let mut low = self.low_write();
            let end = (last as usize).saturating_add(1).min(low.len());
            for fd in (first as usize).min(end)..end {
                if let Some(f) = low[fd].take() {
                    self.set_bit(fd as i32, false);
                    gone.push(f);
                }
            }
        }
        let mut map = self.write();
        let high: Vec<i32> = map
            .keys()
            .copied()
            .filter(|&fd| (fd as u32) >= first && (fd as u32) <= last)
            .collect();
        for fd in high {
            gone.extend(map.remove(&fd));
        }
        self.changed();
        gone
    }

    /// Every virtual descriptor and its description, sorted by descriptor.
    pub fn snapshot(&self) -> Vec<(i32, Arc<OpenFile>)> {
        let low = self.low.read().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<_> = low
            .iter()
            .enumerate()
            .filter_map(|(fd, f)| Some((fd as i32, Arc::clone(f.as_ref()?))))
            .collect();
        drop(low);
        v.extend(self.read().iter().map(|(&fd, f)| (fd, Arc::clone(f))));
        v.sort_by_key(|(fd, _)| *fd);
        v
    }

    /// Holds the table locked for writing (around fork, so the child never inherits a
    /// lock some other thread held).
    pub fn lock_all(&self) -> FdTableLock<'_> {
        FdTableLock {
            _low: self.low_write(),
            _high: self.write(),
        }
    }
}

/// Both locks of an [`FdTable`], held (see [`FdTable::lock_all`]).
pub struct FdTableLock<'a> {
    _low: RwLockWriteGuard<'a, Vec<Option<Arc<OpenFile>>>>,
    _high: RwLockWriteGuard<'a, HashMap<i32, Arc<OpenFile>>>,
}
