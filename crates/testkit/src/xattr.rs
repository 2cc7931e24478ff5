//! Extended attributes of a path, never following a final symbolic link
//! (`llistxattr`, `lgetxattr`, `lsetxattr`).

use std::io;
use std::path::Path;

use crate::sys::cpath;

/// Upper bound on one list or value buffer (the kernel's limit is 64 KiB).
const MAX_BUF: usize = 1 << 20;

/// Calls `f(buf_ptr, buf_len)` with a growing buffer until the result fits (the size can
/// change between the size query and the read, which shows as `ERANGE`).
fn read_sized(mut f: impl FnMut(*mut libc::c_char, usize) -> isize) -> io::Result<Vec<u8>> {
    for _ in 0..8 {
        let need = f(std::ptr::null_mut(), 0);
        if need < 0 {
            return Err(io::Error::last_os_error());
        }
        let len = (need as usize).min(MAX_BUF);
        let mut buf = vec![0u8; len];
        let got = f(buf.as_mut_ptr().cast(), buf.len());
        if got < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) && len < MAX_BUF {
                continue;
            }
            return Err(e);
        }
        buf.truncate(got as usize);
        return Ok(buf);
    }
    Err(io::Error::other("extended attribute keeps changing size"))
}

/// Names of all extended attributes of `path` (with namespace prefix), unsorted. A file
/// system without xattr support gives an empty list.
pub fn list(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    let c = cpath(path)?;
    let raw = read_sized(|buf, len| {
        // SAFETY: `c` is NUL-terminated; `buf` is null with `len` 0 or valid for `len` bytes.
        unsafe { libc::llistxattr(c.as_ptr(), buf, len) }
    });
    let raw = match raw {
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return Ok(Vec::new()),
        r => r?,
    };
    Ok(raw
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(<[u8]>::to_vec)
        .collect())
}

/// The value of extended attribute `name` of `path`.
pub fn get(path: &Path, name: &[u8]) -> io::Result<Vec<u8>> {
    let c = cpath(path)?;
    let n = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "xattr name contains NUL"))?;
    read_sized(|buf, len| {
        // SAFETY: `c` and `n` are NUL-terminated; `buf` is null with `len` 0 or valid for
        // `len` bytes.
        unsafe { libc::lgetxattr(c.as_ptr(), n.as_ptr(), buf.cast(), len) }
    })
}

/// Sets extended attribute `name` of `path` to `value` (creating or replacing it).
pub fn set(path: &Path, name: &[u8], value: &[u8]) -> io::Result<()> {
    let c = cpath(path)?;
    let n = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "xattr name contains NUL"))?;
    // SAFETY: `c` and `n` are NUL-terminated; `value` is valid for `value.len()` bytes.
    let r = unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            n.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Removes extended attribute `name` of `path`.
pub fn remove(path: &Path, name: &[u8]) -> io::Result<()> {
    let c = cpath(path)?;
    let n = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "xattr name contains NUL"))?;
    // SAFETY: `c` and `n` are NUL-terminated strings valid for the call.
    let r = unsafe { libc::lremovexattr(c.as_ptr(), n.as_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// True if `name` is in one of the namespaces compared by default
/// (`user.`, `trusted.`, `security.`), or in `system.` when `with_system` is set.
pub fn is_compared(name: &[u8], with_system: bool) -> bool {
    name.starts_with(b"user.")
        || name.starts_with(b"trusted.")
        || name.starts_with(b"security.")
        || (with_system && name.starts_with(b"system."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_list_remove() {
        let dir = crate::TempDir::new("xattr").unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        set(&f, b"user.k", b"v\0w").unwrap();
        assert_eq!(get(&f, b"user.k").unwrap(), b"v\0w");
        assert!(list(&f).unwrap().contains(&b"user.k".to_vec()));
        remove(&f, b"user.k").unwrap();
        assert!(get(&f, b"user.k").is_err());
        assert!(get(&f, b"user.\0").is_err());
        assert!(is_compared(b"security.x", false));
        assert!(!is_compared(b"system.posix_acl_access", false));
    }
}
