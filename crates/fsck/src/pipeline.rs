//! The second step of a check: passes 1 and 2 pipelined on a pool of workers (the
//! scheduler in [`crate::sched`] moves them between the two stages), then the reference
//! checks pass 2 had to defer until pass 1 was done.

use crate::ctx::{Ctx, Worker};
use crate::{sched, Options, Phases};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Runs passes 1 and 2 on `opts.threads` workers (at SCHED_IDLE with a monitor of idle
/// CPUs when `opts.nice`), then the deferred checks; returns the workers' contexts for
/// the merge and records the phases' times.
pub(crate) fn run(ctx: &Ctx, opts: &Options, phases: &mut Phases) -> Vec<Worker> {
    let t1 = Instant::now();
    let threads = opts.threads.max(1);
    let bs = ctx.geo.block_size as usize;
    let mut workers: Vec<Worker> = (0..threads).map(|_| Worker::new(bs)).collect();
    std::thread::scope(|s| {
        let monitor = opts.nice.then(|| {
            let q = ctx.queues;
            s.spawn(move || sched::monitor_idle_cpus(q, threads))
        });
        let handles: Vec<_> = workers
            .iter_mut()
            .enumerate()
            .map(|(i, w)| {
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
        ctx.queues.done.store(true, Ordering::Relaxed);
        drop(monitor);
    });
    phases.push(("passes 1+2", t1.elapsed().as_secs_f64()));
    let t2 = Instant::now();
    sched::run_revisits(ctx, &mut workers);
    phases.push(("deferred checks", t2.elapsed().as_secs_f64()));
    workers
}

/// Puts the calling thread at SCHED_IDLE (pFSCK's rsched: yield to everything else).
fn set_idle_priority() {
    // SAFETY: sched_param is plain data; sched_setscheduler on the calling thread (0).
    unsafe {
        let p: libc::sched_param = std::mem::zeroed();
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &p);
    }
}
