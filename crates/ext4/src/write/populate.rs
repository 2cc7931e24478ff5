//! Filling a new file system from a directory tree (mkfs.ext4 -d), in three phases:
//!
//! 1. scan: walk the source (lstat, xattrs, symlink targets, data ranges of sparse files)
//!    into an in-memory tree, and refuse up front (ENOSPC) a tree that cannot fit;
//! 2. place: depth first, give every entry its inode (flex_bg/Orlov placement) and every
//!    file its blocks in one go, knowing its size (delayed allocation), build directories
//!    (htree when large), symlinks, device nodes and xattrs — all in memory except
//!    directory and tree blocks;
//! 3. copy: file data is read from the source and written to the image by parallel
//!    workers, in physical order, contiguous pieces coalesced into large writes.

use super::dir::DirEntryIn;
use super::format::lost_found_entry;
use super::writer::{no_space, Writer};
use crate::alloc::{plan_extents, InodeKind, Mapping};
use crate::format::features::ro_compat;
use crate::format::inode::ROOT_INO;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use usfs_fs::{Error, Result, Timestamp};

/// How to populate.
#[derive(Clone, Debug, Default)]
pub struct PopulateOptions {
    /// Make every file owned by root (uid and gid 0).
    pub all_root: bool,
    /// Worker threads scanning the source and copying data (0: four per CPU, 4..=16).
    pub threads: usize,
}

/// What populate did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PopulateReport {
    /// Regular files (inodes).
    pub files: u64,
    /// Directories (besides the root).
    pub dirs: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Device nodes, fifos and sockets.
    pub specials: u64,
    /// Extra hard links (entries pointing at an inode already made).
    pub hardlinks: u64,
    /// Bytes of file data copied.
    pub bytes: u64,
    /// Extents of regular files.
    pub extents: u64,
    /// Xattr blocks shared by more than one inode.
    pub xattr_blocks: u64,
    /// Wall time of each phase: scan, place, copy (milliseconds).
    pub phase_ms: [u64; 3],
}

impl std::fmt::Display for PopulateReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} files, {} directories, {} symlinks, {} special files, {} extra hard links, {} bytes in {} extents, {} shared xattr blocks",
            self.files,
            self.dirs,
            self.symlinks,
            self.specials,
            self.hardlinks,
            self.bytes,
            self.extents,
            self.xattr_blocks
        )
    }
}

/// The attributes of a source entry.
struct Meta {
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    atime: Timestamp,
    mtime: Timestamp,
    ctime: Timestamp,
    rdev: u64,
    dev: u64,
    ino: u64,
    nlink: u64,
    blocks: u64,
}

enum Kind {
    Dir(Vec<usize>),
    /// Data ranges in bytes (start, end), sorted.
    File(Vec<(u64, u64)>),
    Symlink(Vec<u8>),
    Special,
}

struct Node {
    name: Vec<u8>,
    path: PathBuf,
    meta: Meta,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    kind: Kind,
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        e.kind(),
        format!("{}: {e}", path.display()),
    ))
}

fn ts(sec: i64, nsec: i64) -> Timestamp {
    Timestamp {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

fn meta_of(m: &std::fs::Metadata) -> Meta {
    Meta {
        mode: m.mode(),
        uid: m.uid(),
        gid: m.gid(),
        size: m.size(),
        atime: ts(m.atime(), m.atime_nsec()),
        mtime: ts(m.mtime(), m.mtime_nsec()),
        ctime: ts(m.ctime(), m.ctime_nsec()),
        rdev: m.rdev(),
        dev: m.dev(),
        ino: m.ino(),
        nlink: m.nlink(),
        blocks: m.blocks(),
    }
}

/// The extended attributes of `path` (not following a symlink).
fn read_xattrs(path: &Path) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::Invalid)?;
    let mut names = vec![0u8; 1024];
    let n = loop {
        // SAFETY: c is a valid NUL-terminated path; names is a writable buffer of the
        // given length.
        let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
        if n >= 0 {
            break n as usize;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ERANGE) => names.resize(names.len() * 4, 0),
            Some(libc::ENOTSUP) => return Ok(Vec::new()),
            _ => return Err(io_err(path, e)),
        }
        if names.len() > 1 << 20 {
            return Err(io_err(path, e));
        }
    };
    let mut out = Vec::new();
    for name in names[..n].split(|&b| b == 0).filter(|s| !s.is_empty()) {
        let cn = CString::new(name).map_err(|_| Error::Invalid)?;
        let mut val = vec![0u8; 256];
        let len = loop {
            // SAFETY: valid C strings and a writable buffer of the given length.
            let r = unsafe {
                libc::lgetxattr(c.as_ptr(), cn.as_ptr(), val.as_mut_ptr().cast(), val.len())
            };
            if r >= 0 {
                break r as usize;
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) && val.len() < 1 << 20 {
                val.resize(val.len() * 8, 0);
                continue;
            }
            return Err(io_err(path, e));
        };
        val.truncate(len);
        out.push((name.to_vec(), val));
    }
    Ok(out)
}

/// Data ranges of a regular file: the whole file unless it has holes (fewer blocks
/// than its size), then SEEK_DATA / SEEK_HOLE.
fn data_ranges(path: &Path, m: &Meta) -> Result<Vec<(u64, u64)>> {
    if m.size == 0 {
        return Ok(Vec::new());
    }
    if m.blocks * 512 >= m.size {
        return Ok(vec![(0, m.size)]);
    }
    let f = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    let mut out = Vec::new();
    let mut pos: i64 = 0;
    while (pos as u64) < m.size {
        // SAFETY: fd is an open descriptor owned by `f` for the duration of the call.
        let d = unsafe { libc::lseek(fd, pos, libc::SEEK_DATA) };
        if d < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ENXIO) {
                break;
            }
            // No SEEK_DATA support: copy everything.
            return Ok(vec![(0, m.size)]);
        }
        // SAFETY: as above.
        let h = unsafe { libc::lseek(fd, d, libc::SEEK_HOLE) };
        let h = if h < 0 { m.size as i64 } else { h };
        out.push((d as u64, (h as u64).min(m.size)));
        pos = h;
    }
    Ok(out)
}

/// The entries of one source directory, sorted by name, with their attributes.
fn scan_dir(dpath: &Path) -> Result<Vec<Node>> {
    let mut kids: Vec<(Vec<u8>, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(dpath).map_err(|e| io_err(dpath, e))? {
        let e = e.map_err(|e| io_err(dpath, e))?;
        kids.push((e.file_name().as_bytes().to_vec(), e.path()));
    }
    kids.sort();
    let mut out = Vec::with_capacity(kids.len());
    for (name, path) in kids {
        if name.len() > 255 {
            return Err(Error::NameTooLong);
        }
        let m = std::fs::symlink_metadata(&path).map_err(|e| io_err(&path, e))?;
        let meta = meta_of(&m);
        let ft = m.file_type();
        let kind = if ft.is_dir() {
            Kind::Dir(Vec::new())
        } else if ft.is_file() {
            Kind::File(data_ranges(&path, &meta)?)
        } else if ft.is_symlink() {
            let t = std::fs::read_link(&path).map_err(|e| io_err(&path, e))?;
            Kind::Symlink(t.as_os_str().as_bytes().to_vec())
        } else {
            Kind::Special
        };
        let xattrs = read_xattrs(&path)?;
        out.push(Node {
            name,
            path,
            meta,
            xattrs,
            kind,
        });
    }
    Ok(out)
}

/// Work shared by the scanning threads: directories to read, how many are being read.
struct ScanQueue {
    todo: Vec<usize>,
    busy: usize,
    failed: Option<Error>,
}

/// Phase 1: the source tree as nodes (index 0 is the root). Directories are read by
/// `threads` workers (the system calls dominate); where a node lands in the vector does
/// not matter, each directory keeps its children sorted by name.
fn scan(src: &Path, threads: usize) -> Result<Vec<Node>> {
    use std::sync::Condvar;
    let m = std::fs::symlink_metadata(src).map_err(|e| io_err(src, e))?;
    if !m.is_dir() {
        return Err(Error::NotDir);
    }
    let nodes = Mutex::new(vec![Node {
        name: Vec::new(),
        path: src.to_path_buf(),
        meta: meta_of(&m),
        xattrs: read_xattrs(src)?,
        kind: Kind::Dir(Vec::new()),
    }]);
    let queue = Mutex::new(ScanQueue {
        todo: vec![0],
        busy: 0,
        failed: None,
    });
    let wake = Condvar::new();
    let lock_err = || Error::Io(std::io::Error::other("scan: a worker panicked"));
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let d = {
                    let Ok(mut q) = queue.lock() else { return };
                    loop {
                        if q.failed.is_some() {
                            return;
                        }
                        if let Some(d) = q.todo.pop() {
                            q.busy += 1;
                            break d;
                        }
                        if q.busy == 0 {
                            return;
                        }
                        q = match wake.wait(q) {
                            Ok(q) => q,
                            Err(_) => return,
                        };
                    }
                };
                let path = match nodes.lock() {
                    Ok(n) => n[d].path.clone(),
                    Err(_) => return,
                };
                let result = scan_dir(&path);
                let Ok(mut q) = queue.lock() else { return };
                q.busy -= 1;
                match result {
                    Ok(kids) => {
                        let Ok(mut n) = nodes.lock() else { return };
                        let base = n.len();
                        let mut idx = Vec::with_capacity(kids.len());
                        for (i, k) in kids.into_iter().enumerate() {
                            if matches!(k.kind, Kind::Dir(_)) {
                                q.todo.push(base + i);
                            }
                            idx.push(base + i);
                            n.push(k);
                        }
                        n[d].kind = Kind::Dir(idx);
                    }
                    Err(e) => {
                        q.failed.get_or_insert(e);
                    }
                }
                wake.notify_all();
            });
        }
    });
    let q = queue.into_inner().map_err(|_| lock_err())?;
    if let Some(e) = q.failed {
        return Err(e);
    }
    nodes.into_inner().map_err(|_| lock_err())
}

/// Block ranges `(lblk, count)` covering byte ranges.
fn block_ranges(ranges: &[(u64, u64)], bs: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(s, e) in ranges {
        if e <= s {
            continue;
        }
        let (a, b) = (s / bs, e.div_ceil(bs));
        match out.last_mut() {
            Some(r) if r.0 + r.1 >= a => r.1 = r.1.max(b - r.0),
            _ => out.push((a, b - a)),
        }
    }
    out
}

/// An upper bound of the blocks and the number of inodes the tree needs.
fn estimate(nodes: &[Node], bs: u64) -> (u64, u64) {
    let mut blocks = 0u64;
    let mut inodes = 0u64;
    let mut seen = std::collections::HashSet::new();
    let per_leaf = (bs - 12) / 12;
    for n in nodes {
        if !matches!(n.kind, Kind::Dir(_))
            && n.meta.nlink > 1
            && !seen.insert((n.meta.dev, n.meta.ino))
        {
            continue;
        }
        inodes += 1;
        if !n.xattrs.is_empty() {
            blocks += 1;
        }
        blocks += match &n.kind {
            Kind::Dir(kids) => {
                let bytes: u64 = kids
                    .iter()
                    .map(|&k| ((8 + nodes[k].name.len() + 3) & !3) as u64)
                    .sum();
                let leaves = (bytes + 24).div_ceil(bs - 12) + 1;
                leaves + leaves.div_ceil(bs / 8) + 1
            }
            Kind::File(r) => {
                let b: u64 = block_ranges(r, bs).iter().map(|x| x.1).sum();
                let extents = block_ranges(r, bs).len() as u64 + b / 32768;
                b + if extents > 4 {
                    extents.div_ceil(per_leaf) + 1
                } else {
                    0
                }
            }
            Kind::Symlink(t) => u64::from(t.len() >= 60),
            Kind::Special => 0,
        };
    }
    (blocks, inodes)
}

/// Workers for scanning and copying: both wait on the source's disk more than they
/// compute, so four per CPU (4..=16) keep enough reads in flight.
fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cpus * 4).clamp(4, 16)
}

/// One piece of data to copy: `len` bytes at `src_off` of the file to byte `dst` of the
/// image.
struct Piece {
    src_off: u64,
    dst: u64,
    /// Bytes written: whole blocks.
    len: u64,
    /// Bytes of it read from the file (the rest is the zero tail of the last block).
    data: u64,
}

struct CopyJob {
    node: usize,
    pieces: Vec<Piece>,
}

/// Fills the file system of `w` (freshly formatted) with the tree at `src`. The root
/// directory takes the source root's attributes (its owner from -E root_owner when
/// given); lost+found is kept.
pub fn populate(w: &mut Writer, src: &Path, opts: &PopulateOptions) -> Result<PopulateReport> {
    let t0 = std::time::Instant::now();
    let threads = if opts.threads == 0 {
        default_threads()
    } else {
        opts.threads
    };
    let nodes = scan(src, threads)?;
    let t_scan = t0.elapsed();
    let bs = w.block_size() as u64;
    let (need_blocks, need_inodes) = estimate(&nodes, bs);
    if need_inodes > w.inodes.free_inodes() + 1 {
        return Err(no_space(
            "the source tree",
            format!(
                "needs {} inodes, the file system has {} free (use -N or -i)",
                need_inodes - 1,
                w.inodes.free_inodes()
            ),
        ));
    }
    if need_blocks > w.blocks.free_blocks() {
        return Err(no_space(
            "the source tree",
            format!(
                "needs up to {need_blocks} blocks of {bs} bytes, the file system has {} free",
                w.blocks.free_blocks()
            ),
        ));
    }
    let mut report = PopulateReport::default();
    let mut jobs = Vec::new();
    place(w, &nodes, opts, &mut report, &mut jobs)?;
    let t_place = t0.elapsed();
    copy(w, &nodes, jobs, opts.threads, &mut report)?;
    let t_copy = t0.elapsed();
    report.phase_ms = [
        t_scan.as_millis() as u64,
        (t_place - t_scan).as_millis() as u64,
        (t_copy - t_place).as_millis() as u64,
    ];
    report.xattr_blocks = w.xattr_blocks_shared();
    Ok(report)
}

fn set_attrs(w: &mut Writer, ino: u32, n: &Node, all_root: bool) {
    let isz = w.geo.inode_size as usize;
    let now = w.now;
    let mut i = w.inode_mut(ino);
    i.set_i_mode(n.meta.mode as u16);
    if !all_root {
        i.set_uid(n.meta.uid);
        i.set_gid(n.meta.gid);
    }
    i.set_times(n.meta.atime, n.meta.mtime, n.meta.ctime, now, isz);
}

fn file_type_code(k: &Kind, mode: u32) -> u8 {
    match k {
        Kind::Dir(_) => 2,
        Kind::File(_) => 1,
        Kind::Symlink(_) => 7,
        Kind::Special => match mode & libc::S_IFMT {
            libc::S_IFCHR => 3,
            libc::S_IFBLK => 4,
            libc::S_IFIFO => 5,
            _ => 6,
        },
    }
}

/// Phase 2.
fn place(
    w: &mut Writer,
    nodes: &[Node],
    opts: &PopulateOptions,
    report: &mut PopulateReport,
    jobs: &mut Vec<CopyJob>,
) -> Result<()> {
    let dir_nlink = w.geo.features.has_ro_compat(ro_compat::DIR_NLINK);
    let mut links: HashMap<(u64, u64), u32> = HashMap::new();
    // The root takes the source root's attributes.
    set_attrs(w, ROOT_INO, &nodes[0], opts.all_root);
    if let Some((uid, gid)) = w.root_owner {
        let mut r = w.inode_mut(ROOT_INO);
        r.set_uid(uid);
        r.set_gid(gid);
    }
    w.set_xattrs(ROOT_INO, &nodes[0].xattrs)?;
    let mut stack: Vec<(usize, u32, u32)> = vec![(0, ROOT_INO, ROOT_INO)];
    while let Some((d, dino, parent)) = stack.pop() {
        let Kind::Dir(kids) = &nodes[d].kind else {
            unreachable!("only directories are stacked")
        };
        let mut entries = Vec::with_capacity(kids.len() + 1);
        let mut subdirs = 0u64;
        if dino == ROOT_INO {
            entries.push(lost_found_entry());
            subdirs += 1;
        }
        let mut later = Vec::new();
        for &k in kids {
            let n = &nodes[k];
            let ft = file_type_code(&n.kind, n.meta.mode);
            let key = (n.meta.dev, n.meta.ino);
            if ft != 2 && n.meta.nlink > 1 {
                if let Some(&ino) = links.get(&key) {
                    let mut i = w.inode_mut(ino);
                    i.set_i_links_count(i.i_links_count().saturating_add(1));
                    entries.push(DirEntryIn {
                        name: n.name.clone(),
                        ino,
                        file_type: ft,
                    });
                    report.hardlinks += 1;
                    continue;
                }
            }
            let kind = match (&n.kind, dino == ROOT_INO) {
                (Kind::Dir(_), true) => InodeKind::TopDir,
                (Kind::Dir(_), false) => InodeKind::Dir,
                _ => InodeKind::File,
            };
            let ino = w.new_inode(kind, dino)?;
            set_attrs(w, ino, n, opts.all_root);
            w.inode_mut(ino).set_i_links_count(1);
            match &n.kind {
                Kind::Dir(_) => {
                    subdirs += 1;
                    report.dirs += 1;
                    later.push((k, ino));
                }
                Kind::File(ranges) => {
                    report.files += 1;
                    let br = block_ranges(ranges, w.block_size() as u64);
                    let goal = w.data_goal(ino, false);
                    let maps = plan_extents(&mut w.blocks, ino, goal, &br)
                        .map_err(|e| no_space(&n.path.display().to_string(), e))?;
                    w.set_extents(ino, &maps)?;
                    w.inode_mut(ino).set_size(n.meta.size);
                    report.extents += maps.len() as u64;
                    jobs.push(CopyJob {
                        node: k,
                        pieces: pieces(&maps, w.block_size() as u64, n.meta.size),
                    });
                }
                Kind::Symlink(t) => {
                    report.symlinks += 1;
                    w.write_symlink(ino, t)
                        .map_err(|e| Error::Incompatible(format!("{}: {e}", n.path.display())))?;
                }
                Kind::Special => {
                    report.specials += 1;
                    let t = n.meta.mode & libc::S_IFMT;
                    if t == libc::S_IFCHR || t == libc::S_IFBLK {
                        w.set_device(ino, libc::major(n.meta.rdev), libc::minor(n.meta.rdev));
                    }
                }
            }
            w.set_xattrs(ino, &n.xattrs)?;
            if ft != 2 && n.meta.nlink > 1 {
                links.insert(key, ino);
            }
            entries.push(DirEntryIn {
                name: n.name.clone(),
                ino,
                file_type: ft,
            });
        }
        w.write_dir(dino, parent, &entries, 1, true)?;
        let nl = 2 + subdirs;
        let nl = if nl >= 65000 && dir_nlink {
            1
        } else {
            nl.min(65000)
        };
        w.inode_mut(dino).set_i_links_count(nl as u16);
        for (k, ino) in later.into_iter().rev() {
            stack.push((k, ino, dino));
        }
    }
    Ok(())
}

/// The copy pieces of a file: whole blocks (the tail of the last block reads as zeros,
/// which it is on disk), so the pieces of consecutive files join into one write.
fn pieces(maps: &[Mapping], bs: u64, size: u64) -> Vec<Piece> {
    maps.iter()
        .filter_map(|m| {
            let off = m.lblk * bs;
            let end = ((m.lblk + m.len as u64) * bs).min(size.div_ceil(bs) * bs);
            (end > off).then_some(Piece {
                src_off: off,
                dst: m.pblk * bs,
                len: end - off,
                data: end.min(size).saturating_sub(off),
            })
        })
        .collect()
}

/// Phase 3: parallel copy. Workers take batches of jobs in order; within a batch,
/// pieces that are contiguous on the image are gathered into one write.
fn copy(
    w: &Writer,
    nodes: &[Node],
    jobs: Vec<CopyJob>,
    threads: usize,
    report: &mut PopulateReport,
) -> Result<()> {
    const BATCH: usize = 64;
    const BUF: usize = 4 << 20;
    let threads = if threads == 0 {
        default_threads()
    } else {
        threads
    };
    let next = AtomicUsize::new(0);
    let first_err: Mutex<Option<Error>> = Mutex::new(None);
    let copied = AtomicUsize::new(0);
    let dev = w.device();
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut buf: Vec<u8> = Vec::with_capacity(BUF);
                let mut buf_dst = 0u64;
                let flush = |buf: &mut Vec<u8>, dst: u64| -> Result<()> {
                    if !buf.is_empty() {
                        dev.write_at(buf, dst)?;
                        buf.clear();
                    }
                    Ok(())
                };
                let run = |buf: &mut Vec<u8>, buf_dst: &mut u64| -> Result<()> {
                    loop {
                        let i = next.fetch_add(BATCH, Ordering::Relaxed);
                        if i >= jobs.len() || first_err.lock().map(|e| e.is_some()).unwrap_or(true)
                        {
                            return flush(buf, *buf_dst);
                        }
                        for job in &jobs[i..(i + BATCH).min(jobs.len())] {
                            let path = &nodes[job.node].path;
                            let f = std::fs::OpenOptions::new()
                                .read(true)
                                .custom_flags(libc::O_NOATIME)
                                .open(path)
                                .or_else(|_| std::fs::File::open(path))
                                .map_err(|e| io_err(path, e))?;
                            for p in &job.pieces {
                                let mut done = 0u64;
                                while done < p.len {
                                    if buf.is_empty()
                                        || *buf_dst + buf.len() as u64 != p.dst + done
                                        || buf.len() >= BUF
                                    {
                                        flush(buf, *buf_dst)?;
                                        *buf_dst = p.dst + done;
                                    }
                                    let room = (BUF - buf.len().min(BUF)).max(1 << 16) as u64;
                                    let n = (p.len - done).min(room) as usize;
                                    let at = buf.len();
                                    buf.resize(at + n, 0);
                                    // Only the file's bytes are read; past them (the last
                                    // block's tail, or a file that shrank since the scan)
                                    // the buffer stays zero.
                                    let want = (p.data.saturating_sub(done) as usize).min(n);
                                    let got =
                                        read_full(&f, &mut buf[at..at + want], p.src_off + done)
                                            .map_err(|e| io_err(path, e))?;
                                    done += n as u64;
                                    copied.fetch_add(got, Ordering::Relaxed);
                                }
                            }
                        }
                    }
                };
                if let Err(e) = run(&mut buf, &mut buf_dst) {
                    if let Ok(mut g) = first_err.lock() {
                        g.get_or_insert(e);
                    }
                }
            });
        }
    });
    if let Some(e) = first_err.into_inner().unwrap_or(None) {
        return Err(e);
    }
    report.bytes = copied.load(Ordering::Relaxed) as u64;
    Ok(())
}

/// Reads until `buf` is full or end of file; returns the bytes read.
fn read_full(f: &std::fs::File, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], off + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
