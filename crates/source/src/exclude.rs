//! Entries left out of a scan, as mkfs.erofs's `--exclude-path` (an exact path) and
//! `--exclude-regex` (a POSIX extended regular expression, compiled by the C library's
//! regcomp as erofs-utils compiles it, so a pattern means what it means there) name
//! them: by the entry's path relative to the source root, without a leading `/`. A
//! directory left out is not scanned.

use std::ffi::CString;
use std::path::Path;
use usfs_fs::{Error, Result};

/// What to leave out of a scan.
#[derive(Default)]
pub struct Exclude {
    /// Exact relative paths.
    paths: Vec<Vec<u8>>,
    /// Compiled expressions.
    regexes: Vec<PosixRegex>,
}

impl Exclude {
    /// Leaves out the entry at `path`, relative to the source root (compared as it is:
    /// `/a` names nothing, as in mkfs.erofs).
    pub fn add_path(&mut self, path: &str) {
        self.paths.push(path.as_bytes().to_vec());
    }

    /// Leaves out the entries whose relative path matches `pattern` (POSIX ERE); an
    /// invalid pattern is an error naming it.
    pub fn add_regex(&mut self, pattern: &str) -> Result<()> {
        self.regexes.push(PosixRegex::new(pattern)?);
        Ok(())
    }

    /// Is nothing left out?
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty() && self.regexes.is_empty()
    }

    /// Is the entry at `rel` (relative to the root) left out?
    pub fn matches(&self, rel: &Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let b = rel.as_os_str().as_bytes();
        self.paths.iter().any(|p| p == b) || self.regexes.iter().any(|r| r.is_match(b))
    }
}

/// A compiled POSIX extended regular expression (regcomp with REG_EXTENDED|REG_NOSUB),
/// matched against a path relative to the source root (mkfs.erofs's exclusion and
/// compression hints).
pub struct PosixRegex {
    re: Box<libc::regex_t>,
}

// SAFETY: a compiled regex_t is only read by regexec, which POSIX (and glibc: MT-Safe)
// allows from several threads at once; it is freed once, on drop.
unsafe impl Send for PosixRegex {}
// SAFETY: as above: shared use is regexec only.
unsafe impl Sync for PosixRegex {}

impl PosixRegex {
    /// Compiles `pattern`; an invalid one is an error naming it.
    pub fn new(pattern: &str) -> Result<PosixRegex> {
        let invalid =
            |m: String| Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, m));
        let c =
            CString::new(pattern).map_err(|_| invalid(format!("regex {pattern:?}: a NUL byte")))?;
        // SAFETY: regex_t is plain data that regcomp initialises; zeroed is a valid
        // starting value.
        let mut re: Box<libc::regex_t> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: `re` points at a regex_t we own, `c` is NUL-terminated.
        let rc =
            unsafe { libc::regcomp(&mut *re, c.as_ptr(), libc::REG_EXTENDED | libc::REG_NOSUB) };
        if rc != 0 {
            let mut msg = [0u8; 256];
            // SAFETY: regerror writes at most msg.len() bytes, NUL-terminated, about the
            // failed compilation of `re`.
            unsafe { libc::regerror(rc, &*re, msg.as_mut_ptr().cast(), msg.len()) };
            let end = msg.iter().position(|&b| b == 0).unwrap_or(msg.len());
            return Err(invalid(format!(
                "invalid regex {pattern} ({})",
                String::from_utf8_lossy(&msg[..end])
            )));
        }
        Ok(PosixRegex { re })
    }

    /// Does `s` match?
    pub fn is_match(&self, s: &[u8]) -> bool {
        let Ok(c) = CString::new(s) else {
            return false;
        };
        // SAFETY: `re` was compiled by regcomp; REG_NOSUB: no match array is written.
        unsafe { libc::regexec(&*self.re, c.as_ptr(), 0, std::ptr::null_mut(), 0) == 0 }
    }
}

impl Drop for PosixRegex {
    fn drop(&mut self) {
        // SAFETY: compiled by regcomp (a failed compilation never builds a PosixRegex),
        // freed once.
        unsafe { libc::regfree(&mut *self.re) };
    }
}

#[cfg(test)]
mod tests {
    use super::Exclude;
    use std::path::Path;

    #[test]
    fn paths_and_expressions() {
        let mut e = Exclude::default();
        e.add_path("a/b");
        e.add_path("/d");
        e.add_regex("^c(/|$)").unwrap();
        e.add_regex("\\.o$").unwrap();
        assert!(e.matches(Path::new("a/b")));
        assert!(!e.matches(Path::new("a/b/c")) && !e.matches(Path::new("a")));
        assert!(e.matches(Path::new("c")) && e.matches(Path::new("c/x")));
        assert!(!e.matches(Path::new("cc")));
        assert!(e.matches(Path::new("d/x.o")) && !e.matches(Path::new("d/x.oo")));
        assert!(!e.matches(Path::new("d")), "a leading / names nothing");
        assert!(e.add_regex("(").is_err());
    }
}
