//! One worker: picks seeded random operations on its own subtree (and the shared files),
//! runs each on the real directory, predicts its outcome from the model (success or the
//! errno POSIX requires), checks it, and updates the model.

use super::model::{under, Id, Kind, Tree};
use super::{Op, Options, Shared, Stats};
use crate::rng::Rng;
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What one operation came to.
pub(super) enum Outcome {
    /// Ran and matched the model.
    Done,
    /// Ran and failed with the errno the model predicted.
    ExpectedError,
    /// Not run: nothing to run it on, a limit, or the file system does not support it.
    Skipped,
    /// Not supported by the file system (EOPNOTSUPP): skipped.
    Unsupported,
}

/// An operation's outcome, or what did not match the model.
pub(super) type OpResult = Result<Outcome, String>;

/// Longest name the exerciser makes.
pub(super) const NAME_MAX: usize = 255;

/// Longest absolute path the exerciser makes (below Linux's PATH_MAX of 4096, so deep
/// renames never turn into ENAMETOOLONG).
pub(super) const PATH_LIMIT: usize = 3800;

/// A worker's state.
pub(super) struct Worker<'a> {
    /// Worker number.
    pub id: usize,
    /// The real directory of its subtree.
    pub root: PathBuf,
    /// The model of that subtree.
    pub tree: Tree,
    /// Its random numbers.
    pub rng: Rng,
    /// The run's options.
    pub opts: &'a Options,
    /// The files every worker uses.
    pub shared: &'a [Shared],
    /// The last operations, for failure reports.
    pub log: VecDeque<String>,
    /// Counts.
    pub stats: Stats,
}

/// Checks `res` against what the model predicts: `Ok(Some(v))` on an expected success,
/// `Ok(None)` on an expected errno, `Err` on a mismatch.
pub(super) fn expect<T>(res: io::Result<T>, want: &[i32], what: &str) -> Result<Option<T>, String> {
    match (res, want.is_empty()) {
        (Ok(v), true) => Ok(Some(v)),
        (Err(e), false) if want.contains(&e.raw_os_error().unwrap_or(0)) => Ok(None),
        (Ok(_), false) => Err(format!("{what}: succeeded, expected errno {want:?}")),
        (Err(e), _) => Err(format!(
            "{what}: {e}, expected {}",
            if want.is_empty() {
                "success".into()
            } else {
                format!("errno {want:?}")
            }
        )),
    }
}

/// `Done` for an expected success, `ExpectedError` for an expected errno.
pub(super) fn done<T>(r: Option<T>) -> Outcome {
    if r.is_some() {
        Outcome::Done
    } else {
        Outcome::ExpectedError
    }
}

/// Random bytes of length `len`: random, or a repeated pattern (either kind of data).
pub(super) fn bytes(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    if rng.chance(1, 2) {
        rng.fill(&mut v);
    } else {
        let b = rng.below(255) as u8 + 1;
        v.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = b.wrapping_add(i as u8));
    }
    v
}

impl Worker<'_> {
    /// Runs operation `op`.
    pub(super) fn step(&mut self, op: Op) -> OpResult {
        match op {
            Op::Create => self.create(),
            Op::Write | Op::Append | Op::Truncate | Op::Fallocate | Op::Read => self.data_op(op),
            Op::Rename => self.rename(),
            Op::Link => self.link(),
            Op::Unlink => self.unlink(),
            Op::Mkdir => self.mkdir(),
            Op::Rmdir => self.rmdir(),
            Op::Symlink => self.symlink(),
            Op::SetXattr | Op::RemoveXattr => self.xattr(op == Op::SetXattr),
            Op::Chmod => self.chmod(),
            Op::Utimens => self.utimens(),
            Op::Fsync => self.fsync(),
            Op::Readdir => self.readdir(),
        }
    }

    /// Records what is about to run, with paths relative to the run's directory (so a
    /// seed's log reads the same in any directory) and long names shortened.
    pub(super) fn note(&mut self, s: String) {
        if self.log.len() == self.opts.tail.max(1) {
            self.log.pop_front();
        }
        let base = self.root.parent().unwrap_or(&self.root);
        let s = shorten(&s.replace(&format!("{}/", base.display()), ""));
        self.log.push_back(format!("#{} {s}", self.stats.ops));
    }

    /// A name for a new entry: mostly from a small pool (so names collide), sometimes long.
    pub(super) fn name(&mut self) -> Vec<u8> {
        match self.rng.below(16) {
            0 => {
                let n = self.rng.range(64, NAME_MAX as u64) as usize;
                let mut v = format!("long{}-", self.rng.below(4)).into_bytes();
                v.resize(n, b'L');
                v
            }
            1 => format!("é-{}", self.rng.below(4)).into_bytes(),
            _ => format!("n{}", self.rng.below(12)).into_bytes(),
        }
    }

    pub(super) fn path(&self, rel: &Path) -> PathBuf {
        under(&self.root, rel)
    }

    /// A random directory with room below it for one more name (the root always).
    pub(super) fn pick_dir(&mut self) -> (PathBuf, Id) {
        let dirs: Vec<_> = self
            .tree
            .dirs()
            .into_iter()
            .filter(|(p, id)| {
                *id == self.tree.root || self.fits(p.as_os_str().len() + 1 + NAME_MAX)
            })
            .collect();
        dirs[self.rng.index(dirs.len())].clone()
    }

    /// True when a path `rel_len` bytes long below the worker's root stays within
    /// [`PATH_LIMIT`].
    pub(super) fn fits(&self, rel_len: usize) -> bool {
        self.root.as_os_str().len() + 1 + rel_len <= PATH_LIMIT
    }

    /// A random entry for which `keep` holds.
    pub(super) fn pick_entry(
        &mut self,
        keep: impl Fn(&Tree, Id) -> bool,
    ) -> Option<super::model::Entry> {
        let v: Vec<_> = self
            .tree
            .entries()
            .into_iter()
            .filter(|e| keep(&self.tree, e.id))
            .collect();
        self.rng.pick(&v).cloned()
    }

    pub(super) fn is_file(t: &Tree, id: Id) -> bool {
        matches!(t.node(id).kind, Kind::File(_))
    }

    pub(super) fn not_symlink(t: &Tree, id: Id) -> bool {
        !matches!(t.node(id).kind, Kind::Symlink(_))
    }

    pub(super) fn full(&self) -> bool {
        self.tree.live() >= self.opts.max_nodes
    }

    fn create(&mut self) -> OpResult {
        if self.full() {
            return Ok(Outcome::Skipped);
        }
        let (dir, did) = self.pick_dir();
        let name = self.name();
        let perm = 0o600 | (self.rng.below(0o200) as u32);
        let init_len = if self.rng.chance(1, 2) {
            self.rng.below(8192)
        } else {
            0
        };
        let init = bytes(
            &mut self.rng,
            init_len.min(self.opts.max_file_size) as usize,
        );
        let p = self.path(&dir.join(OsStr::from_bytes(&name)));
        self.note(format!(
            "create {} perm {perm:o} with {} bytes",
            p.display(),
            init.len()
        ));
        let exists = self.tree.dir(did).contains_key(&name);
        let want: &[i32] = if exists { &[libc::EEXIST] } else { &[] };
        let res = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p);
        let Some(mut f) = expect(res, want, "create")? else {
            return Ok(Outcome::ExpectedError);
        };
        f.set_permissions(std::fs::Permissions::from_mode(perm))
            .and_then(|()| f.write_all(&init))
            .map_err(|e| format!("create: chmod/write: {e}"))?;
        self.tree.add(did, &name, Kind::File(init), perm);
        Ok(Outcome::Done)
    }

    /// Write, append, truncate, fallocate or read on one of the worker's files or a shared
    /// file (one time in six when there are any).
    fn data_op(&mut self, op: Op) -> OpResult {
        if !self.shared.is_empty() && self.rng.chance(1, 6) {
            let s = &self.shared[self.rng.index(self.shared.len())];
            let mut data = s.data.lock().unwrap_or_else(|e| e.into_inner());
            let path = s.path.clone();
            return self.data_on(op, &path, &mut data);
        }
        let Some(e) = self.pick_entry(Self::is_file) else {
            return Ok(Outcome::Skipped);
        };
        let p = self.path(&e.path);
        let mut data = std::mem::take(self.tree.node_mut(e.id).data_mut());
        let r = self.data_on(op, &p, &mut data);
        *self.tree.node_mut(e.id).data_mut() = data;
        if op == Op::Read && r.is_ok() {
            self.check_meta(&p, e.id)?;
        }
        r
    }

    /// Runs `op` on the file at `p` whose model bytes are `data`.
    fn data_on(&mut self, op: Op, p: &Path, data: &mut Vec<u8>) -> OpResult {
        let max = self.opts.max_file_size;
        let size = data.len() as u64;
        match op {
            Op::Read => {
                self.note(format!("read {}", p.display()));
                let got = std::fs::read(p).map_err(|e| format!("read {}: {e}", p.display()))?;
                compare(p, &got, data)
            }
            Op::Write => {
                let off = self.offset(size).min(max - 1);
                let len = 1 + self.rng.below((max - off).min(65536));
                let buf = bytes(&mut self.rng, len as usize);
                self.note(format!(
                    "write {} at {off} len {len} (size {size})",
                    p.display()
                ));
                let f = open_rw(p, false)?;
                f.write_all_at(&buf, off)
                    .map_err(|e| format!("pwrite: {e}"))?;
                put(data, off, &buf);
                Ok(Outcome::Done)
            }
            Op::Append => {
                let len = self.rng.below((max - size.min(max)).min(65536) + 1);
                if len == 0 {
                    return Ok(Outcome::Skipped);
                }
                let buf = bytes(&mut self.rng, len as usize);
                self.note(format!("append {} len {len} (size {size})", p.display()));
                let mut f = open_rw(p, true)?;
                f.write_all(&buf).map_err(|e| format!("append: {e}"))?;
                data.extend_from_slice(&buf);
                Ok(Outcome::Done)
            }
            Op::Truncate => {
                let new = if self.rng.chance(1, 2) {
                    self.rng.below(size + 1)
                } else {
                    (size + self.rng.below(65536)).min(max)
                };
                self.note(format!("truncate {} from {size} to {new}", p.display()));
                open_rw(p, false)?
                    .set_len(new)
                    .map_err(|e| format!("truncate: {e}"))?;
                data.resize(new as usize, 0);
                Ok(Outcome::Done)
            }
            _ => self.fallocate(p, data),
        }
    }

    /// An offset for a write: inside the file, at its end, or past it (a hole).
    fn offset(&mut self, size: u64) -> u64 {
        match self.rng.below(3) {
            0 => self.rng.below(size + 1),
            1 => size,
            _ => size + self.rng.below(65536),
        }
    }

    fn fallocate(&mut self, p: &Path, data: &mut Vec<u8>) -> OpResult {
        const MODES: [(i32, &str); 5] = [
            (0, "alloc"),
            (libc::FALLOC_FL_KEEP_SIZE, "keep_size"),
            (
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                "punch_hole",
            ),
            (libc::FALLOC_FL_ZERO_RANGE, "zero_range"),
            (
                libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
                "zero_range|keep_size",
            ),
        ];
        let (mode, mname) = MODES[self.rng.index(MODES.len())];
        let max = self.opts.max_file_size;
        let size = data.len() as u64;
        let off = self.offset(size).min(max - 1);
        let len = 1 + self.rng.below((max - off).min(65536));
        self.note(format!(
            "fallocate {} {mname} at {off} len {len} (size {size})",
            p.display()
        ));
        let f = open_rw(p, false)?;
        // SAFETY: plain syscall on a descriptor owned by `f`.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, off as i64, len as i64) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                return Ok(Outcome::Unsupported);
            }
            return Err(format!("fallocate {mname}: {e}"));
        }
        let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let zero = mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0;
        let end = off + len;
        if !keep && end > size {
            data.resize(end as usize, 0);
        }
        if zero {
            let stop = end.min(data.len() as u64);
            if off < stop {
                data[off as usize..stop as usize].fill(0);
            }
        }
        Ok(Outcome::Done)
    }

    /// Size, permissions and link count of file `id` at `p` match the model.
    fn check_meta(&self, p: &Path, id: Id) -> Result<(), String> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(p).map_err(|e| format!("stat {}: {e}", p.display()))?;
        let n = self.tree.node(id);
        let size = match &n.kind {
            Kind::File(d) => d.len() as u64,
            _ => m.size(),
        };
        if (m.size(), m.mode() & 0o7777, m.nlink()) != (size, n.perm, u64::from(n.links)) {
            return Err(format!(
                "stat {}: size {} mode {:o} nlink {}, model {} {:o} {}",
                p.display(),
                m.size(),
                m.mode() & 0o7777,
                m.nlink(),
                size,
                n.perm,
                n.links
            ));
        }
        Ok(())
    }
}

/// `s` with each run of more than 8 `L`s (the filler of long names) written as `L*N`.
fn shorten(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut run = 0;
    let flush = |out: &mut String, run: usize| match run {
        0..=8 => out.extend(std::iter::repeat_n('L', run)),
        n => out.push_str(&format!("L*{n}")),
    };
    for c in s.chars() {
        if c == 'L' {
            run += 1;
            continue;
        }
        flush(&mut out, run);
        run = 0;
        out.push(c);
    }
    flush(&mut out, run);
    out
}

/// Opens `p` for writing (appending when `append`).
fn open_rw(p: &Path, append: bool) -> Result<File, String> {
    OpenOptions::new()
        .write(true)
        .append(append)
        .open(p)
        .map_err(|e| format!("open {}: {e}", p.display()))
}

/// Writes `buf` at `off` into the model bytes (zeros fill a hole).
fn put(data: &mut Vec<u8>, off: u64, buf: &[u8]) {
    let end = off as usize + buf.len();
    if data.len() < end {
        data.resize(end, 0);
    }
    data[off as usize..end].copy_from_slice(buf);
}

/// The bytes read from `p` are the model's.
pub(super) fn compare(p: &Path, got: &[u8], want: &[u8]) -> OpResult {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        return Err(format!(
            "{}: byte {i} is {:#04x}, model says {:#04x} (size {})",
            p.display(),
            got[i],
            want[i],
            want.len()
        ));
    }
    if got.len() != want.len() {
        return Err(format!(
            "{}: {} bytes, model says {}",
            p.display(),
            got.len(),
            want.len()
        ));
    }
    Ok(Outcome::Done)
}
