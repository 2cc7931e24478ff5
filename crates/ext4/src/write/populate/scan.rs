//! Phase 1 of populate: one parallel walk of the source that gathers everything the
//! placement needs — attributes, xattrs, symlink targets, and for regular files which
//! blocks hold data that is not all zeros (mke2fs -d makes the others holes, and so do
//! we). Each regular file is opened and read once here; the bytes of files up to
//! [`HOLD_MAX`] are kept in memory (up to a budget) so the copy phase writes them without
//! touching the source again, larger files are read again by the copy.

use super::chunk::{Chunk, CHUNK_BYTES as CHUNK};
use super::source::{self, Dir, DirEnt};
use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex};
use usfs_fs::{Error, Result, Timestamp};

/// Files up to this size are kept in memory from the scan to the copy (budget
/// allowing); larger ones are read again by the copy. Keeping costs fresh memory, which
/// the kernel must zero on first touch (on the VMs measured, 0.6-1.1 s per GiB: about
/// what a second openat + pread + close costs for a 4 KiB file), so only files of up to
/// one 4 KiB page are worth keeping: on a generated tree of 200k files of at most 8 KiB,
/// 4 KiB gave 1.5 s against 2.1-2.5 s keeping every file and 1.8-2.3 s keeping none.
pub const HOLD_MAX: u64 = 4096;
/// Largest block size: the zero pattern blocks are compared with.
static ZEROS: [u8; 65536] = [0; 65536];
/// Bytes read at a time from a file that is not kept (checking for zero blocks).
const READ_BUF: usize = 1 << 20;

/// The attributes of a source entry.
#[derive(Clone, Debug, Default)]
pub struct Meta {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub atime: Timestamp,
    pub mtime: Timestamp,
    pub ctime: Timestamp,
    pub rdev: u64,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
}

fn ts(sec: i64, nsec: i64) -> Timestamp {
    Timestamp {
        sec,
        nsec: nsec.clamp(0, 999_999_999) as u32,
    }
}

impl Meta {
    fn from_stat(st: &libc::stat) -> Meta {
        Meta {
            mode: st.st_mode,
            uid: st.st_uid,
            gid: st.st_gid,
            size: st.st_size.max(0) as u64,
            atime: ts(st.st_atime, st.st_atime_nsec),
            mtime: ts(st.st_mtime, st.st_mtime_nsec),
            ctime: ts(st.st_ctime, st.st_ctime_nsec),
            rdev: st.st_rdev,
            dev: st.st_dev,
            ino: st.st_ino,
            nlink: st.st_nlink,
        }
    }
}

/// Where a kept file's bytes are: chunk `chunk`, from byte `off`, `Meta::size` long.
#[derive(Clone, Copy, Debug)]
pub struct Held {
    pub chunk: u32,
    pub off: u32,
}

/// A regular file's data as the scan found it.
#[derive(Debug, Default)]
pub struct FileData {
    /// Block ranges `(lblk, count)`, sorted, that hold data other than zeros: what gets
    /// allocated (everything else is a hole).
    pub blocks: Vec<(u64, u64)>,
    /// The file's bytes, when kept in memory.
    pub held: Option<Held>,
}

pub enum Kind {
    /// Children (node indexes), sorted by name.
    Dir(Vec<usize>),
    File(FileData),
    Symlink(Vec<u8>),
    Special,
}

pub struct Node {
    pub name: Vec<u8>,
    /// The parent directory's node (the root is its own parent).
    pub parent: usize,
    pub meta: Meta,
    pub xattrs: Xattrs,
    pub kind: Kind,
}

/// The scanned tree: nodes (index 0 is the root) and the chunks holding kept files.
pub struct Tree {
    pub root: PathBuf,
    pub nodes: Vec<Node>,
    pub chunks: Vec<Chunk>,
}

impl Tree {
    /// The source path of node `i`.
    pub fn path(&self, i: usize) -> PathBuf {
        path_of(&self.root, &self.nodes, i)
    }

    /// Is every regular file with data kept in memory?
    pub fn all_held(&self) -> bool {
        self.nodes.iter().all(|n| match &n.kind {
            Kind::File(d) => d.held.is_some() || d.blocks.is_empty(),
            _ => true,
        })
    }

    /// The bytes of a kept file.
    pub fn held(&self, h: Held, len: u64) -> &[u8] {
        &self.chunks[h.chunk as usize].as_slice()[h.off as usize..h.off as usize + len as usize]
    }
}

fn path_of(root: &Path, nodes: &[Node], mut i: usize) -> PathBuf {
    let mut names = Vec::new();
    while i != 0 {
        names.push(i);
        i = nodes[i].parent;
    }
    let mut p = root.to_path_buf();
    for &k in names.iter().rev() {
        p.push(OsStr::from_bytes(&nodes[k].name));
    }
    p
}

pub fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io(std::io::Error::new(
        e.kind(),
        format!("{}: {e}", path.display()),
    ))
}

/// Block ranges `(lblk, count)` covering byte ranges.
pub fn block_ranges(ranges: &[(u64, u64)], bs: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(s, e) in ranges {
        if e <= s {
            continue;
        }
        let (a, b) = (s / bs, e.div_ceil(bs));
        push_run(&mut out, a, b - a);
    }
    out
}

/// Appends blocks `[a, a+n)` to sorted runs, joining a run it touches or overlaps.
fn push_run(out: &mut Vec<(u64, u64)>, a: u64, n: u64) {
    match out.last_mut() {
        Some(r) if r.0 + r.1 >= a => r.1 = r.1.max(a + n - r.0),
        _ => out.push((a, n)),
    }
}

/// Adds to `out` the blocks of `data` (the file's bytes from block `first`) that are not
/// all zeros; the last block may be short (the end of the file).
fn nonzero_blocks(data: &[u8], first: u64, bs: usize, out: &mut Vec<(u64, u64)>) {
    for (i, b) in data.chunks(bs).enumerate() {
        if b != &ZEROS[..b.len()] {
            push_run(out, first + i as u64, 1);
        }
    }
}

/// Memory for kept files, shared by the workers: chunks are handed out while the budget
/// lasts and collected when full.
struct Arena {
    /// Chunks that may still be handed out.
    left: Mutex<u64>,
    next_id: AtomicU32,
    done: Mutex<Vec<(u32, Chunk)>>,
}

/// A worker's current chunk: `(id, chunk, bytes used)`, filled from the front.
struct ArenaSlot<'a> {
    arena: &'a Arena,
    cur: Option<(u32, Chunk, usize)>,
}

impl ArenaSlot<'_> {
    /// `len` zeroed bytes in a chunk, or `None` when the budget is spent.
    fn reserve(&mut self, len: usize) -> Option<(Held, &mut [u8])> {
        let fits = matches!(&self.cur, Some((_, _, used)) if used + len <= CHUNK);
        if !fits {
            let mut left = self.arena.left.lock().ok()?;
            if *left == 0 {
                return None;
            }
            let chunk = Chunk::new().ok()?;
            *left -= 1;
            drop(left);
            self.retire();
            let id = self.arena.next_id.fetch_add(1, Ordering::Relaxed);
            self.cur = Some((id, chunk, 0));
        }
        let (id, c, used) = self.cur.as_mut()?;
        let off = *used;
        *used += len;
        Some((
            Held {
                chunk: *id,
                off: off as u32,
            },
            &mut c.as_mut_slice()[off..off + len],
        ))
    }

    /// Gives back the last `len` bytes reserved (a file that turned out all zeros:
    /// they are zeros again).
    fn unreserve(&mut self, len: usize) {
        if let Some((_, c, used)) = self.cur.as_mut() {
            *used -= len;
            c.as_mut_slice()[*used..*used + len].fill(0);
        }
    }

    fn retire(&mut self) {
        if let Some((id, c, _)) = self.cur.take() {
            if let Ok(mut d) = self.arena.done.lock() {
                d.push((id, c));
            }
        }
    }
}

impl Drop for ArenaSlot<'_> {
    fn drop(&mut self) {
        self.retire();
    }
}

/// A worker's buffers.
struct Worker<'a> {
    bs: usize,
    dents: Vec<u8>,
    ents: Vec<DirEnt>,
    name: Vec<u8>,
    read_buf: Vec<u8>,
    slot: ArenaSlot<'a>,
}

/// Extended attributes as (name, value) pairs.
pub type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// A child found in a directory: the node, and its path when it is a directory to scan.
type Found = (Node, Option<PathBuf>);

impl Worker<'_> {
    /// Reads directory `dpath` (node `d`): its own attributes and xattrs, and its
    /// entries sorted by name.
    fn scan_dir(&mut self, d: usize, dpath: &Path) -> Result<(Meta, Xattrs, Vec<Found>)> {
        let dir = Dir::open(dpath).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOTDIR) | Some(libc::ELOOP) if d == 0 => Error::NotDir,
            _ => io_err(dpath, e),
        })?;
        let meta = Meta::from_stat(&source::fstat(dir.fd()).map_err(|e| io_err(dpath, e))?);
        let xattrs = source::xattrs_fd(dir.fd()).map_err(|e| io_err(dpath, e))?;
        self.ents.clear();
        dir.entries(&mut self.dents, &mut self.ents)
            .map_err(|e| io_err(dpath, e))?;
        let mut ents = std::mem::take(&mut self.ents);
        ents.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let mut out = Vec::with_capacity(ents.len());
        for e in ents.drain(..) {
            out.push(self.entry(&dir, dpath, d, e)?);
        }
        self.ents = ents;
        Ok((meta, xattrs, out))
    }

    /// One entry of `dir`.
    fn entry(&mut self, dir: &Dir, dpath: &Path, d: usize, e: DirEnt) -> Result<Found> {
        if e.name.len() > 255 {
            return Err(Error::NameTooLong);
        }
        self.name.clear();
        self.name.extend_from_slice(&e.name);
        self.name.push(0);
        let name = std::mem::take(&mut self.name);
        let r = self.entry_named(dir, dpath, d, e, CStr::from_bytes_with_nul(&name));
        self.name = name;
        r
    }

    fn entry_named(
        &mut self,
        dir: &Dir,
        dpath: &Path,
        d: usize,
        e: DirEnt,
        cname: std::result::Result<&CStr, std::ffi::FromBytesWithNulError>,
    ) -> Result<Found> {
        let path = || dpath.join(OsStr::from_bytes(&e.name));
        let cname = cname.map_err(|_| Error::Invalid)?;
        let node = |meta, xattrs, kind| Node {
            name: e.name.clone(),
            parent: d,
            meta,
            xattrs,
            kind,
        };
        if e.d_type == libc::DT_DIR {
            // Its attributes are read when it is scanned.
            return Ok((
                node(Meta::default(), Vec::new(), Kind::Dir(Vec::new())),
                Some(path()),
            ));
        }
        if e.d_type == libc::DT_REG {
            // Opened right away; if it is no longer a plain file, look again below.
            if let Ok(f) = dir.open_file(cname) {
                let st = source::fstat(f.as_fd()).map_err(|er| io_err(&path(), er))?;
                if st.st_mode & libc::S_IFMT == libc::S_IFREG {
                    let (meta, xattrs, data) =
                        self.file(&f, &st).map_err(|er| io_err(&path(), er))?;
                    return Ok((node(meta, xattrs, Kind::File(data)), None));
                }
            }
        }
        let st = dir.stat_at(cname).map_err(|er| io_err(&path(), er))?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => Ok((
                node(Meta::default(), Vec::new(), Kind::Dir(Vec::new())),
                Some(path()),
            )),
            libc::S_IFREG => {
                let f = dir.open_file(cname).map_err(|er| io_err(&path(), er))?;
                let st = source::fstat(f.as_fd()).map_err(|er| io_err(&path(), er))?;
                let (meta, xattrs, data) = self.file(&f, &st).map_err(|er| io_err(&path(), er))?;
                Ok((node(meta, xattrs, Kind::File(data)), None))
            }
            t => {
                let p = path();
                let kind = if t == libc::S_IFLNK {
                    Kind::Symlink(dir.read_link(cname).map_err(|er| io_err(&p, er))?)
                } else {
                    Kind::Special
                };
                let xattrs = source::xattrs_path(&p).map_err(|er| io_err(&p, er))?;
                Ok((node(Meta::from_stat(&st), xattrs, kind), None))
            }
        }
    }

    /// A regular file: attributes, xattrs, and its non-zero blocks (its bytes kept when
    /// it is small and the budget allows).
    fn file(&mut self, f: &File, st: &libc::stat) -> std::io::Result<(Meta, Xattrs, FileData)> {
        let meta = Meta::from_stat(st);
        let xattrs = source::xattrs_fd(f.as_fd())?;
        let size = meta.size;
        let bs = self.bs;
        let mut data = FileData::default();
        if size == 0 {
            return Ok((meta, xattrs, data));
        }
        if size <= HOLD_MAX {
            if let Some((h, buf)) = self.slot.reserve(size as usize) {
                // Holes read as zeros and become holes again; a file that shrank since
                // fstat reads as zeros past its end.
                source::read_full(f, buf, 0)?;
                nonzero_blocks(buf, 0, bs, &mut data.blocks);
                if data.blocks.is_empty() {
                    self.slot.unreserve(size as usize);
                } else {
                    data.held = Some(h);
                }
                return Ok((meta, xattrs, data));
            }
        }
        // Read through (again in the copy phase): data ranges only when it has holes.
        let ranges = if (st.st_blocks.max(0) as u64) * 512 >= size {
            vec![(0, size)]
        } else {
            source::data_ranges(f, size)
        };
        let per = (READ_BUF / bs).max(1) as u64;
        if self.read_buf.len() < per as usize * bs {
            self.read_buf.resize(per as usize * bs, 0);
        }
        for (lblk, count) in block_ranges(&ranges, bs as u64) {
            let mut b = lblk;
            while b < lblk + count {
                let n = per.min(lblk + count - b);
                let off = b * bs as u64;
                let want = (n * bs as u64).min(size.saturating_sub(off)) as usize;
                let buf = &mut self.read_buf[..want];
                let got = source::read_full(f, buf, off)?;
                buf[got..].fill(0);
                nonzero_blocks(buf, b, bs, &mut data.blocks);
                b += n;
            }
        }
        Ok((meta, xattrs, data))
    }
}

/// Work shared by the scanning threads: directories to read, how many are being read.
struct Queue {
    todo: Vec<(usize, PathBuf)>,
    busy: usize,
    failed: Option<Error>,
}

/// Scans the tree at `src` with `threads` workers for a file system of `bs`-byte
/// blocks, keeping small files' bytes in at most `hold_bytes` of memory.
pub fn scan(src: &Path, bs: u32, threads: usize, hold_bytes: u64) -> Result<Tree> {
    let nodes = Mutex::new(vec![Node {
        name: Vec::new(),
        parent: 0,
        meta: Meta::default(),
        xattrs: Vec::new(),
        kind: Kind::Dir(Vec::new()),
    }]);
    let queue = Mutex::new(Queue {
        todo: vec![(0, src.to_path_buf())],
        busy: 0,
        failed: None,
    });
    let arena = Arena {
        left: Mutex::new(hold_bytes / CHUNK as u64),
        next_id: AtomicU32::new(0),
        done: Mutex::new(Vec::new()),
    };
    let wake = Condvar::new();
    let lock_err = || Error::Io(std::io::Error::other("scan: a worker panicked"));
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut w = Worker {
                    bs: bs as usize,
                    dents: vec![0u8; 64 << 10],
                    ents: Vec::new(),
                    name: Vec::new(),
                    read_buf: Vec::new(),
                    slot: ArenaSlot {
                        arena: &arena,
                        cur: None,
                    },
                };
                loop {
                    let (d, dpath) = {
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
                    let result = w.scan_dir(d, &dpath);
                    let Ok(mut q) = queue.lock() else { return };
                    q.busy -= 1;
                    match result {
                        Ok((meta, xattrs, kids)) => {
                            let Ok(mut n) = nodes.lock() else { return };
                            let base = n.len();
                            let mut idx = Vec::with_capacity(kids.len());
                            for (i, (k, sub)) in kids.into_iter().enumerate() {
                                if let Some(p) = sub {
                                    q.todo.push((base + i, p));
                                }
                                idx.push(base + i);
                                n.push(k);
                            }
                            n[d].meta = meta;
                            n[d].xattrs = xattrs;
                            n[d].kind = Kind::Dir(idx);
                        }
                        Err(e) => {
                            q.failed.get_or_insert(e);
                        }
                    }
                    wake.notify_all();
                }
            });
        }
    });
    let q = queue.into_inner().map_err(|_| lock_err())?;
    if let Some(e) = q.failed {
        return Err(e);
    }
    let mut done = arena.done.into_inner().map_err(|_| lock_err())?;
    done.sort_unstable_by_key(|c| c.0);
    let chunks = done.into_iter().map(|c| c.1).collect();
    Ok(Tree {
        root: src.to_path_buf(),
        nodes: nodes.into_inner().map_err(|_| lock_err())?,
        chunks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_blocks_are_left_out() {
        let mut data = vec![0u8; 4096 * 5 + 100];
        data[4096] = 1; // block 1
        data[4096 * 3 + 4095] = 2; // block 3
        let mut out = Vec::new();
        nonzero_blocks(&data, 10, 4096, &mut out);
        assert_eq!(out, [(11, 1), (13, 1)]);
        data[4096 * 5 + 99] = 3; // the short last block
        data[4096 * 2] = 4;
        let mut out = Vec::new();
        nonzero_blocks(&data, 0, 4096, &mut out);
        assert_eq!(out, [(1, 3), (5, 1)]);
    }

    #[test]
    fn ranges_join() {
        assert_eq!(
            block_ranges(&[(0, 10), (4000, 5000), (9000, 9001)], 4096),
            [(0, 3)]
        );
        assert_eq!(
            block_ranges(&[(0, 1), (8192, 8193)], 4096),
            [(0, 1), (2, 1)]
        );
    }
}
