//! `usfs fsck`: a parallel ext4 checker in the design of pFSCK (check mode).
//!
//! The passes are e2fsck's (0 superblock and descriptors, 1 inodes and blocks, 1B shared
//! blocks, 2 directories, 3 connectivity, 4 reference counts, 5 group summaries), but
//! built parallel: pass 1 runs over chunks of the used inode tables and pass 2 over the
//! directory blocks pass 1 finds, at the same time, on a pool of workers that a scheduler
//! moves between the two stages by outstanding weighted work ([`sched`]). Each worker
//! keeps its own context ([`ctx::Worker`]); the only shared state is a few atomic arrays
//! ([`state`]). Checks that need pass 1's verdict on another inode are deferred and
//! certified after pass 1 (in-order commit). Problems come from one table ([`problem`]).

pub mod badblocks;
pub mod blocks;
pub mod ctx;
pub mod dirio;
pub mod htree;
mod pass0;
mod pass1;
mod pass1b;
mod pass2;
mod pass3;
mod pass4;
mod pass5;
pub mod problem;
pub mod sched;
pub mod state;

use ctx::{Counters, Ctx, Worker};
use problem::{Problem, Severity};
use std::time::Instant;
use usfs_dev::Device;
use usfs_ext4::Ext4;

/// How to check.
#[derive(Clone, Debug)]
pub struct Options {
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Run workers at SCHED_IDLE and size the core budget from idle CPUs.
    pub nice: bool,
    /// Inodes per pass-1 work unit.
    pub chunk_inodes: u32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            nice: false,
            chunk_inodes: 512,
        }
    }
}

/// The summary line's numbers (`U/N files (P.P% non-contiguous), B/M blocks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// Inodes in use per the superblock (count - free).
    pub inodes_used: u64,
    /// Inodes.
    pub inodes: u64,
    /// Blocks in use per the superblock (count - free).
    pub blocks_used: u64,
    /// Blocks.
    pub blocks: u64,
    /// Non-contiguous files and directories, in tenths of a percent of inodes_used.
    pub fragmented_tenths: u64,
}

impl Summary {
    /// The line e2fsck prints, for `name`.
    pub fn line(&self, name: &str) -> String {
        format!(
            "{name}: {}/{} files ({}.{}% non-contiguous), {}/{} blocks",
            self.inodes_used,
            self.inodes,
            self.fragmented_tenths / 10,
            self.fragmented_tenths % 10,
            self.blocks_used,
            self.blocks
        )
    }
}

/// Per-stage timing, for `--trace`.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// (phase, seconds).
    pub phases: Vec<(&'static str, f64)>,
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
    let mut phases = Vec::new();
    let (fs, issues) = Ext4::open_for_check(dev)?;
    // e2fsck -n cannot go on from a superblock whose checksum fails (exit 8).
    if let Some(usfs_ext4::OpenIssue::SuperblockChecksum { stored, computed }) = issues
        .iter()
        .find(|i| matches!(i, usfs_ext4::OpenIssue::SuperblockChecksum { .. }))
    {
        return Err(usfs_fs::Error::corrupt(format!(
            "superblock checksum {stored:#010x} does not match contents ({computed:#010x})"
        )));
    }
    let geo = fs.geometry().clone();
    let shared = state::Shared::new(geo.inodes_count, geo.blocks_count, geo.group_count);
    let threads = opts.threads.max(1);
    let queues = sched::Queues::new(Vec::new(), threads);
    let mut problems = pass0::open_issues(&issues);
    let no_bad = badblocks::BadBlocks::default();
    let plan_ctx = Ctx {
        fs: &fs,
        geo: &geo,
        shared: &shared,
        queues: &queues,
        bad: &no_bad,
    };
    problems.extend(pass0::check(&plan_ctx));
    let bad = badblocks::check(&plan_ctx, &mut problems);
    let chunks = sched::plan_chunks(&plan_ctx, opts.chunk_inodes.max(1));
    for c in chunks.iter().take(sched::CHUNKS_AHEAD) {
        pass1::readahead_chunk(&plan_ctx, c);
    }
    let queues = sched::Queues::new(chunks, threads);
    let ctx = Ctx {
        fs: &fs,
        geo: &geo,
        shared: &shared,
        queues: &queues,
        bad: &bad,
    };
    phases.push(("pass 0", t0.elapsed().as_secs_f64()));

    // Passes 1 and 2, pipelined.
    let t1 = Instant::now();
    let bs = geo.block_size as usize;
    let mut workers: Vec<Worker> = (0..threads).map(|_| Worker::new(bs)).collect();
    std::thread::scope(|s| {
        let monitor = opts.nice.then(|| {
            let q = &queues;
            s.spawn(move || sched::monitor_idle_cpus(q, threads))
        });
        let handles: Vec<_> = workers
            .iter_mut()
            .enumerate()
            .map(|(i, w)| {
                let ctx = &ctx;
                let nice = opts.nice;
                s.spawn(move || {
                    if nice {
                        set_idle_priority();
                    }
                    sched::run_worker(ctx, w, i, t1);
                })
            })
            .collect();
        for h in handles {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        // Stops the monitor.
        queues
            .done
            .store(true, std::sync::atomic::Ordering::Relaxed);
        drop(monitor);
    });
    phases.push(("passes 1+2", t1.elapsed().as_secs_f64()));
    let t2 = Instant::now();
    sched::run_revisits(&ctx, &mut workers);
    phases.push(("deferred checks", t2.elapsed().as_secs_f64()));

    // Merge the per-thread contexts.
    let t3 = Instant::now();
    let mut counters = Counters::default();
    let mut xattr_refs: std::collections::HashMap<u64, u32> = Default::default();
    let (mut dotdots, mut parents, mut lost_found) = (Vec::new(), Vec::new(), None);
    let mut links = Vec::new();
    let (mut htree_facts, mut htree_dirs) = (Vec::new(), Vec::new());
    let mut busy = Vec::new();
    let mut timelines = Vec::new();
    for w in &mut workers {
        problems.append(&mut w.problems);
        counters.add(&w.counters);
        for (b, n) in w.xattr_refs.drain() {
            *xattr_refs.entry(b).or_insert(0) += n;
        }
        links.append(&mut w.links);
        htree_facts.append(&mut w.htree);
        htree_dirs.append(&mut w.htree_dirs);
        dotdots.append(&mut w.dotdots);
        parents.append(&mut w.parents);
        lost_found = lost_found.or(w.lost_found);
        busy.push([w.busy_ns[0] as f64 / 1e9, w.busy_ns[1] as f64 / 1e9]);
        timelines.push(std::mem::take(&mut w.timeline));
    }
    let mut late = Worker::new(bs);
    htree::check(&mut htree_dirs, &mut htree_facts, &mut late);
    drop(htree_facts);
    check_xattr_refcounts(&ctx, &mut late, &xattr_refs);
    // With shared_blocks, sharing is the feature (a deduplicated read-only image).
    let sharing_allowed = geo
        .features
        .has_ro_compat(usfs_ext4::format::features::ro_compat::SHARED_BLOCKS);
    if shared.any_dup.load(std::sync::atomic::Ordering::Relaxed) && !sharing_allowed {
        pass1b::run(&ctx, &mut late);
    }
    phases.push(("pass 1B + merge", t3.elapsed().as_secs_f64()));
    let t4 = Instant::now();
    pass3::run(
        &geo,
        &shared,
        &mut late,
        &mut dotdots,
        &mut parents,
        lost_found,
    );
    phases.push(("pass 3", t4.elapsed().as_secs_f64()));
    let t5 = Instant::now();
    // Inodes no directory names by design: the orphan file, quota files, the journal.
    let sbr = fs.superblock();
    let special = [
        sbr.s_orphan_file_inum(),
        sbr.s_usr_quota_inum(),
        sbr.s_grp_quota_inum(),
        sbr.s_prj_quota_inum(),
        sbr.s_journal_inum(),
    ];
    links.sort_unstable();
    pass4::run(&geo, &shared, &mut late, &special, &links);
    phases.push(("pass 4", t5.elapsed().as_secs_f64()));
    let t6 = Instant::now();
    pass5::run(&ctx, &mut late);
    phases.push(("pass 5", t6.elapsed().as_secs_f64()));
    problems.append(&mut late.problems);
    problems.sort_by_key(Problem::sort_key);
    problems.dedup();

    let sb = fs.superblock();
    let inodes = geo.inodes_count as u64;
    let inodes_used = (geo.inodes_count.wrapping_sub(sb.s_free_inodes_count())) as u64;
    let blocks = geo.blocks_count;
    // (Wrapping, as e2fsck prints it when the free count exceeds the total.)
    let blocks_used = blocks.wrapping_sub(sb.free_blocks_count(geo.is64()));
    let frag = counters.fragmented + counters.fragmented_dirs;
    // e2fsck computes this in 32-bit arithmetic (it wraps past 429496 fragmented inodes).
    let fragmented_tenths = 10000u32
        .wrapping_mul(frag as u32)
        .checked_div(inodes_used as u32)
        .map_or(0, |t| (t as u64 + 5) / 10);
    let summary = Summary {
        inodes_used,
        inodes,
        blocks_used,
        blocks,
        fragmented_tenths,
    };
    phases.push(("total", t0.elapsed().as_secs_f64()));
    let trace = Trace {
        phases,
        busy,
        timelines,
        costs: queues.costs(),
        counters,
    };
    let label = sb.label().to_vec();
    Ok(Report {
        problems,
        summary,
        trace,
        label,
    })
}

/// Compares each xattr block's reference count with the inodes using it, and claims it.
fn check_xattr_refcounts(ctx: &Ctx, w: &mut Worker, refs: &std::collections::HashMap<u64, u32>) {
    use usfs_ext4::format::xattr::XattrBlockHeader;
    use usfs_ext4::walk::xattr::{header_issue, XattrIssue};
    let mut buf = vec![0u8; ctx.geo.block_size as usize];
    let mut blocks: Vec<_> = refs.iter().collect();
    blocks.sort();
    for (&b, &n) in blocks {
        ctx.shared.claim_block(b);
        if ctx.read_block(b, &mut buf).is_err() {
            continue;
        }
        // Any block with the magic has a refcount (a bad h_blocks is pass 1's).
        let magic = !matches!(header_issue(&buf), Some(XattrIssue::Magic { .. }));
        let h = XattrBlockHeader::new(&buf[..]).expect("block >= 32");
        if magic && h.h_refcount() != n {
            w.report(
                problem::Problem::new(
                    problem::Code::XattrRefcount,
                    format!("{b}, reference count is {}, should be {n}", h.h_refcount()),
                )
                .block(b),
            );
        }
    }
}

/// Puts the calling thread at SCHED_IDLE (pFSCK's rsched: yield to everything else).
fn set_idle_priority() {
    // SAFETY: sched_param is plain data; sched_setscheduler on the calling thread (0).
    unsafe {
        let p: libc::sched_param = std::mem::zeroed();
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &p);
    }
}
