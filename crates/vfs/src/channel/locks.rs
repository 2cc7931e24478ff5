//! Record locks (fcntl F_SETLK and friends) between the processes of one owner, kept by
//! the kernel: the owner makes a lock file beside its socket, and each process locks, in
//! that one file, the byte range that stands for the range of the image file it names
//! (file `ino`'s bytes `0..2^31` at `ino * 2^31`). So the kernel decides conflicts, waits
//! (F_SETLKW), and drops a process's locks when it exits, as it would for the image's
//! own files. Ranges past 2 GiB are clamped to it; a process holds one descriptor of the
//! lock file, so POSIX and open-file-description locks behave alike (per process).

use crate::resolve::Errno;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use usfs_fs::Ino;

/// Bytes of the lock file that stand for one image file.
const SPAN: i64 = 1 << 31;

/// The lock file as one process uses it.
pub struct LockFile {
    path: PathBuf,
    /// This process's descriptor of it, and the process that opened it.
    fd: Mutex<Option<(i32, i32)>>,
}

/// The lock file of the owner listening at `socket`.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut p = socket.as_os_str().to_owned();
    p.push(".locks");
    PathBuf::from(p)
}

impl LockFile {
    /// The lock file of the owner at `socket` (opened at the first lock).
    pub fn new(socket: &Path) -> LockFile {
        LockFile {
            path: lock_path(socket),
            fd: Mutex::new(None),
        }
    }

    /// The program closes or replaces descriptors `first..=last`.
    pub fn forget_in(&self, first: u32, last: u32) {
        let mut g = self.fd.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_some_and(|(fd, _)| (fd as u32) >= first && (fd as u32) <= last) {
            *g = None;
        }
    }

    fn fd(&self) -> Result<i32, Errno> {
        let mut g = self.fd.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        if let Some((fd, p)) = *g {
            if p == pid {
                return Ok(fd);
            }
        }
        use std::os::unix::ffi::OsStrExt;
        let c =
            std::ffi::CString::new(self.path.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
        // SAFETY: open and fcntl system calls on a path we own and the descriptor made.
        let fd = unsafe {
            let fd = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                c.as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC,
            ) as i32;
            if fd < 0 {
                return Err(std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO));
            }
            let high = libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, 700) as i32;
            if high >= 0 {
                libc::syscall(libc::SYS_close, fd);
                high
            } else {
                fd
            }
        };
        *g = Some((fd, pid));
        Ok(fd)
    }

    /// fcntl `cmd` (F_GETLK, F_SETLK, F_SETLKW and the OFD forms) on file `ino` whose
    /// open-file description is at offset `cur` (for SEEK_CUR) and `size` bytes long (for
    /// SEEK_END); `lk` is the caller's struct flock.
    pub fn fcntl(
        &self,
        ino: Ino,
        cmd: i32,
        lk: &mut libc::flock,
        cur: u64,
        size: u64,
    ) -> Result<i32, Errno> {
        let base = match lk.l_whence as i32 {
            libc::SEEK_SET => 0,
            libc::SEEK_CUR => cur as i64,
            libc::SEEK_END => size as i64,
            _ => return Err(libc::EINVAL),
        };
        let mut start = base.checked_add(lk.l_start).ok_or(libc::EOVERFLOW)?;
        let mut len = lk.l_len;
        if len < 0 {
            start += len;
            len = -len;
        }
        if start < 0 {
            return Err(libc::EINVAL);
        }
        let start = start.min(SPAN - 1);
        let len = if len == 0 || start + len > SPAN {
            SPAN - start
        } else {
            len
        };
        let origin = (ino as i64).checked_mul(SPAN).ok_or(libc::EOVERFLOW)?;
        let mut k: libc::flock = *lk;
        k.l_whence = libc::SEEK_SET as i16;
        k.l_start = origin + start;
        k.l_len = len;
        let cmd = match cmd {
            libc::F_OFD_GETLK => libc::F_GETLK,
            libc::F_OFD_SETLK => libc::F_SETLK,
            libc::F_OFD_SETLKW => libc::F_SETLKW,
            c => c,
        };
        let fd = self.fd()?;
        // SAFETY: fcntl with a struct flock we own.
        let r = unsafe { libc::syscall(libc::SYS_fcntl, fd, cmd, &mut k as *mut libc::flock) };
        if r < 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO));
        }
        if cmd == libc::F_GETLK {
            if k.l_type as i32 == libc::F_UNLCK {
                lk.l_type = libc::F_UNLCK as i16;
            } else {
                k.l_start -= origin;
                if k.l_start + k.l_len >= SPAN {
                    k.l_len = 0;
                }
                *lk = k;
            }
        }
        Ok(0)
    }
}
