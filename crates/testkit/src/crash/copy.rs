//! Sparse file copy: only the data extents of the source are copied (SEEK_DATA/SEEK_HOLE
//! and copy_file_range), so a mostly empty image copies in a few milliseconds.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Makes `dst` (created or truncated) a copy of `src` with the same holes.
pub fn copy_sparse(src: &Path, dst: &Path) -> io::Result<()> {
    let from = File::open(src)?;
    let len = from.metadata()?.len();
    let to = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(dst)?;
    to.set_len(len)?;
    let mut pos = 0u64;
    while pos < len {
        let Some(start) = seek(&from, pos, libc::SEEK_DATA)? else {
            break;
        };
        let end = seek(&from, start, libc::SEEK_HOLE)?.unwrap_or(len).min(len);
        copy_range(&from, &to, start, end)?;
        pos = end;
    }
    Ok(())
}

/// `lseek(whence)` from `pos`; `None` when no data follows (ENXIO).
fn seek(f: &File, pos: u64, whence: libc::c_int) -> io::Result<Option<u64>> {
    let off = i64::try_from(pos).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: plain syscall on a descriptor owned by `f`.
    let r = unsafe { libc::lseek64(f.as_raw_fd(), off, whence) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(None)
        } else {
            Err(e)
        };
    }
    Ok(Some(r as u64))
}

/// Copies bytes `start..end` of `from` to the same place in `to`.
fn copy_range(from: &File, to: &File, start: u64, end: u64) -> io::Result<()> {
    let mut off_in = start as i64;
    let mut off_out = start as i64;
    while (off_in as u64) < end {
        let want = (end - off_in as u64).min(1 << 30) as usize;
        // SAFETY: both descriptors are open; the offsets are valid pointers to i64s that
        // the kernel advances.
        let n = unsafe {
            libc::copy_file_range(
                from.as_raw_fd(),
                &mut off_in,
                to.as_raw_fd(),
                &mut off_out,
                want,
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "source shrank while copying",
            ));
        }
    }
    Ok(())
}
