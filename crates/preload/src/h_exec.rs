//! Processes: fork keeps the tables (the locks are held across it, so the child never
//! inherits one mid-update); execve and friends hand the open virtual descriptors (those
//! without close-on-exec) and the virtual cwd to the new program through a file in
//! /dev/shm named by USFS_HANDOVER (SplitFS hands its state over the same way), and put
//! the mount table and LD_PRELOAD back into the environment if the program dropped them.
//!
//! Offsets: a regular file's description that fork or exec shares with another process
//! gets its offset moved into the kernel first ([`share_offsets`]): its placeholders are
//! replaced by dups of one sealed memfd whose file offset is the description's, so dup,
//! fork and exec share it as they share any kernel file's, and reads and seeks through
//! the description use it from then on (`OpenFile::read_fd`). Descriptions nobody else
//! shares keep their offset in memory (no system call per read).

use crate::exec_path::{self, Found};
use crate::state::{lock, sys_close, State, Target};
use crate::sys::{call_real, hooked, real, ret, set_errno};
use libc::{c_char, c_int, pid_t};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use usfs_vfs::resolve::{resolve, Start};
use usfs_vfs::{OpenFile, Resolved};

/// The environment variable naming the handover file.
const HANDOVER: &str = "USFS_HANDOVER";

/// The seals that mark an offset carrier (and keep it empty).
const CARRIER_SEALS: c_int =
    libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;

/// A new offset carrier at offset `off`: an empty sealed memfd (raw system calls).
fn offset_carrier(off: u64) -> Option<c_int> {
    // SAFETY: memfd_create with a static NUL-terminated name; fcntl and lseek on the new
    // descriptor take integers.
    unsafe {
        let fd = libc::syscall(
            libc::SYS_memfd_create,
            c"usfs-offset".as_ptr(),
            libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC,
        ) as c_int;
        if fd < 0 {
            return None;
        }
        if libc::syscall(libc::SYS_fcntl, fd, libc::F_ADD_SEALS, CARRIER_SEALS) < 0
            || libc::syscall(libc::SYS_lseek, fd, off as i64, libc::SEEK_SET) < 0
        {
            sys_close(fd);
            return None;
        }
        Some(fd)
    }
}

/// True when `fd` is an offset carrier.
fn is_carrier(fd: c_int) -> bool {
    // SAFETY: F_GET_SEALS on a descriptor number.
    unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GET_SEALS) == CARRIER_SEALS as i64 }
}

/// Moves the offset of every regular file's description into the kernel (see the module
/// text), before fork or exec shares the descriptions: each description's descriptors
/// become dups of one offset carrier (close-on-exec as they were). A description that
/// cannot be moved keeps its own offset (then not shared).
fn share_offsets(st: &State) {
    let mut by_file: HashMap<usize, (Arc<OpenFile>, Vec<c_int>)> = HashMap::new();
    for (fd, f) in st.fds.snapshot() {
        if f.kind == usfs_vfs::FileKind::File && !f.offset_in_kernel() {
            by_file
                .entry(Arc::as_ptr(&f) as usize)
                .or_insert_with(|| (Arc::clone(&f), Vec::new()))
                .1
                .push(fd);
        }
    }
    for (f, fds) in by_file.into_values() {
        let Some(carrier) = offset_carrier(f.offset()) else {
            continue;
        };
        let mut all = true;
        for fd in fds {
            // SAFETY: fcntl and dup3 on descriptor numbers: the placeholder `fd` is
            // replaced by a dup of the carrier, keeping its close-on-exec flag.
            let ok = unsafe {
                let fdflags = libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFD);
                let cloexec = if fdflags >= 0 && fdflags & libc::FD_CLOEXEC as i64 != 0 {
                    libc::O_CLOEXEC
                } else {
                    0
                };
                fdflags >= 0 && libc::syscall(libc::SYS_dup3, carrier, fd, cloexec) == fd as i64
            };
            all &= ok;
        }
        sys_close(carrier);
        if all {
            f.keep_offset_in_kernel();
        }
    }
}

/// fork(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn fork() -> pid_t {
    // The popen table first: popen holds it while spawning, which takes the locks below.
    let _popen = crate::state::state().map(|st| st.shell.lock_popen());
    let r = hooked(-1, |st| {
        share_offsets(st);
        let _fds = st.fds.lock_all();
        let _paths = st.paths.lock_all();
        let _dirs = lock(&st.dirs);
        let _streams = lock(&st.streams);
        let _vcwd = st.vcwd.write().unwrap_or_else(|e| e.into_inner());
        let _cwd = st.host_cwd.write().unwrap_or_else(|e| e.into_inner());
        let _std = lock(&st.std_streams);
        let _maps = lock(&st.shared_maps);
        let _owners: Vec<_> = (0..st.table.len())
            .filter_map(|i| st.table.get(i).remote().map(|r| r.hold()))
            .collect();
        Some(call_real!(fork: unsafe extern "C" fn() -> pid_t, -1;))
    });
    match r {
        Some(r) => r,
        None => call_real!(fork: unsafe extern "C" fn() -> pid_t, -1;),
    }
}

/// vfork(2) becomes fork: a vfork child shares our memory, so hooks it runs (open for a
/// redirection, execve) would change the parent's tables and leave the parent's
/// reentrancy guard set. fork is a valid implementation of vfork.
#[no_mangle]
pub(crate) unsafe extern "C" fn vfork() -> pid_t {
    // SAFETY: our fork hook, same contract.
    unsafe { fork() }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Writes the handover file if there is anything to hand over; returns its path.
fn write_handover(st: &State) -> Option<CString> {
    share_offsets(st);
    let mut text = String::new();
    if let Some(vp) = st.vcwd.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        text.push_str(&format!("cwd {}\n", hex(&vp.host_path(&st.table))));
    }
    let mut ids: HashMap<usize, usize> = HashMap::new();
    for (fd, f) in st.fds.snapshot() {
        // SAFETY: F_GETFD on a descriptor number we hold.
        let fdflags = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFD) };
        if fdflags < 0 || fdflags & libc::FD_CLOEXEC as i64 != 0 {
            continue;
        }
        let n = ids.len();
        let id = *ids.entry(Arc::as_ptr(&f) as usize).or_insert(n);
        text.push_str(&format!(
            "fd {fd} {id} {} {} {}\n",
            f.offset_fd(fd).unwrap_or_else(|_| f.offset()),
            f.flags(),
            hex(&f.vpath.host_path(&st.table))
        ));
    }
    if text.is_empty() {
        return None;
    }
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let path = format!(
        "{dir}/usfs-handover-{}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    std::fs::write(&path, text).ok()?;
    CString::new(path).ok()
}

/// The environment for the new program: `envp` without a stale USFS_HANDOVER, with the
/// mount table and LD_PRELOAD if missing, and the new handover file if any.
struct Env {
    _owned: Vec<CString>,
    ptrs: Vec<*const c_char>,
    handover: Option<CString>,
}

fn build_env(st: &State, envp: *const *const c_char) -> Env {
    let handover = write_handover(st);
    let mut owned: Vec<CString> = Vec::new();
    let mut ptrs: Vec<*const c_char> = Vec::new();
    let mut have: Vec<Vec<u8>> = Vec::new();
    // SAFETY: envp is null or a NULL-terminated array of NUL-terminated strings.
    for p in unsafe { crate::sys::c_array(envp) } {
        // SAFETY: as above.
        let s = unsafe { CStr::from_ptr(p) }.to_bytes();
        let key = s.split(|&b| b == b'=').next().unwrap_or(b"").to_vec();
        if key == HANDOVER.as_bytes() {
            continue;
        }
        have.push(key);
        ptrs.push(p);
    }
    for kv in &st.env_keep {
        let key = kv.as_bytes().split(|&b| b == b'=').next().unwrap_or(b"");
        if !have.iter().any(|k| k == key) {
            owned.push(kv.clone());
        }
    }
    if let Some(h) = &handover {
        let mut s = format!("{HANDOVER}=").into_bytes();
        s.extend_from_slice(h.as_bytes());
        owned.extend(CString::new(s).ok());
    }
    ptrs.extend(owned.iter().map(|c| c.as_ptr()));
    ptrs.push(std::ptr::null());
    Env {
        _owned: owned,
        ptrs,
        handover,
    }
}

impl Env {
    /// The exec failed: the new program will not read the file.
    fn failed(&self) {
        if let Some(h) = &self.handover {
            // SAFETY: unlink of a NUL-terminated path.
            unsafe { libc::syscall(libc::SYS_unlink, h.as_ptr()) };
        }
    }
}

/// Runs an exec-like call with the prepared environment. A program inside a mount (named
/// with a `/`, by execve/execv, or found in a PATH directory inside a mount, see
/// [`exec_path`]) is run from a private copy: a memfd executed with execveat(AT_EMPTY_PATH)
/// (a `#!` script gets its interpreter with `/dev/fd/N`, which the memfd stays open for).
/// `f` runs libc's function on the path given (the one found on the host, after our own
/// PATH search) and the environment.
fn exec_with(
    path: *const c_char,
    check_path: bool,
    argv: *const *const c_char,
    envp: *const *const c_char,
    f: impl FnOnce(*const c_char, *const *const c_char) -> c_int,
) -> Option<c_int> {
    hooked(-1, |st| {
        let mut program = None;
        let mut host = None;
        // SAFETY: exec paths are NUL-terminated (null is left to libc).
        let name = (!path.is_null()).then(|| unsafe { CStr::from_ptr(path) }.to_bytes());
        let names_file = check_path || name.is_some_and(|n| n.contains(&b'/'));
        if names_file {
            match st.classify(libc::AT_FDCWD, path, true) {
                Ok(Target::Virt(vp)) => program = Some(vp),
                Err(e) => return Some(ret(Err(e))),
                _ => {}
            }
        } else if let Some(found) = name.and_then(|n| exec_path::search(st, n)) {
            match found {
                Found::Virt(vp) => program = Some(vp),
                Found::Host(p) => host = Some(p),
                Found::Missing(e) => return Some(ret(Err(e))),
            }
        }
        let env = build_env(st, envp);
        let r = match program {
            Some(vp) => ret(exec_virtual(st, vp, argv, env.ptrs.as_ptr())),
            None => f(
                host.as_ref().map_or(path, |h| h.as_ptr()),
                env.ptrs.as_ptr(),
            ),
        };
        env.failed();
        Some(r)
    })
}

/// A memfd copy of the program at `vp`, checked like the kernel's exec (a regular file
/// the caller may execute, EACCES otherwise). A binary's copy is close-on-exec; a `#!`
/// script's stays open, as its interpreter reads it through `/dev/fd/N`.
fn program_copy(st: &State, vp: usfs_vfs::VPath) -> Result<c_int, c_int> {
    if !exec_path::executable(st, &st.meta(&vp)?) {
        return Err(libc::EACCES);
    }
    let mfd = crate::copy::to_memfd(st, vp, c"usfs-copy", 0)?;
    let mut magic = [0u8; 2];
    // SAFETY: reading two bytes of our memfd into a local buffer.
    let n = unsafe { libc::pread(mfd, magic.as_mut_ptr().cast(), 2, 0) };
    if !(n == 2 && magic == *b"#!") {
        // SAFETY: fcntl on our own descriptor.
        unsafe { libc::fcntl(mfd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(mfd)
}

/// Executes the program at `vp` from a memfd copy; returns only on failure.
fn exec_virtual(
    st: &State,
    vp: usfs_vfs::VPath,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> Result<c_int, c_int> {
    let mfd = program_copy(st, vp)?;
    // SAFETY: execveat with our memfd, an empty path and the caller's argv/environment.
    unsafe {
        libc::syscall(
            libc::SYS_execveat,
            mfd,
            c"".as_ptr(),
            argv,
            envp,
            libc::AT_EMPTY_PATH,
        )
    };
    let e = crate::sys::errno();
    sys_close(mfd);
    Err(e)
}

extern "C" {
    static environ: *const *const c_char;
}

/// The process's environment (`environ`).
pub(crate) fn environ_ptr() -> *const *const c_char {
    // SAFETY: reading the process's environment pointer.
    unsafe { environ }
}

type ExecveFn =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;

/// Runs `real` (libc's execve or execvpe) on `target` with the handover of virtual
/// descriptors prepared (`by_path`: `target` is a path, not a name to look up in PATH);
/// `real` with the arguments unchanged when there is nothing to hand over.
unsafe fn exec_via(
    real: Option<ExecveFn>,
    target: *const c_char,
    by_path: bool,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let Some(f) = real else {
        set_errno(libc::ENOSYS);
        return -1;
    };
    // SAFETY: the caller's arguments, passed on unchanged (or with the environment
    // replaced by one of the same shape); the contract is libc's.
    let via = |t, e| unsafe { f(t, argv, e) };
    // SAFETY: the caller's arguments, passed on unchanged; the contract is libc's.
    exec_with(target, by_path, argv, envp, via).unwrap_or_else(|| unsafe { f(target, argv, envp) })
}

/// execve(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let real = real!(execve: ExecveFn);
    // SAFETY: the caller's arguments, as execve takes them.
    unsafe { exec_via(real, path, true, argv, envp) }
}

/// execv(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    let real = real!(execve: ExecveFn);
    // SAFETY: the caller's arguments, as execve takes them.
    unsafe { exec_via(real, path, true, argv, environ_ptr()) }
}

/// execvpe(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let real = real!(execvpe: ExecveFn);
    // SAFETY: the caller's arguments, as execvpe takes them.
    unsafe { exec_via(real, file, false, argv, envp) }
}

/// execvp(3).
#[no_mangle]
pub(crate) unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    let real = real!(execvpe: ExecveFn);
    // SAFETY: the caller's arguments, as execvpe takes them.
    unsafe { exec_via(real, file, false, argv, environ_ptr()) }
}

type FexecveFn = unsafe extern "C" fn(c_int, *const *const c_char, *const *const c_char) -> c_int;
type ExecveatFn = unsafe extern "C" fn(
    c_int,
    *const c_char,
    *const *const c_char,
    *const *const c_char,
    c_int,
) -> c_int;

/// Executes the file descriptor `fd` names, with the handover prepared: a virtual one
/// from a memfd copy of its file (the kernel would check and run the file itself), any
/// other through `real` (libc's fexecve, or execveat with AT_EMPTY_PATH), given the new
/// environment. Returns only on failure.
fn exec_fd(
    st: &State,
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
    real: impl FnOnce(*const *const c_char) -> c_int,
) -> c_int {
    let vp = st.fds.get(fd).map(|f| f.vpath.clone());
    let env = build_env(st, envp);
    let r = match vp {
        Some(vp) => ret(exec_virtual(st, vp, argv, env.ptrs.as_ptr())),
        None => real(env.ptrs.as_ptr()),
    };
    env.failed();
    r
}

/// fexecve(3): glibc's calls execveat directly (no hook sees it), so the handover is
/// prepared here; a virtual descriptor runs its file from a memfd copy.
#[no_mangle]
pub(crate) unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let r = hooked(-1, |st| {
        Some(exec_fd(
            st,
            fd,
            argv,
            envp,
            |env| call_real!(fexecve: FexecveFn, -1; fd, argv, env),
        ))
    });
    match r {
        Some(r) => r,
        None => call_real!(fexecve: FexecveFn, -1; fd, argv, envp),
    }
}

/// execveat(2): an empty path with AT_EMPTY_PATH is fexecve of `dirfd`; a path into a
/// mount runs its file from a memfd copy (a symbolic link with AT_SYMLINK_NOFOLLOW is
/// ELOOP, as the kernel's); a relative path that leaves a virtual directory goes to the
/// kernel absolute; the handover is prepared in every case.
#[no_mangle]
pub(crate) unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    let r = hooked(-1, |st| {
        // SAFETY: a non-null path is NUL-terminated.
        let empty = !path.is_null() && unsafe { *path } == 0;
        if empty && flags & libc::AT_EMPTY_PATH != 0 {
            return Some(exec_fd(
                st,
                dirfd,
                argv,
                envp,
                |env| call_real!(execveat: ExecveatFn, -1; dirfd, path, argv, env, flags),
            ));
        }
        let follow = flags & libc::AT_SYMLINK_NOFOLLOW == 0;
        let (program, dir, target) = match st.classify(dirfd, path, follow) {
            Ok(Target::Virt(vp)) => {
                if !follow
                    && st
                        .meta(&vp)
                        .is_ok_and(|m| m.file_type == usfs_fs::FileType::Symlink)
                {
                    return Some(ret(Err(libc::ELOOP)));
                }
                (Some(vp), dirfd, None)
            }
            Ok(Target::HostAbs(abs)) => (None, libc::AT_FDCWD, Some(abs)),
            Ok(Target::Pass) => (None, dirfd, None),
            Err(e) => return Some(ret(Err(e))),
        };
        let env = build_env(st, envp);
        let r = match program {
            Some(vp) => ret(exec_virtual(st, vp, argv, env.ptrs.as_ptr())),
            None => {
                let p = target.as_ref().map_or(path, |c| c.as_ptr());
                call_real!(execveat: ExecveatFn, -1; dir, p, argv, env.ptrs.as_ptr(), flags)
            }
        };
        env.failed();
        Some(r)
    });
    match r {
        Some(r) => r,
        None => call_real!(execveat: ExecveatFn, -1; dirfd, path, argv, envp, flags),
    }
}

type SpawnFn = unsafe extern "C" fn(
    *mut pid_t,
    *const c_char,
    *const libc::posix_spawn_file_actions_t,
    *const libc::posix_spawnattr_t,
    *const *const c_char,
    *const *const c_char,
) -> c_int;

macro_rules! spawn_hooks {
    ($($name:ident: $check:expr),*) => {$(
        /// posix_spawn(3): the child gets the handover like an exec (the file is left for
        /// it to read and remove); a program inside a mount runs from a memfd copy.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name(pid: *mut pid_t, path: *const c_char, fa: *const libc::posix_spawn_file_actions_t, attr: *const libc::posix_spawnattr_t, argv: *const *const c_char, envp: *const *const c_char) -> c_int {
            let r = hooked(libc::EIO, |st| {
                // A program inside a mount is spawned from its memfd copy through
                // /proc/self/fd/N (the child inherits the descriptor).
                let mut copy = None;
                let mut host = None;
                // SAFETY: spawn paths are NUL-terminated (null is left to libc).
                let name = (!path.is_null()).then(|| unsafe { CStr::from_ptr(path) }.to_bytes());
                let names_file = $check || name.is_some_and(|n| n.contains(&b'/'));
                let program = if names_file {
                    match st.classify(libc::AT_FDCWD, path, true) {
                        Ok(Target::Virt(vp)) => Some(vp),
                        _ => None,
                    }
                } else {
                    match name.and_then(|n| exec_path::search(st, n)) {
                        Some(Found::Virt(vp)) => Some(vp),
                        Some(Found::Host(p)) => {
                            host = Some(p);
                            None
                        }
                        Some(Found::Missing(e)) => return Some(e),
                        None => None,
                    }
                };
                if let Some(vp) = program {
                    match program_copy(st, vp) {
                        Ok(mfd) => copy = Some(mfd),
                        Err(e) => return Some(e),
                    }
                }
                let proc_path = copy.map(|m| CString::new(format!("/proc/self/fd/{m}")).expect("no NUL"));
                let spawn_path = proc_path.as_ref().or(host.as_ref()).map_or(path, |p| p.as_ptr());
                let env = build_env(st, envp);
                let r = call_real!($name: SpawnFn, libc::ENOSYS; pid, spawn_path, fa, attr, argv, env.ptrs.as_ptr());
                if r != 0 {
                    env.failed();
                }
                if let Some(m) = copy {
                    sys_close(m);
                }
                Some(r)
            });
            match r {
                Some(r) => r,
                None => call_real!($name: SpawnFn, libc::ENOSYS; pid, path, fa, attr, argv, envp),
            }
        }
    )*};
}
spawn_hooks!(posix_spawn: true, posix_spawnp: false);

/// True when `fd` is a placeholder (an O_PATH descriptor of /dev/null): a handed-over
/// number the new program still holds unchanged.
pub(crate) fn is_placeholder(fd: c_int) -> bool {
    // SAFETY: F_GETFL on a descriptor number.
    let fl = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_GETFL) };
    if fl < 0 || fl & libc::O_PATH as i64 == 0 {
        return false;
    }
    // SAFETY: fstat into a local struct.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let r = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut sb as *mut libc::stat) };
    r == 0 && sb.st_mode & libc::S_IFMT == libc::S_IFCHR && sb.st_rdev == libc::makedev(1, 3)
}

/// Takes over what the program that exec'd us handed over (run once at load time).
pub(crate) fn restore_handover(st: &State) {
    let Some(path) = std::env::var_os(HANDOVER) else {
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    // SAFETY: at load time, before the program runs: no other thread reads the
    // environment yet.
    unsafe { std::env::remove_var(HANDOVER) };
    let mut objs: HashMap<usize, Arc<OpenFile>> = HashMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w.as_slice() {
            ["cwd", p] => {
                if let Some(Ok(Resolved::Virtual(vp))) =
                    unhex(p).map(|p| resolve(&st.table, Start::Host(b"/"), &p, true))
                {
                    *st.vcwd.write().unwrap_or_else(|e| e.into_inner()) = Some(vp);
                }
            }
            ["fd", fd, id, off, flags, p] => {
                let (Ok(fd), Ok(id), Ok(off), Ok(flags)) = (
                    fd.parse::<c_int>(),
                    id.parse::<usize>(),
                    off.parse::<u64>(),
                    flags.parse::<c_int>(),
                ) else {
                    continue;
                };
                let carried = is_carrier(fd);
                if !carried && !is_placeholder(fd) {
                    continue;
                }
                if let Some(f) = objs.get(&id) {
                    st.fds.insert(fd, Arc::clone(f));
                    continue;
                }
                let Some(Ok(Resolved::Virtual(vp))) =
                    unhex(p).map(|p| resolve(&st.table, Start::Host(b"/"), &p, false))
                else {
                    continue;
                };
                // Open it anew (a new placeholder), move the description onto `fd`.
                let Ok(tmp) = st.open_virtual(vp, flags & !libc::O_CLOEXEC) else {
                    continue;
                };
                if let Some(f) = st.fds.remove(tmp) {
                    let _ = f.seek(off as i64, libc::SEEK_SET);
                    if carried {
                        f.keep_offset_in_kernel();
                    }
                    st.fds.insert(fd, Arc::clone(&f));
                    objs.insert(id, f);
                }
                crate::state::sys_close(tmp);
            }
            _ => {}
        }
    }
}
