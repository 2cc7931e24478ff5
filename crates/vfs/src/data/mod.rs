//! The data path: how a read of an open file becomes bytes in the caller's buffer. The
//! POSIX model (mounts, resolution, descriptors, open-file descriptions, the path table)
//! decides *whether* a read may happen and *where* it starts; everything here decides
//! *how* the bytes get there, through one object per open file, [`DataPath`], that
//! [`OpenFile::pread`](crate::OpenFile::pread) asks.
//!
//! - [`runs`]: where the file's bytes lie in the image mapping (a per-file run map, and
//!   [`RunCell`]s an open-file description keeps to itself); `copy`
//!   copies them out of the mapping.
//! - [`bulk`]: large reads by pread(2) from the image instead (off by default), and the
//!   image's identity for the shared cache.
//! - [`ChunkCache`]: bytes the back end had to produce (decompressed, inline, holes), per
//!   open file, for small reads.
//! - [`shared`]: produced bytes shared with other processes through cache files.
//! - [`read_file`]: the plain path (mapping, else the back end's `read_at`), also what the
//!   FUSE server and the preload library's mmap use.
//!
//! Read-only today. The write path's staging (SplitFS-style: appends into staging extents,
//! relinked at fsync/close) is the sibling to come: its per-file state belongs next to
//! [`DataPath`], and its per-description state next to [`ReadState`].
//!
//! The unsafe code of the crate's data path is here: slices of the image mapping made
//! from recorded addresses ([`DataPath`]'s copy from a run, [`bulk`]'s image head), the
//! vector copy loop (`copy`) and the shared cache's raw system calls and mapping
//! ([`shared`]); each block says why it is sound.

pub mod bulk;
mod chunks;
pub(crate) mod copy;
mod read;
pub mod runs;
pub mod shared;

pub use chunks::{ChunkCache, CHUNK, CHUNKS};
pub use read::read_file;

use crate::resolve::Errno;
use runs::{Run, RunCell, RunMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use usfs_fs::{FileSystem, Ino};

/// How far one `mapped_data` call may reach: a whole extent at once (the run is recorded,
/// not copied).
const LOOKUP_MAX: usize = 1 << 40;

/// Runs an open-file description keeps to itself.
const RECENT: usize = 4;

/// The data path of one open file, shared by every open-file description of it (it lives
/// in the file's [`Node`](crate::Node)): the back end and where the file's bytes are, and
/// the caches that hold what the back end had to produce.
pub struct DataPath {
    /// The file's file system (the image mapping the runs point into lives as long as it).
    fs: Arc<dyn FileSystem>,
    /// The file.
    ino: Ino,
    /// Its size (the image is read-only, so it stays true).
    size: u64,
    /// Bytes the back end produced for small reads (decompressed data and the like).
    chunks: ChunkCache,
    /// pread access to the image for large reads of stored data.
    bulk: Option<Arc<bulk::BulkImage>>,
    /// Where the file's bytes lie in the image mapping, as far as reads have asked.
    runs: RunMap,
    /// The cache of this file's produced (decompressed) bytes shared with other
    /// processes, opened on the first read that needs it; `None` if not cached.
    shared: OnceLock<Option<shared::SharedFile>>,
}

/// What one open-file description remembers between its reads (so sequential reads, and
/// random ones over a file of a few extents, touch nothing shared with other descriptions
/// and threads): the runs its last reads used and where the last read ended.
pub struct ReadState {
    /// The runs of the file ([`DataPath::run_at`]) the last reads used. Read without a
    /// locked instruction ([`RunCell`]): a read is then a few loads and the copy.
    runs: [RunCell; RECENT],
    /// The cell the next new run replaces (round-robin; a hint, plain loads and stores).
    next_run: AtomicUsize,
    /// Where the last read through this description ended (sequential reads are those
    /// that start there).
    last_end: AtomicU64,
}

impl Default for ReadState {
    fn default() -> ReadState {
        ReadState {
            runs: Default::default(),
            next_run: AtomicUsize::new(0),
            last_end: AtomicU64::new(0),
        }
    }
}

impl ReadState {
    /// The run holding `pos` (`pos < size`): one a recent read used, or `data`'s.
    ///
    /// Never waits: a cell being replaced by another thread (or left mid-change by a
    /// fork in the child) is a miss, and the data path answers then.
    #[inline]
    fn run_at(&self, data: &DataPath, pos: u64) -> Result<Run, Errno> {
        for cell in &self.runs {
            if let Some(r) = cell.get() {
                if r.contains(pos) {
                    return Ok(r);
                }
            }
        }
        let r = data.run_at(pos)?;
        let i = self.next_run.load(Ordering::Relaxed) % RECENT;
        self.runs[i].set(r);
        self.next_run.store(i + 1, Ordering::Relaxed);
        Ok(r)
    }
}

impl DataPath {
    /// The data path of file `ino` (of `size` bytes) on `fs`, with the mount's `bulk`
    /// reader (which also names the image for the shared cache; `None`: no shared cache).
    pub fn new(
        fs: Arc<dyn FileSystem>,
        ino: Ino,
        size: u64,
        bulk: Option<Arc<bulk::BulkImage>>,
    ) -> DataPath {
        DataPath {
            fs,
            ino,
            size,
            chunks: ChunkCache::default(),
            bulk,
            runs: RunMap::default(),
            shared: OnceLock::new(),
        }
    }

    /// pread(2) of the file's bytes at `offset` into `buf` for the open-file description
    /// whose read state is `st`; returns the bytes read (short only at the end of the
    /// file). The caller has checked that the description may read.
    #[inline]
    pub fn pread(&self, st: &ReadState, buf: &mut [u8], offset: u64) -> Result<usize, Errno> {
        let size = self.size;
        // A hint only (threads sharing the descriptor may race on it): a plain load and
        // store, not a locked read-modify-write, which would stall every read.
        let sequential = st.last_end.load(Ordering::Relaxed) == offset;
        st.last_end
            .store(offset + buf.len() as u64, Ordering::Relaxed);
        let mut done = 0;
        while done < buf.len() && offset + (done as u64) < size {
            let pos = offset + done as u64;
            let run = st.run_at(self, pos)?;
            let mut n = 0;
            if run.mapped() {
                n = self.copy_mapped(&run, pos, &mut buf[done..]);
            } else if !run.hole {
                if let Some(sf) = self.shared() {
                    // Produced (decompressed) bytes, shared with other processes (None:
                    // not there and not to be stored: read as if there were no cache).
                    match self.copy_shared(sf, pos, &mut buf[done..], sequential)? {
                        Some(0) => break,
                        Some(k) => n = k,
                        None => {}
                    }
                }
            }
            if n == 0 {
                // Not stored contiguously in a mapping here (hole, inline, compressed):
                // large reads go to the back end directly, small ones through the chunk
                // cache.
                if buf.len() - done >= CHUNK {
                    return Ok(done + read_file(&*self.fs, self.ino, pos, &mut buf[done..])?);
                }
                n = self.copy_chunk(pos, &mut buf[done..], sequential)?;
                if n == usize::MAX {
                    return Ok(done + read_file(&*self.fs, self.ino, pos, &mut buf[done..])?);
                }
                if n == 0 {
                    break;
                }
            }
            done += n;
        }
        Ok(done)
    }

    /// The shared cache of this file's produced bytes: files of at least
    /// [`MIN_FILE`](shared::MIN_FILE) bytes on a mounted (mapped) image, when the
    /// cache is on.
    ///
    /// Made outside the once-cell and then offered to it (a thread that loses the race
    /// drops its copy), so no thread ever waits on another's initialisation: a fork in
    /// the middle of one cannot leave the child waiting forever.
    pub fn shared(&self) -> Option<&shared::SharedFile> {
        if let Some(s) = self.shared.get() {
            return s.as_ref();
        }
        let made = (|| {
            if self.size < shared::MIN_FILE {
                return None;
            }
            let (dir, id) = self.bulk.as_ref()?.shared_key()?;
            shared::SharedFile::open(dir, id, self.ino, self.size)
        })();
        let _ = self.shared.set(made);
        self.shared.get().and_then(Option::as_ref)
    }

    /// The run of file bytes holding `pos` (`pos < size`): from the run map, or asked of
    /// the back end and recorded. A run with address 0 is not in the mapping (hole,
    /// inline or compressed data; read through the back end).
    pub fn run_at(&self, pos: u64) -> Result<Run, Errno> {
        if let Some(r) = self.runs.find(pos) {
            return Ok(r);
        }
        let run = match self
            .fs
            .mapped_data(self.ino, pos, LOOKUP_MAX)
            .map_err(|e| e.errno())?
        {
            Some(s) if !s.is_empty() => Run {
                start: pos,
                len: s.len() as u64,
                addr: s.as_ptr() as usize,
                hole: false,
            },
            _ => {
                // Not in the mapping from `pos`: up to the next data if `pos` is in a
                // hole, else to the end of this stretch of data (compressed or inline
                // data is that way throughout).
                let (end, hole) = match self.fs.next_data(self.ino, pos).map_err(|e| e.errno())? {
                    Some(r) if r.start > pos => (r.start, true),
                    Some(r) => (r.end, false),
                    None => (self.size, true),
                };
                Run {
                    start: pos,
                    len: end.max(pos + 1) - pos,
                    addr: 0,
                    hole,
                }
            }
        };
        Ok(self.runs.insert(run))
    }

    /// Copies file bytes at `pos` into `dst` from the cached chunk that holds them (read
    /// from the back end on a miss when `load`); 0 at the end of the file, `usize::MAX`
    /// when the chunk is not cached and not to be loaded.
    fn copy_chunk(&self, pos: u64, dst: &mut [u8], load: bool) -> Result<usize, Errno> {
        let chunk = CHUNK as u64;
        let idx = pos / chunk;
        let cached = self.chunks.cached(idx);
        if cached.is_none() && !load {
            return Ok(usize::MAX);
        }
        let data = match cached {
            Some(d) => d,
            None => self.chunks.get(idx, || {
                let start = idx * chunk;
                let len = (self.size.saturating_sub(start)).min(chunk) as usize;
                let mut v = vec![0u8; len];
                let n = read_file(&*self.fs, self.ino, start, &mut v)?;
                v.truncate(n);
                Ok::<_, Errno>(v)
            })?,
        };
        let skip = (pos - idx * chunk) as usize;
        let n = data.len().saturating_sub(skip).min(dst.len());
        dst[..n].copy_from_slice(&data[skip..skip + n]);
        Ok(n)
    }

    /// Copies file bytes at `pos` into `dst` from the shared cache, producing (and
    /// storing) what holds `pos` first if nobody has: its whole 2 MiB chunk for a
    /// sequential or large read, its 64 KiB piece for a small random one. `Some(0)` at
    /// the end of the file, `None` when that is not filled and this process no longer
    /// fills (producing it for each small read would cost far more than it saves).
    #[inline]
    fn copy_shared(
        &self,
        sf: &shared::SharedFile,
        pos: u64,
        dst: &mut [u8],
        sequential: bool,
    ) -> Result<Option<usize>, Errno> {
        let n = sf.read(pos, dst);
        if n > 0 {
            return Ok(Some(n));
        }
        if sf.broken() {
            return Ok(None);
        }
        let whole = sequential || dst.len() as u64 >= shared::PIECE;
        let range = sf.fill_range(pos, whole);
        let mut data = vec![0u8; (range.end - range.start) as usize];
        let got = read_file(&*self.fs, self.ino, range.start, &mut data)?;
        if got == data.len() {
            sf.fill_at(range.start, &data);
        }
        let skip = (pos - range.start) as usize;
        let n = got.saturating_sub(skip).min(dst.len());
        dst[..n].copy_from_slice(&data[skip..skip + n]);
        Ok(Some(n))
    }

    /// Copies file bytes at `pos` (in `run`, which is mapped) into `dst` straight from the
    /// image mapping (by pread from the image instead only when `USFS_BULK_MIN` asks: see
    /// [`bulk`]).
    fn copy_mapped(&self, run: &Run, pos: u64, dst: &mut [u8]) -> usize {
        let skip = (pos - run.start) as usize;
        let n = ((run.len as usize) - skip).min(dst.len());
        // SAFETY: `addr..addr + len` is (part of) a slice `mapped_data` returned from
        // `self.fs`, which this data path keeps alive through its Arc (and the caller
        // keeps the data path alive through its Arc<Node>). A back end's mapping lives
        // as long as the back end and is never moved or unmapped before it is dropped
        // (usfs_dev::MmapDevice owns it); mounts are read-only, so the bytes are those
        // mapped_data would return again. `skip + n <= len`.
        let src = unsafe { std::slice::from_raw_parts((run.addr + skip) as *const u8, n) };
        if let Some(b) = self.bulk.as_ref().filter(|b| n >= b.min) {
            if let Some(k) = b.read(src, &mut dst[..n]) {
                return k;
            }
        }
        copy::copy(&mut dst[..n], src);
        n
    }
}
