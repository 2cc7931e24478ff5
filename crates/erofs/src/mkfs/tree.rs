//! The source tree as the builder uses it: one [`Node`] per inode (hard links share
//! one), in breadth-first order (the image's directory order), directories with their
//! children in name order. The entries come from a [`Source`] (usfs-source: for a host
//! directory, its parallel descriptor-relative scan, attributes only); file data is read
//! later through the source's readers ([`Tree::reader`]).

use super::Options;
use crate::format::xattr::split_name;
use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use usfs_fs::{Error, FileType, Result};
use usfs_source::{Hold, Kind, Meta, Reader, ScanOptions, Source, Xattrs};

/// A stored xattr: (name index, name suffix, value).
pub(super) type Xattr = (u8, Vec<u8>, Vec<u8>);

/// One inode of the tree.
pub(super) struct Node {
    /// Its entry in the source tree (the first link met, for hard links).
    pub src: usize,
    pub file_type: FileType,
    /// Permission bits (mode & 0o7777).
    pub perm: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub size: u64,
    pub rdev: u64,
    /// Links to it inside the tree (directories: 2 + subdirectories).
    pub nlink: u32,
    /// Stored xattrs as (index, name suffix, value), sorted.
    pub xattrs: Vec<Xattr>,
    /// Directories: children (name, node index) sorted by name; and the parent.
    pub children: Vec<(Vec<u8>, usize)>,
    pub parent: usize,
    /// A symlink's target.
    pub target: Vec<u8>,
}

/// The scanned tree: node 0 is the root.
pub(super) struct Tree<'s> {
    pub nodes: Vec<Node>,
    /// Warnings (xattrs EROFS cannot store...).
    pub warnings: Vec<String>,
    /// Where the entries came from.
    source: &'s dyn Source,
    /// The source's entries.
    entries: usfs_source::Tree,
}

impl Tree<'_> {
    /// A reader of file data for one thread.
    pub(super) fn reader(&self) -> Box<dyn Reader + '_> {
        self.source.reader(&self.entries)
    }

    /// Where node `i` is in the source, for messages.
    pub(super) fn path(&self, i: usize) -> PathBuf {
        self.source.path(&self.entries, self.nodes[i].src)
    }
}

/// Scans `source`: all of it, then its nodes in breadth-first order.
pub(super) fn scan<'s>(source: &'s dyn Source, opts: &Options) -> Result<Tree<'s>> {
    // Attributes only (the data phase reads files), at the caller's priority: nothing
    // consumes the tree while it is scanned.
    let mut exclude = usfs_source::Exclude::default();
    for p in &opts.exclude_paths {
        exclude.add_path(p);
    }
    for r in &opts.exclude_regexes {
        exclude.add_regex(r)?;
    }
    let entries = usfs_source::Tree::new(ScanOptions {
        block_size: None,
        hold: Hold::new(0, 0),
        background: false,
    })
    .excluding(exclude);
    source
        .scan(&entries, usfs_source::default_threads())
        .map_err(|e| match e {
            Error::NotDir => Error::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a directory", source.origin().display()),
            )),
            e => e,
        })?;
    let mut b = Build {
        source,
        entries: &entries,
        opts,
        nodes: Vec::new(),
        warnings: Vec::new(),
        links: HashMap::new(),
    };
    b.walk()?;
    let (nodes, warnings) = (b.nodes, b.warnings);
    Ok(Tree {
        nodes,
        warnings,
        source,
        entries,
    })
}

/// Nodes made from a scanned source tree.
struct Build<'a> {
    source: &'a dyn Source,
    entries: &'a usfs_source::Tree,
    opts: &'a Options,
    nodes: Vec<Node>,
    warnings: Vec<String>,
    /// The node of each hard-linked file met so far, by `(dev, ino)`.
    links: HashMap<(u64, u64), usize>,
}

impl Build<'_> {
    /// Makes the nodes breadth-first, so that the node order is the directory order the
    /// image uses.
    fn walk(&mut self) -> Result<()> {
        let root = self.entries.dir(0)?;
        let node = self.make_node(0, &root.meta, &root.xattrs, 0)?;
        self.nodes.push(node);
        let mut level = vec![0usize];
        while !level.is_empty() {
            let mut next = Vec::new();
            for &d in &level {
                let kids = &self.entries.dir(self.nodes[d].src)?.kids;
                let mut children = Vec::with_capacity(kids.len());
                for &k in kids {
                    let idx = self.child(k, d)?;
                    if self.nodes[idx].file_type == FileType::Directory {
                        self.nodes[d].nlink += 1;
                        next.push(idx);
                    }
                    children.push((self.entries.node(k).name.clone(), idx));
                }
                self.nodes[d].children = children;
            }
            level = next;
        }
        Ok(())
    }

    /// The node of source entry `k` in directory node `d`: a new one, or for another
    /// link of a hard-linked file the one its first link made.
    fn child(&mut self, k: usize, d: usize) -> Result<usize> {
        let entries = self.entries;
        let e = entries.node(k);
        let (meta, xattrs) = match &e.kind {
            Kind::Dir(_) => {
                let ds = entries.dir(k)?;
                (&ds.meta, &ds.xattrs)
            }
            _ => (&e.meta, &e.xattrs),
        };
        let key = (meta.dev, meta.ino);
        let linked = !e.is_dir() && meta.nlink > 1;
        if linked {
            if let Some(&i) = self.links.get(&key) {
                self.nodes[i].nlink += 1;
                return Ok(i);
            }
        }
        let node = self.make_node(k, meta, xattrs, d)?;
        self.nodes.push(node);
        let i = self.nodes.len() - 1;
        if linked {
            self.links.insert(key, i);
        }
        Ok(i)
    }

    /// The node of source entry `k` with attributes `md` and xattrs `xattrs`, under
    /// directory node `parent`.
    fn make_node(&mut self, k: usize, md: &Meta, xattrs: &Xattrs, parent: usize) -> Result<Node> {
        let (source, entries, opts) = (self.source, self.entries, self.opts);
        let path = || source.path(entries, k);
        let file_type = FileType::from_mode(md.mode).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: unknown file type", path().display()),
            )
        })?;
        let (mtime, mtime_nsec) = match opts.timestamp {
            Some(ts) => (ts, 0),
            None => (md.mtime.sec, md.mtime.nsec),
        };
        let (uid, gid) = if opts.all_root {
            (0, 0)
        } else {
            (
                opts.force_uid.unwrap_or(md.uid),
                opts.force_gid.unwrap_or(md.gid),
            )
        };
        let xattrs = if opts.xattr_tolerance < 0 {
            Vec::new()
        } else {
            storable(xattrs, &path, &mut self.warnings)
        };
        let size = match file_type {
            FileType::Regular | FileType::Symlink => md.size,
            _ => 0,
        };
        let target = match &entries.node(k).kind {
            Kind::Symlink(t) => t.clone(),
            _ => Vec::new(),
        };
        Ok(Node {
            src: k,
            file_type,
            perm: md.mode & 0o7777,
            uid,
            gid,
            mtime,
            mtime_nsec,
            size,
            rdev: md.rdev,
            nlink: if file_type == FileType::Directory {
                2
            } else {
                1
            },
            xattrs,
            children: Vec::new(),
            parent,
            target,
        })
    }
}

/// The xattrs EROFS can store, as (name index, suffix, value), sorted; a warning for each
/// one it cannot (a prefix it has no index for, a value over 64 KiB).
fn storable(xattrs: &Xattrs, path: &dyn Fn() -> PathBuf, warnings: &mut Vec<String>) -> Vec<Xattr> {
    let mut out = Vec::new();
    for (name, val) in xattrs {
        let Some((idx, suffix)) = split_name(name) else {
            warnings.push(format!(
                "{}: xattr {} cannot be stored in EROFS, skipped",
                path().display(),
                String::from_utf8_lossy(name)
            ));
            continue;
        };
        if val.len() > u16::MAX as usize {
            warnings.push(format!(
                "{}: xattr value too large, skipped",
                path().display()
            ));
            continue;
        }
        out.push((idx, suffix.to_vec(), val.clone()));
    }
    out.sort();
    out
}
