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
pub struct MountArgs {
    /// Options, comma-separated or repeated: `cache` (kernel page cache, long attribute
    /// TTLs; the default), `direct_io` (FOPEN_DIRECT_IO: every read reaches usfs),
    /// `threads=N` (server threads, default 1), `ro` (accepted; mounts are read-only).
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
pub struct UmountArgs {
    /// The mount point of a `usfs mount`.
    mountpoint: PathBuf,
}

fn parse_opts(list: &[String]) -> CliResult<(CacheMode, usize)> {
    let mut cache = CacheMode::Cache;
    let mut threads = 1;
    for o in list
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.is_empty())
    {
        match o {
            "cache" => cache = CacheMode::Cache,
            "direct_io" => cache = CacheMode::DirectIo,
            "ro" => {}
            _ => match o.strip_prefix("threads=").map(str::parse::<usize>) {
                Some(Ok(n)) if (1..=256).contains(&n) => threads = n,
                _ => {
                    return Err(CliError(format!(
                        "mount: unknown option `{o}` (cache, direct_io, threads=1..256, ro)"
                    )))
                }
            },
        }
    }
    Ok((cache, threads))
}

pub fn run(args: &MountArgs) -> CliResult {
    let (cache, threads) = parse_opts(&args.opts)?;
    let fs = image::open(&args.image)?;
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
    };
    let mp = &args.mountpoint;
    if args.foreground {
        usfs_fuse::serve(fs, mp, &opts, || {}).map_err(|e| CliError::at(mp.display(), e))?;
        return Ok(ExitCode::SUCCESS);
    }
    daemonize_and_serve(fs, mp, &opts)
}

/// Forks (before any thread exists); the child mounts and serves, the parent waits until
/// the child says the mount is in place (or why it failed) and exits accordingly.
fn daemonize_and_serve(
    fs: std::sync::Arc<dyn usfs_fs::FileSystem>,
    mp: &Path,
    opts: &Options,
) -> CliResult {
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
            let r = usfs_fuse::serve(fs, mp, opts, || {
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

pub fn run_umount(args: &UmountArgs) -> CliResult {
    let mp = &args.mountpoint;
    let c = std::ffi::CString::new(mp.as_os_str().as_encoded_bytes())
        .map_err(|_| CliError::at(mp.display(), "path holds a NUL byte"))?;
    // SAFETY: umount2 reads the NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
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
