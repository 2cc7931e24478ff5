//! Progress lines on standard error for long jobs, only when standard output is a terminal.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Prints at most ten updates a second, and nothing when not on a terminal.
pub(crate) struct Progress {
    enabled: bool,
    last: Instant,
    shown: bool,
}

impl Progress {
    /// A progress line enabled when stdout is a terminal (or forced).
    pub(crate) fn new(force: Option<bool>) -> Progress {
        let enabled = force.unwrap_or_else(|| std::io::stdout().is_terminal());
        Progress {
            enabled,
            last: Instant::now() - Duration::from_secs(1),
            shown: false,
        }
    }

    /// Shows `msg` unless the last update was under 100 ms ago.
    pub(crate) fn update(&mut self, msg: impl FnOnce() -> String) {
        if !self.enabled || self.last.elapsed() < Duration::from_millis(100) {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[K{}", msg());
        let _ = e.flush();
    }

    /// Clears the line.
    pub(crate) fn finish(&mut self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
            self.shown = false;
        }
    }
}
