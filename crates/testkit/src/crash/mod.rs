//! The crash harness: materialises the crash states of a recorded log
//! ([`usfs_dev::record`]) as image files and runs a checker on each, counting states
//! checked and failed and keeping the first failures with the state that caused them.
//!
//! Cost: the base image is copied once (sparse: only its data extents); the epochs before
//! a state are applied to that working copy once, in order, as the states move forward;
//! a state's own pieces are applied and undone afterwards. A checker that changes the
//! image (e2fsck -fy) gets a sparse copy of the working image per state; a read-only one
//! can run on the working image itself ([`Options::scratch_copy`] off).
//!
//! [`check_plan`] takes a [`CrashPlan`] instead of a list of states;
//! [`Options::keep_failed`] saves failing states' images for a closer look.
//!
//! Standard checkers are in [`check`]: e2fsck after journal replay, e2fsck repair, and
//! "these files hold exactly these bytes" through usfs's own reader or debugfs.

pub mod check;
mod copy;
#[cfg(feature = "ext4")]
pub mod rw;
#[cfg(feature = "ext4")]
pub mod sweep;
pub mod workload;

pub use copy::copy_sparse;

use crate::TempDir;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use usfs_dev::record::{CrashPlan, CrashState, Log};
use usfs_dev::{Device, FileDevice};

/// How [`check_states`] runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Give the checker its own copy of each state (it may change it); off, the checker
    /// sees the working image and must not change it.
    pub scratch_copy: bool,
    /// Failures kept in the report (all are counted).
    pub keep_failures: usize,
    /// Where the working images go (a fresh temporary directory when absent).
    pub work_dir: Option<PathBuf>,
    /// Save the image of each kept failure here as `state-<index>.img` (sparse), as it
    /// was before the checker ran, for a look with debugfs or e2fsck.
    pub keep_failed: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            scratch_copy: true,
            keep_failures: 8,
            work_dir: None,
            keep_failed: None,
        }
    }
}

/// A state the checker rejected.
#[derive(Clone, Debug)]
pub struct Failure {
    /// Index of the state in the slice given to [`check_states`].
    pub index: usize,
    /// The state.
    pub state: CrashState,
    /// What the checker said.
    pub message: String,
}

/// What [`check_states`] found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// States checked.
    pub checked: usize,
    /// States the checker rejected.
    pub failed: usize,
    /// The first rejected states (at most [`Options::keep_failures`]), in the order checked.
    pub failures: Vec<Failure>,
    /// For each state given, in the same order: did it pass.
    pub passed: Vec<bool>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} crash states checked, {} failed",
            self.checked, self.failed
        )?;
        for x in &self.failures {
            write!(
                f,
                "\n  state {}: {}\n    {}",
                x.index,
                x.state,
                x.message.replace('\n', "\n    ")
            )?;
        }
        if self.failed > self.failures.len() {
            write!(f, "\n  ... and {} more", self.failed - self.failures.len())?;
        }
        Ok(())
    }
}

/// A checker: given an image file holding one crash state, `Ok` or what is wrong.
pub type Checker<'a> = dyn FnMut(&Path, &CrashState) -> Result<(), String> + 'a;

/// Materialises each of `states` from `base` (the image the recording started from) and
/// `log`, and runs `check` on it. I/O errors of the harness itself are errors; what the
/// checker rejects is counted in the report.
pub fn check_states(
    base: &Path,
    log: &Log,
    states: &[CrashState],
    opts: &Options,
    check: &mut Checker<'_>,
) -> io::Result<Report> {
    let tmp;
    let dir = match &opts.work_dir {
        Some(d) => d.clone(),
        None => {
            tmp = TempDir::new("crash")?;
            tmp.path().to_path_buf()
        }
    };
    let work = dir.join("work.img");
    let scratch = dir.join("state.img");
    copy_sparse(base, &work)?;
    let dev = FileDevice::open(&work, true)?;
    let mut order: Vec<usize> = (0..states.len()).collect();
    order.sort_by_key(|&i| states[i].epoch);
    let mut report = Report {
        passed: vec![false; states.len()],
        ..Report::default()
    };
    let mut applied = 0;
    for i in order {
        let state = &states[i];
        log.apply_epochs(applied..state.epoch, &dev)?;
        applied = applied.max(state.epoch);
        let undo = apply_with_undo(log, state, &dev)?;
        let target = if opts.scratch_copy {
            copy_sparse(&work, &scratch)?;
            &scratch
        } else {
            &work
        };
        let result = check(target, state);
        if let (Err(_), Some(keep)) = (&result, &opts.keep_failed) {
            if report.failures.len() < opts.keep_failures {
                copy_sparse(&work, &keep.join(format!("state-{i}.img")))?;
            }
        }
        for (off, old) in undo.iter().rev() {
            dev.write_at(old, *off)?;
        }
        report.checked += 1;
        match result {
            Ok(()) => report.passed[i] = true,
            Err(message) => {
                report.failed += 1;
                if report.failures.len() < opts.keep_failures {
                    report.failures.push(Failure {
                        index: i,
                        state: state.clone(),
                        message,
                    });
                }
            }
        }
    }
    Ok(report)
}

/// The states `plan` gives for `log`, checked as [`check_states`] does.
pub fn check_plan(
    base: &Path,
    log: &Log,
    plan: &CrashPlan,
    opts: &Options,
    check: &mut Checker<'_>,
) -> io::Result<Report> {
    check_states(base, log, &log.states(plan)?, opts, check)
}

/// Applies the pieces of `state` to `dev`, returning the bytes they replaced.
fn apply_with_undo(
    log: &Log,
    state: &CrashState,
    dev: &dyn Device,
) -> io::Result<Vec<(u64, Vec<u8>)>> {
    let mut undo = Vec::with_capacity(state.pieces.len());
    for p in &state.pieces {
        let (off, data) = log.piece_bytes(p)?;
        let mut old = vec![0u8; data.len()];
        dev.read_at(&mut old, off)?;
        dev.write_at(&data, off)?;
        undo.push((off, old));
    }
    Ok(undo)
}
