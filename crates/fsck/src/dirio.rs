//! Directory-block I/O for pass 2: pFSCK's per-thread block cache and adaptive readahead.
//!
//! Batches of directory blocks are sorted by block number when pass 1 queues them. A
//! worker reads a batch run by run: neighbouring blocks (at most [`MAX_GAP`] unwanted
//! blocks apart, at most [`MAX_RUN_BYTES`] in all) come in with one request into the
//! worker's window, which then serves every block of the run (the per-thread block cache:
//! no locks, no sharing). The thread that queues a batch also hints the kernel to start
//! reading its runs, so the I/O overlaps the time the batch waits in the queue — but only
//! while reads are measured to miss the page cache ([`ReadCost`]): on a warm cache the
//! hints would be system calls for nothing.

use crate::ctx::{Ctx, DirBlock};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// Unwanted blocks read to join two runs: reading them costs less than a second request.
pub(crate) const MAX_GAP: u64 = 4;
/// Largest single read.
pub(crate) const MAX_RUN_BYTES: u64 = 128 << 10;
/// Above this many nanoseconds per block, reads are taken to miss the page cache and
/// readahead hints are worth their system call.
const COLD_NS_PER_BLOCK: u64 = 4000;

/// A run: `blocks` (a range of the sorted batch) all inside `[first, first + count)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    /// Indexes into the batch.
    pub blocks: Range<usize>,
    /// First physical block read.
    pub first: u64,
    /// Blocks read.
    pub count: u64,
}

/// Sorts a batch by physical block (the order the disk likes; pass 2's verdicts do not
/// depend on the order blocks are checked in).
pub(crate) fn sort_batch(batch: &mut [DirBlock]) {
    batch.sort_unstable_by_key(|b| (b.pblk, b.dir, b.lblk));
}

/// Splits a sorted batch into runs of at most `max_blocks` blocks.
pub(crate) fn runs(batch: &[DirBlock], max_blocks: u64) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for (i, b) in batch.iter().enumerate() {
        if let Some(r) = out.last_mut() {
            let end = r.first + r.count;
            let joins = b.pblk < end
                || (b.pblk - end <= MAX_GAP && b.pblk + 1 - r.first <= max_blocks.max(1));
            if joins {
                r.count = r.count.max(b.pblk + 1 - r.first);
                r.blocks.end = i + 1;
                continue;
            }
        }
        out.push(Run {
            blocks: i..i + 1,
            first: b.pblk,
            count: 1,
        });
    }
    out
}

/// The measured cost of directory-block reads (EWMA, nanoseconds per block), shared by
/// all workers: it decides whether readahead hints are issued.
#[derive(Debug)]
pub(crate) struct ReadCost(AtomicU64);

impl Default for ReadCost {
    fn default() -> Self {
        // Until measured, assume a cold cache: a missed hint costs more than a wasted one.
        ReadCost(AtomicU64::new(COLD_NS_PER_BLOCK * 2))
    }
}

impl ReadCost {
    /// Records a read of `blocks` blocks that took `ns`.
    pub(crate) fn record(&self, blocks: u64, ns: u64) {
        let per = ns / blocks.max(1);
        let old = self.0.load(Relaxed);
        self.0.store((old * 7 + per) / 8, Relaxed);
    }

    /// Are reads missing the cache (so readahead pays)?
    pub(crate) fn cold(&self) -> bool {
        self.0.load(Relaxed) > COLD_NS_PER_BLOCK
    }
}

/// Hints the kernel to read the runs of a sorted batch, when reads are missing the cache.
pub(crate) fn readahead(ctx: &Ctx, batch: &[DirBlock]) {
    if !ctx.queues.read_cost.cold() {
        return;
    }
    let log = ctx.geo.block_size_log;
    for r in runs(batch, MAX_RUN_BYTES >> log) {
        ctx.fs.device().will_need(r.first << log, r.count << log);
    }
}

/// Reads run `r` into `window` (resized to fit) and records the cost. On failure the
/// caller falls back to block-by-block reads, so the unreadable block is the one reported.
pub(crate) fn read_run(ctx: &Ctx, r: &Run, window: &mut Vec<u8>) -> std::io::Result<()> {
    let log = ctx.geo.block_size_log;
    window.resize((r.count << log) as usize, 0);
    let t = Instant::now();
    ctx.fs.device().read_at(window, r.first << log)?;
    ctx.queues
        .read_cost
        .record(r.count, t.elapsed().as_nanos() as u64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(pblk: u64) -> DirBlock {
        DirBlock {
            dir: 2,
            generation: 0,
            lblk: 0,
            pblk,
            indexed: false,
            hash: None,
        }
    }

    #[test]
    fn runs_join_neighbours_within_gap_and_size() {
        let mut b: Vec<DirBlock> = [10, 11, 13, 30, 30, 31, 100, 101, 102, 103]
            .into_iter()
            .map(blk)
            .collect();
        sort_batch(&mut b);
        let r = runs(&b, 3);
        assert_eq!(
            r,
            vec![
                Run {
                    blocks: 0..2,
                    first: 10,
                    count: 2
                },
                Run {
                    blocks: 2..3,
                    first: 13,
                    count: 1
                },
                Run {
                    blocks: 3..6,
                    first: 30,
                    count: 2
                },
                Run {
                    blocks: 6..9,
                    first: 100,
                    count: 3
                },
                Run {
                    blocks: 9..10,
                    first: 103,
                    count: 1
                },
            ]
        );
        // Every block lies inside its run.
        for run in &r {
            for b in &b[run.blocks.clone()] {
                assert!(b.pblk >= run.first && b.pblk < run.first + run.count);
            }
        }
        assert!(runs(&[], 8).is_empty());
    }
}
