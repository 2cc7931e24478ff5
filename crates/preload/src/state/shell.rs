//! The shell calls' share of the process state: what system(3) and popen(3) must remember
//! between calls, kept here so that fork (h_exec) can hold the popen lock without reaching
//! into h_shell, which only runs the algorithms.
//!
//! Two pieces, as glibc keeps them: the count of running system() calls with the
//! SIGINT/SIGQUIT actions to put back when the last one ends (a second thread's system()
//! must not take the first one's SIG_IGN for the action to restore), and the open popen
//! streams (pclose waits for their shell; a new popen child closes the others'
//! descriptors, as POSIX asks). Each sits behind its own lock; fork holds the popen lock
//! ([`Shell::lock_popen`]) so a child never inherits it taken.

use libc::{c_int, pid_t};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// system(3)'s shared part: running calls and the actions to restore.
pub(crate) struct SystemSignals {
    /// How many system() calls are running.
    pub running: usize,
    /// SIGINT's action before the first of them.
    pub intr: libc::sigaction,
    /// SIGQUIT's action before the first of them.
    pub quit: libc::sigaction,
}

/// An open popen stream.
pub(crate) struct Popen {
    /// The FILE's address.
    pub fp: usize,
    /// The shell running the command.
    pub pid: pid_t,
    /// The parent's end of the pipe (the FILE's descriptor).
    pub fd: c_int,
}

/// The process's system() and popen() bookkeeping.
#[derive(Default)]
pub(crate) struct Shell {
    /// Running system() calls and the signal actions to restore.
    system: Mutex<Option<SystemSignals>>,
    /// Open popen streams.
    popen: Mutex<Vec<Popen>>,
    /// How many entries `popen` has, read without the lock: fclose looks here first, so
    /// closing other streams never takes the lock (fork holds it while the program's
    /// pthread_atfork handlers run, and those may close streams).
    n_popen: AtomicUsize,
}

/// The popen table, locked: popen holds it from spawning the shell to recording the
/// stream, fork across the fork.
pub(crate) struct PopenTable<'a> {
    streams: MutexGuard<'a, Vec<Popen>>,
    n_popen: &'a AtomicUsize,
}

impl PopenTable<'_> {
    /// The open popen streams.
    pub(crate) fn streams(&self) -> &[Popen] {
        &self.streams
    }

    /// Records a new stream.
    pub(crate) fn push(&mut self, p: Popen) {
        self.streams.push(p);
        self.n_popen.fetch_add(1, Ordering::Relaxed);
    }
}

impl Shell {
    /// Locks the popen table (fork holds it across the fork).
    pub(crate) fn lock_popen(&self) -> PopenTable<'_> {
        PopenTable {
            streams: self.popen.lock().unwrap_or_else(|p| p.into_inner()),
            n_popen: &self.n_popen,
        }
    }

    /// Takes the stream whose FILE is at `fp` out of the table; None when it is not a
    /// popen stream of ours (without taking the lock when there are none).
    pub(crate) fn take_popen(&self, fp: usize) -> Option<Popen> {
        if self.n_popen.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut table = self.popen.lock().unwrap_or_else(|p| p.into_inner());
        let i = table.iter().position(|p| p.fp == fp)?;
        self.n_popen.fetch_sub(1, Ordering::Relaxed);
        Some(table.swap_remove(i))
    }

    /// Locks system()'s running count and saved actions.
    pub(crate) fn lock_system(&self) -> MutexGuard<'_, Option<SystemSignals>> {
        self.system.lock().unwrap_or_else(|p| p.into_inner())
    }
}
