//! Crash checking of usfs's read-write ext4 volume: a [`workload`](super::workload) is
//! run on `usfs_ext4::rw::Ext4Rw` over the crash recorder, and each crash state of the
//! recording is recovered three ways and judged against the workload's model.
//!
//! What a state must show (usfs's promise; stronger than POSIX's for fsync, as ext4's):
//! - recovered by usfs (a read-write open replays the journal, then a clean close),
//!   `e2fsck -fn` finds nothing; recovered by `e2fsck -E journal_only -y`, likewise; a
//!   kernel mount (when asked) replays it too and e2fsck finds nothing after;
//! - the three recoveries show the same tree;
//! - that tree is the model after some step `j` at or after the last step whose
//!   persistence call (fsync, fdatasync, sync) had returned before the crash: the same
//!   names, kinds, sizes, symlink targets, `user.` xattrs and hard links (metadata is
//!   journaled, and transactions commit between operations);
//! - every byte of every file is the byte the model has there after step `j` or after a
//!   later step (data reaches the image before the metadata that makes it visible, and
//!   overwrites of allocated blocks go in place, as with ext4's data=ordered). A byte no
//!   step ever wrote there (a stale or another file's block) fails.

use super::workload::{FallocMode, FileData, Model, Node, Op, Persist, Step};
use super::{check, copy_sparse};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use usfs_dev::record::{CrashState, Log};
use usfs_dev::{FileDevice, Recorder};
use usfs_ext4::rw::Ext4Rw;
use usfs_fs::{
    path::resolve, Fallocate, FileSystem, FileSystemWrite, FileType, Ino, NewNode, RenameFlags,
    SetAttr,
};

/// A workload run on the recorder.
pub struct Recorded {
    /// Every write and flush from the read-write open to the close.
    pub log: Log,
    /// The model after each step (`snaps[0]` is the base tree).
    pub snaps: Vec<Model>,
    /// For step `j` (index `j - 1`): the flushes logged when its persistence call
    /// returned (None: no persistence call).
    pub durable: Vec<Option<usize>>,
}

/// What a regular file, directory or symlink of a recovered tree holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A regular file: its bytes and `user.` xattrs.
    File(FileData),
    /// A directory.
    Dir,
    /// A symbolic link's target.
    Symlink(Vec<u8>),
    /// Anything else.
    Other,
}

/// A recovered tree: path -> (inode number, contents); `/lost+found` left out.
pub type Tree = BTreeMap<Vec<u8>, (u64, Seen)>;

type Res<T> = Result<T, String>;

fn split(path: &[u8]) -> (&[u8], &[u8]) {
    let i = path.iter().rposition(|&b| b == b'/').expect("absolute");
    (if i == 0 { b"/" } else { &path[..i] }, &path[i + 1..])
}

fn ino_of(fs: &dyn FileSystem, path: &[u8]) -> Res<Ino> {
    resolve(fs, path, false).map_err(|e| format!("{}: {e}", crate::escape(path)))
}

/// Runs `op` (number `k`) on `fs`.
fn run_op(fs: &Ext4Rw, k: u64, op: &Op) -> usfs_fs::Result<()> {
    let at = |p: &[u8]| resolve(fs, p, false);
    let file = NewNode {
        file_type: FileType::Regular,
        perm: 0o644,
        uid: 0,
        gid: 0,
        rdev: 0,
    };
    let write = |p: &[u8], off: u64, len: u64| -> usfs_fs::Result<()> {
        let data: Vec<u8> = (off..off + len)
            .map(|i| super::workload::pattern(k, i))
            .collect();
        let ino = at(p)?;
        let mut done = 0;
        while done < data.len() {
            done += fs.write_at(ino, off + done as u64, &data[done..])?;
        }
        Ok(())
    };
    match op {
        Op::Create(p) => {
            let (d, n) = split(p);
            fs.create(at(d)?, n, file).map(drop)
        }
        Op::Mkdir(p) => {
            let (d, n) = split(p);
            let node = NewNode {
                file_type: FileType::Directory,
                perm: 0o755,
                ..file
            };
            fs.mkdir(at(d)?, n, node).map(drop)
        }
        Op::Symlink { path, target } => {
            let (d, n) = split(path);
            fs.symlink(at(d)?, n, target, 0, 0).map(drop)
        }
        Op::Write { path, off, len } => write(path, *off, *len),
        Op::Append { path, len } => {
            let size = fs.getattr(at(path)?)?.size;
            write(path, size, *len)
        }
        Op::Truncate { path, size } => {
            let attr = SetAttr {
                size: Some(*size),
                ..SetAttr::default()
            };
            fs.setattr(at(path)?, attr).map(drop)
        }
        Op::Fallocate {
            path,
            mode,
            off,
            len,
        } => {
            let m = match mode {
                FallocMode::Alloc => Fallocate::Allocate { keep_size: false },
                FallocMode::AllocKeepSize => Fallocate::Allocate { keep_size: true },
                FallocMode::Punch => Fallocate::PunchHole,
                FallocMode::Zero => Fallocate::ZeroRange { keep_size: false },
            };
            fs.fallocate(at(path)?, m, *off, *len)
        }
        Op::Link { from, to } => {
            let (d, n) = split(to);
            fs.link(at(from)?, at(d)?, n).map(drop)
        }
        Op::Unlink(p) => {
            let (d, n) = split(p);
            fs.unlink(at(d)?, n)
        }
        Op::Rmdir(p) => {
            let (d, n) = split(p);
            fs.rmdir(at(d)?, n)
        }
        Op::Rename { from, to } => {
            let (d, n) = split(from);
            let (d2, n2) = split(to);
            fs.rename(at(d)?, n, at(d2)?, n2, RenameFlags::default())
        }
        Op::SetXattr { path, name, len } => {
            let mut full = b"user.".to_vec();
            full.extend_from_slice(name);
            let value: Vec<u8> = (0..*len).map(|i| super::workload::pattern(k, i)).collect();
            fs.set_xattr(at(path)?, &full, &value)
        }
        Op::RemoveXattr { path, name } => {
            let mut full = b"user.".to_vec();
            full.extend_from_slice(name);
            fs.remove_xattr(at(path)?, &full)
        }
    }
}

/// Copies `base` to `work` and runs `steps` on it through the recorder: the log, the
/// model after each step, and when each step became durable.
pub fn record(base: &Path, work: &Path, steps: &[Step]) -> Res<Recorded> {
    copy_sparse(base, work).map_err(|e| format!("copy: {e}"))?;
    let dev = FileDevice::open(work, true).map_err(|e| format!("open: {e}"))?;
    let rec = Arc::new(Recorder::new(Box::new(dev)));
    let fs = Ext4Rw::open(Box::new(rec.clone())).map_err(|e| format!("rw open: {e}"))?;
    let mut snaps = vec![Model::base()];
    let mut durable = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let k = i as u64 + 1;
        run_op(&fs, k, &s.op).map_err(|e| format!("step {k} {:?}: {e}", s.op))?;
        let mut m = snaps.last().expect("base").clone();
        m.apply(k, &s.op);
        snaps.push(m);
        let done: Option<Res<()>> = match &s.persist {
            Persist::None => None,
            Persist::Sync => Some(fs.sync().map_err(|e| e.to_string())),
            Persist::Fsync(p) => {
                Some(ino_of(&fs, p).and_then(|i| fs.fsync(i, false).map_err(|e| e.to_string())))
            }
            Persist::Fdatasync(p) => {
                Some(ino_of(&fs, p).and_then(|i| fs.fsync(i, true).map_err(|e| e.to_string())))
            }
        };
        durable.push(match done {
            None => None,
            Some(r) => {
                r.map_err(|e| format!("step {k} {:?}: {e}", s.persist))?;
                Some(rec.log().flushes())
            }
        });
    }
    fs.shutdown().map_err(|e| format!("close: {e}"))?;
    drop(fs);
    Ok(Recorded {
        log: rec.log(),
        snaps,
        durable,
    })
}

/// Reads the whole tree of `fs` (bounded: a corrupt image cannot make it run forever).
pub fn read_tree(fs: &dyn FileSystem) -> Res<Tree> {
    let mut tree = Tree::new();
    let mut stack = vec![(fs.root(), Vec::new())];
    while let Some((dir, path)) = stack.pop() {
        let mut entries = Vec::new();
        fs.readdir(dir, 0, &mut |e, _| {
            entries.push(e);
            entries.len() < 10_000
        })
        .map_err(|e| format!("readdir {}: {e}", crate::escape(&path)))?;
        for e in entries {
            let mut p = path.clone();
            p.push(b'/');
            p.extend_from_slice(&e.name);
            if p == b"/lost+found" {
                continue;
            }
            let seen = read_one(fs, e.ino, &p)?;
            if seen == Seen::Dir {
                if p.len() > 512 {
                    return Err(format!("{}: too deep", crate::escape(&p)));
                }
                stack.push((e.ino, p.clone()));
            }
            tree.insert(p, (e.ino, seen));
            if tree.len() > 10_000 {
                return Err("more than 10000 entries".into());
            }
        }
    }
    Ok(tree)
}

fn read_one(fs: &dyn FileSystem, ino: Ino, p: &[u8]) -> Res<Seen> {
    let err = |e: usfs_fs::Error| format!("{}: {e}", crate::escape(p));
    let meta = fs.getattr(ino).map_err(err)?;
    Ok(match meta.file_type {
        FileType::Directory => Seen::Dir,
        FileType::Symlink => Seen::Symlink(fs.readlink(ino).map_err(err)?),
        FileType::Regular => {
            if meta.size > 64 << 20 {
                return Err(format!("{}: {} bytes", crate::escape(p), meta.size));
            }
            let mut data = vec![0u8; meta.size as usize];
            let mut done = 0;
            while done < data.len() {
                let n = fs
                    .read_at(ino, done as u64, &mut data[done..])
                    .map_err(err)?;
                if n == 0 {
                    return Err(format!("{}: short read at {done}", crate::escape(p)));
                }
                done += n;
            }
            let mut xattrs = BTreeMap::new();
            for name in fs.list_xattrs(ino).map_err(err)? {
                if name.starts_with(b"user.") {
                    let v = fs.get_xattr(ino, &name).map_err(err)?;
                    xattrs.insert(name, v);
                }
            }
            Seen::File(FileData { data, xattrs })
        }
        _ => Seen::Other,
    })
}

/// Reads the tree of a mounted directory (the kernel's view), as [`read_tree`] does.
pub fn read_host_tree(root: &Path) -> Res<Tree> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let mut tree = Tree::new();
    let mut stack = vec![(root.to_path_buf(), Vec::new())];
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    while let Some((dir, path)) = stack.pop() {
        for e in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let e = e.map_err(|e| io(&dir, e))?;
            let mut p = path.clone();
            p.push(b'/');
            p.extend_from_slice(e.file_name().as_bytes());
            if p == b"/lost+found" {
                continue;
            }
            let full = e.path();
            let md = std::fs::symlink_metadata(&full).map_err(|e| io(&full, e))?;
            let seen = if md.is_dir() {
                stack.push((full.clone(), p.clone()));
                Seen::Dir
            } else if md.file_type().is_symlink() {
                let t = std::fs::read_link(&full).map_err(|e| io(&full, e))?;
                Seen::Symlink(t.as_os_str().as_bytes().to_vec())
            } else if md.is_file() {
                let data = std::fs::read(&full).map_err(|e| io(&full, e))?;
                let mut xattrs = BTreeMap::new();
                for name in crate::xattr::list(&full).map_err(|e| io(&full, e))? {
                    if name.starts_with(b"user.") {
                        let v = crate::xattr::get(&full, &name).map_err(|e| io(&full, e))?;
                        xattrs.insert(name, v);
                    }
                }
                Seen::File(FileData { data, xattrs })
            } else {
                Seen::Other
            };
            tree.insert(p, (md.ino(), seen));
        }
    }
    Ok(tree)
}

/// The tree of an image file through usfs's reader (read-only; a dirty journal is
/// replayed in memory).
pub fn image_tree(image: &Path) -> Res<Tree> {
    let dev = FileDevice::open(image, false).map_err(|e| format!("open: {e}"))?;
    let fs = usfs_ext4::Ext4::open(Box::new(dev)).map_err(|e| format!("usfs open: {e}"))?;
    read_tree(&fs)
}

/// Does `tree` show the model after step `j` (data allowed from later steps)?
fn matches_step(tree: &Tree, rec: &Recorded, j: usize) -> Res<()> {
    let snap = &rec.snaps[j];
    let want: Vec<&Vec<u8>> = snap.paths.keys().collect();
    let got: Vec<&Vec<u8>> = tree.keys().collect();
    if want != got {
        let extra = got.iter().find(|p| !snap.paths.contains_key(**p));
        let missing = want.iter().find(|p| !tree.contains_key(**p));
        return Err(format!(
            "names differ: extra {:?}, missing {:?}",
            extra.map(|p| crate::escape(p)),
            missing.map(|p| crate::escape(p))
        ));
    }
    let mut ino_of_file: BTreeMap<usize, u64> = BTreeMap::new();
    for (path, node) in &snap.paths {
        let (ino, seen) = &tree[path];
        let p = crate::escape(path);
        match (node, seen) {
            (Node::Dir, Seen::Dir) => {}
            (Node::Symlink(t), Seen::Symlink(u)) if t == u => {}
            (Node::File(id), Seen::File(f)) => {
                if *ino_of_file.entry(*id).or_insert(*ino) != *ino {
                    return Err(format!("{p}: hard links split"));
                }
                file_matches(f, rec, j, *id).map_err(|e| format!("{p}: {e}"))?;
            }
            _ => return Err(format!("{p}: {node:?} shows as {seen:?}")),
        }
    }
    let distinct: std::collections::BTreeSet<u64> = ino_of_file.values().copied().collect();
    if distinct.len() != ino_of_file.len() {
        return Err("two files share an inode".into());
    }
    Ok(())
}

fn file_matches(f: &FileData, rec: &Recorded, j: usize, id: usize) -> Res<()> {
    let want = &rec.snaps[j].files[id];
    if f.data.len() != want.data.len() {
        return Err(format!(
            "{} bytes, expected {}",
            f.data.len(),
            want.data.len()
        ));
    }
    if f.xattrs != want.xattrs {
        return Err(format!(
            "xattrs {:?}, expected {:?}",
            f.xattrs
                .keys()
                .map(|k| crate::escape(k))
                .collect::<Vec<_>>(),
            want.xattrs
                .keys()
                .map(|k| crate::escape(k))
                .collect::<Vec<_>>()
        ));
    }
    let later: Vec<&[u8]> = rec.snaps[j..]
        .iter()
        .filter_map(|s| s.files.get(id).map(|f| &f.data[..]))
        .collect();
    for (i, &b) in f.data.iter().enumerate() {
        if !later.iter().any(|v| v.get(i) == Some(&b)) {
            return Err(format!(
                "byte {i} is {b:#04x}, never written there (expected {:#04x})",
                want.data[i]
            ));
        }
    }
    Ok(())
}

/// The first step a state must show at least: the last step whose persistence call had
/// returned when `state` crashed.
pub fn durable_step(rec: &Recorded, state: &CrashState) -> usize {
    rec.durable
        .iter()
        .enumerate()
        .filter(|(_, d)| d.is_some_and(|f| f <= state.epoch))
        .map(|(i, _)| i + 1)
        .max()
        .unwrap_or(0)
}

/// Finds the step `tree` shows, at or after `from`.
pub fn judge(tree: &Tree, rec: &Recorded, from: usize) -> Res<usize> {
    let mut first = None;
    for j in from..rec.snaps.len() {
        match matches_step(tree, rec, j) {
            Ok(()) => return Ok(j),
            Err(e) => {
                first.get_or_insert(format!("against step {j}: {e}"));
            }
        }
    }
    Err(format!(
        "shows no step from {from} on (durable); {}",
        first.unwrap_or_default()
    ))
}

/// How [`check_state`] recovers.
#[derive(Clone, Debug, Default)]
pub struct Recover {
    /// Also mount a copy with the kernel (root) at this directory and compare its view.
    pub kernel_mount: Option<std::path::PathBuf>,
}

/// Checks one crash state (the image at `img`, which this changes) of `rec`.
pub fn check_state(img: &Path, state: &CrashState, rec: &Recorded, how: &Recover) -> Res<()> {
    let from = durable_step(rec, state);
    let side = img.with_extension("usfs.img");
    copy_sparse(img, &side).map_err(|e| format!("copy: {e}"))?;
    let kernel = match &how.kernel_mount {
        Some(mnt) => Some(kernel_view(img, mnt)?),
        None => None,
    };
    // usfs's recovery: a read-write open replays the journal, the close marks it clean.
    let dev = FileDevice::open(&side, true).map_err(|e| format!("open: {e}"))?;
    let fs = Ext4Rw::open(Box::new(dev)).map_err(|e| format!("usfs recovery: {e}"))?;
    fs.shutdown()
        .map_err(|e| format!("usfs recovery close: {e}"))?;
    drop(fs);
    check::fsck_clean(&side).map_err(|e| format!("after usfs recovery: {e}"))?;
    let ours = image_tree(&side).map_err(|e| format!("after usfs recovery: {e}"))?;
    let _ = std::fs::remove_file(&side);
    let j = judge(&ours, rec, from).map_err(|e| format!("after usfs recovery: {e}"))?;
    // e2fsck's recovery.
    check::fsck_clean_after_replay(img).map_err(|e| format!("after e2fsck replay: {e}"))?;
    let theirs = image_tree(img).map_err(|e| format!("after e2fsck replay: {e}"))?;
    if theirs != ours {
        let j2 = judge(&theirs, rec, from);
        return Err(format!(
            "e2fsck's replay shows another tree than usfs's (step {j} vs {j2:?})"
        ));
    }
    if let Some((tree, copy)) = kernel {
        let same = tree.len() == ours.len()
            && tree
                .iter()
                .zip(&ours)
                .all(|(a, b)| a.0 == b.0 && a.1 .1 == b.1 .1);
        if !same {
            let jk = judge(&tree, rec, from);
            return Err(format!(
                "the kernel shows another tree (usfs: step {j}, kernel: {jk:?})"
            ));
        }
        check::fsck_clean(&copy).map_err(|e| format!("after a kernel mount: {e}"))?;
        let _ = std::fs::remove_file(&copy);
    }
    Ok(())
}

/// Mounts a copy of `img` with the kernel at `mnt` (which replays the journal), reads
/// its tree and unmounts: the tree and the copy.
fn kernel_view(img: &Path, mnt: &Path) -> Res<(Tree, std::path::PathBuf)> {
    let copy = img.with_extension("kernel.img");
    copy_sparse(img, &copy).map_err(|e| format!("copy: {e}"))?;
    std::fs::create_dir_all(mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
    let ok = Command::new("mount")
        .args(["-t", "ext4", "-o", "loop"])
        .arg(&copy)
        .arg(mnt)
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("mount: {e}"))?;
    if !ok.status.success() {
        return Err(format!(
            "kernel mount failed: {}",
            String::from_utf8_lossy(&ok.stderr).trim()
        ));
    }
    let tree = read_host_tree(mnt);
    let mut unmounted = false;
    for _ in 0..50 {
        // Busy for a moment when another thread's child (between fork and exec) holds a
        // descriptor of the mount: retry quietly.
        let st = Command::new("umount")
            .arg(mnt)
            .stderr(Stdio::null())
            .status();
        if st.is_ok_and(|s| s.success()) {
            unmounted = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if !unmounted {
        let _ = Command::new("umount").arg("-l").arg(mnt).status();
        return Err("kernel umount failed".into());
    }
    Ok((tree.map_err(|e| format!("kernel view: {e}"))?, copy))
}

/// Makes the base image of the workloads at `image`: the [`Model::base`] tree written
/// to `src` and given to `mke2fs -t ext4 -d` (8 MiB, block size `bs`, extra mke2fs
/// `args`; fixed UUID and hash seed so runs repeat).
pub fn make_base(src: &Path, image: &Path, bs: u32, args: &[&str]) -> Res<()> {
    use std::os::unix::ffi::OsStrExt;
    let m = Model::base();
    for (path, node) in &m.paths {
        let p = src.join(std::ffi::OsStr::from_bytes(&path[1..]));
        let r = match node {
            Node::Dir => std::fs::create_dir_all(&p),
            Node::File(id) => std::fs::create_dir_all(p.parent().expect("in src"))
                .and_then(|()| std::fs::write(&p, &m.files[*id].data)),
            Node::Symlink(t) => std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(t), &p),
        };
        r.map_err(|e| format!("{}: {e}", p.display()))?;
    }
    let out = Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-b", &bs.to_string()])
        .args(["-U", "6f1c2e80-4d3a-4c51-9b1e-0a2b3c4d5e6f"])
        .args(["-E", "hash_seed=0b7e1d52-9a3c-4f60-8d21-7c6b5a493827"])
        .args(args)
        .arg("-d")
        .arg(src)
        .arg(image)
        .arg("8M")
        .output()
        .map_err(|e| format!("mke2fs: {e}"))?;
    if !out.status.success() {
        return Err(format!("mke2fs: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}
