//! Runs many crash workloads on usfs's read-write volume and checks every crash state
//! of each ([`super::rw`]): the driver behind the bounded test and the full sweep
//! (`usfs-crashsweep`, `bench/crash-rw.sh`).

use super::rw::{check_state, make_base, record, Recover};
use super::workload::Step;
use super::{check_states, Options};
use crate::TempDir;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use usfs_dev::record::{CrashPlan, InEpochs};

/// How a sweep runs.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Block sizes of the base images (each workload runs on each).
    pub block_sizes: Vec<u32>,
    /// Crash states taken per workload: flush points always; this many evenly spaced
    /// prefixes and this many random reordered (and torn) subsets of every epoch.
    pub per_epoch: usize,
    /// Mount every n-th state with the kernel too (0: never; needs root).
    pub kernel_every: usize,
    /// Worker threads.
    pub threads: usize,
    /// Keep this many failures' descriptions.
    pub keep_failures: usize,
}

/// A failed state.
#[derive(Clone, Debug)]
pub struct SweepFailure {
    /// Block size of the base image.
    pub bs: u32,
    /// The workload.
    pub steps: Vec<Step>,
    /// The state and what was wrong.
    pub what: String,
}

/// What a sweep found.
#[derive(Debug, Default)]
pub struct SweepReport {
    /// Workloads run (times block sizes).
    pub workloads: usize,
    /// Crash states checked.
    pub states: usize,
    /// Of which also through a kernel mount.
    pub kernel_states: usize,
    /// States that failed.
    pub failed: usize,
    /// The first failures.
    pub failures: Vec<SweepFailure>,
}

impl fmt::Display for SweepReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} workloads, {} crash states checked ({} also by a kernel mount), {} failed",
            self.workloads, self.states, self.kernel_states, self.failed
        )?;
        for x in &self.failures {
            write!(
                f,
                "\n  bs {} workload {:?}\n    {}",
                x.bs,
                x.steps,
                x.what.replace('\n', "\n    ")
            )?;
        }
        Ok(())
    }
}

/// Runs every workload on base images of each block size and checks its crash states.
pub fn sweep(workloads: &[Vec<Step>], opts: &SweepOptions) -> Result<SweepReport, String> {
    let tmp = TempDir::new("crash-sweep").map_err(|e| e.to_string())?;
    let mut bases = Vec::new();
    for &bs in &opts.block_sizes {
        let img = tmp.path().join(format!("base-{bs}.img"));
        make_base(&tmp.path().join(format!("src-{bs}")), &img, bs, &[])?;
        bases.push((bs, img));
    }
    let jobs: Vec<(u32, &Path, &Vec<Step>)> = bases
        .iter()
        .flat_map(|(bs, img)| workloads.iter().map(move |w| (*bs, img.as_path(), w)))
        .collect();
    let next = AtomicUsize::new(0);
    let report = Mutex::new(SweepReport::default());
    std::thread::scope(|s| {
        for t in 0..opts.threads.max(1) {
            let dir = tmp.path().join(format!("worker-{t}"));
            let (jobs, next, report) = (&jobs, &next, &report);
            s.spawn(move || -> Result<(), String> {
                std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(bs, base, steps)) = jobs.get(i) else {
                        return Ok(());
                    };
                    let r = one(base, steps, &dir, opts, i)?;
                    let mut rep = report.lock().unwrap_or_else(|e| e.into_inner());
                    rep.workloads += 1;
                    rep.states += r.0;
                    rep.kernel_states += r.1;
                    rep.failed += r.2.len();
                    for what in r.2 {
                        if rep.failures.len() < opts.keep_failures {
                            rep.failures.push(SweepFailure {
                                bs,
                                steps: steps.clone(),
                                what,
                            });
                        }
                    }
                }
            });
        }
    });
    Ok(report.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// One workload: (states checked, of which by the kernel, failures).
fn one(
    base: &Path,
    steps: &[Step],
    dir: &Path,
    opts: &SweepOptions,
    salt: usize,
) -> Result<(usize, usize, Vec<String>), String> {
    let live = dir.join("live.img");
    let rec = match record(base, &live, steps) {
        Ok(r) => r,
        Err(e) => return Ok((0, 0, vec![format!("recording failed: {e}")])),
    };
    let plan = CrashPlan {
        flush_points: true,
        prefixes: opts.per_epoch > 0,
        max_prefixes: opts.per_epoch,
        all_but_one: false,
        subsets: opts.per_epoch,
        seed: salt as u64,
        reorder: true,
        tear: false,
        epochs: InEpochs::All,
    };
    let states = rec.log.states(&plan).map_err(|e| e.to_string())?;
    let copts = Options {
        keep_failures: 2,
        work_dir: Some(dir.to_path_buf()),
        ..Options::default()
    };
    let mnt: PathBuf = dir.join("mnt");
    let mut n = 0;
    let mut kernel = 0;
    let mut checker = |img: &Path, s: &usfs_dev::record::CrashState| {
        n += 1;
        let how = Recover {
            kernel_mount: (opts.kernel_every > 0 && (n + salt).is_multiple_of(opts.kernel_every))
                .then(|| mnt.clone()),
        };
        kernel += usize::from(how.kernel_mount.is_some());
        check_state(img, s, &rec, &how)
    };
    let report = check_states(base, &rec.log, &states, &copts, &mut checker)
        .map_err(|e| format!("harness: {e}"))?;
    let fails = report
        .failures
        .iter()
        .map(|f| format!("state {}: {}\n{}", f.index, f.state, f.message))
        .chain((report.failures.len()..report.failed).map(|_| "(more)".to_string()))
        .collect();
    Ok((report.checked, kernel, fails))
}
