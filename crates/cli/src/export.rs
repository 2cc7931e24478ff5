//! `usfs export`: extract an image's whole tree into a host directory, preserving content
//! (with holes), type, permissions, owner, atime/mtime with nanoseconds, symlinks, hard
//! links, device nodes and extended attributes.
//!
//! Three phases: walk the image creating directories (one thread); restore every inode
//! that is not a directory (N threads, each with its own buffer); then hard links, then
//! directory attributes deepest-first so that creating children does not disturb them.

use crate::image::{self, CliError, CliResult};
use crate::progress::Progress;
use std::ffi::{CString, OsStr};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use usfs_fs::{FileSystem, FileType, Ino, Metadata};

/// Options of `usfs export`.
#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    /// The image.
    image: PathBuf,
    #[command(flatten)]
    dev: crate::image::DeviceArgs,
    /// Destination directory: created if missing, else it must be empty.
    dir: PathBuf,
    /// Worker threads for file contents (default: CPU count).
    #[arg(short = 'j', long)]
    threads: Option<usize>,
    /// Do not restore owners (the default when not running as root).
    #[arg(long)]
    no_owner: bool,
    /// Do not restore extended attributes.
    #[arg(long)]
    no_xattrs: bool,
    /// Show progress even when standard output is not a terminal.
    #[arg(long, conflicts_with = "no_progress")]
    progress: bool,
    /// Never show progress.
    #[arg(long)]
    no_progress: bool,
    /// Allow a non-empty destination directory.
    #[arg(long)]
    force: bool,
    /// Print phase times and image I/O counts to standard error at the end.
    #[arg(long)]
    trace: bool,
}

/// Items a worker takes at once.
const CHUNK: usize = 64;

/// An inode to restore at a host path.
struct Item {
    path: PathBuf,
    ino: Ino,
    meta: Metadata,
}

/// What the restore phases share.
struct Ctx<'a> {
    fs: &'a dyn FileSystem,
    owners: bool,
    /// Owner new files get without chown (directories are created without setgid, so
    /// children never inherit another group).
    creator: (u32, u32),
    xattrs: bool,
    /// Existing directories are used as they are.
    merge: bool,
    /// Items in the way are removed first.
    overwrite: bool,
    problems: Mutex<Vec<String>>,
    files_done: AtomicUsize,
    bytes_done: AtomicU64,
}

impl Ctx<'_> {
    fn problem(&self, path: &Path, what: impl std::fmt::Display) {
        let msg = format!("{}: {what}", path.display());
        self.problems
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(msg);
    }
}

pub(crate) fn run(args: &ExportArgs) -> CliResult {
    let fs = image::open(&args.image, &args.dev)?;
    prepare_dest(&args.dir, args.force)?;
    let opts = TreeOptions {
        threads: args.threads,
        owners: !args.no_owner,
        xattrs: !args.no_xattrs,
        merge: false,
        overwrite: false,
        progress: if args.no_progress {
            Some(false)
        } else if args.progress {
            Some(true)
        } else {
            None
        },
        trace: args.trace,
    };
    let problems = export_tree(&*fs, &args.dir, &opts)?;
    for p in &problems {
        eprintln!("usfs: export: {p}");
    }
    if problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "usfs: export: {} item(s) could not be restored completely",
            problems.len()
        );
        Ok(ExitCode::from(1))
    }
}

/// How [`export_tree`] writes the tree.
pub(crate) struct TreeOptions {
    /// Worker threads for file contents (default: CPU count).
    pub(crate) threads: Option<usize>,
    /// Restore owners (only when running as root).
    pub(crate) owners: bool,
    /// Restore extended attributes.
    pub(crate) xattrs: bool,
    /// Directories that exist already are used as they are (fsck.erofs --extract).
    pub(crate) merge: bool,
    /// Anything else in the way of an item is removed first (fsck.erofs --overwrite; an
    /// empty directory in the way of a file too).
    pub(crate) overwrite: bool,
    /// Progress display: forced on, off, or on a terminal only (`None`).
    pub(crate) progress: Option<bool>,
    /// Print phase times and image I/O counts to standard error at the end.
    pub(crate) trace: bool,
}

/// Writes the whole tree of `fs` under the existing directory `dest`; returns the
/// problems (one line each, path first) of items that could not be restored completely.
pub(crate) fn export_tree(
    fs: &dyn FileSystem,
    dest: &Path,
    opts: &TreeOptions,
) -> CliResult<Vec<String>> {
    // SAFETY: plain system calls without arguments that can fail.
    let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // Files are created with their final permission bits: no umask in the way.
    // SAFETY: umask only changes this process's file-creation mask.
    unsafe { libc::umask(0) };
    let ctx = Ctx {
        fs,
        owners: opts.owners && euid == 0,
        creator: (euid, egid),
        xattrs: opts.xattrs,
        merge: opts.merge,
        overwrite: opts.overwrite,
        problems: Mutex::new(Vec::new()),
        files_done: AtomicUsize::new(0),
        bytes_done: AtomicU64::new(0),
    };
    let mut progress = Progress::new(opts.progress);

    let started = std::time::Instant::now();
    let (dirs, inodes, links) = walk(&ctx, dest, &mut progress)?;
    let threads = opts
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 64);
    let walked = started.elapsed();
    restore_all(&ctx, &inodes, threads, &mut progress);
    for (target, path) in &links {
        if let Err(e) = clear_way(&ctx, path).and_then(|()| std::fs::hard_link(target, path)) {
            ctx.problem(path, format!("hard link to {}: {e}", target.display()));
        }
    }
    for d in dirs.iter().rev() {
        set_attributes(&ctx, d);
    }
    progress.finish();
    if opts.trace {
        let io = fs.io_stats();
        eprintln!(
            "export: walk {:.3} s ({} directories, {} inodes, {} links), total {:.3} s, {threads} threads; image reads: {} requests, {} bytes",
            walked.as_secs_f64(),
            dirs.len(),
            inodes.len(),
            links.len(),
            started.elapsed().as_secs_f64(),
            io.reads,
            io.bytes_read
        );
    }
    Ok(ctx.problems.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// Restores every non-directory inode on `threads` threads, showing progress.
fn restore_all(ctx: &Ctx, inodes: &[Item], threads: usize, progress: &mut Progress) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut buf = vec![0u8; 1 << 20];
                // Items are in walk order, so a chunk mostly shares one directory: the
                // threads rarely contend for the same directory's lock.
                loop {
                    let first = next.fetch_add(CHUNK, Ordering::Relaxed);
                    if first >= inodes.len() {
                        break;
                    }
                    for item in &inodes[first..(first + CHUNK).min(inodes.len())] {
                        restore_inode(ctx, item, &mut buf);
                    }
                    let done = CHUNK.min(inodes.len() - first);
                    ctx.files_done.fetch_add(done, Ordering::Relaxed);
                }
            });
        }
        while ctx.files_done.load(Ordering::Relaxed) < inodes.len() {
            progress.update(|| {
                format!(
                    "export: {}/{} files, {} MiB",
                    ctx.files_done.load(Ordering::Relaxed),
                    inodes.len(),
                    ctx.bytes_done.load(Ordering::Relaxed) >> 20
                )
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
}

/// With `overwrite`, removes whatever is at `path` (a non-directory, or an empty
/// directory, as fsck.erofs's rmdir) so a non-directory can be created there.
fn clear_way(ctx: &Ctx, path: &Path) -> io::Result<()> {
    if !ctx.overwrite {
        return Ok(());
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates a directory; with `merge` an existing directory will do, and with
/// `overwrite` a non-directory in the way is removed first.
fn make_dir(ctx: &Ctx, path: &Path) -> io::Result<()> {
    match std::fs::create_dir(path) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && ctx.merge => {
            if std::fs::symlink_metadata(path)?.is_dir() {
                return Ok(());
            }
            if !ctx.overwrite {
                return Err(e);
            }
            std::fs::remove_file(path)?;
            std::fs::create_dir(path)
        }
        r => r,
    }
}

fn prepare_dest(dir: &Path, force: bool) -> CliResult<()> {
    match std::fs::read_dir(dir) {
        Ok(mut rd) => {
            if !force && rd.next().is_some() {
                return Err(CliError::at(
                    dir.display(),
                    "destination directory is not empty (use --force)",
                ));
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| CliError::at(dir.display(), e))
        }
        Err(e) => Err(CliError::at(dir.display(), e)),
    }
}

type Walked = (Vec<Item>, Vec<Item>, Vec<(PathBuf, PathBuf)>);

/// Walks the image breadth-first, creating directories; returns the directories (in
/// creation order, root first), the inodes to restore, and (first path, link path) pairs.
fn walk(ctx: &Ctx, dest: &Path, progress: &mut Progress) -> CliResult<Walked> {
    let fs = ctx.fs;
    let root = fs.root();
    let root_meta = fs
        .getattr(root)
        .map_err(|e| CliError::at("image root", e))?;
    let mut dirs = vec![Item {
        path: dest.to_path_buf(),
        ino: root,
        meta: root_meta,
    }];
    let mut inodes = Vec::new();
    let mut links = Vec::new();
    let mut first_path: std::collections::HashMap<Ino, usize> = Default::default();
    // A corrupt image can link a directory twice (or into its own subtree).
    let mut seen_dirs = std::collections::HashSet::from([root]);
    let mut i = 0;
    while i < dirs.len() {
        let (dir_ino, dir_path) = (dirs[i].ino, dirs[i].path.clone());
        i += 1;
        let mut entries = Vec::new();
        if let Err(e) = fs.readdir(dir_ino, 0, &mut |e, _| {
            entries.push(e);
            true
        }) {
            ctx.problem(&dir_path, e);
            continue;
        }
        for e in entries {
            let path = dir_path.join(OsStr::from_bytes(&e.name));
            let meta = match fs.getattr(e.ino) {
                Ok(m) => m,
                Err(err) => {
                    ctx.problem(&path, err);
                    continue;
                }
            };
            if meta.file_type == FileType::Directory {
                if !seen_dirs.insert(e.ino) {
                    ctx.problem(
                        &path,
                        format!("directory inode {} appears twice (directory loop)", e.ino),
                    );
                    continue;
                }
                if let Err(err) = make_dir(ctx, &path) {
                    ctx.problem(&path, err);
                    continue;
                }
                dirs.push(Item {
                    path,
                    ino: e.ino,
                    meta,
                });
                continue;
            }
            if meta.nlink > 1 {
                if let Some(&k) = first_path.get(&e.ino) {
                    links.push((inodes_path(&inodes, k), path));
                    continue;
                }
                first_path.insert(e.ino, inodes.len());
            }
            inodes.push(Item {
                path,
                ino: e.ino,
                meta,
            });
        }
        progress.update(|| {
            format!(
                "export: scanning, {} directories, {} files",
                dirs.len(),
                inodes.len()
            )
        });
    }
    Ok((dirs, inodes, links))
}

fn inodes_path(inodes: &[Item], k: usize) -> PathBuf {
    inodes[k].path.clone()
}

/// Creates one non-directory inode and sets its attributes.
fn restore_inode(ctx: &Ctx, item: &Item, buf: &mut [u8]) {
    if let Err(e) = clear_way(ctx, &item.path) {
        return ctx.problem(&item.path, e);
    }
    let r = match item.meta.file_type {
        FileType::Regular => match copy_file(ctx, item, buf) {
            Ok(f) => {
                set_attributes_on(ctx, item, Target::Fd(&f));
                return;
            }
            Err(e) => Err(e),
        },
        FileType::Symlink => ctx
            .fs
            .readlink(item.ino)
            .map_err(|e| e.to_string())
            .and_then(|t| {
                std::os::unix::fs::symlink(OsStr::from_bytes(&t), &item.path)
                    .map_err(|e| e.to_string())
            }),
        _ => make_node(&item.path, &item.meta).map_err(|e| e.to_string()),
    };
    match r {
        Ok(()) => set_attributes(ctx, item),
        Err(e) => ctx.problem(&item.path, e),
    }
}

/// Copies file data range by range, leaving holes as holes; returns the open file.
fn copy_file(ctx: &Ctx, item: &Item, buf: &mut [u8]) -> Result<File, String> {
    // Created with its final permissions (setuid/setgid are set again after chown and
    // writes, which may clear them); the descriptor stays writable whatever they are.
    let f: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(item.meta.perm & 0o777)
        .open(&item.path)
        .map_err(|e| e.to_string())?;
    let size = item.meta.size;
    let mut off = 0;
    let mut written_to = 0;
    while off < size {
        let Some(range) = ctx.fs.next_data(item.ino, off).map_err(|e| e.to_string())? else {
            break;
        };
        let mut pos = range.start;
        while pos < range.end {
            let want = ((range.end - pos) as usize).min(buf.len());
            let n = ctx
                .fs
                .read_at(item.ino, pos, &mut buf[..want])
                .map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            f.write_all_at(&buf[..n], pos).map_err(|e| e.to_string())?;
            ctx.bytes_done.fetch_add(n as u64, Ordering::Relaxed);
            pos += n as u64;
            written_to = pos;
        }
        off = range.end.max(off + 1);
    }
    if written_to != size {
        // A trailing hole (or an empty file that is not empty on disk).
        f.set_len(size).map_err(|e| e.to_string())?;
    }
    Ok(f)
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn make_node(path: &Path, m: &Metadata) -> io::Result<()> {
    let c = cpath(path)?;
    let mode = m.file_type.mode_bits() | 0o600;
    // SAFETY: `c` is a valid NUL-terminated path; mknod reads it and returns.
    let r = unsafe { libc::mknod(c.as_ptr(), mode as libc::mode_t, m.rdev as libc::dev_t) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Where attributes are applied: an open descriptor (regular files: no path lookups) or
/// a path (directories, symlinks, nodes; never following a final symlink).
enum Target<'a> {
    Fd(&'a File),
    Path(&'a CString),
}

/// Restores xattrs, owner, permissions and times of an item that exists on the host.
fn set_attributes(ctx: &Ctx, item: &Item) {
    match cpath(&item.path) {
        Ok(c) => set_attributes_on(ctx, item, Target::Path(&c)),
        Err(_) => ctx.problem(&item.path, "path contains NUL"),
    }
}

fn check(r: libc::c_int) -> Result<(), String> {
    if r != 0 {
        return Err(io::Error::last_os_error().to_string());
    }
    Ok(())
}

fn set_attributes_on(ctx: &Ctx, item: &Item, t: Target) {
    use std::os::fd::AsRawFd;
    let m = &item.meta;
    // Regular files were created with their permission bits; only setuid, setgid and
    // sticky need another chmod. Everything else (created 0600/0700) needs one.
    let is_fd = matches!(t, Target::Fd(_));
    let needs_chmod = m.file_type != FileType::Symlink && (!is_fd || m.perm & 0o7000 != 0);
    let needs_chown = ctx.owners && (!is_fd || (m.uid, m.gid) != ctx.creator);
    if ctx.xattrs {
        match ctx.fs.list_xattrs(item.ino) {
            Ok(names) => {
                for name in names {
                    let r = ctx
                        .fs
                        .get_xattr(item.ino, &name)
                        .map_err(|e| e.to_string())
                        .and_then(|v| {
                            let n = CString::new(name.clone())
                                .map_err(|_| "name contains NUL".to_string())?;
                            let (val, len) = (v.as_ptr().cast(), v.len());
                            // SAFETY: valid C strings, an open descriptor, a buffer of len bytes.
                            check(unsafe {
                                match t {
                                    Target::Fd(f) => {
                                        libc::fsetxattr(f.as_raw_fd(), n.as_ptr(), val, len, 0)
                                    }
                                    Target::Path(c) => {
                                        libc::lsetxattr(c.as_ptr(), n.as_ptr(), val, len, 0)
                                    }
                                }
                            })
                        });
                    if let Err(e) = r {
                        ctx.problem(
                            &item.path,
                            format!("xattr {}: {e}", String::from_utf8_lossy(&name)),
                        );
                    }
                }
            }
            Err(e) => ctx.problem(&item.path, format!("xattrs: {e}")),
        }
    }
    if needs_chown {
        // SAFETY: valid C string / open descriptor.
        let r = check(unsafe {
            match t {
                Target::Fd(f) => libc::fchown(f.as_raw_fd(), m.uid, m.gid),
                Target::Path(c) => libc::lchown(c.as_ptr(), m.uid, m.gid),
            }
        });
        if let Err(e) = r {
            ctx.problem(&item.path, format!("chown: {e}"));
        }
    }
    if needs_chmod {
        // After chown, which clears setuid/setgid.
        let mode = m.perm as libc::mode_t;
        // SAFETY: valid C string / open descriptor.
        let r = check(unsafe {
            match t {
                Target::Fd(f) => libc::fchmod(f.as_raw_fd(), mode),
                Target::Path(c) => libc::chmod(c.as_ptr(), mode),
            }
        });
        if let Err(e) = r {
            ctx.problem(&item.path, format!("chmod: {e}"));
        }
    }
    let ts = |t: usfs_fs::Timestamp| libc::timespec {
        tv_sec: t.sec as libc::time_t,
        tv_nsec: t.nsec as _,
    };
    let times = [ts(m.atime), ts(m.mtime)];
    // SAFETY: valid C string / open descriptor, and a two-element timespec array.
    let r = check(unsafe {
        match t {
            Target::Fd(f) => libc::futimens(f.as_raw_fd(), times.as_ptr()),
            Target::Path(c) => libc::utimensat(
                libc::AT_FDCWD,
                c.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            ),
        }
    });
    if let Err(e) = r {
        ctx.problem(&item.path, format!("utimensat: {e}"));
    }
}
