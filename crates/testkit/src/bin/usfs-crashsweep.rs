//! `usfs-crashsweep`: the full crash-state sweep of usfs's read-write ext4 volume (see
//! `usfs_testkit::crash::rw`); `bench/crash-rw.sh` runs it.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use usfs_testkit::crash::sweep::{sweep, SweepOptions};
use usfs_testkit::crash::workload;

/// Record B3-style workloads (one to three operations on a small tree, each followed by
/// fsync, fdatasync, sync or nothing) on usfs's read-write ext4 volume through the crash
/// recorder, and check every crash state: recovered by usfs, by e2fsck and (every
/// --kernel-every states, as root) by a kernel mount, it must pass e2fsck -fn and hold
/// the tree after a step at or after the last durable one. Exits 0 when every state
/// passed, 1 when one failed, 2 on a usage or setup error.
#[derive(Parser, Debug)]
#[command(name = "usfs-crashsweep", version)]
struct Args {
    /// Run every one-operation workload (B3's seq-1).
    #[arg(long)]
    seq1: bool,
    /// Random two-operation workloads.
    #[arg(long, default_value_t = 0)]
    seq2: usize,
    /// Random three-operation workloads.
    #[arg(long, default_value_t = 0)]
    seq3: usize,
    /// Seed of the random workloads.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Block sizes of the base images, comma-separated.
    #[arg(long, default_value = "1024,4096", value_delimiter = ',')]
    block_sizes: Vec<u32>,
    /// Prefixes and reordered subsets taken in every epoch (besides its flush point).
    #[arg(long, default_value_t = 3)]
    per_epoch: usize,
    /// Also recover every N-th state with a kernel mount (0: never; needs root).
    #[arg(long, default_value_t = 25)]
    kernel_every: usize,
    /// Worker threads.
    #[arg(long, short = 'j', default_value_t = 2)]
    threads: usize,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let mut w = Vec::new();
    if a.seq1 {
        w.extend(workload::seq1());
    }
    w.extend(workload::random(a.seed, a.seq2, 2));
    w.extend(workload::random(a.seed.wrapping_add(1), a.seq3, 3));
    if w.is_empty() {
        eprintln!("usfs-crashsweep: no workloads (give --seq1, --seq2 N or --seq3 N)");
        return ExitCode::from(2);
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if a.kernel_every > 0 && !root {
        eprintln!("usfs-crashsweep: not root: no kernel mounts");
    }
    let opts = SweepOptions {
        block_sizes: a.block_sizes,
        per_epoch: a.per_epoch,
        kernel_every: if root { a.kernel_every } else { 0 },
        threads: a.threads,
        keep_failures: 20,
    };
    let t = Instant::now();
    match sweep(&w, &opts) {
        Ok(r) => {
            println!("{r}");
            println!("time: {:.1} s", t.elapsed().as_secs_f64());
            if r.failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("usfs-crashsweep: {e}");
            ExitCode::from(2)
        }
    }
}
