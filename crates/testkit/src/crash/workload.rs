//! Bounded crash workloads in the manner of B3 (Mohan et al., OSDI 2018): short sequences
//! of file-system operations on a small fixed tree, each followed by a persistence call
//! (fsync, fdatasync, sync or none), and an in-memory model of what the tree holds after
//! every step, so a crash state can be judged.
//!
//! File data is written in patterns that name the operation and the offset
//! ([`pattern`]), so a byte that shows up where it was never written (another file's
//! freed block, a stale block) cannot pass for a right one.

use crate::rng::Rng;
use std::collections::BTreeMap;

/// One operation of a workload; paths are absolute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Create an empty regular file.
    Create(Vec<u8>),
    /// Create a directory.
    Mkdir(Vec<u8>),
    /// Write `len` bytes at `off` (an overwrite, or past the end leaving a hole).
    Write {
        /// The file.
        path: Vec<u8>,
        /// Byte offset.
        off: u64,
        /// Bytes written.
        len: u64,
    },
    /// Write `len` bytes at the end of the file.
    Append {
        /// The file.
        path: Vec<u8>,
        /// Bytes appended.
        len: u64,
    },
    /// Set the file's size.
    Truncate {
        /// The file.
        path: Vec<u8>,
        /// New size.
        size: u64,
    },
    /// fallocate(2) on the range.
    Fallocate {
        /// The file.
        path: Vec<u8>,
        /// Mode.
        mode: FallocMode,
        /// Byte offset.
        off: u64,
        /// Length.
        len: u64,
    },
    /// A hard link `to` naming the file at `from`.
    Link {
        /// Existing file.
        from: Vec<u8>,
        /// New name.
        to: Vec<u8>,
    },
    /// Remove a file's name.
    Unlink(Vec<u8>),
    /// Remove an empty directory.
    Rmdir(Vec<u8>),
    /// Move `from` to `to` (replacing a file there).
    Rename {
        /// Old name.
        from: Vec<u8>,
        /// New name.
        to: Vec<u8>,
    },
    /// A symbolic link at `path` pointing at `target`.
    Symlink {
        /// The link's name.
        path: Vec<u8>,
        /// Its target.
        target: Vec<u8>,
    },
    /// Set `user.<name>` to `len` pattern bytes (large values go to an xattr block).
    SetXattr {
        /// The file.
        path: Vec<u8>,
        /// Name without the `user.` prefix.
        name: Vec<u8>,
        /// Value length.
        len: u64,
    },
    /// Remove `user.<name>`.
    RemoveXattr {
        /// The file.
        path: Vec<u8>,
        /// Name without the `user.` prefix.
        name: Vec<u8>,
    },
}

/// fallocate modes the workloads use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FallocMode {
    /// Allocate (unwritten extents), growing the size.
    Alloc,
    /// Allocate without changing the size (FALLOC_FL_KEEP_SIZE).
    AllocKeepSize,
    /// Punch a hole (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE).
    Punch,
    /// Zero the range, growing the size (FALLOC_FL_ZERO_RANGE).
    Zero,
}

/// What follows an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Persist {
    /// Nothing.
    None,
    /// fsync(2) of this file or directory.
    Fsync(Vec<u8>),
    /// fdatasync(2) of this file.
    Fdatasync(Vec<u8>),
    /// sync(2).
    Sync,
}

/// An operation and the persistence call after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The operation.
    pub op: Op,
    /// What makes it durable.
    pub persist: Persist,
}

/// One entry of the modelled tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A regular file: an index into [`Model::files`] (hard links share it).
    File(usize),
    /// A directory.
    Dir,
    /// A symbolic link and its target.
    Symlink(Vec<u8>),
}

/// A regular file's contents and user xattrs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileData {
    /// The bytes.
    pub data: Vec<u8>,
    /// `user.*` attributes: full name -> value.
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// The tree after some steps: every path (absolute, `/` itself excluded) and the files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// Paths and what they name.
    pub paths: BTreeMap<Vec<u8>, Node>,
    /// Regular files, by identity; never removed (unlinked ones just have no path).
    pub files: Vec<FileData>,
}

/// The byte operation `op` writes at file offset `off`: never zero, different for
/// neighbouring offsets and for different operations.
pub fn pattern(op: u64, off: u64) -> u8 {
    let x = op
        .wrapping_mul(0x9e37_79b9)
        .wrapping_add(off.wrapping_mul(7) + off / 4096);
    (x % 251) as u8 + 1
}

fn fill(op: u64, off: u64, len: u64) -> impl Iterator<Item = u8> {
    (off..off + len).map(move |i| pattern(op, i))
}

fn parent(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(0) | None => b"/",
        Some(i) => &path[..i],
    }
}

impl Model {
    /// The fixed starting tree: `/A/foo` (8 KiB), `/bar` (3000 bytes), directories `/A`,
    /// `/B` and `/B/C`; file data written as operation 0.
    pub fn base() -> Model {
        let mut m = Model::default();
        m.paths.insert(b"/A".to_vec(), Node::Dir);
        m.paths.insert(b"/B".to_vec(), Node::Dir);
        m.paths.insert(b"/B/C".to_vec(), Node::Dir);
        for (p, len) in [(&b"/A/foo"[..], 8192), (&b"/bar"[..], 3000)] {
            m.paths.insert(p.to_vec(), Node::File(m.files.len()));
            m.files.push(FileData {
                data: fill(0, 0, len).collect(),
                xattrs: BTreeMap::new(),
            });
        }
        m
    }

    fn file(&self, path: &[u8]) -> Option<usize> {
        match self.paths.get(path) {
            Some(Node::File(id)) => Some(*id),
            _ => None,
        }
    }

    fn is_dir(&self, path: &[u8]) -> bool {
        path == b"/" || self.paths.get(path) == Some(&Node::Dir)
    }

    fn children(&self, dir: &[u8]) -> usize {
        self.paths.keys().filter(|p| parent(p) == dir).count()
    }

    /// Can `op` run on this tree (names exist or are free as it needs)?
    pub fn valid(&self, op: &Op) -> bool {
        let free = |p: &[u8]| !self.paths.contains_key(p) && self.is_dir(parent(p));
        match op {
            Op::Create(p) | Op::Mkdir(p) | Op::Symlink { path: p, .. } => free(p),
            Op::Write { path, .. }
            | Op::Append { path, .. }
            | Op::Truncate { path, .. }
            | Op::Fallocate { path, .. }
            | Op::SetXattr { path, .. }
            | Op::Unlink(path) => self.file(path).is_some(),
            Op::RemoveXattr { path, name } => self
                .file(path)
                .is_some_and(|id| self.files[id].xattrs.contains_key(&user(name))),
            Op::Link { from, to } => self.file(from).is_some() && free(to),
            Op::Rmdir(p) => self.paths.get(p) == Some(&Node::Dir) && self.children(p) == 0,
            Op::Rename { from, to } => self.rename_valid(from, to),
        }
    }

    fn rename_valid(&self, from: &[u8], to: &[u8]) -> bool {
        let Some(src) = self.paths.get(from) else {
            return false;
        };
        if from == to || !self.is_dir(parent(to)) {
            return false;
        }
        let mut inside = from.to_vec();
        inside.push(b'/');
        if to.starts_with(&inside) {
            return false;
        }
        match (src, self.paths.get(to)) {
            (_, None) => true,
            (Node::Dir, Some(Node::Dir)) => self.children(to) == 0,
            (Node::Dir, Some(_)) | (_, Some(Node::Dir)) => false,
            (Node::File(a), Some(Node::File(b))) => a != b,
            _ => true,
        }
    }

    /// Applies operation number `k` (1-based: 0 wrote the base files' data).
    pub fn apply(&mut self, k: u64, op: &Op) {
        match op {
            Op::Create(p) => {
                self.paths.insert(p.clone(), Node::File(self.files.len()));
                self.files.push(FileData::default());
            }
            Op::Mkdir(p) => {
                self.paths.insert(p.clone(), Node::Dir);
            }
            Op::Symlink { path, target } => {
                self.paths
                    .insert(path.clone(), Node::Symlink(target.clone()));
            }
            Op::Write { path, off, len } => self.write(path, k, *off, *len),
            Op::Append { path, len } => {
                let off = self.files[self.file(path).expect("valid")].data.len() as u64;
                self.write(path, k, off, *len)
            }
            Op::Truncate { path, size } => {
                let id = self.file(path).expect("valid");
                self.files[id].data.resize(*size as usize, 0);
            }
            Op::Fallocate {
                path,
                mode,
                off,
                len,
            } => self.fallocate(path, *mode, *off, *len),
            Op::Link { from, to } => {
                let id = self.file(from).expect("valid");
                self.paths.insert(to.clone(), Node::File(id));
            }
            Op::Unlink(p) | Op::Rmdir(p) => {
                self.paths.remove(p);
            }
            Op::Rename { from, to } => self.rename(from, to),
            Op::SetXattr { path, name, len } => {
                let id = self.file(path).expect("valid");
                let value = fill(k, 0, *len).collect();
                self.files[id].xattrs.insert(user(name), value);
            }
            Op::RemoveXattr { path, name } => {
                let id = self.file(path).expect("valid");
                self.files[id].xattrs.remove(&user(name));
            }
        }
    }

    fn write(&mut self, path: &[u8], k: u64, off: u64, len: u64) {
        let id = self.file(path).expect("valid");
        let d = &mut self.files[id].data;
        let end = (off + len) as usize;
        if d.len() < end {
            d.resize(end, 0);
        }
        for (b, v) in d[off as usize..end].iter_mut().zip(fill(k, off, len)) {
            *b = v;
        }
    }

    fn fallocate(&mut self, path: &[u8], mode: FallocMode, off: u64, len: u64) {
        let id = self.file(path).expect("valid");
        let d = &mut self.files[id].data;
        let end = (off + len) as usize;
        let grow = matches!(mode, FallocMode::Alloc | FallocMode::Zero);
        if grow && d.len() < end {
            d.resize(end, 0);
        }
        if matches!(mode, FallocMode::Punch | FallocMode::Zero) {
            let stop = end.min(d.len());
            if (off as usize) < stop {
                d[off as usize..stop].fill(0);
            }
        }
    }

    fn rename(&mut self, from: &[u8], to: &[u8]) {
        let mut prefix = from.to_vec();
        prefix.push(b'/');
        let moved: Vec<(Vec<u8>, Node)> = self
            .paths
            .iter()
            .filter(|(p, _)| *p == from || p.starts_with(&prefix))
            .map(|(p, n)| (p.clone(), n.clone()))
            .collect();
        self.paths.remove(to);
        for (p, n) in moved {
            self.paths.remove(&p);
            let mut q = to.to_vec();
            q.extend_from_slice(&p[from.len()..]);
            self.paths.insert(q, n);
        }
    }
}

fn user(name: &[u8]) -> Vec<u8> {
    let mut n = b"user.".to_vec();
    n.extend_from_slice(name);
    n
}

/// Every operation the generator draws from, for the tree `m` (only valid ones).
pub fn candidates(m: &Model) -> Vec<Op> {
    let p = |s: &str| s.as_bytes().to_vec();
    let files: Vec<Vec<u8>> = [
        "/A/foo", "/bar", "/new", "/A/new", "/B/C/new", "/B/bar", "/B/link",
    ]
    .iter()
    .map(|s| p(s))
    .filter(|f| m.file(f).is_some())
    .collect();
    let mut ops = Vec::new();
    for f in ["/new", "/A/new", "/B/C/new"] {
        ops.push(Op::Create(p(f)));
    }
    for d in ["/D", "/A/E"] {
        ops.push(Op::Mkdir(p(d)));
    }
    ops.push(Op::Symlink {
        path: p("/A/sym"),
        target: p("../bar"),
    });
    ops.push(Op::Symlink {
        path: p("/slow"),
        target: vec![b'x'; 200],
    });
    for f in &files {
        file_ops(f, &mut ops);
    }
    for (a, b) in [
        ("/A/foo", "/B/link"),
        ("/bar", "/A/bar2"),
        ("/new", "/B/C/link"),
    ] {
        ops.push(Op::Link {
            from: p(a),
            to: p(b),
        });
    }
    for (a, b) in [
        ("/bar", "/B/bar"),
        ("/A/foo", "/bar"),
        ("/new", "/A/foo"),
        ("/A", "/B/C/A"),
        ("/B/C", "/D"),
        ("/A/new", "/B/new2"),
    ] {
        ops.push(Op::Rename {
            from: p(a),
            to: p(b),
        });
    }
    for d in ["/B/C", "/D", "/A/E"] {
        ops.push(Op::Rmdir(p(d)));
    }
    ops.retain(|o| m.valid(o));
    ops
}

/// The data and xattr operations on file `f`.
fn file_ops(f: &[u8], ops: &mut Vec<Op>) {
    let path = || f.to_vec();
    for (off, len) in [(0, 4096), (2000, 100), (9000, 30_000), (200_000, 5000)] {
        ops.push(Op::Write {
            path: path(),
            off,
            len,
        });
    }
    for len in [10, 5000, 70_000] {
        ops.push(Op::Append { path: path(), len });
    }
    for size in [0, 100, 5000, 40_000] {
        ops.push(Op::Truncate { path: path(), size });
    }
    for (mode, off, len) in [
        (FallocMode::Alloc, 0, 50_000),
        (FallocMode::AllocKeepSize, 8192, 40_000),
        (FallocMode::Punch, 1024, 4096),
        (FallocMode::Zero, 100, 6000),
    ] {
        ops.push(Op::Fallocate {
            path: path(),
            mode,
            off,
            len,
        });
    }
    ops.push(Op::Unlink(path()));
    ops.push(Op::SetXattr {
        path: path(),
        name: b"small".to_vec(),
        len: 20,
    });
    ops.push(Op::SetXattr {
        path: path(),
        name: b"big".to_vec(),
        len: 700,
    });
    for name in ["small", "big"] {
        ops.push(Op::RemoveXattr {
            path: path(),
            name: name.as_bytes().to_vec(),
        });
    }
}

/// The persistence calls that may follow `op`.
pub fn persists(op: &Op) -> Vec<Persist> {
    let target = match op {
        Op::Create(p) | Op::Mkdir(p) => Some(p.clone()),
        Op::Write { path, .. }
        | Op::Append { path, .. }
        | Op::Truncate { path, .. }
        | Op::Fallocate { path, .. }
        | Op::SetXattr { path, .. }
        | Op::RemoveXattr { path, .. } => Some(path.clone()),
        Op::Link { to, .. } | Op::Rename { to, .. } => Some(to.clone()),
        Op::Unlink(p) | Op::Rmdir(p) | Op::Symlink { path: p, .. } => Some(parent(p).to_vec()),
    };
    let mut out = vec![Persist::None, Persist::Sync];
    if let Some(t) = target {
        out.push(Persist::Fsync(t.clone()));
        out.push(Persist::Fdatasync(t));
    }
    out
}

/// Every one-operation workload (B3's seq-1): each candidate on the base tree with each
/// persistence call after it.
pub fn seq1() -> Vec<Vec<Step>> {
    let base = Model::base();
    let mut out = Vec::new();
    for op in candidates(&base) {
        for persist in persists(&op) {
            out.push(vec![Step {
                op: op.clone(),
                persist,
            }]);
        }
    }
    out
}

/// `n` seeded random workloads of `len` steps; the last step always persists.
pub fn random(seed: u64, n: usize, len: usize) -> Vec<Vec<Step>> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    while out.len() < n {
        let mut m = Model::base();
        let mut steps = Vec::new();
        for k in 0..len {
            let ops = candidates(&m);
            let Some(op) = rng.pick(&ops).cloned() else {
                break;
            };
            let mut ps = persists(&op);
            if k + 1 == len {
                ps.retain(|p| *p != Persist::None);
            }
            let persist = rng.pick(&ps).cloned().unwrap_or(Persist::Sync);
            m.apply(k as u64 + 1, &op);
            steps.push(Step { op, persist });
        }
        out.push(steps);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_renames_move_subtrees_and_replace_files() {
        let mut m = Model::base();
        m.apply(
            1,
            &Op::Rename {
                from: b"/A".to_vec(),
                to: b"/B/C/A".to_vec(),
            },
        );
        assert!(m.paths.contains_key(&b"/B/C/A/foo"[..]));
        assert!(!m.paths.contains_key(&b"/A/foo"[..]));
        m.apply(
            2,
            &Op::Rename {
                from: b"/B/C/A/foo".to_vec(),
                to: b"/bar".to_vec(),
            },
        );
        assert_eq!(m.paths.get(&b"/bar"[..]), Some(&Node::File(0)));
        assert!(!m.valid(&Op::Rename {
            from: b"/B".to_vec(),
            to: b"/B/C/X".to_vec(),
        }));
    }

    #[test]
    fn seq1_covers_every_kind_and_random_workloads_are_valid() {
        let w = seq1();
        assert!(w.len() > 150, "{}", w.len());
        for (i, steps) in random(9, 40, 3).iter().enumerate() {
            let mut m = Model::base();
            for (k, s) in steps.iter().enumerate() {
                assert!(m.valid(&s.op), "workload {i} step {k}: {:?}", s.op);
                m.apply(k as u64 + 1, &s.op);
            }
            assert_ne!(steps.last().unwrap().persist, Persist::None);
        }
    }

    #[test]
    fn patterns_are_never_zero_and_differ_by_operation() {
        assert!((0..5000).all(|i| pattern(3, i) != 0));
        assert!((0..100).any(|i| pattern(3, i) != pattern(4, i)));
    }
}
