//! Extended attributes of a path, never following a final symbolic link: read through
//! usfs-source (`llistxattr`, `lgetxattr`), written here (`lsetxattr`, `lremovexattr`).

use std::io;
use std::path::Path;

use crate::sys::cpath;

/// Names of all extended attributes of `path` (with namespace prefix), unsorted; and the
/// value of one. Read by the scanner mkfs uses ([`usfs_source::xattr`]), so the tests see
/// a tree's attributes the way the image builders do. A file system without xattr
/// support gives an empty list.
pub use usfs_source::xattr::{names as list, value as get};

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
