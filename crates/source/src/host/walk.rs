//! One scan worker of a host directory: reads a directory relative to its open
//! descriptor ([`super::sys::Dir`]) — its attributes, xattrs and entries — and each
//! entry in it: attributes, xattrs, symlink targets and, when the tree reads data
//! ([`Tree::block_size`]), which blocks of each regular file hold data that is not all
//! zeros. Each regular file is opened and read once here; the bytes of files up to
//! [`HOLD_MAX`] are kept in memory ([`crate::hold`], recycled) so the copy writes them
//! without touching the source again, larger files are read again by the copy.

use super::sys::{self, Dir, DirEnt};
use crate::blocks::{block_ranges, nonzero_blocks};
use crate::entry::{FileData, Kind, Meta, Node, Xattrs};
use crate::hold::Filler;
use crate::tree::{DirWorker, Listing, Tree};
use crate::{io_err, xattr};
use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use usfs_fs::{Error, Result};

/// Files up to this size are kept in memory from the scan to the copy (memory
/// allowing, see [`crate::hold`]); larger ones are read again by the copy, which for them
/// costs little next to their data. Keeping saves the copy a second openat + pread +
/// close per file; with the memory recycled that pays for any file up to the chunk
/// size, and 64 KiB keeps the 256 KiB chunks well filled.
const HOLD_MAX: u64 = 64 << 10;
/// Bytes read at a time from a file that is not kept (checking for zero blocks).
const READ_BUF: usize = 1 << 20;

/// A worker's buffers.
pub(super) struct Walker<'a> {
    /// The source directory.
    root: &'a Path,
    /// Block size when files are read.
    bs: Option<usize>,
    dents: Vec<u8>,
    ents: Vec<DirEnt>,
    name: Vec<u8>,
    read_buf: Vec<u8>,
    slot: Filler<'a>,
}

impl<'a> Walker<'a> {
    /// A worker scanning `tree` from the directory `root`, made on its own thread
    /// (whose priority it lowers for a background scan: [`sys::lower_priority`]).
    pub(super) fn new(root: &'a Path, tree: &'a Tree) -> Walker<'a> {
        if tree.background() {
            sys::lower_priority();
        }
        Walker {
            root,
            bs: tree.block_size().map(|b| b as usize),
            dents: vec![0u8; 64 << 10],
            ents: Vec::new(),
            name: Vec::new(),
            read_buf: Vec::new(),
            slot: Filler::new(&tree.hold),
        }
    }
}

impl DirWorker for Walker<'_> {
    /// Reads directory `d`: its own attributes and xattrs, and its entries sorted by
    /// name.
    fn scan_dir(&mut self, tree: &Tree, d: usize) -> Result<Listing> {
        let dpath = tree.path_under(self.root, d);
        let dir = Dir::open(&dpath).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOTDIR) | Some(libc::ELOOP) if d == 0 => Error::NotDir,
            _ => io_err(&dpath, e),
        })?;
        let meta = Meta::from_stat(&sys::fstat(dir.fd()).map_err(|e| io_err(&dpath, e))?);
        let xattrs = xattr::of_fd(dir.fd()).map_err(|e| io_err(&dpath, e))?;
        self.ents.clear();
        dir.entries(&mut self.dents, &mut self.ents)
            .map_err(|e| io_err(&dpath, e))?;
        let mut ents = std::mem::take(&mut self.ents);
        ents.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        let mut entries = Vec::with_capacity(ents.len());
        for e in ents.drain(..) {
            entries.push(self.entry(&dir, &dpath, d, e)?);
        }
        self.ents = ents;
        Ok(Listing {
            meta,
            xattrs,
            entries,
        })
    }

    fn idle(&mut self) {
        // Its partly filled chunk must not stay pinned while it idles.
        self.slot.retire();
    }
}

impl Walker<'_> {
    /// One entry of `dir`.
    fn entry(&mut self, dir: &Dir, dpath: &Path, d: usize, e: DirEnt) -> Result<Node> {
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
    ) -> Result<Node> {
        let path = || -> PathBuf { dpath.join(OsStr::from_bytes(&e.name)) };
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
            return Ok(Node::unscanned_dir(e.name.clone(), d));
        }
        if e.d_type == libc::DT_REG {
            // Opened right away; if it is no longer a plain file, look again below.
            if let Ok(f) = dir.open_file(cname) {
                let st = sys::fstat(f.as_fd()).map_err(|er| io_err(&path(), er))?;
                if st.st_mode & libc::S_IFMT == libc::S_IFREG {
                    let (meta, xattrs, data) =
                        self.file(&f, &st).map_err(|er| io_err(&path(), er))?;
                    return Ok(node(meta, xattrs, Kind::File(data)));
                }
            }
        }
        let st = dir.stat_at(cname).map_err(|er| io_err(&path(), er))?;
        match st.st_mode & libc::S_IFMT {
            libc::S_IFDIR => Ok(Node::unscanned_dir(e.name.clone(), d)),
            libc::S_IFREG => {
                let f = dir.open_file(cname).map_err(|er| io_err(&path(), er))?;
                let st = sys::fstat(f.as_fd()).map_err(|er| io_err(&path(), er))?;
                let (meta, xattrs, data) = self.file(&f, &st).map_err(|er| io_err(&path(), er))?;
                Ok(node(meta, xattrs, Kind::File(data)))
            }
            t => {
                let p = path();
                let kind = if t == libc::S_IFLNK {
                    Kind::Symlink(dir.read_link(cname).map_err(|er| io_err(&p, er))?)
                } else {
                    Kind::Special
                };
                let xattrs = xattr::of_path(&p).map_err(|er| io_err(&p, er))?;
                Ok(node(Meta::from_stat(&st), xattrs, kind))
            }
        }
    }

    /// A regular file: attributes, xattrs, and (when the tree reads data) its non-zero
    /// blocks, its bytes kept when it is small and the budget allows.
    fn file(&mut self, f: &File, st: &libc::stat) -> std::io::Result<(Meta, Xattrs, FileData)> {
        let meta = Meta::from_stat(st);
        let xattrs = xattr::of_fd(f.as_fd())?;
        let size = meta.size;
        let mut data = FileData::default();
        let Some(bs) = self.bs else {
            return Ok((meta, xattrs, data));
        };
        if size == 0 {
            return Ok((meta, xattrs, data));
        }
        if size <= HOLD_MAX {
            if let Some((h, buf)) = self.slot.reserve(size as usize) {
                // Holes read as zeros and become holes again; a file that shrank since
                // fstat reads as zeros past its end.
                let got = sys::read_full(f, buf, 0)?;
                buf[got..].fill(0);
                nonzero_blocks(buf, 0, bs, &mut data.blocks);
                if data.blocks.is_empty() {
                    self.slot.unreserve(h, size as usize);
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
            sys::data_ranges(f, size)
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
                let got = sys::read_full(f, buf, off)?;
                buf[got..].fill(0);
                nonzero_blocks(buf, b, bs, &mut data.blocks);
                b += n;
            }
        }
        Ok((meta, xattrs, data))
    }
}
