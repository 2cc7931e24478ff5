//! Comparison of one entry present in both trees: type, hard links, mode, owner, link
//! count, size, symlink target, device number, times, xattrs, then content.

use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::diff::{show_bytes, show_time};
use super::{io_diff, DiffKind, Difference, Walker};
use crate::escape;
use crate::sys::{self, Timespec};
use crate::xattr;

/// Which tree.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Side {
    A,
    B,
}

/// The type of a file as a word.
fn type_name(m: &Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_file() {
        "regular file"
    } else if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symlink"
    } else if t.is_fifo() {
        "fifo"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "char device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "unknown type"
    }
}

fn differ<T: PartialEq>(
    rel: &Path,
    kind: DiffKind,
    a: T,
    b: T,
    show: impl Fn(T) -> String,
) -> Result<(), Difference> {
    if a == b {
        Ok(())
    } else {
        Err(Difference::new(rel, kind, show(a), show(b)))
    }
}

fn times(m: &Metadata) -> (Timespec, Timespec) {
    (
        Timespec::new(m.atime(), m.atime_nsec() as u32),
        Timespec::new(m.mtime(), m.mtime_nsec() as u32),
    )
}

fn show_dev(d: u64) -> String {
    format!("{}:{}", sys::major(d), sys::minor(d))
}

impl Walker<'_> {
    /// Compares entry `rel`, whose lstat results are `ma` and `mb`.
    pub(super) fn entry(
        &mut self,
        rel: &Path,
        ma: &Metadata,
        mb: &Metadata,
        root: bool,
    ) -> Result<(), Difference> {
        differ(
            rel,
            DiffKind::FileType,
            type_name(ma),
            type_name(mb),
            str::to_string,
        )?;
        let ft = ma.file_type();
        if !root {
            self.count(ma);
        }
        let attrs = !(root && self.opts.ignore_root_attrs);
        if attrs {
            differ(
                rel,
                DiffKind::Mode,
                ma.mode() & 0o7777,
                mb.mode() & 0o7777,
                |m| format!("{m:04o}"),
            )?;
            differ(rel, DiffKind::Uid, ma.uid(), mb.uid(), |v| v.to_string())?;
            differ(rel, DiffKind::Gid, ma.gid(), mb.gid(), |v| v.to_string())?;
        }
        let mut seen = false;
        if !ft.is_dir() {
            differ(rel, DiffKind::Nlink, ma.nlink(), mb.nlink(), |v| {
                v.to_string()
            })?;
            seen = self.hard_links(rel, ma, mb)?;
        }
        if ft.is_file() {
            differ(rel, DiffKind::Size, ma.size(), mb.size(), |v| v.to_string())?;
        } else if ft.is_symlink() {
            self.symlink(rel)?;
        } else if ft.is_char_device() || ft.is_block_device() {
            differ(rel, DiffKind::Rdev, ma.rdev(), mb.rdev(), show_dev)?;
        }
        if attrs {
            self.times(rel, ma, mb)?;
            if self.opts.xattrs {
                self.xattrs(rel)?;
            }
        }
        if ft.is_file() && !seen {
            self.content(rel, ma.size())?;
        }
        Ok(())
    }

    fn count(&mut self, m: &Metadata) {
        let s = &mut self.stats;
        s.entries += 1;
        let t = m.file_type();
        if t.is_dir() {
            s.dirs += 1;
        } else if t.is_file() {
            s.files += 1;
        } else if t.is_symlink() {
            s.symlinks += 1;
        } else {
            s.specials += 1;
        }
    }

    /// Checks that this name shares its inode with the same earlier name on both sides.
    /// Returns true if the inode was seen before (its content is already compared).
    fn hard_links(&mut self, rel: &Path, ma: &Metadata, mb: &Metadata) -> Result<bool, Difference> {
        if ma.nlink() < 2 && mb.nlink() < 2 {
            return Ok(false);
        }
        let ka = (ma.dev(), ma.ino());
        let kb = (mb.dev(), mb.ino());
        match (self.links_a.get(&ka), self.links_b.get(&kb)) {
            (None, None) => {
                self.links_a.insert(ka, rel.to_path_buf());
                self.links_b.insert(kb, rel.to_path_buf());
                Ok(false)
            }
            (Some(pa), Some(pb)) if pa == pb => {
                self.stats.hardlinks += 1;
                Ok(true)
            }
            (pa, pb) => {
                let show = |p: Option<&PathBuf>| match p {
                    Some(p) => format!("same inode as {}", escape(p.as_os_str().as_bytes())),
                    None => "not linked to any earlier name".to_string(),
                };
                Err(Difference::new(rel, DiffKind::HardLink, show(pa), show(pb)))
            }
        }
    }

    fn symlink(&mut self, rel: &Path) -> Result<(), Difference> {
        let ta = std::fs::read_link(self.abs_a(rel))
            .map_err(|e| io_diff(rel, Side::A, "readlink", e))?;
        let tb = std::fs::read_link(self.abs_b(rel))
            .map_err(|e| io_diff(rel, Side::B, "readlink", e))?;
        differ(
            rel,
            DiffKind::SymlinkTarget,
            ta.as_os_str().as_bytes(),
            tb.as_os_str().as_bytes(),
            show_bytes,
        )
    }

    fn times(&mut self, rel: &Path, ma: &Metadata, mb: &Metadata) -> Result<(), Difference> {
        let g = self.opts.time_granularity.nanos();
        let same =
            |x: Timespec, y: Timespec| x.as_nanos().div_euclid(g) == y.as_nanos().div_euclid(g);
        let ((aa, am), (ba, bm)) = (times(ma), times(mb));
        let mtime = !(ma.is_dir() && self.opts.ignore_dir_mtime);
        if mtime && !same(am, bm) {
            return Err(Difference::new(
                rel,
                DiffKind::Mtime,
                show_time(am),
                show_time(bm),
            ));
        }
        let atime = self.opts.atime && (self.opts.symlink_atime || !ma.file_type().is_symlink());
        if atime && !same(aa, ba) {
            return Err(Difference::new(
                rel,
                DiffKind::Atime,
                show_time(aa),
                show_time(ba),
            ));
        }
        Ok(())
    }

    fn xattr_names(&self, rel: &Path, side: Side) -> Result<Vec<Vec<u8>>, Difference> {
        let path = match side {
            Side::A => self.abs_a(rel),
            Side::B => self.abs_b(rel),
        };
        let mut names = xattr::list(&path).map_err(|e| io_diff(rel, side, "listxattr", e))?;
        names.retain(|n| xattr::is_compared(n, self.opts.system_xattrs));
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }

    fn xattrs(&mut self, rel: &Path) -> Result<(), Difference> {
        let na = self.xattr_names(rel, Side::A)?;
        let nb = self.xattr_names(rel, Side::B)?;
        if na != nb {
            // Name the first attribute present on one side only.
            let first = na
                .iter()
                .chain(&nb)
                .filter(|n| !(na.contains(n) && nb.contains(n)))
                .min();
            let first = first.map(|n| escape(n)).unwrap_or_default();
            let show = |names: &[Vec<u8>]| {
                let has = names.iter().any(|n| escape(n) == first);
                format!(
                    "{} {first} ({} names)",
                    if has { "has" } else { "no" },
                    names.len()
                )
            };
            return Err(Difference::new(
                rel,
                DiffKind::XattrNames,
                show(&na),
                show(&nb),
            ));
        }
        let (pa, pb) = (self.abs_a(rel), self.abs_b(rel));
        for name in &na {
            let va = xattr::get(&pa, name).map_err(|e| io_diff(rel, Side::A, "getxattr", e))?;
            let vb = xattr::get(&pb, name).map_err(|e| io_diff(rel, Side::B, "getxattr", e))?;
            if va != vb {
                let kind = DiffKind::XattrValue(escape(name));
                return Err(Difference::new(rel, kind, show_bytes(&va), show_bytes(&vb)));
            }
            self.stats.xattrs += 1;
        }
        Ok(())
    }

    fn content(&mut self, rel: &Path, size: u64) -> Result<(), Difference> {
        let fa =
            sys::open_noatime(&self.abs_a(rel), 0).map_err(|e| io_diff(rel, Side::A, "open", e))?;
        let fb =
            sys::open_noatime(&self.abs_b(rel), 0).map_err(|e| io_diff(rel, Side::B, "open", e))?;
        match self.content.compare(&fa, &fb, size) {
            Ok(None) => Ok(()),
            Ok(Some(m)) => {
                let show = |v: Option<u8>| match v {
                    Some(b) => format!("byte 0x{b:02x} at offset {}", m.offset),
                    None => format!("end of file at offset {}", m.offset),
                };
                Err(Difference::new(
                    rel,
                    DiffKind::Content,
                    show(m.a),
                    show(m.b),
                ))
            }
            Err((side, e)) => Err(io_diff(rel, side, "read", e)),
        }
    }
}
