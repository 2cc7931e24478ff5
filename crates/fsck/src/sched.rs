//! The scheduler: pass 1 (inode chunks) and pass 2 (directory blocks) run at once
//! (pipeline parallelism); every worker, after each task, picks the stage that most needs
//! a thread by pFSCK's rule. With q_i items queued, w_i the measured cost of an item
//! (EWMA, nanoseconds) and C threads, stage i deserves t_i = C * q_i*w_i / sum_j q_j*w_j
//! threads; a worker joins the stage with the largest shortfall t_i - running_i.
//! With `--nice`, a monitor sizes the core budget from idle CPUs (/proc/stat) and workers
//! beyond it pause (pFSCK's rsched).

use crate::chunked::Chunked;
use crate::ctx::{Ctx, DirBlock, Worker};
use crate::pass1::{self, InodeChunk};
use crate::pass2;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How far ahead of the chunk being taken an inode-table chunk is hinted for readahead
/// (the first ones are hinted when the plan is made): enough requests in flight for the
/// device to stream while the workers check inodes.
pub(crate) const CHUNKS_AHEAD: usize = 16;

/// Directory blocks queued for pass 2 beyond which free workers drain the queue before
/// taking more inodes (24 bytes each: about 1.5 MiB).
const MAX_QUEUED_DIR_BLOCKS: u64 = 65536;

/// Stage numbers.
pub(crate) const STAGE_INODES: usize = 0;
/// Pass 2.
pub(crate) const STAGE_DIRS: usize = 1;

/// The two queues and what the scheduler measures.
pub(crate) struct Queues {
    /// Pass-1 chunks, taken in order.
    chunks: Vec<InodeChunk>,
    next_chunk: AtomicUsize,
    /// Inodes in chunks not yet taken.
    inodes_left: AtomicU64,
    /// Chunks taken but not finished.
    chunks_running: AtomicUsize,
    /// Pass-2 batches.
    dir_blocks: Mutex<VecDeque<Vec<DirBlock>>>,
    /// Directory blocks queued.
    dir_blocks_left: AtomicU64,
    /// Threads working in each stage.
    running: [AtomicUsize; 2],
    /// Measured cost per item (ns) of each stage, EWMA.
    cost_ns: [AtomicU64; 2],
    /// Measured cost of directory-block reads (decides readahead).
    pub read_cost: crate::dirio::ReadCost,
    /// Core budget (threads allowed to work).
    pub budget: AtomicUsize,
    /// Set when everything is done.
    pub done: AtomicBool,
}

impl Queues {
    /// Queues for `chunks` and a budget of `threads`.
    pub(crate) fn new(chunks: Vec<InodeChunk>, threads: usize) -> Queues {
        let inodes = chunks.iter().map(|c| c.count as u64).sum();
        Queues {
            chunks,
            next_chunk: AtomicUsize::new(0),
            inodes_left: AtomicU64::new(inodes),
            chunks_running: AtomicUsize::new(0),
            dir_blocks: Mutex::new(VecDeque::new()),
            dir_blocks_left: AtomicU64::new(0),
            running: [AtomicUsize::new(0), AtomicUsize::new(0)],
            // Starting weights: a directory block costs about twice an inode (pFSCK
            // measured 1.8-2.3x); replaced by measurements after the first tasks.
            cost_ns: [AtomicU64::new(1000), AtomicU64::new(2000)],
            read_cost: Default::default(),
            budget: AtomicUsize::new(threads),
            done: AtomicBool::new(false),
        }
    }

    /// Adds directory blocks for pass 2.
    pub(crate) fn push_dir_blocks(&self, batch: Vec<DirBlock>) {
        self.dir_blocks_left.fetch_add(batch.len() as u64, Relaxed);
        self.dir_blocks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(batch);
    }

    fn pop_dir_blocks(&self) -> Option<Vec<DirBlock>> {
        let b = self
            .dir_blocks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()?;
        self.dir_blocks_left.fetch_sub(b.len() as u64, Relaxed);
        Some(b)
    }

    /// Takes the next chunk; `ahead` receives the chunks [`CHUNKS_AHEAD`] further on, whose
    /// inode tables are worth a readahead hint now.
    fn pop_chunk(&self, ahead: &mut dyn FnMut(&InodeChunk)) -> Option<InodeChunk> {
        let i = self.next_chunk.fetch_add(1, Relaxed);
        let c = *self.chunks.get(i)?;
        if let Some(next) = self.chunks.get(i + CHUNKS_AHEAD) {
            ahead(next);
        }
        self.chunks_running.fetch_add(1, Relaxed);
        self.inodes_left.fetch_sub(c.count as u64, Relaxed);
        Some(c)
    }

    /// Is pass 1 finished (no chunk left or running)?
    fn inodes_finished(&self) -> bool {
        self.next_chunk.load(Relaxed) >= self.chunks.len() && self.chunks_running.load(Relaxed) == 0
    }

    /// The stage a free worker should join, by weighted outstanding work — except that a
    /// pass-2 backlog past [`MAX_QUEUED_DIR_BLOCKS`] is drained first (bounded memory).
    fn choose(&self) -> usize {
        if self.dir_blocks_left.load(Relaxed) > MAX_QUEUED_DIR_BLOCKS {
            return STAGE_DIRS;
        }
        let q = [
            self.inodes_left.load(Relaxed) as f64,
            self.dir_blocks_left.load(Relaxed) as f64,
        ];
        let w = [
            self.cost_ns[0].load(Relaxed) as f64,
            self.cost_ns[1].load(Relaxed) as f64,
        ];
        let work = [q[0] * w[0], q[1] * w[1]];
        let total = work[0] + work[1];
        if total == 0.0 {
            return STAGE_INODES;
        }
        let c = self.budget.load(Relaxed).max(1) as f64;
        let short = |i: usize| c * work[i] / total - self.running[i].load(Relaxed) as f64;
        if short(STAGE_DIRS) > short(STAGE_INODES) {
            STAGE_DIRS
        } else {
            STAGE_INODES
        }
    }

    fn record_cost(&self, stage: usize, items: u64, ns: u64) {
        if items == 0 {
            return;
        }
        let per = ns / items;
        let old = self.cost_ns[stage].load(Relaxed);
        self.cost_ns[stage].store((old * 7 + per) / 8, Relaxed);
    }

    /// Measured cost per item of each stage (for the trace).
    pub(crate) fn costs(&self) -> [u64; 2] {
        [self.cost_ns[0].load(Relaxed), self.cost_ns[1].load(Relaxed)]
    }
}

/// One worker's loop: passes 1 and 2 until both are done.
pub(crate) fn run_worker(ctx: &Ctx, w: &mut Worker, index: usize, start: Instant) {
    let q = ctx.queues;
    let mut last_stage = usize::MAX;
    loop {
        if index >= q.budget.load(Relaxed) && !q.done.load(Relaxed) {
            // Over the core budget (--nice): let other programs run.
            std::thread::sleep(Duration::from_millis(5));
            if !(q.inodes_finished() && q.dir_blocks_left.load(Relaxed) == 0) {
                continue;
            }
        }
        let mut stage = q.choose();
        let mut did = false;
        for _ in 0..2 {
            let t0 = Instant::now();
            let items = match stage {
                STAGE_INODES => match q.pop_chunk(&mut |c| pass1::readahead_chunk(ctx, c)) {
                    Some(c) => {
                        q.running[STAGE_INODES].fetch_add(1, Relaxed);
                        pass1::check_chunk(ctx, w, c);
                        ctx.shared.chunk_done(c.group);
                        q.running[STAGE_INODES].fetch_sub(1, Relaxed);
                        q.chunks_running.fetch_sub(1, Relaxed);
                        Some(c.count as u64)
                    }
                    None => None,
                },
                _ => match q.pop_dir_blocks() {
                    Some(batch) => {
                        q.running[STAGE_DIRS].fetch_add(1, Relaxed);
                        pass2::check_batch(ctx, w, &batch);
                        q.running[STAGE_DIRS].fetch_sub(1, Relaxed);
                        Some(batch.len() as u64)
                    }
                    None => None,
                },
            };
            if let Some(n) = items {
                let ns = t0.elapsed().as_nanos() as u64;
                w.busy_ns[stage] += ns;
                q.record_cost(stage, n, ns);
                if stage != last_stage {
                    w.timeline
                        .push((start.elapsed().as_millis() as u32, stage as u8));
                    last_stage = stage;
                }
                did = true;
                break;
            }
            stage = 1 - stage;
        }
        if did {
            continue;
        }
        if q.inodes_finished() && q.dir_blocks_left.load(Relaxed) == 0 {
            // A chunk finishing may still push blocks: check once more under the lock.
            if q.dir_blocks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
            {
                break;
            }
            continue;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Splits the used part of every inode table into chunks of at most `per_chunk` inodes:
/// groups with INODE_UNINIT are skipped, and so is the itable_unused tail (when the
/// group descriptors carry checksums that make these fields trustworthy).
pub(crate) fn plan_chunks(ctx: &Ctx, per_chunk: u32) -> Vec<InodeChunk> {
    let mut out = Vec::new();
    for g in 0..ctx.geo.group_count {
        let used = ctx.inodes_in_use_area(g);
        ctx.shared.plan_group(g, used.div_ceil(per_chunk));
        let mut start = 0;
        while start < used {
            let count = per_chunk.min(used - start);
            out.push(InodeChunk {
                group: g,
                start,
                count,
            });
            start += count;
        }
    }
    out
}

/// The rsched monitor: every 200 ms, sets the budget to the number of idle CPUs (at
/// least 1, at most `max`), until `done`.
pub(crate) fn monitor_idle_cpus(q: &Queues, max: usize) {
    let mut prev = read_cpu_times();
    while !q.done.load(Relaxed) {
        // Sample every 200 ms, but notice the end within 10 ms.
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(10));
            if q.done.load(Relaxed) {
                return;
            }
        }
        let now = read_cpu_times();
        if let (Some((idle0, total0)), Some((idle1, total1))) = (prev, now) {
            let (di, dt) = (
                idle1.saturating_sub(idle0) as f64,
                total1.saturating_sub(total0) as f64,
            );
            if dt > 0.0 {
                let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
                // Our own busy workers count as "idle" capacity for us.
                let ours = q.running[0].load(Relaxed) + q.running[1].load(Relaxed);
                let idle = (di / dt * cpus).round() as usize + ours;
                q.budget.store(idle.clamp(1, max), Relaxed);
            }
        }
        prev = now;
    }
}

/// (idle, total) jiffies from the first line of /proc/stat.
fn read_cpu_times() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let idle = v.get(3)? + v.get(4).unwrap_or(&0);
    Some((idle, v.iter().sum()))
}

/// Runs the deferred reference checks of pass 2 on `threads` threads.
pub(crate) fn run_revisits(ctx: &Ctx, workers: &mut [Worker]) {
    let mut all: Chunked<DirBlock> = Chunked::default();
    for w in workers.iter_mut() {
        all.append(&mut w.revisit);
    }
    // (In the order of crate::dirio::sort_batch, 64 blocks at a time.)
    let all = Mutex::new(all.into_sorted_by_key(|b| (b.pblk, b.dir, b.lblk)));
    std::thread::scope(|s| {
        for w in workers.iter_mut() {
            let all = &all;
            s.spawn(move || loop {
                let part: Vec<DirBlock> = all.lock().expect("no panic").by_ref().take(64).collect();
                if part.is_empty() {
                    break;
                }
                // Inline directories (block 0) sort first.
                let inline = part.partition_point(|b| b.pblk == 0);
                for b in &part[..inline] {
                    pass2::revisit_inline(ctx, w, *b);
                }
                pass2::revisit_batch(ctx, w, &part[inline..]);
            });
        }
    });
}
