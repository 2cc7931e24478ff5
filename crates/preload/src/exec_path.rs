//! PATH lookup for execvp, execvpe and posix_spawnp when a PATH directory lies in a mount.
//! glibc searches PATH with its internal execve, which the preload library does not see,
//! so a program stored in an image would never be found: when some PATH entry is inside a
//! mount the search is done here instead, in glibc's order and with its rules (an empty
//! entry is the current directory; a candidate that exists but may not be executed makes
//! the search end in EACCES if nothing later is found, else ENOENT). Without such an entry
//! libc searches as always.

use crate::state::{State, Target};
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStringExt;
use usfs_vfs::VPath;

/// Where the search found the program.
pub(crate) enum Found {
    /// In a mount.
    Virt(VPath),
    /// On the host, at this path (with a `/`: libc runs it without searching again).
    Host(CString),
    /// Nowhere: the errno to fail with.
    Missing(i32),
}

/// glibc's PATH when the variable is unset.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// Looks `name` (no `/`) up in this process's PATH if a PATH directory is in a mount;
/// `None` when none is (libc's own search then applies).
pub(crate) fn search(st: &State, name: &[u8]) -> Option<Found> {
    if name.is_empty() {
        return Some(Found::Missing(libc::ENOENT));
    }
    let path = std::env::var_os("PATH").map_or_else(|| DEFAULT_PATH.to_vec(), OsString::into_vec);
    let dirs: Vec<&[u8]> = path.split(|&b| b == b':').collect();
    let in_mount = |dir: &[u8]| {
        let d = if dir.is_empty() { &b"."[..] } else { dir };
        CString::new(d).ok().is_some_and(|c| {
            matches!(
                st.classify(libc::AT_FDCWD, c.as_ptr(), true),
                Ok(Target::Virt(_))
            )
        })
    };
    if !dirs.iter().any(|d| in_mount(d)) {
        return None;
    }
    let mut denied = false;
    for dir in dirs {
        let mut cand = dir.to_vec();
        if !cand.is_empty() && !cand.ends_with(b"/") {
            cand.push(b'/');
        }
        if cand.is_empty() {
            cand.extend_from_slice(b"./");
        }
        cand.extend_from_slice(name);
        let Ok(c) = CString::new(cand) else { continue };
        match st.classify(libc::AT_FDCWD, c.as_ptr(), true) {
            Ok(Target::Virt(vp)) => match st.meta(&vp) {
                Ok(m) if executable(st, &m) => {
                    return Some(Found::Virt(vp));
                }
                Ok(_) => denied = true,
                Err(e) => denied |= e == libc::EACCES,
            },
            Ok(Target::HostAbs(h)) => {
                if let Some(f) = host_candidate(h, &mut denied) {
                    return Some(f);
                }
            }
            Ok(Target::Pass) => {
                if let Some(f) = host_candidate(c, &mut denied) {
                    return Some(f);
                }
            }
            Err(e) => denied |= e == libc::EACCES,
        }
    }
    Some(Found::Missing(if denied {
        libc::EACCES
    } else {
        libc::ENOENT
    }))
}

/// May the caller execute the file with these attributes (the kernel's check for exec:
/// a regular file with execute permission for the caller)?
pub(crate) fn executable(st: &State, m: &usfs_fs::Metadata) -> bool {
    m.file_type == usfs_fs::FileType::Regular
        && match &st.creds {
            Some(c) => c.may(m, usfs_vfs::creds::MAY_EXEC),
            None => m.perm & 0o111 != 0,
        }
}

/// A host file that exists: found when it is a regular file the caller may execute,
/// else noted as denied (`denied`) when it exists at all.
fn host_candidate(path: CString, denied: &mut bool) -> Option<Found> {
    // SAFETY: stat and access on a NUL-terminated path into a local struct; inside a
    // hook these reach libc's own functions.
    let mut sb: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above: a NUL-terminated path and a local struct.
    if unsafe { libc::stat(path.as_ptr(), &mut sb) } != 0 {
        *denied |= std::io::Error::last_os_error().raw_os_error() == Some(libc::EACCES);
        return None;
    }
    // SAFETY: as above.
    let exec_ok = unsafe { libc::access(path.as_ptr(), libc::X_OK) } == 0;
    if sb.st_mode & libc::S_IFMT == libc::S_IFREG && exec_ok {
        return Some(Found::Host(path));
    }
    *denied = true;
    None
}
