//! `usfs mount [-o cache|direct_io] [-o threads=N] IMAGE MOUNTPOINT` and `usfs umount`:
//! an image served through FUSE (the fallback and the baseline of `usfs run`).
//!
//! Like fuse2fs and squashfuse, `usfs mount` returns once the mount is in place and keeps
//! serving in the background (`-f` stays in the foreground); `usfs umount` (or `umount`,
//! `fusermount3 -u`) ends it.

use crate::image::{self, CliError, CliResult};
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use usfs_fuse::{CacheMode, Options};

/// Arguments of `usfs mount`.
#[derive(clap::Args)]
pub(crate) struct MountArgs {
    #[command(flatten)]
    pub(crate) dev: crate::image::DeviceArgs,
    /// Options, comma-separated or repeated: `ro` (the default) or `rw` (ext4 only:
    /// changes go through the journaled volume; one writer per image), `cache` (kernel
    /// page cache, long attribute TTLs; the default), `direct_io` (FOPEN_DIRECT_IO: every
    /// request reaches usfs), `threads=N` (/dev/fuse server threads, default 1),
    /// `no_uring` (keep requests on /dev/fuse even where the kernel offers FUSE over
    /// io_uring, fuse's enable_uring parameter; by default usfs then serves each CPU's
    /// requests on that CPU), `allow_other`, `default_permissions` (always on: the kernel
    /// checks permissions).
    #[arg(short = 'o', value_name = "OPTS")]
    opts: Vec<String>,
    /// Stay in the foreground.
    #[arg(short = 'f')]
    foreground: bool,
    /// The image (format detected by its magic number).
    image: PathBuf,
    /// Where to mount it.
    mountpoint: PathBuf,
}

/// Arguments of `usfs umount`.
#[derive(clap::Args)]
pub(crate) struct UmountArgs {
    /// The mount point of a `usfs mount`.
    mountpoint: PathBuf,
}

/// What the -o options ask for.
struct Parsed {
    cache: CacheMode,
    threads: usize,
    rw: bool,
    allow_other: bool,
    uring: bool,
}

fn parse_opts(list: &[String]) -> CliResult<Parsed> {
    let mut cache = CacheMode::Cache;
    let mut threads = 1;
    let (mut rw, mut allow_other, mut uring) = (false, false, true);
    for o in list
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.is_empty())
    {
        match o {
            "cache" => cache = CacheMode::Cache,
            "direct_io" => cache = CacheMode::DirectIo,
            "ro" => rw = false,
            "rw" => rw = true,
            "allow_other" => allow_other = true,
            "no_uring" => uring = false,
            "default_permissions" | "noatime" | "nodev" | "nosuid" => {}
            _ => match o.strip_prefix("threads=").map(str::parse::<usize>) {
                Some(Ok(n)) if (1..=256).contains(&n) => threads = n,
                _ => {
                    return Err(CliError(format!(
                        "mount: unknown option `{o}` (ro, rw, cache, direct_io, threads=1..256, no_uring, allow_other, default_permissions)"
                    )))
                }
            },
        }
    }
    Ok(Parsed {
        cache,
        threads,
        rw,
        allow_other,
        uring,
    })
}

/// What a mount serves, and the writer lock of a read-write one.
struct Served {
    backend: usfs_fuse::Backend,
    owned: Option<usfs_vfs::owner::Owned>,
}

pub(crate) fn run(args: &MountArgs) -> CliResult {
    let Parsed {
        cache,
        threads,
        rw,
        allow_other,
        uring,
    } = parse_opts(&args.opts)?;
    let fs = if rw {
        let owned = usfs_vfs::owner::open_rw(&args.image)
            .map_err(|e| CliError::at(args.image.display(), e))?;
        Served {
            backend: usfs_fuse::Backend::ReadWrite(owned.fs.clone()),
            owned: Some(owned),
        }
    } else {
        Served {
            backend: usfs_fuse::Backend::ReadOnly(image::open(&args.image, &args.dev)?),
            owned: None,
        }
    };
    if !args.mountpoint.is_dir() {
        return Err(CliError::at(args.mountpoint.display(), "not a directory"));
    }
    let opts = Options {
        cache,
        threads,
        fsname: std::fs::canonicalize(&args.image)
            .unwrap_or_else(|_| args.image.clone())
            .display()
            .to_string(),
        allow_other,
        uring,
    };
    let mp = &args.mountpoint;
    if args.foreground {
        serve(fs, mp, &opts, || {}).map_err(|e| CliError::at(mp.display(), e))?;
        return Ok(ExitCode::SUCCESS);
    }
    daemonize_and_serve(fs, mp, &opts)
}

/// Forks (before any thread exists); the child mounts and serves, the parent waits until
/// the child says the mount is in place (or why it failed) and exits accordingly.
fn daemonize_and_serve(fs: Served, mp: &Path, opts: &Options) -> CliResult {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(CliError::at("pipe", std::io::Error::last_os_error()));
    }
    // SAFETY: the descriptors were just created and are owned by these Files alone.
    let (mut rd, mut wr) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    // SAFETY: the process is single-threaded here (clap parsing and opening the image
    // start no threads), so the child may keep running Rust code after fork.
    match unsafe { libc::fork() } {
        -1 => Err(CliError::at("fork", std::io::Error::last_os_error())),
        0 => {
            drop(rd);
            // SAFETY: setsid has no preconditions; it detaches from the terminal's session.
            unsafe { libc::setsid() };
            let mut ready_wr = wr.try_clone().ok();
            let r = serve(fs, mp, opts, || {
                if let Some(w) = ready_wr.as_mut() {
                    let _ = w.write_all(b"ok");
                }
                detach_stdio();
            });
            if let Err(e) = r {
                let _ = write!(wr, "{}: {e}", mp.display());
                std::process::exit(1);
            }
            std::process::exit(0);
        }
        _child => {
            drop(wr);
            // "ok" once mounted (the server keeps the pipe open while it runs), or an error
            // message followed by the child's exit.
            let mut head = [0u8; 2];
            let mut got = 0;
            while got < 2 {
                match rd.read(&mut head[got..]) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
            if &head[..got] == b"ok" {
                return Ok(ExitCode::SUCCESS);
            }
            let mut rest = String::new();
            let _ = rd.read_to_string(&mut rest);
            let msg = format!("{}{rest}", String::from_utf8_lossy(&head[..got]));
            if msg.is_empty() {
                Err(CliError::at(mp.display(), "FUSE server exited"))
            } else {
                Err(CliError(msg))
            }
        }
    }
}

/// Serves until unmounted. A read-write mount is unmounted on SIGTERM, SIGINT or SIGHUP
/// (so the server gets FUSE's DESTROY and returns), then its volume is committed and
/// closed cleanly.
fn serve(fs: Served, mp: &Path, opts: &Options, ready: impl FnOnce()) -> std::io::Result<()> {
    tune_allocator();
    if fs.owned.is_some() {
        unmount_on_signal(mp);
    }
    let r = usfs_fuse::serve(fs.backend, mp, opts, ready);
    if let Some(o) = fs.owned {
        o.fs.shutdown().map_err(std::io::Error::other)?;
    }
    r
}

/// glibc malloc for a server whose request threads allocate and free small buffers all
/// the time: one arena (the main one, grown by brk with 8 MiB to spare and trimmed only
/// past 32 MiB free) instead of one per thread, whose heaps grow a page or two at a time
/// by mprotect (3,000 calls and their page faults in one `git clone` onto the mount,
/// 5-10% of its time). Call before the server's threads start.
fn tune_allocator() {
    // SAFETY: mallopt only sets glibc allocator parameters; any value is valid input.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_TOP_PAD, 8 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 32 << 20);
    }
}

/// Blocks the termination signals in this thread (and the threads it starts) and
/// starts a thread that waits for one and unmounts `mp`.
fn unmount_on_signal(mp: &Path) {
    let Ok(c) = std::ffi::CString::new(mp.as_os_str().as_encoded_bytes()) else {
        return;
    };
    // SAFETY: a zeroed sigset is valid input for sigemptyset; the set is only read by
    // pthread_sigmask and sigwait; umount2 reads a NUL-terminated path.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        std::thread::spawn(move || {
            let mut sig = 0;
            libc::sigwait(&set, &mut sig);
            if libc::umount2(c.as_ptr(), 0) != 0 {
                libc::umount2(c.as_ptr(), libc::MNT_DETACH);
            }
        });
    }
}

/// Points stdin, stdout and stderr at /dev/null, so a caller waiting for our output is
/// not held by the background server.
fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        use std::os::fd::AsRawFd;
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors of this process.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}

pub(crate) fn run_umount(args: &UmountArgs) -> CliResult {
    let mp = &args.mountpoint;
    let c = std::ffi::CString::new(mp.as_os_str().as_encoded_bytes())
        .map_err(|_| CliError::at(mp.display(), "path holds a NUL byte"))?;
    let image = mount_source(mp);
    // SAFETY: umount2 reads the NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        if let Some(img) = image {
            wait_for_writer(&img);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EPERM) {
        // Not root: the setuid helper of fuse3 may unmount our own FUSE mounts.
        let st = std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(mp)
            .status()
            .map_err(|e| CliError::at("fusermount3", e))?;
        return Ok(if st.success() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    Err(CliError::at(mp.display(), err))
}

/// The source (the image path a usfs mount names) of the mount at `mp`.
fn mount_source(mp: &Path) -> Option<PathBuf> {
    let want = std::fs::canonicalize(mp).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in info.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let sep = f.iter().position(|x| *x == "-")?;
        if f.get(4).map(Path::new) == Some(want.as_path())
            && f.get(sep + 1).is_some_and(|t| t.starts_with("fuse"))
        {
            return f.get(sep + 2).map(PathBuf::from);
        }
    }
    None
}

/// Waits (up to a minute) until no usfs writer holds `image`: the server of a read-write
/// mount commits and closes the volume after the kernel lets the mount go, and a caller
/// of `usfs umount` expects a finished image when it returns. The wait is a blocking
/// shared flock (the writer holds an exclusive one until it has closed the image) in a
/// thread, so it ends the moment the writer lets go; a writer that never does leaves
/// the thread blocked when this process exits after the minute.
fn wait_for_writer(image: &Path) {
    use std::os::fd::AsRawFd;
    let Ok(f) = std::fs::File::open(image) else {
        return;
    };
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: flock on a descriptor this thread owns; released when `f` closes.
        let _ = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH) };
        let _ = done.send(());
    });
    let _ = wait.recv_timeout(std::time::Duration::from_secs(60));
}
