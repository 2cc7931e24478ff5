//! Reading extended attributes, of an open file (`flistxattr`, `fgetxattr`: the scan) or
//! of a path without following a final symlink (`llistxattr`, `lgetxattr`: symlinks and
//! device nodes, which are not opened, and the tests' tree comparisons). Buffers grow on
//! ERANGE up to 1 MiB; a file system without xattrs (ENOTSUP) has none.

use crate::entry::Xattrs;
use crate::host::sys::path_cstr;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::Path;

/// Largest list or value buffer tried.
const MAX_BUF: usize = 1 << 20;

/// The extended attributes of an open file or directory.
pub(crate) fn of_fd(fd: BorrowedFd<'_>) -> io::Result<Xattrs> {
    let fd = fd.as_raw_fd();
    read_all(
        // SAFETY: fd is open; the buffer is writable for the given length.
        |buf| unsafe { libc::flistxattr(fd, buf.as_mut_ptr().cast(), buf.len()) },
        // SAFETY: as above, and name is a valid C string.
        |name, buf| unsafe {
            libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
        },
    )
}

/// Lists the names of `path`'s xattrs with `llistxattr`.
fn llist(c: &CStr, buf: &mut [u8]) -> isize {
    // SAFETY: c is a valid C string; the buffer is writable for the given length.
    unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) }
}

/// Reads value `name` of `path`'s xattrs with `lgetxattr`.
fn lget(c: &CStr, name: &CStr, buf: &mut [u8]) -> isize {
    // SAFETY: c and name are valid C strings; the buffer is writable for its length.
    unsafe {
        libc::lgetxattr(
            c.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    }
}

/// The extended attributes (name, value) of `path`, not following a final symlink, in
/// the order the file system lists them.
pub fn of_path(path: &Path) -> io::Result<Xattrs> {
    let c = path_cstr(path)?;
    read_all(|buf| llist(&c, buf), |name, buf| lget(&c, name, buf))
}

/// The names of the extended attributes of `path` (with namespace prefix), not
/// following a final symlink, unsorted.
pub fn names(path: &Path) -> io::Result<Vec<Vec<u8>>> {
    let c = path_cstr(path)?;
    let mut small = [0u8; 512];
    let mut big = Vec::new();
    let Some(list) = list_names(|buf| llist(&c, buf), &mut small, &mut big)? else {
        return Ok(Vec::new());
    };
    Ok(split_names(list).map(|n| n.to_bytes().to_vec()).collect())
}

/// The value of extended attribute `name` of `path`, not following a final symlink.
pub fn value(path: &Path, name: &[u8]) -> io::Result<Vec<u8>> {
    let c = path_cstr(path)?;
    let n = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "xattr name contains NUL"))?;
    read_value(|buf| lget(&c, &n, buf))
}

/// The name list `list` gives, read into `small` or, when it does not fit, into `big`
/// (grown on ERANGE); `None` when the file system has no xattrs (ENOTSUP).
fn list_names<'b>(
    list: impl Fn(&mut [u8]) -> isize,
    small: &'b mut [u8],
    big: &'b mut Vec<u8>,
) -> io::Result<Option<&'b [u8]>> {
    let mut use_big = false;
    loop {
        let buf: &mut [u8] = if use_big { big } else { small };
        let n = list(buf);
        if n >= 0 {
            let buf: &[u8] = if use_big { big } else { small };
            return Ok(Some(&buf[..n as usize]));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ERANGE) if big.len() < MAX_BUF => {
                big.resize((big.len() * 4).max(4096), 0);
                use_big = true;
            }
            Some(libc::ENOTSUP) => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// The names in a list as `listxattr` returns it (NUL-terminated, empty pieces skipped).
fn split_names(list: &[u8]) -> impl Iterator<Item = &CStr> {
    list.split_inclusive(|&b| b == 0)
        .filter_map(|n| CStr::from_bytes_with_nul(n).ok())
        .filter(|n| !n.is_empty())
}

/// A value as `get` reads it, growing the buffer on ERANGE.
fn read_value(get: impl Fn(&mut [u8]) -> isize) -> io::Result<Vec<u8>> {
    let mut val = vec![0u8; 256];
    loop {
        let r = get(&mut val);
        if r >= 0 {
            val.truncate(r as usize);
            return Ok(val);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ERANGE) && val.len() < MAX_BUF {
            val.resize(val.len() * 8, 0);
            continue;
        }
        return Err(e);
    }
}

/// Lists names with `list` and reads each value with `get`.
fn read_all(
    list: impl Fn(&mut [u8]) -> isize,
    get: impl Fn(&CStr, &mut [u8]) -> isize,
) -> io::Result<Xattrs> {
    let mut small = [0u8; 512];
    let mut big = Vec::new();
    let Some(names) = list_names(list, &mut small, &mut big)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for cn in split_names(names) {
        let val = read_value(|buf| get(cn, buf))?;
        out.push((cn.to_bytes().to_vec(), val));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_and_skip_empty_pieces() {
        let got: Vec<&[u8]> = split_names(b"user.a\0\0trusted.b\0tail")
            .map(|n| n.to_bytes())
            .collect();
        assert_eq!(got, [&b"user.a"[..], b"trusted.b"]);
    }

    #[test]
    fn reads_xattrs_of_a_path() {
        let d = std::env::temp_dir().join(format!("usfs-source-x-{}", std::process::id()));
        std::fs::write(&d, b"x").unwrap();
        let c = path_cstr(&d).unwrap();
        let big = vec![7u8; 3000];
        // SAFETY: valid C strings; the value is valid for its length.
        let r = unsafe {
            libc::lsetxattr(
                c.as_ptr(),
                c"user.k".as_ptr(),
                big.as_ptr().cast(),
                big.len(),
                0,
            )
        };
        if r == 0 {
            assert_eq!(names(&d).unwrap(), [b"user.k".to_vec()]);
            assert_eq!(value(&d, b"user.k").unwrap(), big);
            assert_eq!(of_path(&d).unwrap(), [(b"user.k".to_vec(), big)]);
            assert!(value(&d, b"user.none").is_err());
        }
        std::fs::remove_file(&d).unwrap();
    }
}
