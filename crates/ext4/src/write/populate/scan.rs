//! Stage 1 of populate: one parallel walk of the source, running while placement and the
//! copy already use what it found ([`Tree`]), that gathers everything placement needs — attributes, xattrs, symlink targets, and for regular files which
//! blocks hold data that is not all zeros (mke2fs -d makes the others holes, and so do
//! we). Each regular file is opened and read once here; the bytes of files up to
//! [`HOLD_MAX`] are kept in memory ([`super::hold`], recycled) so the copy writes them
//! without touching the source again, larger files are read again by the copy.

pub(super) use super::hold::Hold;
use super::hold::{Filler, Held};
use super::source::{self, Dir, DirEnt};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, OnceLock};
use usfs_fs::{Error, Result, Timestamp};

/// Files up to this size are kept in memory from the scan to the copy (memory
/// allowing, see [`super::hold`]); larger ones are read again by the copy, which for them
/// costs little next to their data. Keeping saves the copy a second openat + pread +
/// close per file; with the memory recycled that pays for any file up to the chunk
/// size, and 64 KiB keeps the 256 KiB chunks well filled.
pub(super) const HOLD_MAX: u64 = 64 << 10;
/// Largest block size: the zero pattern blocks are compared with.
static ZEROS: [u8; 65536] = [0; 65536];
/// Bytes read at a time from a file that is not kept (checking for zero blocks).
const READ_BUF: usize = 1 << 20;

/// The attributes of a source entry.
#[derive(Clone, Debug, Default)]
pub(super) struct Meta {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub rdev: u64,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
}

fn ts(sec: i64, nsec: i64) -> Timestamp {
    Timestamp {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

impl Meta {
    fn from_stat(st: &libc::stat) -> Meta {
        Meta {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size.max(0) as u64,
            atime: ts(st.st_atime, st.st_atime_nsec),
            mtime: ts(st.st_mtime, st.st_mtime_nsec),
            ctime: ts(st.st_ctime, st.st_ctime_nsec),
            rdev: st.st_rdev,
            dev: st.st_dev,
            ino: st.st_ino,
            nlink: st.st_nlink,
        }
    }
}

/// Block ranges `(lblk, count)`: most files have one, kept inline (no allocation).
pub(super) type Runs = smallvec::SmallVec<[(u64, u64); 1]>;

/// A regular file's data as the scan found it.
#[derive(Debug, Default)]
pub(super) struct FileData {
    /// Block ranges `(lblk, count)`, sorted, that hold data other than zeros: what gets
    /// allocated (everything else is a hole).
    pub blocks: Runs,
    /// The file's bytes, when kept in memory.
    pub held: Option<Held>,
}

/// What scanning a directory found: its own attributes and its entries.
pub(super) struct DirScan {
    pub meta: Meta,
    pub xattrs: Xattrs,
    /// Children (node indexes), sorted by name.
    pub kids: Vec<usize>,
}

pub(super) enum Kind {
    /// Set once the directory has been scanned ([`Tree::dir`]).
    Dir(OnceLock<Box<DirScan>>),
    File(FileData),
    Symlink(Vec<u8>),
    Special,
}

pub(super) struct Node {
    pub name: Vec<u8>,
    /// The parent directory's node (the root is its own parent).
    pub parent: usize,
    /// Attributes; for a directory they are in its [`DirScan`] (default here).
    pub meta: Meta,
    /// Extended attributes; for a directory in its [`DirScan`] (empty here).
    pub xattrs: Xattrs,
    pub kind: Kind,
}

/// A directory waiting to be scanned.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    /// Where placement meets it: the ranks of the directories on its path among their
    /// parents' entries (depth first in name order is ascending `order`). The scan
    /// takes directories in this order, so what it keeps in memory is soon placed and
    /// copied, and the memory reused.
    order: Vec<u32>,
    node: usize,
    path: PathBuf,
}

/// Directories waiting to be scanned and how the scan is going.
struct Progress {
    /// Directories to scan, the one placement needs first on top.
    todo: BinaryHeap<Reverse<Pending>>,
    /// Directories being scanned.
    busy: usize,
    failed: Option<Error>,
    /// Every worker has stopped (after the last directory, or an error).
    stopped: bool,
    /// Workers waiting for a directory to scan (on [`Tree::work_cv`]).
    idle: usize,
    /// Directories scanned so far.
    done: u64,
    /// Placement waits (on [`Tree::ready_cv`]) for this directory node, and to be woken
    /// once it is scanned and `done` has reached the count given.
    placement_waits: Option<(usize, u64)>,
}

impl Progress {
    /// Nothing more will be scanned: every directory is, or the scan failed or stopped.
    fn over(&self) -> bool {
        self.failed.is_some() || self.stopped || (self.todo.is_empty() && self.busy == 0)
    }
}

/// Directories placement lets the scan finish past the one it waits for before it is
/// woken (unless the scan runs dry first): it then places a run of directories per
/// wake-up instead of sleeping and waking once per directory.
const PLACEMENT_LAG: u64 = 16;

/// The source tree, filled in by the scan while placement and copy already use it:
/// nodes never change once added (index 0 is the root), a directory's entries appear
/// all at once when it has been scanned ([`Tree::dir`] waits for that).
pub(super) struct Tree {
    pub root: PathBuf,
    nodes: boxcar::Vec<Node>,
    /// Memory of kept files.
    pub hold: Hold,
    progress: Mutex<Progress>,
    /// Idle scan workers wait here for directories to scan (or the end).
    work_cv: Condvar,
    /// Placement waits here for a directory (see [`Progress::placement_waits`]).
    ready_cv: Condvar,
    /// Held while a directory's entries are added to `nodes`, so they get consecutive
    /// indexes (placement walks them in order).
    adding: Mutex<()>,
    bs: usize,
}

impl Tree {
    /// A tree to scan from directory `src` for a file system of `bs`-byte blocks,
    /// keeping small files' bytes in `hold` until they are copied.
    pub(super) fn new(src: &Path, bs: u32, hold: Hold) -> Tree {
        let nodes = boxcar::Vec::new();
        nodes.push(Node {
            name: Vec::new(),
            parent: 0,
            meta: Meta::default(),
            xattrs: Vec::new(),
            kind: Kind::Dir(OnceLock::new()),
        });
        Tree {
            root: src.to_path_buf(),
            nodes,
            hold,
            progress: Mutex::new(Progress {
                todo: BinaryHeap::from([Reverse(Pending {
                    order: Vec::new(),
                    node: 0,
                    path: src.to_path_buf(),
                })]),
                busy: 0,
                failed: None,
                stopped: false,
                idle: 0,
                done: 0,
                placement_waits: None,
            }),
            work_cv: Condvar::new(),
            ready_cv: Condvar::new(),
            adding: Mutex::new(()),
            bs: bs as usize,
        }
    }

    /// Node `i` (any index the tree handed out).
    pub(super) fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// Nodes added so far (all of them once [`Tree::scan`] has returned).
    pub(super) fn len(&self) -> usize {
        self.nodes.count()
    }

    /// Directory `d` as scanned, waiting for its scan; an error when the scan stopped
    /// before reaching it.
    pub(super) fn dir(&self, d: usize) -> Result<&DirScan> {
        let Kind::Dir(once) = &self.nodes[d].kind else {
            return Err(Error::NotDir);
        };
        let stopped = || Error::Io(std::io::Error::other("the scan of the source stopped"));
        if let Some(ds) = once.get() {
            return Ok(&**ds);
        }
        // Scan workers must not wait for memory while this waits for them.
        self.hold.set_starved(true);
        let r = self.wait_dir(d, once, stopped);
        self.hold.set_starved(false);
        r
    }

    fn wait_dir<'t>(
        &self,
        d: usize,
        once: &'t OnceLock<Box<DirScan>>,
        stopped: impl Fn() -> Error,
    ) -> Result<&'t DirScan> {
        let mut p = self.progress.lock().map_err(|_| stopped())?;
        let r = loop {
            if let Some(ds) = once.get() {
                break Ok(&**ds);
            }
            if p.over() {
                break Err(stopped());
            }
            p.placement_waits = Some((d, p.done + PLACEMENT_LAG));
            p = match self.ready_cv.wait(p) {
                Ok(p) => p,
                Err(_) => return Err(stopped()),
            };
        };
        p.placement_waits = None;
        r
    }

    /// Who should act on the scan's progress, decided with `p` locked: idle workers,
    /// one per directory waiting; placement when its directory is ready and either
    /// [`PLACEMENT_LAG`] more are or the queue is empty; everybody when the scan is over.
    /// Condition variables are only signalled when someone waits (a signal is a system
    /// call even then), and after the lock is let go ([`Wake::send`]).
    fn wake(&self, p: &Progress) -> Wake<'_> {
        let mut w = Wake {
            tree: self,
            workers: 0,
            placement: false,
        };
        if p.over() {
            w.workers = if p.idle > 0 { usize::MAX } else { 0 };
            w.placement = p.placement_waits.is_some();
            return w;
        }
        w.workers = p.idle.min(p.todo.len());
        if let Some((d, until)) = p.placement_waits {
            let ready = matches!(&self.nodes[d].kind, Kind::Dir(o) if o.get().is_some());
            w.placement = ready && (p.done >= until || p.todo.is_empty());
        }
        w
    }

    /// Placement is over (done, failed or panicked): from now on the scan keeps no
    /// more files in memory and never waits for it.
    pub(super) fn placement_done(&self) {
        self.hold.close();
    }

    /// The source path of node `i`.
    pub(super) fn path(&self, mut i: usize) -> PathBuf {
        let mut names = Vec::new();
        while i != 0 {
            names.push(i);
            i = self.nodes[i].parent;
        }
        let mut p = self.root.clone();
        for &k in names.iter().rev() {
            p.push(OsStr::from_bytes(&self.nodes[k].name));
        }
        p
    }

    /// Scans the whole tree with `threads` workers; returns when every directory has
    /// been read, or with the first error.
    pub(super) fn scan(&self, threads: usize) -> Result<()> {
        std::thread::scope(|s| {
            for _ in 0..threads.max(1) {
                s.spawn(|| self.work());
            }
        });
        // Placement may be waiting for a directory nobody will scan now.
        let mut p = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        p.stopped = true;
        let wake = self.wake(&p);
        let r = match p.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        };
        drop(p);
        wake.send();
        r
    }

    /// One scan worker: takes directories until none is left.
    fn work(&self) {
        lower_priority();
        let mut guard = PanicGuard {
            tree: self,
            busy: false,
        };
        let mut w = Worker {
            bs: self.bs,
            dents: vec![0u8; 64 << 10],
            ents: Vec::new(),
            name: Vec::new(),
            read_buf: Vec::new(),
            slot: Filler::new(&self.hold),
        };
        loop {
            let Pending {
                order,
                node: d,
                path: dpath,
            } = {
                let Ok(mut q) = self.progress.lock() else {
                    return;
                };
                loop {
                    if q.failed.is_some() {
                        return;
                    }
                    if let Some(Reverse(d)) = q.todo.pop() {
                        q.busy += 1;
                        guard.busy = true;
                        break d;
                    }
                    if q.busy == 0 {
                        return;
                    }
                    // Its partly filled chunk must not stay pinned while it idles.
                    w.slot.retire();
                    q.idle += 1;
                    q = match self.work_cv.wait(q) {
                        Ok(q) => q,
                        Err(_) => return,
                    };
                    q.idle -= 1;
                }
            };
            let result = w.scan_dir(d, &dpath).map(|(meta, xattrs, kids)| {
                // Published before the progress lock is taken below, where placement
                // (checking under that lock) is woken.
                let mut idx = Vec::with_capacity(kids.len());
                let mut subdirs = Vec::new();
                let adding = self.adding.lock().unwrap_or_else(|e| e.into_inner());
                for (rank, (k, sub)) in kids.into_iter().enumerate() {
                    let i = self.nodes.push(k);
                    if let Some(path) = sub {
                        let mut o = order.clone();
                        o.push(rank as u32);
                        subdirs.push(Reverse(Pending {
                            order: o,
                            node: i,
                            path,
                        }));
                    }
                    idx.push(i);
                }
                drop(adding);
                if let Kind::Dir(once) = &self.nodes[d].kind {
                    let _ = once.set(Box::new(DirScan {
                        meta,
                        xattrs,
                        kids: idx,
                    }));
                }
                subdirs
            });
            let Ok(mut q) = self.progress.lock() else {
                return;
            };
            q.busy -= 1;
            guard.busy = false;
            q.done += 1;
            match result {
                Ok(subdirs) => q.todo.extend(subdirs),
                Err(e) => {
                    q.failed.get_or_insert(e);
                }
            }
            let wake = self.wake(&q);
            drop(q);
            wake.send();
        }
    }
}

/// Signals to send once the progress lock is let go ([`Tree::wake`]).
#[must_use]
struct Wake<'a> {
    tree: &'a Tree,
    /// Idle workers to wake (`usize::MAX`: all).
    workers: usize,
    placement: bool,
}

impl Wake<'_> {
    fn send(self) {
        if self.workers == usize::MAX {
            self.tree.work_cv.notify_all();
        } else {
            for _ in 0..self.workers {
                self.tree.work_cv.notify_one();
            }
        }
        if self.placement {
            self.tree.ready_cv.notify_one();
        }
    }
}

/// Ends the scan with an error when a worker panics: its directory would otherwise stay
/// "being scanned" and the others, and placement, would wait for it forever.
struct PanicGuard<'a> {
    tree: &'a Tree,
    /// The worker is scanning a directory (counted in `busy`).
    busy: bool,
}

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let mut q = self.tree.progress.lock().unwrap_or_else(|e| e.into_inner());
        if self.busy {
            q.busy -= 1;
        }
        q.failed
            .get_or_insert_with(|| Error::Io(std::io::Error::other("scan: a worker panicked")));
        let wake = self.tree.wake(&q);
        drop(q);
        wake.send();
    }
}

/// How much less CPU priority (nice) scan workers take than the rest of populate.
const SCAN_NICENESS: i32 = 5;

/// Lowers the calling thread's CPU priority by [`SCAN_NICENESS`]. The scan feeds
/// placement (one thread) and the copy: when the CPUs are busy, those should run first,
/// or placement falls behind the many scan workers and finishes alone after them (and
/// kept files wait longer for the copy). A failure leaves the priority as it was.
fn lower_priority() {
    // SAFETY: gettid, getpriority and setpriority take integers only; on Linux
    // PRIO_PROCESS with a thread id applies to that thread alone.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let cur = libc::getpriority(libc::PRIO_PROCESS, tid);
        if *libc::__errno_location() == 0 {
            libc::setpriority(libc::PRIO_PROCESS, tid, (cur + SCAN_NICENESS).min(19));
        }
    }
}

pub(super) fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        e.kind(),
        format!("{}: {e}", path.display()),
    ))
}

/// Block ranges `(lblk, count)` covering byte ranges.
pub(super) fn block_ranges(ranges: &[(u64, u64)], bs: u64) -> Runs {
    let mut out = Runs::new();
    for &(s, e) in ranges {
        if e <= s {
            continue;
        }
        let (a, b) = (s / bs, e.div_ceil(bs));
        push_run(&mut out, a, b - a);
    }
    out
}

/// Appends blocks `[a, a+n)` to sorted runs, joining a run it touches or overlaps.
fn push_run(out: &mut Runs, a: u64, n: u64) {
    match out.last_mut() {
        Some(r) if r.0 + r.1 >= a => r.1 = r.1.max(a + n - r.0),
        _ => out.push((a, n)),
    }
}

/// Adds to `out` the blocks of `data` (the file's bytes from block `first`) that are not
/// all zeros; the last block may be short (the end of the file).
fn nonzero_blocks(data: &[u8], first: u64, bs: usize, out: &mut Runs) {
    for (i, b) in data.chunks(bs).enumerate() {
        if b != &ZEROS[..b.len()] {
            push_run(out, first + i as u64, 1);
        }
    }
}

/// A worker's buffers.
struct Worker<'a> {
    bs: usize,
    dents: Vec<u8>,
    ents: Vec<DirEnt>,
    name: Vec<u8>,
    read_buf: Vec<u8>,
    slot: Filler<'a>,
}

/// Extended attributes as (name, value) pairs.
pub(super) type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// A child found in a directory: the node, and its path when it is a directory to scan.
type Found = (Node, Option<PathBuf>);

impl Worker<'_> {
    /// Reads directory `dpath` (node `d`): its own attributes and xattrs, and its
    /// entries sorted by name.
    fn scan_dir(&mut self, d: usize, dpath: &Path) -> Result<(Meta, Xattrs, Vec<Found>)> {
        let dir = Dir::open(dpath).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOTDIR) | Some(libc::ELOOP) if d == 0 => Error::NotDir,
            _ => io_err(dpath, e),
        })?;
        let meta = Meta::from_stat(&source::fstat(dir.fd()).map_err(|e| io_err(dpath, e))?);
        let xattrs = source::xattrs_fd(dir.fd()).map_err(|e| io_err(dpath, e))?;
        self.ents.clear();
        dir.entries(&mut self.dents, &mut self.ents)
            .map_err(|e| io_err(dpath, e))?;
        let mut ents = std::mem::take(&mut self.ents);
        ents.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let mut out = Vec::with_capacity(ents.len());
        for e in ents.drain(..) {
            out.push(self.entry(&dir, dpath, d, e)?);
        }
        self.ents = ents;
        Ok((meta, xattrs, out))
    }

    /// One entry of `dir`.
    fn entry(&mut self, dir: &Dir, dpath: &Path, d: usize, e: DirEnt) -> Result<Found> {
        if e.name.len() > 255 {
            return Err(Error::NameTooLong);
        }
        self.name.clear();
        self.name.extend_from_slice(&e.name);
        self.name.push(0);
        let name = std::mem::take(&mut self.name);
        let r = self.entry_named(dir, dpath, d, e, CStr::from_bytes_with_nul(&name));
        self.name = name;
        r
    }

    fn entry_named(
        &mut self,
        dir: &Dir,
        dpath: &Path,
        d: usize,
        e: DirEnt,
        cname: std::result::Result<&CStr, std::ffi::FromBytesWithNulError>,
    ) -> Result<Found> {
        let path = || dpath.join(OsStr::from_bytes(&e.name));
        let cname = cname.map_err(|_| Error::Invalid)?;
        let node = |meta, xattrs, kind| Node {
            name: e.name.clone(),
            parent: d,
            meta,
            xattrs,
            kind,
        };
        if e.d_type == libc::DT_DIR {
            // Its attributes are read when it is scanned.
            return Ok((
                node(Meta::default(), Vec::new(), Kind::Dir(OnceLock::new())),
                Some(path()),
            ));
        }
        if e.d_type == libc::DT_REG {
            // Opened right away; if it is no longer a plain file, look again below.
            if let Ok(f) = dir.open_file(cname) {
                let st = source::fstat(f.as_fd()).map_err(|er| io_err(&path(), er))?;
                if st.st_mode & libc::S_IFMT == libc::S_IFREG {
                    let (meta, xattrs, data) =
                        self.file(&f, &st).map_err(|er| io_err(&path(), er))?;
                    return Ok((node(meta, xattrs, Kind::File(data)), None));
                }
            }
        }
        let st = dir.stat_at(cname).map_err(|er| io_err(&path(), er))?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => Ok((
                node(Meta::default(), Vec::new(), Kind::Dir(OnceLock::new())),
                Some(path()),
            )),
            libc::S_IFREG => {
                let f = dir.open_file(cname).map_err(|er| io_err(&path(), er))?;
                let st = source::fstat(f.as_fd()).map_err(|er| io_err(&path(), er))?;
                let (meta, xattrs, data) = self.file(&f, &st).map_err(|er| io_err(&path(), er))?;
                Ok((node(meta, xattrs, Kind::File(data)), None))
            }
            t => {
                let p = path();
                let kind = if t == libc::S_IFLNK {
                    Kind::Symlink(dir.read_link(cname).map_err(|er| io_err(&p, er))?)
                } else {
                    Kind::Special
                };
                let xattrs = source::xattrs_path(&p).map_err(|er| io_err(&p, er))?;
                Ok((node(Meta::from_stat(&st), xattrs, kind), None))
            }
        }
    }

    /// A regular file: attributes, xattrs, and its non-zero blocks (its bytes kept when
    /// it is small and the budget allows).
    fn file(&mut self, f: &File, st: &libc::stat) -> std::io::Result<(Meta, Xattrs, FileData)> {
        let meta = Meta::from_stat(st);
        let xattrs = source::xattrs_fd(f.as_fd())?;
        let size = meta.size;
        let bs = self.bs;
        let mut data = FileData::default();
        if size == 0 {
            return Ok((meta, xattrs, data));
        }
        if size <= HOLD_MAX {
            if let Some((h, buf)) = self.slot.reserve(size as usize) {
                // Holes read as zeros and become holes again; a file that shrank since
                // fstat reads as zeros past its end.
                let got = source::read_full(f, buf, 0)?;
                buf[got..].fill(0);
                nonzero_blocks(buf, 0, bs, &mut data.blocks);
                if data.blocks.is_empty() {
                    self.slot.unreserve(h, size as usize);
                } else {
                    data.held = Some(h);
                }
                return Ok((meta, xattrs, data));
            }
        }
        // Read through (again in the copy phase): data ranges only when it has holes.
        let ranges = if (st.st_blocks.max(0) as u64) * 512 >= size {
            vec![(0, size)]
        } else {
            source::data_ranges(f, size)
        };
        let per = (READ_BUF / bs).max(1) as u64;
        if self.read_buf.len() < per as usize * bs {
            self.read_buf.resize(per as usize * bs, 0);
        }
        for (lblk, count) in block_ranges(&ranges, bs as u64) {
            let mut b = lblk;
            while b < lblk + count {
                let n = per.min(lblk + count - b);
                let off = b * bs as u64;
                let want = (n * bs as u64).min(size.saturating_sub(off)) as usize;
                let buf = &mut self.read_buf[..want];
                let got = source::read_full(f, buf, off)?;
                buf[got..].fill(0);
                nonzero_blocks(buf, b, bs, &mut data.blocks);
                b += n;
            }
        }
        Ok((meta, xattrs, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_blocks_are_left_out() {
        let mut data = vec![0u8; 4096 * 5 + 100];
        data[4096] = 1; // block 1
        data[4096 * 3 + 4095] = 2; // block 3
        let mut out = Runs::new();
        nonzero_blocks(&data, 10, 4096, &mut out);
        assert_eq!(out[..], [(11, 1), (13, 1)]);
        data[4096 * 5 + 99] = 3; // the short last block
        data[4096 * 2] = 4;
        let mut out = Runs::new();
        nonzero_blocks(&data, 0, 4096, &mut out);
        assert_eq!(out[..], [(1, 3), (5, 1)]);
    }

    #[test]
    fn ranges_join() {
        assert_eq!(
            block_ranges(&[(0, 10), (4000, 5000), (9000, 9001)], 4096)[..],
            [(0, 3)]
        );
        assert_eq!(
            block_ranges(&[(0, 1), (8192, 8193)], 4096)[..],
            [(0, 1), (2, 1)]
        );
    }
}
