//! Commands run through the shell: system(3), popen(3) and pclose(3). glibc starts the
//! shell with its internal posix_spawn, which no preload library sees, so the shell
//! would lose the virtual working directory and descriptors (and `system("rm -rf *")`
//! from a directory in an image would run in the kernel's working directory). These are
//! glibc's algorithms (2.36: `/bin/sh -c COMMAND`) on top of the posix_spawn hook
//! (h_exec), which hands both over.
//!
//! What these calls remember between calls (running system() calls and the signal
//! actions to restore, the open popen streams) is part of the process's [`State`]
//! ([`crate::state::shell`]); this file holds no state of its own.

use crate::state::shell::{Popen, SystemSignals};
use crate::state::{state, State};
use crate::sys::{call_real, errno, set_errno};
use libc::{c_char, c_int, pid_t, FILE};
use std::ptr::{null, null_mut};

/// glibc's `_PATH_BSHELL`.
const SHELL: &std::ffi::CStr = c"/bin/sh";

/// Spawns `/bin/sh -c command` through the posix_spawn hook (which hands the virtual
/// working directory and descriptors over); returns posix_spawn's result.
fn spawn_shell(
    pid: &mut pid_t,
    command: *const c_char,
    fa: *const libc::posix_spawn_file_actions_t,
    attr: *const libc::posix_spawnattr_t,
) -> c_int {
    let argv: [*const c_char; 4] = [c"sh".as_ptr(), c"-c".as_ptr(), command, null()];
    // SAFETY: our own posix_spawn hook with a NUL-terminated path, a NULL-terminated
    // argv of NUL-terminated strings, the caller's file actions and attributes (or null)
    // and the process's environment.
    unsafe {
        crate::h_exec::posix_spawn(
            pid,
            SHELL.as_ptr(),
            fa,
            attr,
            argv.as_ptr(),
            crate::h_exec::environ_ptr(),
        )
    }
}

/// waitpid(pid, 0), again after EINTR; the status, or None when it fails.
fn wait_for(pid: pid_t) -> Option<c_int> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid into a local.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Some(status);
        }
        if r == -1 && errno() == libc::EINTR {
            continue;
        }
        return None;
    }
}

/// glibc's do_system: SIGINT and SIGQUIT ignored and SIGCHLD blocked in the caller while
/// the shell runs (the shell gets the caller's mask and, for signals not ignored before,
/// default actions); the wait status, 127 << 8 if the shell could not be started, -1 if
/// the wait failed.
fn do_system(st: &State, line: *const c_char) -> c_int {
    // SAFETY: sigaction, sigset and spawn-attribute calls on locals; the signal state
    // they change is put back below.
    unsafe {
        let mut ign: libc::sigaction = std::mem::zeroed();
        ign.sa_sigaction = libc::SIG_IGN;
        libc::sigemptyset(&mut ign.sa_mask);
        let (intr_handler, quit_handler) = {
            let mut g = st.shell.lock_system();
            if g.as_ref().is_none_or(|s| s.running == 0) {
                let mut s = SystemSignals {
                    running: 0,
                    intr: std::mem::zeroed(),
                    quit: std::mem::zeroed(),
                };
                libc::sigaction(libc::SIGINT, &ign, &mut s.intr);
                libc::sigaction(libc::SIGQUIT, &ign, &mut s.quit);
                *g = Some(s);
            }
            let s = g.as_mut().expect("set above");
            s.running += 1;
            (s.intr.sa_sigaction, s.quit.sa_sigaction)
        };
        let mut chld: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        let mut omask: libc::sigset_t = std::mem::zeroed();
        if libc::sigprocmask(libc::SIG_BLOCK, &chld, &mut omask) < 0 {
            let e = errno();
            end_system(st);
            set_errno(e);
            return -1;
        }
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        let mut reset: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut reset);
        if intr_handler != libc::SIG_IGN {
            libc::sigaddset(&mut reset, libc::SIGINT);
        }
        if quit_handler != libc::SIG_IGN {
            libc::sigaddset(&mut reset, libc::SIGQUIT);
        }
        libc::posix_spawnattr_setsigmask(&mut attr, &omask);
        libc::posix_spawnattr_setsigdefault(&mut attr, &reset);
        libc::posix_spawnattr_setflags(
            &mut attr,
            (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as libc::c_short,
        );
        let mut pid: pid_t = 0;
        let ret = spawn_shell(&mut pid, line, null(), &attr);
        libc::posix_spawnattr_destroy(&mut attr);
        let status = if ret == 0 {
            wait_for(pid).unwrap_or(-1)
        } else {
            // POSIX: as if the shell had exited with 127.
            127 << 8
        };
        end_system(st);
        libc::sigprocmask(libc::SIG_SETMASK, &omask, null_mut());
        if ret != 0 {
            set_errno(ret);
        }
        status
    }
}

/// One system() call ended: the last one puts SIGINT's and SIGQUIT's actions back.
fn end_system(st: &State) {
    let mut g = st.shell.lock_system();
    if let Some(s) = g.as_mut() {
        s.running -= 1;
        if s.running == 0 {
            // SAFETY: restoring actions sigaction gave us.
            unsafe {
                libc::sigaction(libc::SIGINT, &s.intr, null_mut());
                libc::sigaction(libc::SIGQUIT, &s.quit, null_mut());
            }
        }
    }
}

/// system(3): with a null command, whether a shell is available (nonzero if so).
#[no_mangle]
pub(crate) unsafe extern "C" fn system(line: *const c_char) -> c_int {
    let Some(st) = state() else {
        return call_real!(system: unsafe extern "C" fn(*const c_char) -> c_int, -1; line);
    };
    if line.is_null() {
        return (do_system(st, c"exit 0".as_ptr()) == 0) as c_int;
    }
    do_system(st, line)
}

/// Closes a kernel descriptor (raw system call).
fn close_fd(fd: c_int) {
    crate::state::sys_close(fd);
}

/// glibc's popen: `r` or `w` (exactly one) and optionally `e`; a pipe whose child end
/// becomes the shell's stdout (`r`) or stdin (`w`); the parent's end close-on-exec only
/// with `e`; the shell closes the other popen streams' descriptors.
fn do_popen(st: &State, command: *const c_char, mode: *const c_char) -> *mut FILE {
    let (mut read, mut write, mut cloexec) = (false, false, false);
    let m = if mode.is_null() {
        &[][..]
    } else {
        // SAFETY: popen's mode is a NUL-terminated string.
        unsafe { std::ffi::CStr::from_ptr(mode) }.to_bytes()
    };
    for &c in m {
        match c {
            b'r' => read = true,
            b'w' => write = true,
            b'e' => cloexec = true,
            _ => {
                set_errno(libc::EINVAL);
                return null_mut();
            }
        }
    }
    if read == write {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 into a local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return null_mut();
    }
    let (parent_end, child_end, child_fd) = if read { (0, 1, 1) } else { (1, 0, 0) };
    if fds[child_end] == child_fd {
        // Moved away, so the child's dup2 clears close-on-exec.
        // SAFETY: fcntl on our pipe descriptor (raw system call).
        let tmp = unsafe { libc::syscall(libc::SYS_fcntl, child_fd, libc::F_DUPFD_CLOEXEC, 0) };
        if tmp < 0 {
            let e = errno();
            close_fd(fds[0]);
            close_fd(fds[1]);
            set_errno(e);
            return null_mut();
        }
        close_fd(fds[child_end]);
        fds[child_end] = tmp as c_int;
    }
    type FdopenFn = unsafe extern "C" fn(c_int, *const c_char) -> *mut FILE;
    let fmode = if read { c"r" } else { c"w" };
    let fp = call_real!(fdopen: FdopenFn, null_mut(); fds[parent_end], fmode.as_ptr());
    if fp.is_null() {
        let e = errno();
        close_fd(fds[0]);
        close_fd(fds[1]);
        set_errno(e);
        return null_mut();
    }
    let mut table = st.shell.lock_popen();
    let pid = spawn_popen(command, fds[child_end], child_fd, table.streams());
    close_fd(fds[child_end]);
    let Some(pid) = pid else {
        // The FILE made above; closing it closes the parent's end.
        call_real!(fclose: unsafe extern "C" fn(*mut FILE) -> c_int, -1; fp);
        set_errno(libc::ENOMEM);
        return null_mut();
    };
    if !cloexec {
        // SAFETY: fcntl on our pipe descriptor (raw system call).
        unsafe { libc::syscall(libc::SYS_fcntl, fds[parent_end], libc::F_SETFD, 0) };
    }
    table.push(Popen {
        fp: fp as usize,
        pid,
        fd: fds[parent_end],
    });
    fp
}

/// Spawns the popen shell: `child_end` becomes its descriptor `child_fd`, the other
/// popen streams' descriptors are closed in it. The pid, or None on failure.
fn spawn_popen(
    command: *const c_char,
    child_end: c_int,
    child_fd: c_int,
    open: &[Popen],
) -> Option<pid_t> {
    // SAFETY: file-action calls on a local, destroyed below.
    unsafe {
        let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut fa);
        let mut ok = libc::posix_spawn_file_actions_adddup2(&mut fa, child_end, child_fd) == 0;
        for p in open.iter().filter(|p| p.fd != child_fd) {
            ok &= libc::posix_spawn_file_actions_addclose(&mut fa, p.fd) == 0;
        }
        let mut pid = 0;
        if ok {
            ok = spawn_shell(&mut pid, command, &fa, null()) == 0;
        }
        libc::posix_spawn_file_actions_destroy(&mut fa);
        ok.then_some(pid)
    }
}

/// popen(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn popen(command: *const c_char, mode: *const c_char) -> *mut FILE {
    let Some(st) = state() else {
        type PopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;
        return call_real!(popen: PopenFn, null_mut(); command, mode);
    };
    do_popen(st, command, mode)
}

/// Closes a popen stream of ours and waits for its shell: the wait status, -1 if the
/// wait fails; None when `fp` is not one of ours.
pub(crate) fn close_popen(fp: *mut FILE) -> Option<c_int> {
    let p = state()?.shell.take_popen(fp as usize)?;
    // The caller's stream (a popen stream of ours); closing it closes the pipe, so a `w`
    // command sees end of file before we wait.
    call_real!(fclose: unsafe extern "C" fn(*mut FILE) -> c_int, -1; fp);
    Some(wait_for(p.pid).unwrap_or(-1))
}

/// pclose(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn pclose(fp: *mut FILE) -> c_int {
    match close_popen(fp) {
        Some(r) => r,
        None => call_real!(pclose: unsafe extern "C" fn(*mut FILE) -> c_int, -1; fp),
    }
}
