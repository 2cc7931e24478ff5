//! Private copies of files inside images, for the calls that need a real kernel file:
//! freopen (glibc's stream reads with its internal read), exec (the kernel loads the
//! program) and dlopen (the loader opens the library itself). The copy is a memfd filled
//! from the image (straight from its mapping where the data is stored uncompressed);
//! images are read-only, so the copy is exact.

use crate::state::{sys_close, State};
use libc::{c_int, c_uint};
use std::ffi::CStr;
use usfs_vfs::VPath;

/// The seals a sealed copy gets: nothing can change, grow, shrink or unseal it.
const SEALS: c_int =
    libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;

/// A memfd named `name` holding the contents of the file at `vp`, at offset 0. `flags`
/// are memfd_create's (MFD_CLOEXEC; with MFD_ALLOW_SEALING the filled copy is sealed).
/// Errors are errnos (those of opening the file, reading it, or memfd's).
pub(crate) fn to_memfd(st: &State, vp: VPath, name: &CStr, flags: c_uint) -> Result<c_int, c_int> {
    let fd = st.open_virtual(vp, libc::O_RDONLY | libc::O_CLOEXEC)?;
    let r = fill(st, fd, name, flags);
    st.fds.remove(fd);
    sys_close(fd);
    r
}

fn fill(st: &State, fd: c_int, name: &CStr, flags: c_uint) -> Result<c_int, c_int> {
    let f = st.fds.get(fd).ok_or(libc::EBADF)?;
    if f.kind != usfs_vfs::FileKind::File {
        return Err(libc::EISDIR);
    }
    // SAFETY: memfd_create with a NUL-terminated name.
    let mfd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    if mfd < 0 {
        return Err(crate::sys::errno());
    }
    let mut off = 0i64;
    loop {
        match crate::h_io::copy_out(&f, fd, Some(&mut off), mfd, None, 1 << 20) {
            0 => break,
            n if n < 0 => {
                let e = crate::sys::errno();
                sys_close(mfd);
                return Err(e);
            }
            _ => {}
        }
    }
    // SAFETY: rewinding and sealing our own memfd.
    unsafe {
        libc::lseek(mfd, 0, libc::SEEK_SET);
        if flags & libc::MFD_ALLOW_SEALING != 0 {
            libc::fcntl(mfd, libc::F_ADD_SEALS, SEALS);
        }
    }
    Ok(mfd)
}
