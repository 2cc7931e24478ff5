//! Memory for the bytes of small files between the scan that reads them and the copy
//! that writes them to the image (mkfs.ext4), shared by the scan workers, placement (the
//! tree's consumer) and the copy workers running at the same time.
//!
//! Workers fill chunks ([`Chunk`]) front to back; every kept file holds a reference on
//! its chunk until the copy has written it ([`Hold::release`]), and the worker filling a
//! chunk holds one until it moves to the next. A chunk nobody references any more goes
//! back to a free list and is filled again: since the copy follows the scan closely, a
//! few chunks serve the whole tree, and fresh memory (whose first touch costs as much as
//! reading a small file twice) is rarely needed. Up to a soft limit chunks are mapped
//! freely. Past it, a scan worker waits (at most [`MAX_WAIT`]) for a chunk to come back —
//! the scan must not run far ahead of the copy, or every chunk would be fresh — except
//! while placement is waiting for the scan ([`Hold::set_starved`]: chunks only come back
//! through placement), when more are mapped up to a hard limit. When neither gives a
//! chunk, or placement is over ([`Hold::close`]), the file is not kept and the copy
//! reads it again.

use crate::chunk::{Chunk, CHUNK_BYTES};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Longest wait for a chunk before a file is read without keeping it.
const MAX_WAIT: Duration = Duration::from_millis(50);

/// Where a kept file's bytes are: chunk `chunk`, from byte `off` (the length is the
/// file's size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    /// The chunk.
    pub chunk: u32,
    /// The first byte in it.
    pub off: u32,
}

/// One chunk and the references on it.
struct Slot {
    chunk: Chunk,
    /// Kept files not yet released, plus one while a worker fills the chunk.
    live: AtomicU32,
}

/// Chunks ready to be filled again, and how many workers wait for one.
#[derive(Default)]
struct FreeList {
    ids: Vec<u32>,
    waiting: usize,
}

/// The chunks, shared by every thread of a populate.
pub struct Hold {
    slots: boxcar::Vec<Slot>,
    /// Chunks with no reference left, ready to be filled again.
    free: Mutex<FreeList>,
    /// Signalled when a chunk is freed or waiting must stop, if someone waits.
    freed: Condvar,
    /// Chunks mapped so far.
    made: AtomicU64,
    /// Chunks mapped before anyone waits for a free one.
    soft: u64,
    /// Chunks never exceeded.
    hard: u64,
    /// Placement waits for the scan: nobody waits for chunks, and up to `hard` may be
    /// mapped.
    starved: AtomicBool,
    /// Placement is over: nothing more is kept.
    closed: AtomicBool,
}

impl Hold {
    /// A pool of chunks: up to `soft` bytes are mapped freely, then a scan worker waits
    /// for a free chunk (see the module text) before mapping more, up to `hard` bytes.
    pub fn new(soft: u64, hard: u64) -> Hold {
        let chunks = |b: u64| b / CHUNK_BYTES as u64;
        Hold {
            slots: boxcar::Vec::new(),
            free: Mutex::new(FreeList::default()),
            freed: Condvar::new(),
            made: AtomicU64::new(0),
            soft: chunks(soft),
            hard: chunks(hard.max(soft)),
            starved: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    /// Nothing more is kept from now on (placement ended: the copy will release no
    /// chunk that is not already placed); waiting workers stop waiting.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake_all();
    }

    /// Placement is (`true`) or is no longer waiting for the scan. While it is, scan
    /// workers do not wait for chunks.
    pub(crate) fn set_starved(&self, starved: bool) {
        self.starved.store(starved, Ordering::Release);
        if starved {
            self.wake_all();
        }
    }

    /// Wakes every worker waiting for a chunk (they look at the flags again).
    fn wake_all(&self) {
        if let Ok(f) = self.free.lock() {
            if f.waiting > 0 {
                self.freed.notify_all();
            }
        }
    }

    /// A chunk to fill, referenced once for its filler: a free one; else a new one
    /// within the soft limit; else, while placement waits for the scan, a new one within
    /// the hard limit; else one freed within [`MAX_WAIT`]; else none.
    fn take(&self) -> Option<u32> {
        if self.hard == 0 || self.closed.load(Ordering::Acquire) {
            return None;
        }
        let mut free = self.free.lock().ok()?;
        let mut waited = false;
        loop {
            if let Some(id) = free.ids.pop() {
                self.slots[id as usize].live.store(1, Ordering::Release);
                return Some(id);
            }
            let starved = self.starved.load(Ordering::Acquire);
            let made = self.made.load(Ordering::Acquire);
            if made < self.soft || (starved && made < self.hard) {
                // The free list's lock is held: nobody else maps meanwhile.
                self.made.store(made + 1, Ordering::Release);
                break;
            }
            if waited || starved || self.closed.load(Ordering::Acquire) {
                return None;
            }
            free.waiting += 1;
            free = self.freed.wait_timeout(free, MAX_WAIT).ok()?.0;
            free.waiting -= 1;
            waited = true;
        }
        drop(free);
        let chunk = Chunk::new().ok()?;
        let id = self.slots.push(Slot {
            chunk,
            live: AtomicU32::new(1),
        });
        u32::try_from(id).ok()
    }

    /// Drops one reference on chunk `id`; the last one frees it for reuse.
    fn unref(&self, id: u32) {
        let Some(slot) = self.slots.get(id as usize) else {
            return;
        };
        if slot.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Ok(mut f) = self.free.lock() {
                f.ids.push(id);
                if f.waiting > 0 {
                    self.freed.notify_one();
                }
            }
        }
    }

    /// Bytes of chunks mapped so far.
    pub fn bytes_mapped(&self) -> u64 {
        (self.slots.count() * CHUNK_BYTES) as u64
    }

    /// The bytes of a kept file of `len` bytes.
    pub fn bytes(&self, h: Held, len: u64) -> &[u8] {
        self.slots[h.chunk as usize]
            .chunk
            .range(h.off as usize, len as usize)
    }

    /// The copy is done with a kept file: its chunk may be reused once the others in it
    /// are done too. Call once per kept file; the bytes must not be read afterwards.
    pub fn release(&self, h: Held) {
        self.unref(h.chunk);
    }
}

/// A scan worker's chunk being filled.
pub(crate) struct Filler<'a> {
    hold: &'a Hold,
    /// Chunk id and bytes used.
    cur: Option<(u32, usize)>,
}

impl<'a> Filler<'a> {
    /// A filler with no chunk yet.
    pub(crate) fn new(hold: &'a Hold) -> Filler<'a> {
        Filler { hold, cur: None }
    }

    /// Room for a file of `len` (<= CHUNK_BYTES) bytes, referenced until
    /// [`Hold::release`] or [`Filler::unreserve`]; `None` when no memory is left. The
    /// bytes are not zeroed (a reused chunk holds old files).
    pub(crate) fn reserve(&mut self, len: usize) -> Option<(Held, &mut [u8])> {
        if !matches!(self.cur, Some((_, used)) if used + len <= CHUNK_BYTES) {
            self.retire();
            self.cur = Some((self.hold.take()?, 0));
        }
        let (id, used) = self.cur.as_mut()?;
        let off = *used;
        *used += len;
        let slot = &self.hold.slots[*id as usize];
        slot.live.fetch_add(1, Ordering::AcqRel);
        // SAFETY: off..off+len lies past every range handed out from this chunk since it
        // was taken, and the chunk was taken by this filler alone (fresh, or from the
        // free list once every earlier file in it was released): nobody else uses it.
        let buf = unsafe { slot.chunk.range_mut(off, len) };
        Some((
            Held {
                chunk: *id,
                off: off as u32,
            },
            buf,
        ))
    }

    /// Gives back the room just reserved for `len` bytes (a file that turned out to
    /// have no data to keep).
    pub(crate) fn unreserve(&mut self, h: Held, len: usize) {
        if let Some((id, used)) = self.cur.as_mut() {
            if *id == h.chunk && *used == h.off as usize + len {
                *used = h.off as usize;
            }
        }
        self.hold.unref(h.chunk);
    }

    /// Lets go of the chunk being filled (a worker about to idle).
    pub(crate) fn retire(&mut self) {
        if let Some((id, _)) = self.cur.take() {
            self.hold.unref(id);
        }
    }
}

impl Drop for Filler<'_> {
    fn drop(&mut self) {
        self.retire();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_reused_once_every_file_is_released() {
        let hold = Hold::new(2 * CHUNK_BYTES as u64, 0);
        // Placement waiting: no waits for chunks.
        hold.set_starved(true);
        let mut f = Filler::new(&hold);
        let (a, buf) = f.reserve(CHUNK_BYTES - 10).unwrap();
        buf.fill(1);
        // The next file does not fit: a second chunk.
        let (b, buf) = f.reserve(20).unwrap();
        buf.fill(2);
        assert_eq!((a.chunk, b.chunk), (0, 1));
        // The budget is spent and nothing is free.
        assert!(f.reserve(CHUNK_BYTES).is_none());
        assert_eq!(hold.bytes(b, 20), [2; 20]);
        // Chunk 0 was retired by its filler; releasing its only file frees it.
        hold.release(a);
        let (c, buf) = f.reserve(CHUNK_BYTES).unwrap();
        assert_eq!(c, Held { chunk: 0, off: 0 });
        assert_eq!(buf[0], 1, "a reused chunk is not zeroed");
        // Chunk 1 still holds b.
        assert!(f.reserve(1).is_none());
        hold.release(b);
        drop(f);
        assert_eq!(hold.free.lock().unwrap().ids.len(), 1);
    }

    #[test]
    fn unreserve_gives_the_room_back() {
        let hold = Hold::new(CHUNK_BYTES as u64, 0);
        let mut f = Filler::new(&hold);
        let (a, _) = f.reserve(100).unwrap();
        f.unreserve(a, 100);
        let (b, _) = f.reserve(50).unwrap();
        assert_eq!(a, b);
        hold.release(b);
        drop(f);
        assert_eq!(hold.free.lock().unwrap().ids.len(), 1);
    }
}
