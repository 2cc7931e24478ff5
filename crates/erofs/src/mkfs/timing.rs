//! Where a build spends its time: wall time per phase, with the CPU time of the calling
//! (writer) thread and of the whole process in that phase, so the serial part and how
//! busy the workers kept the cores can be read off (`usfs mkfs.erofs --timing`).

use std::time::{Duration, Instant};

/// One phase of a build.
#[derive(Clone, Debug)]
pub struct Phase {
    /// The phase's name in `--timing` output.
    pub name: &'static str,
    /// Wall-clock time.
    pub wall: Duration,
    /// CPU time (user + system) of the thread that ran the build.
    pub main_cpu: Duration,
    /// CPU time of the whole process (the main thread and every worker).
    pub all_cpu: Duration,
}

/// Records phases as they end.
pub(super) struct Timer {
    last: (Instant, Duration, Duration),
    pub phases: Vec<Phase>,
}

impl Timer {
    pub(super) fn start() -> Timer {
        Timer {
            last: (
                Instant::now(),
                cpu(libc::RUSAGE_THREAD),
                cpu(libc::RUSAGE_SELF),
            ),
            phases: Vec::new(),
        }
    }

    /// Ends the current phase, naming it.
    pub(super) fn phase(&mut self, name: &'static str) {
        let now = (
            Instant::now(),
            cpu(libc::RUSAGE_THREAD),
            cpu(libc::RUSAGE_SELF),
        );
        self.phases.push(Phase {
            name,
            wall: now.0 - self.last.0,
            main_cpu: now.1.saturating_sub(self.last.1),
            all_cpu: now.2.saturating_sub(self.last.2),
        });
        self.last = now;
    }
}

/// User + system CPU time of this thread or the process.
fn cpu(who: libc::c_int) -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one rusage into the pointer it is given, which is valid
    // and properly aligned; `who` is RUSAGE_SELF or RUSAGE_THREAD.
    let ok = unsafe { libc::getrusage(who, ru.as_mut_ptr()) } == 0;
    if !ok {
        return Duration::ZERO;
    }
    // SAFETY: zero-initialised and filled by a successful getrusage.
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
