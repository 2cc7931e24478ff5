//! Stage 3 of populate: file data (and the blocks placement made between files) to the
//! image, while the scan and placement go on. Jobs come in placement order, which is
//! physical order for the small files packed together, in batches of about
//! [`BATCH_BYTES`] ([`Batcher`]); workers take batches and gather pieces that are
//! contiguous on the image into one write of up to [`BUF`] bytes, past the page cache
//! when aligned ([`Device::write_direct`]). Kept files are copied from memory and
//! released; the others are read again through the source's [`Reader`] (a host
//! directory's keeps the directory open while its files follow).

use crate::alloc::Mapping;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Mutex;
use usfs_dev::{AlignedBuf, Device};
use usfs_fs::{Error, Result};
use usfs_source::{Kind, Reader, Source, Tree};

/// Largest write to the image.
const BUF: usize = 4 << 20;
/// Bytes of data per batch of jobs a worker takes.
const BATCH_BYTES: u64 = 2 << 20;

/// One piece of data to copy: `len` bytes at `src_off` of the file to byte `dst` of the
/// image.
pub(super) struct Piece {
    src_off: u64,
    dst: u64,
    /// Bytes written: whole blocks.
    len: u64,
    /// Bytes of it that are the file's (the rest is the zero tail of the last block).
    data: u64,
}

/// One thing to write to the image.
pub(super) enum CopyJob {
    /// The data of the file of tree node `node`.
    File { node: usize, pieces: Vec<Piece> },
    /// Blocks the writer made while placing (directory, extent-tree and symlink blocks):
    /// `data` goes to image byte `dst`. They travel with the file data so the pieces
    /// around them join into one write.
    Meta { dst: u64, data: Vec<u8> },
}

impl CopyJob {
    fn bytes(&self) -> u64 {
        match self {
            CopyJob::File { pieces, .. } => pieces.iter().map(|p| p.len).sum(),
            CopyJob::Meta { data, .. } => data.len() as u64,
        }
    }
}

/// The copy pieces of a file: whole blocks (the tail of the last block is zeros, as on
/// disk), so the pieces of consecutive files join into one write.
pub(super) fn pieces(maps: &[Mapping], bs: u64, size: u64) -> Vec<Piece> {
    maps.iter()
        .filter_map(|m| {
            let off = m.lblk * bs;
            let end = ((m.lblk + m.len as u64) * bs).min(size.div_ceil(bs) * bs);
            (end > off).then_some(Piece {
                src_off: off,
                dst: m.pblk * bs,
                len: end - off,
                data: end.min(size).saturating_sub(off),
            })
        })
        .collect()
}

/// Bytes a worker writes between two write-back hints.
const KICK_BYTES: u64 = 32 << 20;

/// Writes gathered into one buffer while they are contiguous on the image. Every
/// [`KICK_BYTES`] written, write-back of the range written is started, so the disk
/// works during the copy rather than all in the final flush.
struct Gather<'a> {
    dev: &'a dyn Device,
    buf: AlignedBuf,
    dst: u64,
    /// Bytes written since the last hint, and the image range they lie in.
    unkicked: u64,
    lo: u64,
    hi: u64,
}

impl Gather<'_> {
    /// `n` (<= BUF) zeroed bytes of the buffer for image byte `dst` onwards, after
    /// writing out what is buffered if `dst` does not follow it or it is full.
    fn next(&mut self, dst: u64, n: usize) -> std::io::Result<&mut [u8]> {
        if !self.buf.is_empty()
            && (self.dst + self.buf.len() as u64 != dst || self.buf.len() + n > BUF)
        {
            self.flush()?;
        }
        if self.buf.is_empty() {
            self.dst = dst;
        }
        Ok(self.buf.extend_zeroed(n))
    }

    /// Appends `data` then `pad` zero bytes for image byte `dst` onwards (`data.len() +
    /// pad <= BUF`).
    fn append(&mut self, dst: u64, data: &[u8], pad: usize) -> std::io::Result<()> {
        let n = data.len() + pad;
        if !self.buf.is_empty()
            && (self.dst + self.buf.len() as u64 != dst || self.buf.len() + n > BUF)
        {
            self.flush()?;
        }
        if self.buf.is_empty() {
            self.dst = dst;
        }
        self.buf.extend_from_slice(data);
        self.buf.extend_zeroed(pad);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            let end = self.dst + self.buf.len() as u64;
            // Past the page cache when aligned: nothing reads file data back, and the
            // copy into the cache plus its write-back cost more CPU than the file reads.
            self.dev.write_direct(self.buf.as_slice(), self.dst)?;
            if self.unkicked == 0 {
                (self.lo, self.hi) = (self.dst, end);
            }
            (self.lo, self.hi) = (self.lo.min(self.dst), self.hi.max(end));
            self.unkicked += self.buf.len() as u64;
            if self.unkicked >= KICK_BYTES {
                self.dev.start_writeback(self.lo, self.hi - self.lo);
                self.unkicked = 0;
            }
            self.buf.clear();
        }
        Ok(())
    }
}

/// A worker's state: the gathered writes and its reader of the source.
struct CopyWorker<'a> {
    tree: &'a Tree,
    out: Gather<'a>,
    reader: Box<dyn Reader + 'a>,
    copied: u64,
}

impl CopyWorker<'_> {
    fn job(&mut self, job: &CopyJob) -> Result<()> {
        let (node, pieces) = match job {
            CopyJob::File { node, pieces } => (*node, pieces),
            CopyJob::Meta { dst, data } => {
                for (i, part) in data.chunks(BUF).enumerate() {
                    let at = dst + (i * BUF) as u64;
                    self.out.append(at, part, 0).map_err(Error::Io)?;
                }
                return Ok(());
            }
        };
        let n = self.tree.node(node);
        let size = n.meta.size;
        let held = match &n.kind {
            Kind::File(d) => d.held,
            _ => None,
        };
        if let Some(h) = held {
            let bytes = self.tree.hold.bytes(h, size);
            for p in pieces {
                let mut done = 0u64;
                while done < p.len {
                    let k = (p.len - done).min(BUF as u64) as usize;
                    let from = (p.src_off + done) as usize;
                    let want = (p.data.saturating_sub(done) as usize).min(k);
                    self.out
                        .append(p.dst + done, &bytes[from..from + want], k - want)
                        .map_err(Error::Io)?;
                    self.copied += want as u64;
                    done += k as u64;
                }
            }
            // Its bytes are in the write buffer now: the chunk may be reused.
            self.tree.hold.release(h);
            return Ok(());
        }
        for p in pieces {
            let mut done = 0u64;
            while done < p.len {
                let k = (p.len - done).min(BUF as u64) as usize;
                let buf = self.out.next(p.dst + done, k).map_err(Error::Io)?;
                // Only the file's bytes are read; past them (the last block's tail, or
                // a file that shrank since the scan) the buffer stays zero.
                let want = (p.data.saturating_sub(done) as usize).min(k);
                let got = self
                    .reader
                    .read_at(node, &mut buf[..want], p.src_off + done)?;
                self.copied += got as u64;
                done += k as u64;
            }
        }
        Ok(())
    }
}

/// Groups jobs, as placement makes them, into batches of about [`BATCH_BYTES`] for the
/// copy workers.
pub(super) struct Batcher {
    tx: SyncSender<Vec<CopyJob>>,
    cur: Vec<CopyJob>,
    bytes: u64,
}

impl Batcher {
    pub(super) fn new(tx: SyncSender<Vec<CopyJob>>) -> Batcher {
        Batcher {
            tx,
            cur: Vec::new(),
            bytes: 0,
        }
    }

    /// Adds a job; false when the workers have stopped (after an error).
    pub(super) fn push(&mut self, job: CopyJob) -> bool {
        self.bytes += job.bytes();
        self.cur.push(job);
        if self.bytes < BATCH_BYTES {
            return true;
        }
        self.bytes = 0;
        self.tx.send(std::mem::take(&mut self.cur)).is_ok()
    }

    /// Sends the last batch; dropping the batcher then tells the workers no more come.
    pub(super) fn finish(mut self) {
        if !self.cur.is_empty() {
            let _ = self.tx.send(std::mem::take(&mut self.cur));
        }
    }
}

/// Copies the data of the batches arriving on `rx` to `dev` with `threads` workers,
/// until the sender is gone; returns the bytes of file data copied. Kept files are
/// copied from memory (and released), the others read again from the source.
pub(super) fn copy(
    dev: &dyn Device,
    src: &dyn Source,
    tree: &Tree,
    rx: Receiver<Vec<CopyJob>>,
    threads: usize,
) -> Result<u64> {
    let rx = Mutex::new(rx);
    let first_err: Mutex<Option<Error>> = Mutex::new(None);
    let copied = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut w = CopyWorker {
                    tree,
                    out: Gather {
                        dev,
                        buf: AlignedBuf::with_capacity(BUF),
                        dst: 0,
                        unkicked: 0,
                        lo: 0,
                        hi: 0,
                    },
                    reader: src.reader(tree),
                    copied: 0,
                };
                let mut run = || -> Result<()> {
                    loop {
                        let batch = match rx.lock() {
                            Ok(r) => r.recv(),
                            Err(_) => {
                                return Err(Error::Io(std::io::Error::other(
                                    "copy: a worker panicked",
                                )))
                            }
                        };
                        let failed = first_err.lock().map(|e| e.is_some()).unwrap_or(true);
                        let Ok(batch) = batch else {
                            return w.out.flush().map_err(Error::Io);
                        };
                        if failed {
                            return Ok(());
                        }
                        for job in &batch {
                            w.job(job)?;
                        }
                    }
                };
                let r = run();
                copied.fetch_add(w.copied, Ordering::Relaxed);
                if let Err(e) = r {
                    if let Ok(mut g) = first_err.lock() {
                        g.get_or_insert(e);
                    }
                }
            });
        }
    });
    if let Some(e) = first_err.into_inner().unwrap_or(None) {
        return Err(e);
    }
    Ok(copied.load(Ordering::Relaxed))
}
