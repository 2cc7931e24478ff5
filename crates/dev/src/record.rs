//! A crash-recording device: forwards every request to the device it wraps and logs every
//! write (offset, bytes) and every flush, in the order the device saw them, so a test can
//! rebuild the image a crash at any moment could have left — CrashMonkey/B3 without a
//! kernel module.
//!
//! The model of what a crash leaves: everything written before a flush is durable; of the
//! writes since the last flush (an *epoch*), any subset may have reached the disk, in any
//! order (so where two of them overlap either version, or neither, may be there), and one
//! write may be torn at sector (512-byte) granularity. [`Log::states`] enumerates such
//! states from a [`CrashPlan`]; [`Log::apply`] builds one on a copy of the base image.
//!
//! Memory: the log keeps a 32-byte index entry per request; write payloads go to a
//! [`Store`], either memory with a byte limit (a write that would pass it fails with an
//! error naming the limit, so a runaway workload stops loudly instead of eating the
//! machine) or a spill file (`O_TMPFILE`: never named, gone when the last [`Log`] handle
//! drops) for long workloads. [`Log::save`] and [`Log::load`] move a log between
//! processes (a server records, a test checks).
//!
//! Writes are serialised by the recorder (one lock orders each write with its log entry),
//! which costs parallel writers some speed: a test device, not a production one.

use crate::{Device, IoStats};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

mod file;
mod states;
pub use states::{CrashPlan, CrashState, InEpochs, Piece, StateKind};

/// Bytes in a sector: the unit a torn write is cut into.
pub const SECTOR: u64 = 512;

/// Default byte limit of an in-memory log (1 GiB).
pub const DEFAULT_MEMORY_LIMIT: u64 = 1 << 30;

/// Where write payloads are kept.
enum Payloads {
    /// In memory, at most `limit` bytes.
    Memory { bytes: Vec<u8>, limit: u64 },
    /// Appended to an unlinked file; `len` bytes so far.
    Spill { file: File, len: u64 },
}

/// The payload store of a log: append-only, so positions handed out stay valid while
/// recording goes on and [`Log`] snapshots read from it.
pub struct Store {
    inner: Mutex<Payloads>,
}

impl Store {
    /// Payloads in memory, at most `limit` bytes in all.
    pub fn memory(limit: u64) -> Store {
        Store {
            inner: Mutex::new(Payloads::Memory {
                bytes: Vec::new(),
                limit,
            }),
        }
    }

    /// Payloads in a new unnamed file (`O_TMPFILE`) in directory `dir`, bounded by the
    /// disk only; the file is gone when the last handle drops.
    pub fn spill(dir: &Path) -> io::Result<Store> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE)
            .open(dir)?;
        Ok(Store {
            inner: Mutex::new(Payloads::Spill { file, len: 0 }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Payloads> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `data`, returning its position.
    fn append(&self, data: &[u8]) -> io::Result<u64> {
        match &mut *self.lock() {
            Payloads::Memory { bytes, limit } => {
                if bytes.len() as u64 + data.len() as u64 > *limit {
                    return Err(io::Error::other(format!(
                        "crash recorder: in-memory log limit of {limit} bytes reached (use a spill file)"
                    )));
                }
                let pos = bytes.len() as u64;
                bytes.extend_from_slice(data);
                Ok(pos)
            }
            Payloads::Spill { file, len } => {
                let pos = *len;
                file.write_all_at(data, pos)?;
                *len += data.len() as u64;
                Ok(pos)
            }
        }
    }

    /// Reads `buf.len()` bytes stored at `pos`.
    fn read(&self, pos: u64, buf: &mut [u8]) -> io::Result<()> {
        match &*self.lock() {
            Payloads::Memory { bytes, .. } => {
                let src = usize::try_from(pos)
                    .ok()
                    .and_then(|p| bytes.get(p..p.checked_add(buf.len())?))
                    .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
                buf.copy_from_slice(src);
                Ok(())
            }
            Payloads::Spill { file, .. } => file.read_exact_at(buf, pos),
        }
    }

    /// Payload bytes held.
    pub fn bytes(&self) -> u64 {
        match &*self.lock() {
            Payloads::Memory { bytes, .. } => bytes.len() as u64,
            Payloads::Spill { len, .. } => *len,
        }
    }
}

/// One logged request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `len` bytes written at device byte `offset`; the bytes are at `pos` in the store.
    Write {
        /// Device byte offset.
        offset: u64,
        /// Bytes written.
        len: u64,
        /// Where the payload sits in the [`Store`].
        pos: u64,
    },
    /// A flush: everything logged before it is durable.
    Flush,
}

/// A device that forwards everything to `inner` and logs writes and flushes.
///
/// Share it: wrap it in an [`Arc`] and hand the file system a `Box::new(arc.clone())`
/// (`Arc<Recorder>` is a [`Device`]); the test keeps the other handle and takes
/// [`Recorder::log`] when it likes.
pub struct Recorder {
    inner: Box<dyn Device>,
    store: Arc<Store>,
    /// The index; its lock also orders a write on `inner` with its log entry, so the log
    /// order is the order in which overlapping writes landed.
    events: Mutex<Vec<Event>>,
    stats: IoStats,
}

impl Recorder {
    /// Records in memory, failing writes once [`DEFAULT_MEMORY_LIMIT`] payload bytes are
    /// logged.
    pub fn new(inner: Box<dyn Device>) -> Recorder {
        Recorder::with_store(inner, Store::memory(DEFAULT_MEMORY_LIMIT))
    }

    /// Records into `store` ([`Store::memory`] with a limit, or [`Store::spill`]).
    pub fn with_store(inner: Box<dyn Device>, store: Store) -> Recorder {
        Recorder {
            inner,
            store: Arc::new(store),
            events: Mutex::new(Vec::new()),
            stats: IoStats::default(),
        }
    }

    fn events(&self) -> MutexGuard<'_, Vec<Event>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Everything logged so far (later requests do not change the returned log).
    pub fn log(&self) -> Log {
        Log {
            events: self.events().clone(),
            store: self.store.clone(),
        }
    }

    /// The device being recorded.
    pub fn inner(&self) -> &dyn Device {
        &*self.inner
    }

    /// Writes through `write` and logs the bytes when it succeeds.
    fn logged(
        &self,
        buf: &[u8],
        offset: u64,
        write: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        self.stats.record_write(buf.len());
        let mut ev = self.events();
        write()?;
        let pos = self.store.append(buf)?;
        ev.push(Event::Write {
            offset,
            len: buf.len() as u64,
            pos,
        });
        Ok(())
    }
}

impl Device for Recorder {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.stats.record_read(buf.len());
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.logged(buf, offset, || self.inner.write_at(buf, offset))
    }

    fn write_direct(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.logged(buf, offset, || self.inner.write_direct(buf, offset))
    }

    fn flush(&self) -> io::Result<()> {
        let mut ev = self.events();
        self.inner.flush()?;
        ev.push(Event::Flush);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn stats(&self) -> &IoStats {
        &self.stats
    }

    fn as_slice(&self) -> Option<&[u8]> {
        self.inner.as_slice()
    }

    fn will_need(&self, offset: u64, len: u64) {
        self.inner.will_need(offset, len)
    }

    fn start_writeback(&self, offset: u64, len: u64) {
        self.inner.start_writeback(offset, len)
    }
}

/// A snapshot of a recorder's log: the events in order and the store with their bytes.
#[derive(Clone)]
pub struct Log {
    events: Vec<Event>,
    store: Arc<Store>,
}

impl Log {
    /// The events in the order the device saw them.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Number of writes logged.
    pub fn writes(&self) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Write { .. }))
            .count()
    }

    /// Number of flushes logged.
    pub fn flushes(&self) -> usize {
        self.events.len() - self.writes()
    }

    /// The epochs: for each, the indices into [`Log::events`] of its writes. Epoch `k`
    /// holds the writes between flush `k-1` and flush `k`; when writes follow the last
    /// flush they form one more, unflushed, epoch. So there are `flushes()` epochs, plus
    /// one if the log does not end with a flush.
    pub fn epochs(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new()];
        for (i, e) in self.events.iter().enumerate() {
            match e {
                Event::Write { .. } => out.last_mut().expect("never empty").push(i),
                Event::Flush => out.push(Vec::new()),
            }
        }
        if out.last().is_some_and(Vec::is_empty) {
            out.pop();
        }
        out
    }

    /// The bytes of write event `i` (an error if event `i` is not a write).
    pub fn data(&self, i: usize) -> io::Result<Vec<u8>> {
        match self.events.get(i) {
            Some(&Event::Write { len, pos, .. }) => {
                let len = usize::try_from(len).map_err(io::Error::other)?;
                let mut buf = vec![0u8; len];
                self.store.read(pos, &mut buf)?;
                Ok(buf)
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("log event {i} is not a write"),
            )),
        }
    }

    /// Payload bytes held by the store (all snapshots of one recorder share it).
    pub fn payload_bytes(&self) -> u64 {
        self.store.bytes()
    }

    /// Applies `state` to `dev`, which must hold the base image the recording started
    /// from: all writes of the epochs before `state.epoch` in log order, then
    /// `state.pieces` in their order.
    pub fn apply(&self, state: &CrashState, dev: &dyn Device) -> io::Result<()> {
        self.apply_epochs(0..state.epoch, dev)?;
        self.apply_pieces(&state.pieces, dev)
    }

    /// Applies every write of the epochs in `range` (see [`Log::epochs`]) in log order.
    pub fn apply_epochs(&self, range: std::ops::Range<usize>, dev: &dyn Device) -> io::Result<()> {
        let epochs = self.epochs();
        let Some(chosen) = epochs.get(range.clone()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("epochs {range:?}: the log has {}", epochs.len()),
            ));
        };
        for ep in chosen {
            for &i in ep {
                self.apply_piece(&Piece::whole(self, i)?, dev)?;
            }
        }
        Ok(())
    }

    /// Applies `pieces` in order.
    pub fn apply_pieces(&self, pieces: &[Piece], dev: &dyn Device) -> io::Result<()> {
        pieces.iter().try_for_each(|p| self.apply_piece(p, dev))
    }

    /// Writes one piece to `dev`.
    pub fn apply_piece(&self, p: &Piece, dev: &dyn Device) -> io::Result<()> {
        let (offset, data) = self.piece_bytes(p)?;
        dev.write_at(&data, offset)
    }

    /// Where piece `p` goes on the device and its bytes.
    pub fn piece_bytes(&self, p: &Piece) -> io::Result<(u64, Vec<u8>)> {
        let Some(&Event::Write { offset, len, pos }) = self.events.get(p.event) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("log event {} is not a write", p.event),
            ));
        };
        if p.range.start > p.range.end || p.range.end > len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "piece {:?} outside write {} of {len} bytes",
                    p.range, p.event
                ),
            ));
        }
        let n = usize::try_from(p.range.end - p.range.start).map_err(io::Error::other)?;
        let mut buf = vec![0u8; n];
        self.store.read(pos + p.range.start, &mut buf)?;
        Ok((offset + p.range.start, buf))
    }
}

#[cfg(test)]
mod tests;
