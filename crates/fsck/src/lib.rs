//! `usfs fsck`: a parallel ext4 checker in the design of pFSCK (check mode).
//!
//! The passes are e2fsck's (0 superblock and descriptors, 1 inodes and blocks, 1B shared
//! blocks, 2 directories, 3 connectivity, 4 reference counts, 5 group summaries), but
//! built parallel: pass 1 runs over chunks of the used inode tables and pass 2 over the
//! directory blocks pass 1 finds, at the same time, on a pool of workers that a scheduler
//! moves between the two stages by outstanding weighted work (`sched`). Each worker
//! keeps its own context (`ctx::Worker`); the only shared state is a few atomic arrays
//! (`state`). Checks that need pass 1's verdict on another inode are deferred and
//! certified after pass 1 (in-order commit). Problems come from one table ([`problem`]).
//!
//! [`check`] runs in four steps, a module each: `plan` (open, pass 0, the pass-1 work
//! units), `pipeline` (passes 1 and 2 on the workers, then the deferred checks),
//! `merge` (the per-thread contexts joined, then passes 1B, 3, 4 and 5) and `summary`.
//! Only [`check`], [`Options`], [`Report`], [`Trace`] and [`problem`] are the crate's
//! interface (with [`Summary`] and [`Counters`], the types of their fields).

pub(crate) mod backup_gdt;
pub(crate) mod badblocks;
pub(crate) mod blocks;
mod chunked;
pub(crate) mod ctx;
pub(crate) mod dirio;
mod dirmap;
mod ea_inode;
mod encrypt;
mod extent_shape;
pub(crate) mod htree;
mod iflags;
mod journal;
mod merge;
mod pass0;
mod pass1;
mod pass1b;
mod pass2;
mod pass3;
mod pass4;
mod pass5;
mod pipeline;
mod plan;
pub mod problem;
pub mod quota;
mod ranges;
mod refs;
pub mod repair;
mod sbfields;
pub(crate) mod sched;
mod special;
pub(crate) mod state;
mod summary;

pub use ctx::Counters;
use ctx::Ctx;
use problem::{Problem, Severity};
use std::time::Instant;
pub use summary::Summary;
use usfs_dev::Device;
use usfs_ext4::Ext4;

/// (phase, seconds), in the order the phases ran: the trace's timing.
type Phases = Vec<(&'static str, f64)>;

/// How to check.
#[derive(Clone, Debug)]
pub struct Options {
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Run workers at SCHED_IDLE and size the core budget from idle CPUs.
    pub nice: bool,
    /// Inodes per pass-1 work unit.
    pub chunk_inodes: u32,
    /// A repair's: the journal was deleted before it began (before the replay,
    /// [`repair::reset_before_replay`]), to be made anew once the image is clean.
    pub journal_deleted: bool,
    /// The check is a repair's: what e2fsck looks at only when it may write is looked
    /// at too (the Hurd's filetype feature).
    pub repairing: bool,
    /// The check is a preen's (e2fsck -p), which never falls back to the backup
    /// descriptors: it goes on with the primary ones.
    pub preen: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            nice: false,
            chunk_inodes: 512,
            journal_deleted: false,
            repairing: false,
            preen: false,
        }
    }
}

/// Per-stage timing, for `--trace`.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// (phase, seconds).
    pub phases: Phases,
    /// Busy seconds of each worker in pass 1 and pass 2.
    pub busy: Vec<[f64; 2]>,
    /// Each worker's stage switches: (ms since start, stage 0/1).
    pub timelines: Vec<Vec<(u32, u8)>>,
    /// Measured cost per inode and per directory block (ns).
    pub costs: [u64; 2],
    /// Counters.
    pub counters: Counters,
}

/// The outcome of a check.
#[derive(Clone, Debug)]
pub struct Report {
    /// Every problem, sorted by pass.
    pub problems: Vec<Problem>,
    /// The summary numbers.
    pub summary: Summary,
    /// Timing.
    pub trace: Trace,
    /// The volume label (e2fsck names the file system by it).
    pub label: Vec<u8>,
    /// The group summaries as found where they disagree with the image: what a repair
    /// writes.
    pub(crate) found: usfs_ext4::rw::repair::Found,
    /// The quota files to write anew (one per [`problem::Code::QuotaUsage`] problem).
    pub(crate) quota: Vec<quota::QuotaFix>,
}

impl Report {
    /// Does the file system have errors (e2fsck -n would exit 4)?
    pub fn has_errors(&self) -> bool {
        self.problems
            .iter()
            .any(|p| p.code.def().severity == Severity::Error)
    }
}

/// Checks the ext4 file system on `dev` without changing it.
pub fn check(dev: Box<dyn Device>, opts: &Options) -> usfs_fs::Result<Report> {
    let t0 = Instant::now();
    // (An image whose journal needs recovery is checked as it is, as e2fsck -n checks
    // it; a repair replays the journal first.)
    let (fs, issues) = Ext4::open_unreplayed(dev)?;
    plan::refuse_failed_superblock(&issues)?;
    let geo = fs.geometry().clone();
    let shared = state::Shared::new(
        geo.inodes_count,
        geo.blocks_count,
        geo.cluster_shift,
        geo.group_count,
    );
    let mut problems = pass0::open_issues(&issues, &geo);
    let plan = plan::Plan::new(&fs, &geo, &shared, opts, &mut problems);
    let ctx = Ctx {
        fs: &fs,
        geo: &geo,
        shared: &shared,
        queues: &plan.queues,
        bad: &plan.bad,
    };
    let mut phases = vec![("pass 0", t0.elapsed().as_secs_f64())];
    let mut workers = pipeline::run(&ctx, opts, &mut phases);
    let mut merged = merge::run(&ctx, &mut workers, &mut problems, &mut phases);
    if !opts.repairing {
        // (e2fsck queues directories for pass 3A, and fixes an overflowed link count,
        // only when it may write.)
        use problem::Code::{DirOptimize, DirOverflowRefCount};
        problems.retain(|p| !matches!(p.code, DirOptimize | DirOverflowRefCount));
    }
    let found = std::mem::take(&mut merged.found);
    let quota = std::mem::take(&mut merged.quota);
    let summary = summary::summarize(&fs, &geo, &merged.counters);
    phases.push(("total", t0.elapsed().as_secs_f64()));
    let trace = Trace {
        phases,
        busy: merged.busy,
        timelines: merged.timelines,
        costs: plan.queues.costs(),
        counters: merged.counters,
    };
    let label = fs.superblock().label().to_vec();
    Ok(Report {
        problems,
        summary,
        trace,
        label,
        found,
        quota,
    })
}
