//! The tree a source fills in while its consumers (placement, copy) already use it:
//! nodes never change once added (index 0 is the root), a directory's entries appear all
//! at once when it has been scanned ([`Tree::dir`] waits for that).
//!
//! Directories are scanned by many workers at once ([`Tree::scan`]), in the order a
//! depth-first walk in name order meets them (a priority queue), so a consumer that
//! walks the tree that way (mkfs.ext4's placement) gets each directory soon, and memory
//! kept for small files ([`crate::hold`]) is soon released and reused. How one
//! directory is read is the source's ([`DirWorker`]); the scheduling is here.

use crate::entry::{DirScan, Kind, Meta, Node, Xattrs};
use crate::hold::Hold;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use usfs_fs::{Error, Result};

/// What reading one directory found: its own attributes and its entries sorted by name
/// (directories among them as [`Node::unscanned_dir`], scanned later).
pub struct Listing {
    /// The directory's attributes.
    pub meta: Meta,
    /// The directory's extended attributes.
    pub xattrs: Xattrs,
    /// Its entries, sorted by name, each with its `parent` set to the directory.
    pub entries: Vec<Node>,
}

/// One scan worker of a source: reads directories of the tree, one at a time.
pub trait DirWorker {
    /// Reads directory node `d`.
    fn scan_dir(&mut self, tree: &Tree, d: usize) -> Result<Listing>;
    /// The worker is about to wait for work: let go of what it should not keep meanwhile.
    fn idle(&mut self) {}
}

/// A directory waiting to be scanned.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Pending {
    /// Where a depth-first walk in name order meets it: the ranks of the directories on
    /// its path among their parents' entries (that walk is ascending `order`). The scan
    /// takes directories in this order, so what it keeps in memory is soon consumed and
    /// the memory reused.
    order: Vec<u32>,
    node: usize,
}

/// Directories waiting to be scanned and how the scan is going.
struct Progress {
    /// Directories to scan, the one the consumer needs first on top.
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
    /// The consumer waits (on [`Tree::ready_cv`]) for this directory node, and to be
    /// woken once it is scanned and `done` has reached the count given.
    consumer_waits: Option<(usize, u64)>,
}

impl Progress {
    /// Nothing more will be scanned: every directory is, or the scan failed or stopped.
    fn over(&self) -> bool {
        self.failed.is_some() || self.stopped || (self.todo.is_empty() && self.busy == 0)
    }
}

/// Directories the consumer lets the scan finish past the one it waits for before it is
/// woken (unless the scan runs dry first): it then takes a run of directories per
/// wake-up instead of sleeping and waking once per directory.
const CONSUMER_LAG: u64 = 16;

/// How a tree is to be scanned.
pub struct ScanOptions {
    /// Read every regular file in blocks of this size for its non-zero blocks
    /// ([`crate::FileData`]), keeping small files' bytes in `hold` until they are
    /// released; `None`: attributes only.
    pub block_size: Option<u32>,
    /// Memory for kept files (unused without `block_size`: `Hold::new(0, 0)`).
    pub hold: Hold,
    /// A consumer works at the same time (mkfs.ext4's placement and copy): scan workers
    /// run at a lower CPU priority so it keeps up with them. Off, they run at the
    /// caller's priority (a scan nobody waits on beside: mkfs.erofs's).
    pub background: bool,
}

/// The source tree, filled in by a scan while consumers already use it.
pub struct Tree {
    nodes: boxcar::Vec<Node>,
    /// Memory of kept files.
    pub hold: Hold,
    progress: Mutex<Progress>,
    /// Idle scan workers wait here for directories to scan (or the end).
    work_cv: Condvar,
    /// The consumer waits here for a directory (see [`Progress::consumer_waits`]).
    ready_cv: Condvar,
    /// Held while a directory's entries are added to `nodes`, so they get consecutive
    /// indexes (consumers walk them in order).
    adding: Mutex<()>,
    /// Block size when regular files are read during the scan.
    block_size: Option<u32>,
    /// Scan workers run at lower priority ([`ScanOptions::background`]).
    background: bool,
    /// Entries left out ([`Tree::excluding`]).
    exclude: Option<crate::Exclude>,
}

impl Tree {
    /// An empty tree (just its root, not scanned), to be scanned as `opts` say.
    pub fn new(opts: ScanOptions) -> Tree {
        let ScanOptions {
            block_size,
            hold,
            background,
        } = opts;
        let nodes = boxcar::Vec::new();
        nodes.push(Node::unscanned_dir(Vec::new(), 0));
        Tree {
            nodes,
            hold,
            progress: Mutex::new(Progress {
                todo: BinaryHeap::from([Reverse(Pending {
                    order: Vec::new(),
                    node: 0,
                })]),
                busy: 0,
                failed: None,
                stopped: false,
                idle: 0,
                done: 0,
                consumer_waits: None,
            }),
            work_cv: Condvar::new(),
            ready_cv: Condvar::new(),
            adding: Mutex::new(()),
            block_size,
            background,
            exclude: None,
        }
    }

    /// The tree, leaving out of its scan the entries `exclude` names (a directory left
    /// out is not read).
    pub fn excluding(mut self, exclude: crate::Exclude) -> Tree {
        self.exclude = (!exclude.is_empty()).then_some(exclude);
        self
    }

    /// The block size files are read in during the scan (`None`: they are not read).
    pub fn block_size(&self) -> Option<u32> {
        self.block_size
    }

    /// Whether scan workers run at lower priority ([`ScanOptions::background`]).
    pub fn background(&self) -> bool {
        self.background
    }

    /// Node `i` (any index the tree handed out).
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// Nodes added so far (all of them once the scan has returned).
    pub fn len(&self) -> usize {
        self.nodes.count()
    }

    /// Whether the tree has no node (never: the root is there from the start).
    pub fn is_empty(&self) -> bool {
        self.nodes.count() == 0
    }

    /// Directory `d` as scanned, waiting for its scan; an error when the scan stopped
    /// before reaching it.
    pub fn dir(&self, d: usize) -> Result<&DirScan> {
        let Kind::Dir(once) = &self.nodes[d].kind else {
            return Err(Error::NotDir);
        };
        if let Some(ds) = once.get() {
            return Ok(&**ds);
        }
        // Scan workers must not wait for memory while this waits for them.
        self.hold.set_starved(true);
        let r = self.wait_dir(d);
        self.hold.set_starved(false);
        r
    }

    fn wait_dir(&self, d: usize) -> Result<&DirScan> {
        let stopped = || Error::Io(std::io::Error::other("the scan of the source stopped"));
        let Kind::Dir(once) = &self.nodes[d].kind else {
            return Err(Error::NotDir);
        };
        let mut p = self.progress.lock().map_err(|_| stopped())?;
        let r = loop {
            if let Some(ds) = once.get() {
                break Ok(&**ds);
            }
            if p.over() {
                break Err(stopped());
            }
            p.consumer_waits = Some((d, p.done + CONSUMER_LAG));
            p = match self.ready_cv.wait(p) {
                Ok(p) => p,
                Err(_) => return Err(stopped()),
            };
        };
        p.consumer_waits = None;
        r
    }

    /// Who should act on the scan's progress, decided with `p` locked: idle workers,
    /// one per directory waiting; the consumer when its directory is ready and either
    /// [`CONSUMER_LAG`] more are or the queue is empty; everybody when the scan is over.
    /// Condition variables are only signalled when someone waits (a signal is a system
    /// call even then), and after the lock is let go ([`Wake::send`]).
    fn wake(&self, p: &Progress) -> Wake<'_> {
        let mut w = Wake {
            tree: self,
            workers: 0,
            consumer: false,
        };
        if p.over() {
            w.workers = if p.idle > 0 { usize::MAX } else { 0 };
            w.consumer = p.consumer_waits.is_some();
            return w;
        }
        w.workers = p.idle.min(p.todo.len());
        if let Some((d, until)) = p.consumer_waits {
            let ready = matches!(&self.nodes[d].kind, Kind::Dir(o) if o.get().is_some());
            w.consumer = ready && (p.done >= until || p.todo.is_empty());
        }
        w
    }

    /// The consumer is over (done, failed or panicked): from now on the scan keeps no
    /// more files in memory and never waits for it.
    pub fn consumer_done(&self) {
        self.hold.close();
    }

    /// Listing `l` of directory `d` without the entries left out.
    fn filtered(&self, d: usize, mut l: Listing) -> Listing {
        if let Some(ex) = &self.exclude {
            let dir = self.path_under(Path::new(""), d);
            l.entries
                .retain(|e| !ex.matches(&dir.join(OsStr::from_bytes(&e.name))));
        }
        l
    }

    /// The path of node `i` below `base`, the path of the root (`base` itself for the
    /// root).
    pub fn path_under(&self, base: &Path, mut i: usize) -> PathBuf {
        let mut names = Vec::new();
        while i != 0 {
            names.push(i);
            i = self.nodes[i].parent;
        }
        let mut p = base.to_path_buf();
        for &k in names.iter().rev() {
            p.push(OsStr::from_bytes(&self.nodes[k].name));
        }
        p
    }

    /// Scans the whole tree with `threads` workers, each made by `worker` on its own
    /// thread; returns when every directory has been read, or with the first error.
    pub fn scan<W: DirWorker>(&self, threads: usize, worker: impl Fn() -> W + Sync) -> Result<()> {
        std::thread::scope(|s| {
            for _ in 0..threads.max(1) {
                s.spawn(|| self.work(worker()));
            }
        });
        // The consumer may be waiting for a directory nobody will scan now.
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

    /// The next directory to scan, counted busy; `None` when the scan is over for this
    /// worker.
    fn next_dir<W: DirWorker>(&self, w: &mut W, guard: &mut PanicGuard<'_>) -> Option<Pending> {
        let mut q = self.progress.lock().ok()?;
        loop {
            if q.failed.is_some() {
                return None;
            }
            if let Some(Reverse(d)) = q.todo.pop() {
                q.busy += 1;
                guard.busy = true;
                return Some(d);
            }
            if q.busy == 0 {
                return None;
            }
            w.idle();
            q.idle += 1;
            q = self.work_cv.wait(q).ok()?;
            q.idle -= 1;
        }
    }

    /// One scan worker: takes directories until none is left.
    fn work<W: DirWorker>(&self, mut w: W) {
        let mut guard = PanicGuard {
            tree: self,
            busy: false,
        };
        while let Some(Pending { order, node: d }) = self.next_dir(&mut w, &mut guard) {
            let result = w
                .scan_dir(self, d)
                .map(|l| self.publish(d, &order, self.filtered(d, l)));
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

    /// Adds the entries of directory `d` (met at `order`) and publishes its scan (before
    /// the progress lock is taken, where the consumer is woken); returns its
    /// subdirectories to scan.
    fn publish(&self, d: usize, order: &[u32], l: Listing) -> Vec<Reverse<Pending>> {
        let mut idx = Vec::with_capacity(l.entries.len());
        let mut subdirs = Vec::new();
        let adding = self.adding.lock().unwrap_or_else(|e| e.into_inner());
        for (rank, k) in l.entries.into_iter().enumerate() {
            let is_dir = k.is_dir();
            let i = self.nodes.push(k);
            if is_dir {
                let mut o = order.to_vec();
                o.push(rank as u32);
                subdirs.push(Reverse(Pending { order: o, node: i }));
            }
            idx.push(i);
        }
        drop(adding);
        if let Kind::Dir(once) = &self.nodes[d].kind {
            let _ = once.set(Box::new(DirScan {
                meta: l.meta,
                xattrs: l.xattrs,
                kids: idx,
            }));
        }
        subdirs
    }
}

/// Signals to send once the progress lock is let go ([`Tree::wake`]).
#[must_use]
struct Wake<'a> {
    tree: &'a Tree,
    /// Idle workers to wake (`usize::MAX`: all).
    workers: usize,
    consumer: bool,
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
        if self.consumer {
            self.tree.ready_cv.notify_one();
        }
    }
}

/// Ends the scan with an error when a worker panics: its directory would otherwise stay
/// "being scanned" and the others, and the consumer, would wait for it forever.
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
