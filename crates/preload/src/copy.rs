//! Private copies of files inside images, for the calls that need a real kernel file:
//! freopen (glibc's stream reads with its internal read) and exec (the kernel loads the
//! program). The copy is a memfd filled from the image; images are read-only, so the
//! copy is exact.

use crate::state::{sys_close, State};
use libc::c_int;
use usfs_vfs::VPath;

/// A memfd holding the contents of the file at `vp`, at offset 0; `cloexec` sets
/// MFD_CLOEXEC. Errors are errnos (those of opening the file, reading it, or memfd's).
pub fn to_memfd(st: &State, vp: VPath, cloexec: bool) -> Result<c_int, c_int> {
    let fd = st.open_virtual(vp, libc::O_RDONLY | libc::O_CLOEXEC)?;
    let r = fill(st, fd, cloexec);
    st.fds.remove(fd);
    sys_close(fd);
    r
}

fn fill(st: &State, fd: c_int, cloexec: bool) -> Result<c_int, c_int> {
    let f = st.fds.get(fd).ok_or(libc::EBADF)?;
    let flags = if cloexec { libc::MFD_CLOEXEC } else { 0 };
    // SAFETY: memfd_create with a NUL-terminated name.
    let mfd = unsafe { libc::memfd_create(c"usfs-copy".as_ptr(), flags) };
    if mfd < 0 {
        return Err(crate::sys::errno());
    }
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match f.read_fd(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                sys_close(mfd);
                return Err(e);
            }
        };
        let mut done = 0;
        while done < n {
            // SAFETY: writing initialised bytes of `buf` to our memfd.
            let w = unsafe { libc::write(mfd, buf[done..n].as_ptr().cast(), n - done) };
            if w < 0 {
                let e = crate::sys::errno();
                if e == libc::EINTR {
                    continue;
                }
                sys_close(mfd);
                return Err(e);
            }
            done += w as usize;
        }
    }
    // SAFETY: rewinding our own descriptor.
    unsafe { libc::lseek(mfd, 0, libc::SEEK_SET) };
    Ok(mfd)
}
