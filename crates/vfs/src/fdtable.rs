//! Descriptor table: which descriptor numbers are virtual and which open-file description
//! each names. `dup` makes two numbers share one [`OpenFile`] (and so one offset).
//!
//! The question "is this descriptor ours?" is asked on every read, write and close a
//! program makes, so it is one atomic load for descriptors below [`FAST_FDS`]; the map
//! behind a lock is touched only for virtual descriptors.

use crate::file::OpenFile;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockWriteGuard};

/// Descriptors below this have a bit in the fast bitmap.
pub const FAST_FDS: usize = 1 << 16;

/// Virtual descriptors of a process.
pub struct FdTable {
    /// One bit per descriptor below [`FAST_FDS`]: set when the descriptor is virtual.
    bits: Box<[AtomicU64]>,
    /// Set when some virtual descriptor is at or above [`FAST_FDS`].
    any_high: AtomicU64,
    map: RwLock<HashMap<i32, Arc<OpenFile>>>,
}

impl Default for FdTable {
    fn default() -> Self {
        FdTable {
            bits: (0..FAST_FDS / 64).map(|_| AtomicU64::new(0)).collect(),
            any_high: AtomicU64::new(0),
            map: RwLock::new(HashMap::new()),
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

    /// The description behind `fd`, if virtual.
    pub fn get(&self, fd: i32) -> Option<Arc<OpenFile>> {
        if !self.is_virtual(fd) {
            return None;
        }
        self.read().get(&fd).cloned()
    }

    /// Makes `fd` name `file` (replacing what it named); returns the old description.
    pub fn insert(&self, fd: i32, file: Arc<OpenFile>) -> Option<Arc<OpenFile>> {
        if fd < 0 {
            return None;
        }
        let mut map = self.write();
        let old = map.insert(fd, file);
        self.set_bit(fd, true);
        old
    }

    /// Forgets `fd`; returns its description if it was virtual.
    pub fn remove(&self, fd: i32) -> Option<Arc<OpenFile>> {
        if !self.is_virtual(fd) {
            return None;
        }
        let mut map = self.write();
        self.set_bit(fd, false);
        map.remove(&fd)
    }

    /// Forgets every virtual descriptor in `first..=last` (close_range).
    pub fn remove_range(&self, first: u32, last: u32) -> Vec<Arc<OpenFile>> {
        let mut map = self.write();
        let gone: Vec<i32> = map
            .keys()
            .copied()
            .filter(|&fd| (fd as u32) >= first && (fd as u32) <= last)
            .collect();
        gone.into_iter()
            .filter_map(|fd| {
                self.set_bit(fd, false);
                map.remove(&fd)
            })
            .collect()
    }

    /// Every virtual descriptor and its description, sorted by descriptor.
    pub fn snapshot(&self) -> Vec<(i32, Arc<OpenFile>)> {
        let mut v: Vec<_> = self
            .read()
            .iter()
            .map(|(&fd, f)| (fd, Arc::clone(f)))
            .collect();
        v.sort_by_key(|(fd, _)| *fd);
        v
    }

    /// Holds the table locked for writing (around fork, so the child never inherits a
    /// lock some other thread held).
    pub fn lock_all(&self) -> RwLockWriteGuard<'_, HashMap<i32, Arc<OpenFile>>> {
        self.write()
    }
}
