//! The tree comparator: [`compare`] walks two trees side by side and returns the first
//! difference in names, types, contents, sizes, modes, owners, symlink targets, device
//! numbers, times, xattrs or hard-link structure.
//!
//! Symbolic links are never followed (except that a root may be a link to a directory).
//! Files and directories are opened with `O_NOATIME` where permitted, and every entry's
//! times are taken (lstat) before it is read, so comparing does not disturb what it
//! compares. Reading a symlink (readlink) may still update its atime on a read-write
//! relatime mount; the value compared is the one from before.
//!
//! Order: directories are walked depth first; in each directory names are taken in byte
//! order, and all entries of a directory are compared before descending into its
//! subdirectories. "First difference" means first in that order.

mod content;
mod diff;
mod entry;

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub use diff::{DiffKind, Difference};

use content::Comparer;

/// How finely timestamps are compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimeGranularity {
    /// Exact nanoseconds.
    #[default]
    Nanosecond,
    /// Microseconds (the nanoseconds below are ignored).
    Microsecond,
    /// Milliseconds.
    Millisecond,
    /// Whole seconds (e.g. `mke2fs -d` drops nanoseconds). Times are floored, so
    /// -0.5 s compares equal to -1 s.
    Second,
}

impl TimeGranularity {
    /// Parses `ns`, `us`, `ms` or `s`.
    pub fn parse(s: &str) -> Option<TimeGranularity> {
        match s {
            "ns" => Some(TimeGranularity::Nanosecond),
            "us" => Some(TimeGranularity::Microsecond),
            "ms" => Some(TimeGranularity::Millisecond),
            "s" => Some(TimeGranularity::Second),
            _ => None,
        }
    }

    /// The granularity in nanoseconds.
    pub fn nanos(self) -> i128 {
        match self {
            TimeGranularity::Nanosecond => 1,
            TimeGranularity::Microsecond => 1_000,
            TimeGranularity::Millisecond => 1_000_000,
            TimeGranularity::Second => 1_000_000_000,
        }
    }
}

/// What [`compare`] compares. `CmpOptions::default()` compares everything at nanosecond
/// granularity, ignores `system.*` xattrs and ignores no names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmpOptions {
    /// Compare access times (EROFS, for one, has none of its own). Default true.
    pub atime: bool,
    /// Also compare the access times of symbolic links. Default false: reading a link
    /// (readlink has no `O_NOATIME`) updates its atime on a read-write relatime mount, so
    /// only the first comparison after a tree is made would agree.
    pub symlink_atime: bool,
    /// Granularity of time comparisons. Default nanoseconds.
    pub time_granularity: TimeGranularity,
    /// Do not compare the mtime of directories (some populators change them).
    pub ignore_dir_mtime: bool,
    /// Do not compare the attributes (mode, owner, times, xattrs) of the two roots, e.g.
    /// when one is a mount point. Their contents are still compared.
    pub ignore_root_attrs: bool,
    /// Top-level names to leave out on both sides (e.g. `lost+found`).
    pub ignore: Vec<OsString>,
    /// Compare extended attributes (user., trusted., security.). Default true.
    pub xattrs: bool,
    /// Also compare `system.*` xattrs (POSIX ACLs and the like). Default false.
    pub system_xattrs: bool,
}

impl Default for CmpOptions {
    fn default() -> CmpOptions {
        CmpOptions {
            atime: true,
            symlink_atime: false,
            time_granularity: TimeGranularity::Nanosecond,
            ignore_dir_mtime: false,
            ignore_root_attrs: false,
            ignore: Vec::new(),
            xattrs: true,
            system_xattrs: false,
        }
    }
}

/// What an equal comparison covered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmpStats {
    /// Entries compared (names; the roots not counted).
    pub entries: u64,
    /// Directories among them.
    pub dirs: u64,
    /// Regular files among them (each name counted).
    pub files: u64,
    /// Symbolic links among them.
    pub symlinks: u64,
    /// Fifos, sockets and device nodes among them.
    pub specials: u64,
    /// Names whose inode was already seen under another name.
    pub hardlinks: u64,
    /// Extended attributes compared.
    pub xattrs: u64,
    /// Bytes of file content read from each side and compared.
    pub bytes_compared: u64,
    /// Bytes of file content skipped because both sides had a hole there.
    pub bytes_skipped: u64,
}

impl fmt::Display for CmpStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "trees are equal: {} entries ({} dirs, {} files, {} symlinks, {} special, {} hard links), \
             {} xattrs, {} bytes compared, {} bytes of holes skipped",
            self.entries,
            self.dirs,
            self.files,
            self.symlinks,
            self.specials,
            self.hardlinks,
            self.xattrs,
            self.bytes_compared,
            self.bytes_skipped
        )
    }
}

/// Compares trees `a` and `b`; `Ok` with statistics when they are equal under `opts`,
/// otherwise the first [`Difference`] (an I/O error is a difference of kind
/// [`DiffKind::Io`]). Either root may be a symlink to a directory; nothing below is
/// followed.
pub fn compare(a: &Path, b: &Path, opts: &CmpOptions) -> Result<CmpStats, Difference> {
    let mut w = Walker {
        a: a.to_path_buf(),
        b: b.to_path_buf(),
        opts,
        links_a: HashMap::new(),
        links_b: HashMap::new(),
        content: Comparer::new(),
        stats: CmpStats::default(),
    };
    let root = PathBuf::new();
    let ma = std::fs::metadata(a).map_err(|e| io_diff(&root, entry::Side::A, "stat", e))?;
    let mb = std::fs::metadata(b).map_err(|e| io_diff(&root, entry::Side::B, "stat", e))?;
    w.entry(&root, &ma, &mb, true)?;
    if ma.is_dir() {
        let mut stack = vec![root];
        while let Some(dir) = stack.pop() {
            w.dir(&dir, &mut stack)?;
        }
    }
    w.stats.bytes_compared = w.content.bytes_compared;
    w.stats.bytes_skipped = w.content.bytes_skipped;
    Ok(w.stats)
}

/// State of one comparison.
struct Walker<'o> {
    a: PathBuf,
    b: PathBuf,
    opts: &'o CmpOptions,
    /// First relative path seen for each multiply-linked inode (dev, ino) of A.
    links_a: HashMap<(u64, u64), PathBuf>,
    /// The same for B.
    links_b: HashMap<(u64, u64), PathBuf>,
    content: Comparer,
    stats: CmpStats,
}

fn io_diff(rel: &Path, side: entry::Side, op: &str, e: std::io::Error) -> Difference {
    let msg = format!("{op}: {e}");
    match side {
        entry::Side::A => Difference::new(rel, DiffKind::Io, msg, ""),
        entry::Side::B => Difference::new(rel, DiffKind::Io, "", msg),
    }
}

impl Walker<'_> {
    fn abs_a(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.a.clone()
        } else {
            self.a.join(rel)
        }
    }

    fn abs_b(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.b.clone()
        } else {
            self.b.join(rel)
        }
    }

    /// Compares the listings of directory `rel` and every entry in it; pushes the
    /// subdirectories onto `stack` so the first one is walked next.
    fn dir(&mut self, rel: &Path, stack: &mut Vec<PathBuf>) -> Result<(), Difference> {
        let top = rel.as_os_str().is_empty();
        let mut na = crate::sys::read_dir_names(&self.abs_a(rel), top)
            .map_err(|e| io_diff(rel, entry::Side::A, "readdir", e))?;
        let mut nb = crate::sys::read_dir_names(&self.abs_b(rel), top)
            .map_err(|e| io_diff(rel, entry::Side::B, "readdir", e))?;
        if top && !self.opts.ignore.is_empty() {
            let ignored = |n: &Vec<u8>| {
                self.opts
                    .ignore
                    .iter()
                    .any(|i| i.as_bytes() == n.as_slice())
            };
            na.retain(|n| !ignored(n));
            nb.retain(|n| !ignored(n));
        }
        na.sort_unstable();
        nb.sort_unstable();
        let mut subdirs = Vec::new();
        let (mut i, mut j) = (0, 0);
        loop {
            let (name, in_a, in_b) = match (na.get(i), nb.get(j)) {
                (None, None) => break,
                (Some(x), Some(y)) if x == y => (x, true, true),
                (Some(x), Some(y)) if x < y => (x, true, false),
                (Some(x), None) => (x, true, false),
                (_, Some(y)) => (y, false, true),
            };
            let child = rel.join(std::ffi::OsStr::from_bytes(name));
            if !in_b {
                return Err(Difference::new(
                    &child,
                    DiffKind::OnlyInA,
                    "present",
                    "absent",
                ));
            }
            if !in_a {
                return Err(Difference::new(
                    &child,
                    DiffKind::OnlyInB,
                    "absent",
                    "present",
                ));
            }
            let ma = std::fs::symlink_metadata(self.abs_a(&child))
                .map_err(|e| io_diff(&child, entry::Side::A, "lstat", e))?;
            let mb = std::fs::symlink_metadata(self.abs_b(&child))
                .map_err(|e| io_diff(&child, entry::Side::B, "lstat", e))?;
            self.entry(&child, &ma, &mb, false)?;
            if ma.is_dir() {
                subdirs.push(child);
            }
            i += 1;
            j += 1;
        }
        stack.extend(subdirs.into_iter().rev());
        Ok(())
    }
}
