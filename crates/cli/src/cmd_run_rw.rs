//! `usfs run --rw`: usfs holds each image read-write (its one writer: the lock and the
//! kernel check of usfs_vfs::owner) and serves the changes CMD's processes make through
//! the preload library, over a Unix socket per image in a private directory
//! (usfs_vfs::channel). The directory is 0711 and each socket's name carries 128 random
//! bits: a process of CMD that changed its user (setpriv, su) still reaches the owner by
//! the name it inherited in the environment, and no other user can find the socket
//! (environments are private to their processes). CMD runs as a child and usfs is a
//! child subreaper: when CMD and every process it started have exited, each image is
//! committed and closed, and usfs exits with CMD's status.
//!
//! usfs ignores SIGINT and SIGQUIT while CMD runs (as system(3) does), so a ^C reaches
//! the program and the images still close cleanly. A usfs killed outright leaves images
//! whose journal the next opener replays: changes made durable (fsync, sync, or every
//! change with `--mode sync`) are there.

use crate::image::{CliError, CliResult};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use usfs_fs::FileSystemWrite;
use usfs_vfs::channel::Owner;
use usfs_vfs::owner::Owned;
use usfs_vfs::MountSpec;

/// Durability of `usfs run --rw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// Durable at fsync, fdatasync, syncfs and the end of the run.
    Posix,
    /// Every change durable when its call returns.
    Sync,
}

/// The images being served, their owners, and the socket directory.
pub(crate) struct Owners {
    served: Vec<(PathBuf, Owned, Arc<Owner>)>,
    dir: PathBuf,
}

impl Owners {
    /// Opens every image of `specs` for writing, starts its owner on a socket of its own
    /// and records the socket in the spec.
    pub(crate) fn start(specs: &mut [MountSpec], mode: Mode) -> CliResult<Owners> {
        let dir = socket_dir()?;
        let mut me = Owners {
            served: Vec::new(),
            dir,
        };
        for (i, spec) in specs.iter_mut().enumerate() {
            let owned = usfs_vfs::owner::open_rw(&spec.image)
                .map_err(|e| CliError::at(spec.image.display(), e))?;
            let sock = me.dir.join(format!("owner-{i}-{}.sock", secret()?));
            let listener =
                UnixListener::bind(&sock).map_err(|e| CliError::at(sock.display(), e))?;
            std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666))
                .map_err(|e| CliError::at(sock.display(), e))?;
            let locks = usfs_vfs::channel::lock_path(&sock);
            std::fs::File::create(&locks)
                .and_then(|_| {
                    std::fs::set_permissions(&locks, std::fs::Permissions::from_mode(0o666))
                })
                .map_err(|e| CliError::at(locks.display(), e))?;
            let fs: Arc<dyn FileSystemWrite> = owned.fs.clone();
            let owner = Owner::new(fs, mode == Mode::Sync, &sock);
            owner.listen(listener);
            spec.owner = Some(sock);
            me.served.push((spec.image.clone(), owned, owner));
        }
        Ok(me)
    }

    /// Runs `cmd`, serves until it and every connected process are done, then closes the
    /// images; the exit status is the command's (128 + N when signal N killed it).
    pub(crate) fn run(self, mut cmd: std::process::Command, name: &str) -> CliResult {
        // Orphaned descendants become ours, so the images stay open until every process
        // CMD started has exited, not only those connected now.
        // SAFETY: prctl with integer arguments.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        // A command that cannot be started still leaves the images closed cleanly.
        let status = cmd.spawn().and_then(|mut child| {
            // SAFETY: setting dispositions to SIG_IGN; the child already has its own.
            unsafe {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                libc::signal(libc::SIGQUIT, libc::SIG_IGN);
            }
            let st = child.wait()?;
            reap_descendants();
            Ok(st)
        });
        let mut failed = status.as_ref().err().map(|e| CliError::at(name, e));
        for (image, owned, owner) in &self.served {
            owner.wait_idle();
            if let Err(e) = owned.fs.shutdown() {
                failed.get_or_insert(CliError::at(
                    image.display(),
                    format!("closing the image: {e}"),
                ));
            }
        }
        let status = match (status, failed) {
            (Ok(s), None) => s,
            (_, Some(e)) => return Err(e),
            (Err(e), None) => return Err(CliError::at(name, e)),
        };
        let code = match (status.code(), status.signal()) {
            (Some(c), _) => c,
            (None, Some(sig)) => 128 + sig,
            _ => 1,
        };
        Ok(ExitCode::from(code.clamp(0, 255) as u8))
    }
}

/// Waits for every remaining descendant (they were reparented to us as they lost their
/// parents).
fn reap_descendants() {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on any child with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

impl Drop for Owners {
    /// The sockets, lock files and mirrors go with the owners (also when starting failed
    /// half way).
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// 128 random bits in hex.
fn secret() -> CliResult<String> {
    let mut b = [0u8; 16];
    // SAFETY: getrandom writes at most 16 bytes into our buffer.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        return Err(CliError::at("getrandom", std::io::Error::last_os_error()));
    }
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// A new directory for the sockets, searchable but not listable by others ($XDG_RUNTIME_DIR, else $TMPDIR or /tmp).
fn socket_dir() -> CliResult<PathBuf> {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .or_else(|| std::env::var_os("TMPDIR"))
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let mut t = base
        .join("usfs-run-XXXXXX")
        .into_os_string()
        .into_encoded_bytes();
    t.push(0);
    // SAFETY: mkdtemp rewrites the X's of the NUL-terminated template we own.
    let p = unsafe { libc::mkdtemp(t.as_mut_ptr().cast()) };
    if p.is_null() {
        return Err(CliError::at(
            base.display(),
            std::io::Error::last_os_error(),
        ));
    }
    t.pop();
    // SAFETY: the bytes came from an OsString and mkdtemp replaced ASCII X's only.
    let dir = PathBuf::from(unsafe { std::ffi::OsString::from_encoded_bytes_unchecked(t) });
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))
        .map_err(|e| CliError::at(dir.display(), e))?;
    Ok(dir)
}
