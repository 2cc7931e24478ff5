//! The first difference between two trees, and how values are shown in it.

use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::escape;
use crate::sys::Timespec;

/// What differs at a path.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiffKind {
    /// The name exists only in tree A.
    OnlyInA,
    /// The name exists only in tree B.
    OnlyInB,
    /// File type (regular, directory, symlink, ...).
    FileType,
    /// Size of a regular file.
    Size,
    /// File contents (the values name the first differing offset and bytes).
    Content,
    /// Permission bits (mode & 0o7777).
    Mode,
    /// Owner.
    Uid,
    /// Group.
    Gid,
    /// Link count of a non-directory.
    Nlink,
    /// Hard-link structure: which earlier path shares this inode.
    HardLink,
    /// Symbolic link target.
    SymlinkTarget,
    /// Device number of a character or block device.
    Rdev,
    /// Modification time.
    Mtime,
    /// Access time.
    Atime,
    /// The set of extended attribute names.
    XattrNames,
    /// The value of the named extended attribute.
    XattrValue(String),
    /// An I/O error while reading one of the trees (the message is in the value of the
    /// side it happened on; the other value is empty).
    Io,
}

impl fmt::Display for DiffKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiffKind::OnlyInA => write!(f, "only in A"),
            DiffKind::OnlyInB => write!(f, "only in B"),
            DiffKind::FileType => write!(f, "file type"),
            DiffKind::Size => write!(f, "size"),
            DiffKind::Content => write!(f, "content"),
            DiffKind::Mode => write!(f, "mode"),
            DiffKind::Uid => write!(f, "uid"),
            DiffKind::Gid => write!(f, "gid"),
            DiffKind::Nlink => write!(f, "nlink"),
            DiffKind::HardLink => write!(f, "hard links"),
            DiffKind::SymlinkTarget => write!(f, "symlink target"),
            DiffKind::Rdev => write!(f, "rdev"),
            DiffKind::Mtime => write!(f, "mtime"),
            DiffKind::Atime => write!(f, "atime"),
            DiffKind::XattrNames => write!(f, "xattr names"),
            DiffKind::XattrValue(n) => write!(f, "xattr {n}"),
            DiffKind::Io => write!(f, "I/O error"),
        }
    }
}

/// The first difference found between trees A and B.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// Path relative to both roots (`.` for the roots themselves).
    pub path: PathBuf,
    /// What differs.
    pub kind: DiffKind,
    /// The value in tree A (empty when not applicable).
    pub a: String,
    /// The value in tree B (empty when not applicable).
    pub b: String,
}

impl Difference {
    pub(crate) fn new(
        path: &std::path::Path,
        kind: DiffKind,
        a: impl Into<String>,
        b: impl Into<String>,
    ) -> Difference {
        let path = if path.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            path.to_path_buf()
        };
        Difference {
            path,
            kind,
            a: a.into(),
            b: b.into(),
        }
    }

    /// True if this is an I/O error rather than a difference in content or attributes.
    pub fn is_io(&self) -> bool {
        self.kind == DiffKind::Io
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = escape(self.path.as_os_str().as_bytes());
        match self.kind {
            DiffKind::OnlyInA | DiffKind::OnlyInB => write!(f, "{p}: {}", self.kind),
            DiffKind::Io if self.a.is_empty() => write!(f, "{p}: I/O error in B: {}", self.b),
            DiffKind::Io => write!(f, "{p}: I/O error in A: {}", self.a),
            _ => write!(
                f,
                "{p}: {} differs: A: {}; B: {}",
                self.kind, self.a, self.b
            ),
        }
    }
}

impl std::error::Error for Difference {}

/// A timestamp as `seconds.nanoseconds (UTC date and time)`.
pub(crate) fn show_time(t: Timespec) -> String {
    let days = t.sec.div_euclid(86_400);
    let secs = t.sec.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}.{:09} ({y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z)",
        t.sec,
        t.nsec,
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        t.nsec
    )
}

/// Year, month, day of a day count since 1970-01-01 (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// An xattr value or symlink target, escaped, cut to the first 64 bytes, with its length.
pub(crate) fn show_bytes(v: &[u8]) -> String {
    let shown = &v[..v.len().min(64)];
    let more = if v.len() > 64 { "..." } else { "" };
    format!("\"{}\"{more} ({} bytes)", escape(shown), v.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_show_dates() {
        assert_eq!(
            show_time(Timespec::new(0, 1)),
            "0.000000001 (1970-01-01T00:00:00.000000001Z)"
        );
        assert_eq!(
            show_time(Timespec::new(-1, 500_000_000)),
            "-1.500000000 (1969-12-31T23:59:59.500000000Z)"
        );
        assert!(show_time(Timespec::new(2_208_988_800, 0)).contains("2040-01-01T00:00:00"));
        assert!(show_time(Timespec::new(i64::MIN, 0)).len() > 10);
    }

    #[test]
    fn display_is_one_line() {
        let d = Difference::new(
            std::path::Path::new("a\nb"),
            DiffKind::Mode,
            "0o644",
            "0o755",
        );
        assert_eq!(d.to_string(), "a\\nb: mode differs: A: 0o644; B: 0o755");
        let d = Difference::new(std::path::Path::new(""), DiffKind::OnlyInB, "", "");
        assert_eq!(d.to_string(), ".: only in B");
    }
}
