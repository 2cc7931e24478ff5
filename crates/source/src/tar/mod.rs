//! A tar stream as a [`Source`] (mkfs.erofs `--tar`): the archive is read once, front
//! to back ([`parse`]), into a tree built as mkfs.erofs 1.9.3 builds it ([`build`]);
//! file data stays in the tar file, or in a spool file for a pipe or a compressed
//! stream ([`input`]), and is read from there at the offsets recorded. The scan then
//! hands the tree out directory by directory like a host directory's.

mod build;
mod header;
mod input;
mod parse;
mod pax;
mod sparse;

use crate::blocks::block_ranges;
use crate::entry::{FileData, Kind, Node};
use crate::tree::{DirWorker, Listing, Tree};
use crate::{io_err, Reader, Source};
use build::{Inode, What};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use usfs_fs::{Error, Result, Timestamp};

/// How a tar stream is read and turned into a tree.
#[derive(Clone, Debug, Default)]
pub struct TarOptions {
    /// Turn aufs whiteouts (`.wh.NAME`, `.wh..wh..opq`) into overlayfs ones
    /// (mkfs.erofs `--aufs`).
    pub aufs: bool,
    /// Leave overlayfs metadata out: aufs whiteouts and the opaque and origin xattrs
    /// (mkfs.erofs `--ovlfs-strip=1`).
    pub ovlfs_strip: bool,
    /// Where file data of a stream that cannot be read twice (standard input, a
    /// compressed tar) is spooled: an unlinked file in this directory (default:
    /// `$TMPDIR`).
    pub spool_dir: Option<PathBuf>,
    /// The root directory's modification time when the archive has no entry for it
    /// (mkfs.erofs: the build time).
    pub root_mtime: i64,
}

/// Where data is spooled.
fn spool_dir(opts: &TarOptions) -> PathBuf {
    opts.spool_dir
        .clone()
        .unwrap_or_else(input::default_spool_dir)
}

/// A tar archive, read and ready to be scanned.
pub struct TarSource {
    origin: PathBuf,
    inodes: Vec<Inode>,
    /// Where file data is read: the tar file, or the spool.
    store: File,
    warnings: Vec<String>,
    /// Compression the stream had.
    layer: Option<&'static str>,
    /// Data is read in place from the tar file.
    in_place: bool,
    /// Bytes of the (decompressed) stream the parser consumed, up to the end-of-archive
    /// blocks.
    stream_len: u64,
}

impl TarSource {
    /// Reads the tar at `path` (`-`: standard input), gzip- or zstd-compressed or not.
    pub fn open(path: &Path, opts: &TarOptions) -> Result<TarSource> {
        let inp = input::Input::open(path, &spool_dir(opts)).map_err(|e| io_err(path, e))?;
        TarSource::parse(inp, path, opts)
    }

    /// Reads a tar stream from `r` (compressed or not), spooling file data; `origin`
    /// names it in messages.
    pub fn from_reader(
        r: Box<dyn std::io::Read + Send>,
        origin: &Path,
        opts: &TarOptions,
    ) -> Result<TarSource> {
        let inp = input::Input::stream(r, &spool_dir(opts)).map_err(|e| io_err(origin, e))?;
        TarSource::parse(inp, origin, opts)
    }

    /// Parses the stream `inp` into a tree.
    fn parse(mut inp: input::Input, path: &Path, opts: &TarOptions) -> Result<TarSource> {
        let t = Timestamp {
            sec: opts.root_mtime,
            nsec: 0,
        };
        // As mkfs.erofs makes a tar image's root until the archive names it: 0777,
        // owned by whoever builds.
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let root = crate::entry::Meta {
            mode: libc::S_IFDIR | 0o777,
            uid,
            gid,
            atime: t,
            mtime: t,
            ctime: t,
            ..Default::default()
        };
        let rules = build::Rules {
            aufs: opts.aufs,
            ovlfs_strip: opts.ovlfs_strip,
        };
        let mut b = build::Build::new(root, rules);
        let mut warnings = Vec::new();
        parse::parse(&mut inp, &mut b, &mut warnings).map_err(|e| io_err(path, e))?;
        let (layer, in_place, stream_len) = (inp.layer, inp.in_place(), inp.pos);
        Ok(TarSource {
            stream_len,
            origin: path.to_path_buf(),
            inodes: b.finish(),
            store: inp.into_store(),
            warnings,
            layer,
            in_place,
        })
    }

    /// What was ignored or odd in the archive.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The compression layer the stream had (`gzip`, `zstd`), if any.
    pub fn compression(&self) -> Option<&'static str> {
        self.layer
    }

    /// Whether file data is read from the tar file itself (an uncompressed regular
    /// file) rather than from a spool.
    pub fn data_in_place(&self) -> bool {
        self.in_place
    }

    /// Bytes of the stream the parser consumed (the tar's length up to its end-of-archive
    /// blocks, without the record padding after them).
    pub fn stream_len(&self) -> u64 {
        self.stream_len
    }

    /// The inode behind tree node `node` (its `ino` is the inode's index + 1).
    fn inode_of(&self, tree: &Tree, node: usize) -> Result<&Inode> {
        let ino = tree.node(node).meta.ino;
        usize::try_from(ino)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| self.inodes.get(i))
            .ok_or(Error::Invalid)
    }
}

impl Source for TarSource {
    fn origin(&self) -> &Path {
        &self.origin
    }

    fn scan(&self, tree: &Tree, threads: usize) -> Result<()> {
        // Everything is in memory already: one worker hands it out.
        let _ = threads;
        tree.scan(1, || Worker { src: self })
    }

    fn reader<'a>(&'a self, tree: &'a Tree) -> Box<dyn Reader + 'a> {
        Box::new(TarReader { src: self, tree })
    }
}

/// Hands out the directories of a parsed archive.
struct Worker<'a> {
    src: &'a TarSource,
}

impl DirWorker for Worker<'_> {
    fn scan_dir(&mut self, tree: &Tree, d: usize) -> Result<Listing> {
        let inodes = &self.src.inodes;
        // The root node carries no inode number yet: it is inode 0.
        let di = if d == 0 {
            0
        } else {
            (tree.node(d).meta.ino - 1) as usize
        };
        let dir = &inodes[di];
        let What::Dir(kids) = &dir.what else {
            return Err(Error::NotDir);
        };
        let mut entries = Vec::with_capacity(kids.len());
        for (name, &k) in kids {
            let n = &inodes[k];
            let mut node = match &n.what {
                What::Dir(_) => Node::unscanned_dir(name.clone(), d),
                other => Node {
                    name: name.clone(),
                    parent: d,
                    meta: n.meta.clone(),
                    xattrs: n.xattrs.clone(),
                    kind: match other {
                        What::File(data) => Kind::File(FileData {
                            blocks: tree.block_size().map_or_else(Default::default, |bs| {
                                let r: Vec<(u64, u64)> =
                                    data.segs.iter().map(|s| (s.0, s.0 + s.1)).collect();
                                block_ranges(&r, u64::from(bs))
                            }),
                            held: None,
                        }),
                        What::Symlink(t) => Kind::Symlink(t.clone()),
                        _ => Kind::Special,
                    },
                },
            };
            // A directory's own attributes come with its scan; its node keeps the
            // inode number so the scan finds it.
            node.meta.ino = n.meta.ino;
            entries.push(node);
        }
        Ok(Listing {
            meta: dir.meta.clone(),
            xattrs: dir.xattrs.clone(),
            entries,
        })
    }
}

/// Reads file data from the tar file or spool at the recorded offsets; holes of sparse
/// files read as zeros.
struct TarReader<'a> {
    src: &'a TarSource,
    tree: &'a Tree,
}

impl Reader for TarReader<'_> {
    fn read_at(&mut self, node: usize, buf: &mut [u8], off: u64) -> Result<usize> {
        let n = self.src.inode_of(self.tree, node)?;
        let What::File(data) = &n.what else {
            return Err(Error::Invalid);
        };
        let size = n.meta.size;
        if off >= size {
            return Ok(0);
        }
        let len = (size - off).min(buf.len() as u64) as usize;
        let buf = &mut buf[..len];
        let end = off + len as u64;
        // The first segment that ends past `off`.
        let first = data.segs.partition_point(|s| s.0 + s.1 <= off);
        let mut filled = 0u64; // bytes of buf up to which holes were zeroed
        for &(fo, fl, at) in &data.segs[first..] {
            if fo >= end {
                break;
            }
            let s = fo.max(off);
            let e = (fo + fl).min(end);
            let (bs, be) = ((s - off) as usize, (e - off) as usize);
            buf[filled as usize..bs].fill(0);
            self.src
                .store
                .read_exact_at(&mut buf[bs..be], at + (s - fo))
                .map_err(|e| io_err(&self.src.origin, e))?;
            filled = be as u64;
        }
        buf[filled as usize..].fill(0);
        Ok(len)
    }

    fn size(&mut self, node: usize) -> Result<u64> {
        Ok(self.src.inode_of(self.tree, node)?.meta.size)
    }

    fn contiguous_at(&mut self, node: usize) -> Option<u64> {
        let n = self.src.inode_of(self.tree, node).ok()?;
        let What::File(data) = &n.what else {
            return None;
        };
        match data.segs[..] {
            [(0, len, at)] if self.src.in_place && len == n.meta.size => Some(at),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
