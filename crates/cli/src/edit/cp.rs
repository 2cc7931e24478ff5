//! `usfs cp [-r] [-p|-a] SRC... DEST`: copies into an image (host -> `IMAGE:PATH`), out of
//! one (`IMAGE:PATH` -> host) or between images, with cp's rules: an existing directory
//! as DEST receives the sources by their names; `-r` copies trees (symbolic links inside
//! them as links, devices and fifos as nodes); `-p` keeps mode, owner and times; `-a` is
//! `-r -p` plus hard links among the copied files, xattrs, and no following of symbolic
//! links given on the command line.

use super::{creator, parse_place, umask, Editor, Place};
use crate::image::{CliError, CliResult};
use crate::progress::Progress;
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use usfs_fs::{
    Error, FileSystem, FileSystemWrite, FileType, Ino, Metadata, NewNode, SetAttr, Timestamp,
};
use usfs_vfs::attrs;

/// Options of `usfs cp`.
#[derive(clap::Args)]
pub(crate) struct CpArgs {
    /// Copy directories recursively.
    #[arg(short = 'r', short_alias = 'R', long)]
    recursive: bool,
    /// Keep mode, ownership and timestamps.
    #[arg(short = 'p')]
    preserve: bool,
    /// Archive: -r -p, hard links and xattrs kept, symbolic links never followed.
    #[arg(short = 'a', long)]
    archive: bool,
    /// Show progress even when standard output is not a terminal.
    #[arg(long)]
    progress: bool,
    /// Sources then the destination (IMAGE:PATH or host paths).
    #[arg(required = true, num_args = 2..)]
    paths: Vec<String>,
}

/// Where a node is read from.
#[derive(Clone)]
enum Src {
    Host(PathBuf),
    Image(Arc<dyn FileSystem>, Ino, String),
}

/// A node's attributes, whichever side it is on.
struct Node {
    meta: Metadata,
    /// Hard-link identity (device, inode) for -a.
    key: (u64, u64),
}

/// What a copy shares: options, the hard-link map, counters, progress.
struct Ctx {
    recursive: bool,
    preserve: bool,
    archive: bool,
    links: HashMap<(u64, u64), Ino>,
    host_links: HashMap<(u64, u64), PathBuf>,
    files: u64,
    bytes: u64,
    progress: Progress,
    buf: Vec<u8>,
    /// The caller's umask and (uid, gid), read once.
    umask: u32,
    creator: (u32, u32),
}

pub(crate) fn run(a: &CpArgs) -> CliResult {
    let (dest, srcs) = a.paths.split_last().expect("clap: two or more paths");
    let mut ctx = Ctx {
        recursive: a.recursive || a.archive,
        preserve: a.preserve || a.archive,
        archive: a.archive,
        links: HashMap::new(),
        host_links: HashMap::new(),
        files: 0,
        bytes: 0,
        progress: Progress::new(a.progress.then_some(true)),
        buf: vec![0u8; 1 << 20],
        umask: umask(),
        creator: creator(),
    };
    let mut readers: HashMap<PathBuf, Arc<dyn FileSystem>> = HashMap::new();
    let mut sources = Vec::new();
    for s in srcs {
        sources.push(match parse_place(s) {
            Place::Host(p) => Src::Host(p),
            Place::Image { image, path } => {
                let fs = match readers.get(&image) {
                    Some(f) => f.clone(),
                    None => {
                        let f = crate::image::open(&image, &Default::default())?;
                        readers.insert(image.clone(), f.clone());
                        f
                    }
                };
                let ino = crate::image::resolve(&*fs, &image, &path, !a.archive)?;
                Src::Image(fs, ino, format!("{}:{path}", image.display()))
            }
        });
    }
    let code = match parse_place(dest) {
        Place::Image { image, path } => {
            if readers.contains_key(&image) {
                return Err(CliError(format!(
                    "{}: copying inside one image is not supported (use ln or mv)",
                    image.display()
                )));
            }
            let ed = Editor::open(&image)?;
            let r = copy_into(&ed, &path, &sources, &mut ctx);
            ctx.progress.finish();
            ed.close()?;
            r?
        }
        Place::Host(p) => {
            let r = copy_out(&p, &sources, &mut ctx);
            ctx.progress.finish();
            r?
        }
    };
    Ok(code)
}

/// The last component of a source, its name at the destination.
fn src_name(s: &Src) -> Vec<u8> {
    let p = match s {
        Src::Host(p) => p.as_os_str().as_bytes().to_vec(),
        Src::Image(_, _, p) => p
            .split_once(':')
            .map_or(p.as_str(), |x| x.1)
            .as_bytes()
            .to_vec(),
    };
    let t: &[u8] = {
        let mut e = p.len();
        while e > 1 && p[e - 1] == b'/' {
            e -= 1;
        }
        &p[..e]
    };
    t.rsplit(|&c| c == b'/').next().unwrap_or(t).to_vec()
}

fn stat_src(s: &Src, follow: bool) -> Result<Node, String> {
    match s {
        Src::Host(p) => {
            let m = if follow {
                std::fs::metadata(p)
            } else {
                std::fs::symlink_metadata(p)
            };
            let m = m.map_err(|e| format!("{}: {e}", p.display()))?;
            Ok(Node {
                key: (m.dev(), m.ino()),
                meta: host_meta(&m),
            })
        }
        Src::Image(fs, ino, name) => {
            let m = fs.getattr(*ino).map_err(|e| format!("{name}: {e}"))?;
            Ok(Node {
                key: (0, *ino),
                meta: m,
            })
        }
    }
}

fn host_meta(m: &std::fs::Metadata) -> Metadata {
    let ft = m.file_type();
    let file_type = if ft.is_dir() {
        FileType::Directory
    } else if ft.is_symlink() {
        FileType::Symlink
    } else if ft.is_block_device() {
        FileType::BlockDevice
    } else if ft.is_char_device() {
        FileType::CharDevice
    } else if ft.is_fifo() {
        FileType::Fifo
    } else if ft.is_socket() {
        FileType::Socket
    } else {
        FileType::Regular
    };
    let ts = |s: i64, n: i64| Timestamp {
        sec: s,
        nsec: n as u32,
    };
    Metadata {
        ino: m.ino(),
        file_type,
        perm: m.permissions().mode() & 0o7777,
        uid: m.uid(),
        gid: m.gid(),
        nlink: m.nlink(),
        size: m.size(),
        blocks: m.blocks(),
        rdev: m.rdev(),
        blksize: m.blksize() as u32,
        atime: ts(m.atime(), m.atime_nsec()),
        mtime: ts(m.mtime(), m.mtime_nsec()),
        ctime: ts(m.ctime(), m.ctime_nsec()),
        crtime: None,
        generation: 0,
    }
}

/// Copies every source into `path` of the image.
fn copy_into(ed: &Editor, path: &str, srcs: &[Src], ctx: &mut Ctx) -> CliResult<ExitCode> {
    let target = ed.resolve(path, true);
    let into_dir = matches!(target, Ok(t) if ed.is_dir(t));
    if srcs.len() > 1 && !into_dir {
        return Err(ed.err(path, "target is not a directory"));
    }
    let mut failed = false;
    for s in srcs {
        let (dir, name) = if into_dir {
            (target.as_ref().copied().expect("checked"), src_name(s))
        } else {
            ed.parent(path)?
        };
        let follow = !ctx.archive;
        if let Err(e) = copy_node_in(ed, s, dir, &name, follow, ctx) {
            eprintln!("usfs: {e}");
            failed = true;
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn copy_node_in(
    ed: &Editor,
    s: &Src,
    dir: Ino,
    name: &[u8],
    follow: bool,
    ctx: &mut Ctx,
) -> Result<(), String> {
    let n = stat_src(s, follow)?;
    let m = &n.meta;
    let shown = String::from_utf8_lossy(name).to_string();
    let err = |e: Error| format!("{}: {shown}: {e}", ed.image.display());
    if m.file_type == FileType::Directory && !ctx.recursive {
        return Err(format!("-r not specified; omitting directory '{shown}'"));
    }
    if ctx.archive && m.file_type != FileType::Directory && m.nlink > 1 {
        if let Some(&ino) = ctx.links.get(&n.key) {
            return ed.fs.link(ino, dir, name).map(|_| ()).map_err(err);
        }
    }
    // Without -p the new inode is the caller's, its mode the source's less the umask (or
    // under the directory's default ACL), its group a setgid directory's: as cp makes it
    // on a kernel mount.
    let node = if ctx.preserve {
        NewNode {
            file_type: m.file_type,
            perm: m.perm,
            uid: m.uid,
            gid: m.gid,
            rdev: m.rdev,
        }
    } else {
        let (uid, gid) = ctx.creator;
        let pm = ed.fs.getattr(dir).map_err(err)?;
        let mask = attrs::umask_for(&*ed.fs, dir, ctx.umask);
        let caller = attrs::Caller { uid, gid };
        attrs::new_node(m.file_type, m.perm & 0o1777, mask, m.rdev, caller, &pm)
    };
    let (uid, gid) = (node.uid, node.gid);
    let existing = ed.fs.lookup(dir, name).ok();
    let ino = match m.file_type {
        FileType::Directory => match existing.filter(|&e| ed.is_dir(e)) {
            Some(e) => e,
            None => ed.fs.mkdir(dir, name, node).map_err(err)?.ino,
        },
        FileType::Symlink => {
            if existing.is_some() {
                ed.fs.unlink(dir, name).map_err(err)?;
            }
            let target = read_link(s)?;
            ed.fs
                .symlink(dir, name, &target, uid, gid)
                .map_err(err)?
                .ino
        }
        FileType::Regular => {
            let ino = match existing {
                Some(e) if !ed.is_dir(e) => {
                    ed.fs
                        .setattr(
                            e,
                            SetAttr {
                                size: Some(0),
                                ..Default::default()
                            },
                        )
                        .map_err(err)?;
                    e
                }
                Some(_) => return Err(err(Error::IsDir)),
                None => ed.fs.create(dir, name, node).map_err(err)?.ino,
            };
            copy_data_in(ed, s, m.size, ino, ctx).map_err(|e| format!("{shown}: {e}"))?;
            ino
        }
        _ => {
            if existing.is_some() {
                ed.fs.unlink(dir, name).map_err(err)?;
            }
            ed.fs.create(dir, name, node).map_err(err)?.ino
        }
    };
    if ctx.archive && m.file_type != FileType::Directory && m.nlink > 1 {
        ctx.links.insert(n.key, ino);
    }
    if m.file_type == FileType::Directory {
        for (child, cname) in list_src(s)? {
            copy_node_in(ed, &child, ino, &cname, false, ctx)?;
        }
    }
    if ctx.archive {
        copy_xattrs_in(ed, s, ino).map_err(&err)?;
    }
    if ctx.preserve {
        let attr = SetAttr {
            perm: Some(m.perm),
            uid: Some(m.uid),
            gid: Some(m.gid),
            atime: Some(m.atime),
            mtime: Some(m.mtime),
            ..Default::default()
        };
        ed.fs.setattr(ino, attr).map_err(err)?;
    }
    Ok(())
}

/// Copies the bytes of a regular file, leaving holes where the source has them.
/// Copies the data of `s` (whose size was `size` when it was looked at) into the new
/// file `ino`.
fn copy_data_in(ed: &Editor, s: &Src, size: u64, ino: Ino, ctx: &mut Ctx) -> Result<(), String> {
    let mut off = 0u64;
    match s {
        Src::Host(p) => {
            let mut f = File::open(p).map_err(|e| e.to_string())?;
            loop {
                let n = read_some(&mut f, &mut ctx.buf).map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                write_piece(ed, ino, off, &ctx.buf[..n])?;
                off += n as u64;
                ctx.count(n);
                // All the bytes stat counted: no read returning 0 to make sure (a file
                // that says it is empty, as /proc's do, is read to the end).
                if size > 0 && off >= size {
                    break;
                }
            }
        }
        Src::Image(fs, src, _) => loop {
            let n = fs
                .read_at(*src, off, &mut ctx.buf)
                .map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            write_piece(ed, ino, off, &ctx.buf[..n])?;
            off += n as u64;
            ctx.count(n);
        },
    }
    // Trailing zeros were left as a hole (write_piece): they still count in the size.
    let written = ed.fs.getattr(ino).map(|m| m.size).unwrap_or(off);
    if off > written {
        ed.fs
            .setattr(
                ino,
                SetAttr {
                    size: Some(off),
                    ..Default::default()
                },
            )
            .map_err(|e| e.to_string())?;
    }
    ctx.files += 1;
    Ok(())
}

/// Writes one buffer, skipping whole blocks of zeros (they stay holes).
fn write_piece(ed: &Editor, ino: Ino, off: u64, data: &[u8]) -> Result<(), String> {
    const B: usize = 4096;
    let mut i = 0;
    while i < data.len() {
        let zero_run = data[i..]
            .chunks(B)
            .take_while(|c| c.len() == B && c.iter().all(|&b| b == 0))
            .count()
            * B;
        if zero_run > 0 && (off + i as u64).is_multiple_of(B as u64) {
            i += zero_run;
            continue;
        }
        let mut j = i + B.min(data.len() - i);
        while j < data.len() {
            let c = &data[j..(j + B).min(data.len())];
            if c.len() == B && c.iter().all(|&b| b == 0) {
                break;
            }
            j += c.len();
        }
        ed.fs
            .write_at(ino, off + i as u64, &data[i..j])
            .map_err(|e| e.to_string())?;
        i = j;
    }
    Ok(())
}

/// One read(2) into `buf`, again when interrupted.
fn read_some(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match f.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}

fn read_link(s: &Src) -> Result<Vec<u8>, String> {
    match s {
        Src::Host(p) => std::fs::read_link(p)
            .map(|t| t.as_os_str().as_bytes().to_vec())
            .map_err(|e| format!("{}: {e}", p.display())),
        Src::Image(fs, ino, name) => fs.readlink(*ino).map_err(|e| format!("{name}: {e}")),
    }
}

/// The children of a directory source, sorted by name (a stable order for the image).
fn list_src(s: &Src) -> Result<Vec<(Src, Vec<u8>)>, String> {
    let mut out = Vec::new();
    match s {
        Src::Host(p) => {
            for e in std::fs::read_dir(p).map_err(|e| format!("{}: {e}", p.display()))? {
                let e = e.map_err(|e| format!("{}: {e}", p.display()))?;
                out.push((Src::Host(e.path()), e.file_name().as_bytes().to_vec()));
            }
        }
        Src::Image(fs, ino, name) => {
            let mut err = None;
            let mut cookie = 0;
            loop {
                let mut got = 0;
                let r = fs.readdir(*ino, cookie, &mut |e, next| {
                    let child = format!("{name}/{}", String::from_utf8_lossy(&e.name));
                    out.push((Src::Image(fs.clone(), e.ino, child), e.name));
                    cookie = next;
                    got += 1;
                    got < 4096
                });
                if let Err(e) = r {
                    err = Some(e);
                    break;
                }
                if got < 4096 {
                    break;
                }
            }
            if let Some(e) = err {
                return Err(format!("{name}: {e}"));
            }
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

fn copy_xattrs_in(ed: &Editor, s: &Src, ino: Ino) -> Result<(), Error> {
    let names: Vec<(Vec<u8>, Vec<u8>)> = match s {
        Src::Host(_) => Vec::new(),
        Src::Image(fs, src, _) => fs
            .list_xattrs(*src)?
            .into_iter()
            .filter_map(|n| fs.get_xattr(*src, &n).ok().map(|v| (n, v)))
            .collect(),
    };
    for (n, v) in names {
        ed.fs.set_xattr(ino, &n, &v)?;
    }
    Ok(())
}

impl Ctx {
    fn count(&mut self, n: usize) {
        self.bytes += n as u64;
        let (f, b) = (self.files, self.bytes);
        self.progress
            .update(|| format!("copied {f} files, {:.1} MiB", b as f64 / 1048576.0));
    }
}

/// Copies every image source out to host path `dest`.
fn copy_out(dest: &Path, srcs: &[Src], ctx: &mut Ctx) -> CliResult<ExitCode> {
    let into_dir = dest.is_dir();
    if srcs.len() > 1 && !into_dir {
        return Err(CliError(format!(
            "{}: target is not a directory",
            dest.display()
        )));
    }
    let mut failed = false;
    for s in srcs {
        if matches!(s, Src::Host(_)) {
            return Err(CliError("cp: host to host copies are cp(1)'s job".into()));
        }
        let target = if into_dir {
            dest.join(std::ffi::OsStr::from_bytes(&src_name(s)))
        } else {
            dest.to_path_buf()
        };
        if let Err(e) = copy_node_out(s, &target, ctx) {
            eprintln!("usfs: {e}");
            failed = true;
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn copy_node_out(s: &Src, target: &Path, ctx: &mut Ctx) -> Result<(), String> {
    let Src::Image(fs, ino, name) = s else {
        return Err("host source".into());
    };
    let m = fs.getattr(*ino).map_err(|e| format!("{name}: {e}"))?;
    let at = |e: std::io::Error| format!("{}: {e}", target.display());
    if ctx.archive && m.file_type != FileType::Directory && m.nlink > 1 {
        if let Some(p) = ctx.host_links.get(&(0, *ino)) {
            return std::fs::hard_link(p, target).map_err(at);
        }
    }
    match m.file_type {
        FileType::Directory => {
            if !ctx.recursive {
                return Err(format!("-r not specified; omitting directory '{name}'"));
            }
            if !target.is_dir() {
                std::fs::create_dir(target).map_err(at)?;
            }
            for (child, cname) in list_src(s)? {
                copy_node_out(
                    &child,
                    &target.join(std::ffi::OsStr::from_bytes(&cname)),
                    ctx,
                )?;
            }
        }
        FileType::Symlink => {
            let t = fs.readlink(*ino).map_err(|e| format!("{name}: {e}"))?;
            let _ = std::fs::remove_file(target);
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&t), target).map_err(at)?;
        }
        FileType::Regular => {
            let f = File::create(target).map_err(at)?;
            let mut off = 0u64;
            loop {
                let n = fs
                    .read_at(*ino, off, &mut ctx.buf)
                    .map_err(|e| format!("{name}: {e}"))?;
                if n == 0 {
                    break;
                }
                std::os::unix::fs::FileExt::write_all_at(&f, &ctx.buf[..n], off).map_err(at)?;
                off += n as u64;
                ctx.count(n);
            }
            f.set_len(m.size).map_err(at)?;
            ctx.files += 1;
        }
        _ => {
            let c = std::ffi::CString::new(target.as_os_str().as_bytes())
                .map_err(|_| "NUL in path".to_string())?;
            let mode = m.file_type.mode_bits() | m.perm;
            // SAFETY: valid C string; mknod only reads it.
            if unsafe { libc::mknod(c.as_ptr(), mode as libc::mode_t, m.rdev as libc::dev_t) } != 0
            {
                return Err(at(std::io::Error::last_os_error()));
            }
        }
    }
    if ctx.archive && m.file_type != FileType::Directory && m.nlink > 1 {
        ctx.host_links.insert((0, *ino), target.to_path_buf());
    }
    if ctx.preserve {
        set_host_attrs(target, &m).map_err(at)?;
    } else if m.file_type != FileType::Symlink {
        std::fs::set_permissions(
            target,
            std::fs::Permissions::from_mode(m.perm & !umask() & 0o777),
        )
        .map_err(at)?;
    }
    Ok(())
}

fn set_host_attrs(target: &Path, m: &Metadata) -> std::io::Result<()> {
    let c = std::ffi::CString::new(target.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let check = |r: libc::c_int| {
        if r != 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // SAFETY: valid C string and a two-element timespec array; calls only read them.
    unsafe {
        if creator().0 == 0 {
            check(libc::lchown(c.as_ptr(), m.uid, m.gid))?;
        }
        if m.file_type != FileType::Symlink {
            check(libc::chmod(c.as_ptr(), m.perm as libc::mode_t))?;
        }
        let ts = |t: Timestamp| libc::timespec {
            tv_sec: t.sec as libc::time_t,
            tv_nsec: t.nsec as _,
        };
        let times = [ts(m.atime), ts(m.mtime)];
        check(libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        ))
    }
}
