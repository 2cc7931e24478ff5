//! Scanning the source tree: one [`Node`] per inode (hard links share one), directories
//! with their children in name order.

use super::Options;
use crate::format::xattr::split_name;
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use usfs_fs::FileType;

/// A stored xattr: (name index, name suffix, value).
pub(super) type Xattr = (u8, Vec<u8>, Vec<u8>);

/// One inode of the tree.
pub(super) struct Node {
    /// Where its content comes from.
    pub path: PathBuf,
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
}

/// The scanned tree: node 0 is the root.
pub(super) struct Tree {
    pub nodes: Vec<Node>,
    /// Warnings (xattrs EROFS cannot store...).
    pub warnings: Vec<String>,
}

fn io_err(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Scans `root`.
pub(super) fn scan(root: &Path, opts: &Options) -> io::Result<Tree> {
    let mut t = Tree {
        nodes: Vec::new(),
        warnings: Vec::new(),
    };
    let mut links: HashMap<(u64, u64), usize> = HashMap::new();
    let md = std::fs::symlink_metadata(root).map_err(|e| io_err(root, e))?;
    if !md.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a directory", root.display()),
        ));
    }
    let xattrs = node_xattrs(root, opts)?;
    let r = make_node(&mut t, root, &md, 0, opts, xattrs)?;
    debug_assert_eq!(r, 0);
    // Breadth-first, so that the node order is the directory order the image uses; one
    // level at a time, its directories listed (names, lstat, xattrs) in parallel and
    // joined in order, so the tree is the same whatever the number of workers.
    let mut level = vec![0usize];
    while !level.is_empty() {
        let paths: Vec<PathBuf> = level.iter().map(|&d| t.nodes[d].path.clone()).collect();
        let listed = super::par::map(&paths, opts.workers, || (), |_, p| list_dir(p, opts));
        let mut next = Vec::new();
        for (&d, entries) in level.iter().zip(listed) {
            let mut children = Vec::new();
            for e in entries? {
                let md = &e.md;
                let idx = if !md.is_dir() && md.nlink() > 1 {
                    match links.get(&(md.dev(), md.ino())) {
                        Some(&i) => {
                            t.nodes[i].nlink += 1;
                            i
                        }
                        None => {
                            let i = make_node(&mut t, &e.path, md, d, opts, e.xattrs)?;
                            links.insert((md.dev(), md.ino()), i);
                            i
                        }
                    }
                } else {
                    make_node(&mut t, &e.path, md, d, opts, e.xattrs)?
                };
                if t.nodes[idx].file_type == FileType::Directory {
                    t.nodes[d].nlink += 1;
                    next.push(idx);
                }
                children.push((e.name, idx));
            }
            t.nodes[d].children = children;
        }
        level = next;
    }
    Ok(t)
}

/// One directory entry as listed, before it becomes a node.
struct Listed {
    name: Vec<u8>,
    path: PathBuf,
    md: std::fs::Metadata,
    /// Stored xattrs, or the warnings of its xattrs that cannot be stored.
    xattrs: (Vec<Xattr>, Vec<String>),
}

/// The entries of directory `dpath` in name order, with their metadata and xattrs.
fn list_dir(dpath: &Path, opts: &Options) -> io::Result<Vec<Listed>> {
    let mut names: Vec<Vec<u8>> = Vec::new();
    for e in std::fs::read_dir(dpath).map_err(|e| io_err(dpath, e))? {
        let e = e.map_err(|e| io_err(dpath, e))?;
        names.push(e.file_name().as_bytes().to_vec());
    }
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        if name.len() > crate::format::dirent::NAME_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "name longer than 255 bytes",
            ));
        }
        let path = dpath.join(OsStr::from_bytes(&name));
        let md = std::fs::symlink_metadata(&path).map_err(|e| io_err(&path, e))?;
        let xattrs = node_xattrs(&path, opts)?;
        out.push(Listed {
            name,
            path,
            md,
            xattrs,
        });
    }
    Ok(out)
}

fn node_xattrs(path: &Path, opts: &Options) -> io::Result<(Vec<Xattr>, Vec<String>)> {
    let mut warnings = Vec::new();
    if opts.xattr_tolerance < 0 {
        return Ok((Vec::new(), warnings));
    }
    let x = read_xattrs(path, &mut warnings)?;
    Ok((x, warnings))
}

fn make_node(
    t: &mut Tree,
    path: &Path,
    md: &std::fs::Metadata,
    parent: usize,
    opts: &Options,
    (xattrs, warnings): (Vec<Xattr>, Vec<String>),
) -> io::Result<usize> {
    let file_type = file_type_of(path, md)?;
    let (mtime, mtime_nsec) = match opts.timestamp {
        Some(ts) => (ts, 0),
        None => (md.mtime(), md.mtime_nsec() as u32),
    };
    let uid = if opts.all_root {
        0
    } else {
        opts.force_uid.unwrap_or(md.uid())
    };
    let gid = if opts.all_root {
        0
    } else {
        opts.force_gid.unwrap_or(md.gid())
    };
    t.warnings.extend(warnings);
    let size = match file_type {
        FileType::Regular | FileType::Symlink => md.len(),
        _ => 0,
    };
    t.nodes.push(Node {
        path: path.to_path_buf(),
        file_type,
        perm: md.mode() & 0o7777,
        uid,
        gid,
        mtime,
        mtime_nsec,
        size,
        rdev: md.rdev(),
        nlink: if file_type == FileType::Directory {
            2
        } else {
            1
        },
        xattrs,
        children: Vec::new(),
        parent,
    });
    Ok(t.nodes.len() - 1)
}

fn file_type_of(path: &Path, md: &std::fs::Metadata) -> io::Result<FileType> {
    FileType::from_mode(md.mode()).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: unknown file type", path.display()),
        )
    })
}

fn read_xattrs(path: &Path, warnings: &mut Vec<String>) -> io::Result<Vec<Xattr>> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    let mut buf = vec![0u8; 4096];
    let n = loop {
        // SAFETY: `c` is a NUL-terminated path and `buf` is writable for its length.
        let n = unsafe { libc::llistxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ERANGE) => buf.resize(buf.len() * 4, 0),
            Some(libc::ENOTSUP) => return Ok(Vec::new()),
            _ => return Err(io_err(path, e)),
        }
    };
    let mut out = Vec::new();
    for name in buf[..n].split(|&b| b == 0).filter(|s| !s.is_empty()) {
        let Some((idx, suffix)) = split_name(name) else {
            warnings.push(format!(
                "{}: xattr {} cannot be stored in EROFS, skipped",
                path.display(),
                String::from_utf8_lossy(name)
            ));
            continue;
        };
        let cname = CString::new(name).expect("no NUL in a listed name");
        let mut val = vec![0u8; 256];
        loop {
            // SAFETY: valid NUL-terminated strings and a writable buffer of the given length.
            let r = unsafe {
                libc::lgetxattr(
                    c.as_ptr(),
                    cname.as_ptr(),
                    val.as_mut_ptr().cast(),
                    val.len(),
                )
            };
            if r >= 0 {
                val.truncate(r as usize);
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ERANGE) && val.len() < 1 << 17 {
                val.resize(val.len() * 4, 0);
                continue;
            }
            return Err(io_err(path, e));
        }
        if val.len() > u16::MAX as usize {
            warnings.push(format!(
                "{}: xattr value too large, skipped",
                path.display()
            ));
            continue;
        }
        out.push((idx, suffix.to_vec(), val));
    }
    out.sort();
    Ok(out)
}
