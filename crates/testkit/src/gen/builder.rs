//! The builder: creates entries under the root, counts them in the report, and remembers
//! the attributes each inode gets in the final pass (owner, then mode, then times,
//! children before parents so directory times stay as set).

use std::ffi::OsStr;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::attrs::Attrs;
use super::{GenOptions, GenReport};
use crate::content::{self, Content};
use crate::names;
use crate::rng::Rng;
use crate::sys;
use crate::Timespec;

/// A kind of special file.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Special {
    Fifo,
    Char(u32, u32),
    Block(u32, u32),
    Socket,
}

struct Pending {
    rel: PathBuf,
    attrs: Attrs,
    symlink: bool,
}

pub(crate) struct Builder<'a> {
    root: PathBuf,
    pub opts: &'a GenOptions,
    pub report: GenReport,
    pending: Vec<Pending>,
}

impl<'a> Builder<'a> {
    pub(super) fn new(root: &Path, opts: &'a GenOptions) -> Builder<'a> {
        Builder {
            root: root.to_path_buf(),
            opts,
            report: GenReport::default(),
            pending: Vec::new(),
        }
    }

    /// A generator for one section of the tree, independent of the other sections.
    pub(super) fn rng(&self, section: &str) -> Rng {
        // FNV-1a of the section name, mixed with the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in section.as_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Rng::new(self.opts.seed ^ h)
    }

    /// The absolute path of `rel`.
    pub(super) fn abs(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    /// Adds a note to the report (once per distinct text).
    pub(super) fn note(&mut self, msg: String) {
        if !self.report.notes.contains(&msg) {
            self.report.notes.push(msg);
        }
    }

    /// `dir/name`, with a suffix added when that name is already taken.
    pub(super) fn unique(&self, dir: &Path, name: &[u8]) -> PathBuf {
        let name = names::sanitize(name.to_vec());
        let mut cand = dir.join(OsStr::from_bytes(&name));
        let mut n = 1u32;
        while fs::symlink_metadata(self.abs(&cand)).is_ok() {
            let suffix = format!("~{n}");
            let mut alt = name.clone();
            alt.truncate(names::NAME_MAX - suffix.len());
            alt.extend_from_slice(suffix.as_bytes());
            cand = dir.join(OsStr::from_bytes(&alt));
            n += 1;
        }
        cand
    }

    fn remember(&mut self, rel: &Path, attrs: Attrs, symlink: bool) {
        self.pending.push(Pending {
            rel: rel.to_path_buf(),
            attrs,
            symlink,
        });
        if !rel.as_os_str().is_empty() {
            self.report.entries += 1;
        }
    }

    /// Registers the root directory (it exists already).
    pub(super) fn root(&mut self, attrs: Attrs) {
        self.remember(Path::new(""), attrs, false);
    }

    /// Creates directory `rel`.
    pub(super) fn mkdir(&mut self, rel: &Path, attrs: Attrs) -> io::Result<()> {
        fs::create_dir(self.abs(rel)).map_err(|e| ctx(e, "mkdir", rel))?;
        self.report.dirs += 1;
        self.remember(rel, attrs, false);
        Ok(())
    }

    /// Creates regular file `rel` with `len` bytes of `kind`.
    pub(super) fn file(
        &mut self,
        rel: &Path,
        kind: Content,
        len: u64,
        rng: &mut Rng,
        attrs: Attrs,
    ) -> io::Result<()> {
        let f = File::create(self.abs(rel)).map_err(|e| ctx(e, "create", rel))?;
        let mut w = BufWriter::with_capacity(64 * 1024, f);
        content::write(&mut w, kind, rng, len).map_err(|e| ctx(e, "write", rel))?;
        w.flush().map_err(|e| ctx(e, "write", rel))?;
        self.report.files += 1;
        self.report.bytes += len;
        self.report.data_bytes += len;
        self.remember(rel, attrs, false);
        Ok(())
    }

    /// Creates sparse file `rel` of `size` bytes with random data at `segments`
    /// (offset, length) and holes elsewhere.
    pub(super) fn sparse(
        &mut self,
        rel: &Path,
        segments: &[(u64, u64)],
        size: u64,
        rng: &mut Rng,
        attrs: Attrs,
    ) -> io::Result<()> {
        let f = File::create(self.abs(rel)).map_err(|e| ctx(e, "create", rel))?;
        for &(off, len) in segments {
            let data = content::random_bytes(rng, len as usize);
            f.write_all_at(&data, off)
                .map_err(|e| ctx(e, "write", rel))?;
            self.report.data_bytes += len;
        }
        f.set_len(size).map_err(|e| ctx(e, "truncate", rel))?;
        self.report.files += 1;
        self.report.sparse_files += 1;
        if size > 1 << 32 {
            self.report.huge_files += 1;
        }
        self.report.bytes += size;
        self.remember(rel, attrs, false);
        Ok(())
    }

    /// Creates symbolic link `rel` pointing to `target` (raw bytes).
    pub(super) fn symlink(&mut self, rel: &Path, target: &[u8], attrs: Attrs) -> io::Result<()> {
        std::os::unix::fs::symlink(OsStr::from_bytes(target), self.abs(rel))
            .map_err(|e| ctx(e, "symlink", rel))?;
        self.report.symlinks += 1;
        self.remember(rel, attrs, true);
        Ok(())
    }

    /// Adds name `new` for the inode of `existing` (not following a symlink).
    pub(super) fn hardlink(&mut self, existing: &Path, new: &Path) -> io::Result<()> {
        fs::hard_link(self.abs(existing), self.abs(new)).map_err(|e| ctx(e, "link", new))?;
        self.report.hardlinks += 1;
        self.report.entries += 1;
        Ok(())
    }

    /// Creates a special file; returns false (with a note) when devices cannot be made
    /// here (no permission).
    pub(super) fn special(&mut self, rel: &Path, kind: Special, attrs: Attrs) -> io::Result<bool> {
        let path = self.abs(rel);
        let (r, what) = match kind {
            Special::Fifo => (sys::mknod(&path, libc::S_IFIFO, 0o644, 0), "fifo"),
            Special::Char(ma, mi) => (
                sys::mknod(&path, libc::S_IFCHR, 0o644, sys::makedev(ma, mi)),
                "char device",
            ),
            Special::Block(ma, mi) => (
                sys::mknod(&path, libc::S_IFBLK, 0o644, sys::makedev(ma, mi)),
                "block device",
            ),
            Special::Socket => (make_socket(&path), "socket"),
        };
        if let Err(e) = r {
            if e.raw_os_error() == Some(libc::EPERM)
                && matches!(kind, Special::Char(..) | Special::Block(..))
            {
                self.note(format!("device nodes skipped: mknod: {e}"));
                return Ok(false);
            }
            return Err(ctx(e, &format!("mknod {what}"), rel));
        }
        match kind {
            Special::Fifo => self.report.fifos += 1,
            Special::Char(..) => self.report.char_devices += 1,
            Special::Block(..) => self.report.block_devices += 1,
            Special::Socket => self.report.sockets += 1,
        }
        self.remember(rel, attrs, false);
        Ok(true)
    }

    /// Sets extended attributes on `rel`; a namespace the file system or the user cannot
    /// write is skipped with a note.
    pub(super) fn xattrs(&mut self, rel: &Path, list: &[(Vec<u8>, Vec<u8>)]) -> io::Result<()> {
        let path = self.abs(rel);
        for (name, value) in list.iter().take(self.opts.max_xattrs_per_file) {
            match crate::xattr::set(&path, name, value) {
                Ok(()) => self.report.xattrs += 1,
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EPERM | libc::ENOTSUP | libc::EACCES)
                    ) =>
                {
                    let ns = name.split(|&b| b == b'.').next().unwrap_or(b"");
                    self.note(format!(
                        "{}.* xattrs skipped: {e}",
                        String::from_utf8_lossy(ns)
                    ));
                }
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ENOSPC | libc::E2BIG | libc::ERANGE)
                    ) =>
                {
                    let (n, p) = (
                        crate::escape(name),
                        crate::escape(rel.as_os_str().as_bytes()),
                    );
                    self.note(format!(
                        "xattr {n} ({} bytes) skipped on {p}: {e}",
                        value.len()
                    ));
                }
                Err(e) => {
                    return Err(ctx(
                        e,
                        &format!("setxattr {}", String::from_utf8_lossy(name)),
                        rel,
                    ))
                }
            }
        }
        Ok(())
    }

    /// The final pass: owner, mode and times for every entry, children before parents.
    pub(super) fn finish(mut self) -> io::Result<GenReport> {
        let pending = std::mem::take(&mut self.pending);
        for p in pending.iter().rev() {
            let path = self.abs(&p.rel);
            match std::os::unix::fs::lchown(&path, Some(p.attrs.uid), Some(p.attrs.gid)) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                    self.note(format!("owners not set: chown: {e}"));
                }
                Err(e) => return Err(ctx(e, "chown", &p.rel)),
            }
            if !p.symlink {
                fs::set_permissions(&path, fs::Permissions::from_mode(p.attrs.perm & 0o7777))
                    .map_err(|e| ctx(e, "chmod", &p.rel))?;
            }
            let (atime, mtime) = if self.opts.times_32bit {
                (clamp_32bit(p.attrs.atime), clamp_32bit(p.attrs.mtime))
            } else {
                (p.attrs.atime, p.attrs.mtime)
            };
            sys::set_times(&path, atime, mtime).map_err(|e| ctx(e, "utimensat", &p.rel))?;
        }
        Ok(self.report)
    }
}

/// A timestamp moved into the signed 32-bit range of seconds (for `times_32bit`).
fn clamp_32bit(t: Timespec) -> Timespec {
    let sec = t.sec.clamp(i32::MIN as i64, i32::MAX as i64);
    Timespec::new(sec, if sec == t.sec { t.nsec } else { 0 })
}

/// Binds a Unix socket at `path` and closes it (the socket file stays). A path too long
/// for `sun_path` gets a socket inode from mknod instead.
fn make_socket(path: &Path) -> io::Result<()> {
    match std::os::unix::net::UnixListener::bind(path) {
        Ok(l) => {
            drop(l);
            Ok(())
        }
        Err(e) if fs::symlink_metadata(path).is_err() => sys::mknod(path, libc::S_IFSOCK, 0o755, 0)
            .map_err(|e2| io::Error::new(e2.kind(), format!("{e}; mknod: {e2}"))),
        Err(e) => Err(e),
    }
}

/// Adds what was being done and where to an error.
pub(crate) fn ctx(e: io::Error, op: &str, rel: &Path) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("{op} {}: {e}", crate::escape(rel.as_os_str().as_bytes())),
    )
}
