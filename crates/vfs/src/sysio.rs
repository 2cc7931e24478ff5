//! Raw positional I/O: system calls, so no libc hook of the preload library is involved
//! (the vfs runs inside it).

/// Reads into `buf` at `off` until it is full, the file ends or an error stops it; returns
/// the bytes read.
pub(crate) fn pread_full(fd: i32, buf: &mut [u8], off: u64) -> usize {
    transfer(libc::SYS_pread64, fd, buf.as_mut_ptr(), buf.len(), off)
}

/// Writes all of `buf` at `off` unless an error stops it; returns the bytes written.
pub(crate) fn pwrite_full(fd: i32, buf: &[u8], off: u64) -> usize {
    transfer(
        libc::SYS_pwrite64,
        fd,
        buf.as_ptr().cast_mut(),
        buf.len(),
        off,
    )
}

/// pread64 or pwrite64 (`nr`) of `len` bytes at `ptr`, repeated until done.
fn transfer(nr: libc::c_long, fd: i32, ptr: *mut u8, len: usize, off: u64) -> usize {
    let mut done = 0;
    while done < len {
        // SAFETY: `ptr..ptr + len` is a buffer the caller borrows (mutably for pread,
        // which writes at most `len - done` bytes at `ptr + done`; pwrite only reads it).
        let n = unsafe {
            libc::syscall(
                nr,
                fd,
                ptr.add(done),
                len - done,
                (off + done as u64) as i64,
            )
        };
        if n <= 0 {
            break;
        }
        done += n as usize;
    }
    done
}

/// lseek(2) as a raw system call: the new offset, or the errno.
pub(crate) fn lseek(fd: i32, off: i64, whence: i32) -> Result<u64, i32> {
    // SAFETY: lseek takes integers only.
    let r = unsafe { libc::syscall(libc::SYS_lseek, fd, off, whence) };
    if r < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(r as u64)
    }
}
