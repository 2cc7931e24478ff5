//! A seeded random-operation exerciser (in the spirit of fsx and fsstress) for any
//! directory: a kernel mount today, `usfs mount -o rw` later.
//!
//! N workers each own a subtree `t<i>/` and share the files `shared/f<j>`. Each runs
//! seeded random operations — create, write at random offsets (holes, past EOF), append,
//! truncate (shrink, grow), fallocate (allocate, KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE; an
//! EOPNOTSUPP is counted and skipped), rename (within and across directories, over
//! existing entries), link, unlink, mkdir, rmdir, symlink, setxattr/removexattr
//! (`user.*`), chmod, utimens, fsync, read, readdir — and keeps every file's bytes and the
//! namespace in an in-memory model. Each result is checked against the model (including
//! the errno of calls POSIX says must fail), reads compare bytes, and at the end the whole
//! tree is compared with the model. A worker's own subtree is changed by it alone, so its
//! model is exact; a shared file is locked while one worker runs an operation on it.
//!
//! A failure names the seed, the worker, the operation number and the last operations.
//! Memory is bounded by `threads * max_nodes * max_file_size` plus the shared files.

mod model;
mod namespace;
mod ops;
mod verify;

use crate::rng::Rng;
use ops::{Outcome, Worker};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The operations, with the weight each is picked with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// Create a file (EEXIST when the name is taken), maybe with some bytes.
    Create,
    /// pwrite at a random offset: inside, at the end, or past it (a hole).
    Write,
    /// Write with O_APPEND.
    Append,
    /// Shrink or grow.
    Truncate,
    /// fallocate in one of five modes.
    Fallocate,
    /// rename within or across directories, maybe over an existing entry.
    Rename,
    /// A hard link (EPERM for directories, EEXIST for a taken name).
    Link,
    /// unlink (EISDIR for directories).
    Unlink,
    /// mkdir.
    Mkdir,
    /// rmdir (ENOTEMPTY, ENOTDIR).
    Rmdir,
    /// symlink.
    Symlink,
    /// setxattr of a `user.` attribute.
    SetXattr,
    /// removexattr (ENODATA when absent).
    RemoveXattr,
    /// chmod.
    Chmod,
    /// utimensat (no follow) with nanoseconds.
    Utimens,
    /// fsync of a file or directory.
    Fsync,
    /// Read a whole file and compare; stat it.
    Read,
    /// List a directory and compare.
    Readdir,
}

impl Op {
    /// Every operation and its weight.
    pub const WEIGHTS: [(Op, u64); 18] = [
        (Op::Create, 8),
        (Op::Write, 16),
        (Op::Append, 5),
        (Op::Truncate, 5),
        (Op::Fallocate, 5),
        (Op::Rename, 8),
        (Op::Link, 4),
        (Op::Unlink, 6),
        (Op::Mkdir, 4),
        (Op::Rmdir, 3),
        (Op::Symlink, 3),
        (Op::SetXattr, 4),
        (Op::RemoveXattr, 2),
        (Op::Chmod, 3),
        (Op::Utimens, 3),
        (Op::Fsync, 4),
        (Op::Read, 10),
        (Op::Readdir, 3),
    ];

    fn pick(rng: &mut Rng) -> Op {
        let total: u64 = Op::WEIGHTS.iter().map(|w| w.1).sum();
        let mut r = rng.below(total);
        for (op, w) in Op::WEIGHTS {
            if r < w {
                return op;
            }
            r -= w;
        }
        Op::Read
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Seed of everything random.
    pub seed: u64,
    /// Workers (threads), each on its own subtree.
    pub threads: usize,
    /// Operations per worker (0: no limit; then `duration` must be set).
    pub ops: u64,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Largest size a file is made to reach.
    pub max_file_size: u64,
    /// Most inodes in one worker's subtree.
    pub max_nodes: usize,
    /// Files shared by all workers.
    pub shared_files: usize,
    /// Use extended attributes.
    pub xattrs: bool,
    /// Operations kept for the failure report, per worker.
    pub tail: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            seed: 1,
            threads: 2,
            ops: 1000,
            duration: None,
            max_file_size: 256 << 10,
            max_nodes: 64,
            shared_files: 4,
            xattrs: true,
            tail: 32,
        }
    }
}

/// Counts of what ran.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Operations attempted.
    pub ops: u64,
    /// Ran and matched.
    pub done: u64,
    /// Failed with the predicted errno.
    pub expected_errors: u64,
    /// Nothing to run on, or a limit.
    pub skipped: u64,
    /// EOPNOTSUPP from the file system.
    pub unsupported: u64,
    /// Attempts per operation.
    pub per_op: BTreeMap<Op, u64>,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.ops += o.ops;
        self.done += o.done;
        self.expected_errors += o.expected_errors;
        self.skipped += o.skipped;
        self.unsupported += o.unsupported;
        for (k, v) in &o.per_op {
            *self.per_op.entry(*k).or_default() += v;
        }
    }
}

/// A file all workers use.
pub struct Shared {
    /// Its path.
    pub path: PathBuf,
    /// Its model bytes, locked while a worker runs an operation on it.
    pub data: Mutex<Vec<u8>>,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Report {
    /// All workers' counts.
    pub stats: Stats,
    /// Wall time of the operations (not the final check).
    pub elapsed: Duration,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        write!(
            f,
            "{} ops in {:.2} s ({:.0} ops/s): {} done, {} expected errors, {} skipped, {} unsupported",
            s.ops,
            secs,
            s.ops as f64 / secs,
            s.done,
            s.expected_errors,
            s.skipped,
            s.unsupported
        )
    }
}

/// Why a run failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailKind {
    /// Bad options, or the directory could not be prepared (not empty, not writable).
    Setup,
    /// The directory and the model disagree.
    Mismatch,
}

/// Why a run failed: a setup error, or a mismatch between the directory and the model.
#[derive(Clone, Debug)]
pub struct Failure {
    /// Setup error or mismatch.
    pub kind: FailKind,
    /// The run's seed.
    pub seed: u64,
    /// The worker (None: a shared file or the setup).
    pub thread: Option<usize>,
    /// The operation number in that worker (None: the final comparison).
    pub op: Option<u64>,
    /// What did not match.
    pub message: String,
    /// The worker's last operations.
    pub tail: Vec<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.kind == FailKind::Setup {
            return write!(f, "setup: {}", self.message);
        }
        write!(f, "MISMATCH seed {}", self.seed)?;
        if let Some(t) = self.thread {
            write!(f, " thread {t}")?;
        }
        match self.op {
            Some(n) => write!(f, " op {n}")?,
            None => write!(f, " final check")?,
        }
        write!(f, ": {}", self.message)?;
        if !self.tail.is_empty() {
            write!(f, "\nlast operations:")?;
            for l in &self.tail {
                write!(f, "\n  {l}")?;
            }
        }
        Ok(())
    }
}

/// The models after a run, to compare with the directory ([`World::verify`]).
pub struct World {
    root: PathBuf,
    seed: u64,
    trees: Vec<model::Tree>,
    logs: Vec<Vec<String>>,
    shared: Vec<(PathBuf, Vec<u8>)>,
}

impl World {
    /// Compares the whole directory with the model: names, kinds, bytes, sizes, symlink
    /// targets, permissions, link counts (and which names share an inode), `user.` xattrs,
    /// and mtimes set by utimens and not changed since.
    pub fn verify(&self) -> Result<(), Failure> {
        let fail = |thread, message| Failure {
            kind: FailKind::Mismatch,
            seed: self.seed,
            thread,
            op: None,
            message,
            tail: thread
                .map(|t: usize| self.logs[t].clone())
                .unwrap_or_default(),
        };
        for (i, t) in self.trees.iter().enumerate() {
            verify::tree(&self.root.join(format!("t{i}")), t).map_err(|m| fail(Some(i), m))?;
        }
        for (p, data) in &self.shared {
            let got = std::fs::read(p).map_err(|e| fail(None, format!("{}: {e}", p.display())))?;
            ops::compare(p, &got, data).map_err(|m| fail(None, m))?;
        }
        Ok(())
    }
}

/// Runs the workers on `root` (an empty directory, or one holding only lost+found), then
/// compares the whole tree with the model.
pub fn run(root: &Path, opts: &Options) -> Result<Report, Failure> {
    let (report, world) = run_ops(root, opts)?;
    world.verify()?;
    Ok(report)
}

/// Runs the workers on `root` and returns the models without the final comparison.
pub fn run_ops(root: &Path, opts: &Options) -> Result<(Report, World), Failure> {
    let setup_fail = |message: String| Failure {
        kind: FailKind::Setup,
        seed: opts.seed,
        thread: None,
        op: None,
        message,
        tail: Vec::new(),
    };
    let shared = setup(root, opts).map_err(setup_fail)?;
    let mut rng = Rng::new(opts.seed);
    let seeds: Vec<Rng> = (0..opts.threads).map(|_| rng.fork()).collect();
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let deadline = opts.duration.map(|d| start + d);
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = seeds
            .into_iter()
            .enumerate()
            .map(|(id, rng)| {
                let w = Worker {
                    id,
                    root: root.join(format!("t{id}")),
                    tree: model::Tree::new(),
                    rng,
                    opts,
                    shared: &shared,
                    log: VecDeque::new(),
                    stats: Stats::default(),
                };
                let stop = &stop;
                s.spawn(move || work(w, deadline, stop))
            })
            .collect();
        handles.into_iter().map(|h| h.join()).collect()
    });
    let elapsed = start.elapsed();
    let mut world = World {
        root: root.to_path_buf(),
        seed: opts.seed,
        trees: Vec::new(),
        logs: Vec::new(),
        shared: Vec::new(),
    };
    let mut stats = Stats::default();
    let mut first_failure = None;
    for r in results {
        match r {
            Ok((w, failure)) => {
                stats.add(&w.stats);
                first_failure = first_failure.or(failure);
                world.trees.push(w.tree);
                world.logs.push(w.log.into_iter().collect());
            }
            Err(_) => {
                return Err(Failure {
                    kind: FailKind::Mismatch,
                    ..setup_fail("a worker panicked".into())
                })
            }
        }
    }
    if let Some(f) = first_failure {
        return Err(f);
    }
    world.shared = shared
        .into_iter()
        .map(|s| {
            (
                s.path,
                s.data.into_inner().unwrap_or_else(|e| e.into_inner()),
            )
        })
        .collect();
    Ok((Report { stats, elapsed }, world))
}

/// Makes the worker directories and the shared files.
fn setup(root: &Path, opts: &Options) -> Result<Vec<Shared>, String> {
    if opts.threads == 0 || (opts.ops == 0 && opts.duration.is_none()) {
        return Err("need at least one thread, and an op count or a duration".into());
    }
    if opts.max_file_size == 0 {
        return Err("max file size must be at least 1".into());
    }
    let names =
        crate::sys::read_dir_names(root, true).map_err(|e| format!("{}: {e}", root.display()))?;
    if names.iter().any(|n| n != b"lost+found") {
        return Err(format!(
            "{}: not empty (give an empty directory)",
            root.display()
        ));
    }
    let mkdir = |p: &Path| {
        std::fs::create_dir(p)
            .and_then(|()| {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
            })
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    for i in 0..opts.threads {
        mkdir(&root.join(format!("t{i}")))?;
    }
    mkdir(&root.join("shared"))?;
    (0..opts.shared_files)
        .map(|j| {
            let path = root.join("shared").join(format!("f{j}"));
            std::fs::write(&path, b"").map_err(|e| format!("{}: {e}", path.display()))?;
            Ok(Shared {
                path,
                data: Mutex::new(Vec::new()),
            })
        })
        .collect()
}

/// One worker's loop: operations until the count, the deadline, or a failure anywhere.
fn work<'a>(
    mut w: Worker<'a>,
    deadline: Option<Instant>,
    stop: &AtomicBool,
) -> (Worker<'a>, Option<Failure>) {
    while (w.opts.ops == 0 || w.stats.ops < w.opts.ops)
        && deadline.is_none_or(|d| Instant::now() < d)
        && !stop.load(Ordering::Relaxed)
    {
        let op = Op::pick(&mut w.rng);
        *w.stats.per_op.entry(op).or_default() += 1;
        let r = w.step(op);
        w.stats.ops += 1;
        match r {
            Ok(Outcome::Done) => w.stats.done += 1,
            Ok(Outcome::ExpectedError) => w.stats.expected_errors += 1,
            Ok(Outcome::Skipped) => w.stats.skipped += 1,
            Ok(Outcome::Unsupported) => w.stats.unsupported += 1,
            Err(message) => {
                stop.store(true, Ordering::Relaxed);
                let f = Failure {
                    kind: FailKind::Mismatch,
                    seed: w.opts.seed,
                    thread: Some(w.id),
                    op: Some(w.stats.ops - 1),
                    message,
                    tail: w.log.iter().cloned().collect(),
                };
                return (w, Some(f));
            }
        }
    }
    (w, None)
}

#[cfg(test)]
mod tests;
