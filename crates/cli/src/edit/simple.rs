//! `usfs mkdir`, `rm`, `mv`, `ln`, `chmod`, `chown`: one change per argument, as the
//! coreutils commands of the same names make it on a mounted file system.

use super::{creator, parse_place, umask, Editor, Place};
use crate::image::{CliError, CliResult};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use usfs_fs::{Error, FileSystem, FileSystemWrite, FileType, Ino, RenameFlags, SetAttr};
use usfs_vfs::attrs;

/// Groups `IMAGE:PATH` arguments by image (all must be inside images).
fn by_image(args: &[String]) -> CliResult<BTreeMap<PathBuf, Vec<String>>> {
    let mut out: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for a in args {
        match parse_place(a) {
            Place::Image { image, path } => out.entry(image).or_default().push(path),
            Place::Host(p) => {
                return Err(CliError(format!(
                    "{}: not IMAGE:PATH (the image file must exist)",
                    p.display()
                )))
            }
        }
    }
    Ok(out)
}

/// Runs `f` for every path of every image; errors are printed and make the exit code 1.
fn each(args: &[String], mut f: impl FnMut(&Editor, &str) -> CliResult<()>) -> CliResult {
    let mut failed = false;
    for (image, paths) in by_image(args)? {
        let ed = Editor::open(&image)?;
        for p in &paths {
            if let Err(e) = f(&ed, p) {
                eprintln!("usfs: {e}");
                failed = true;
            }
        }
        ed.close()?;
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Options of `usfs mkdir`.
#[derive(clap::Args)]
pub(crate) struct MkdirArgs {
    /// Make parents as needed; no error if a directory exists.
    #[arg(short = 'p', long)]
    parents: bool,
    /// Permission bits (octal), default 0777 less the umask.
    #[arg(short = 'm', long)]
    mode: Option<String>,
    /// Directories to make, as IMAGE:PATH.
    #[arg(required = true)]
    paths: Vec<String>,
}

pub(crate) fn mkdir(a: &MkdirArgs) -> CliResult {
    // -m sets the mode as given (GNU mkdir: umask and default ACL aside); without it the
    // umask applies, or the directory's default ACL in its place.
    let (mode, mask) = match &a.mode {
        Some(m) => (
            parse_mode(m, 0o777).ok_or_else(|| CliError(format!("invalid mode '{m}'")))?,
            Some(0),
        ),
        None => (0o777, None),
    };
    let (uid, gid) = creator();
    let caller = attrs::Caller { uid, gid };
    each(&a.paths, |ed, path| {
        let make = |dir: Ino, name: &[u8], mode: u32, mask: Option<u32>| {
            let pm = ed.fs.getattr(dir)?;
            let mask = mask.unwrap_or_else(|| attrs::umask_for(&*ed.fs, dir, umask()));
            let node = attrs::new_node(FileType::Directory, mode, mask, 0, caller, &pm);
            ed.fs.mkdir(dir, name, node).map(|m| m.ino)
        };
        if a.parents {
            let mut cur: Ino = ed.fs.root();
            let comps: Vec<&str> = path
                .split('/')
                .filter(|c| !c.is_empty() && *c != ".")
                .collect();
            for (k, comp) in comps.iter().enumerate() {
                let name = comp.as_bytes();
                cur = match ed.fs.lookup(cur, name) {
                    Ok(i) if ed.is_dir(i) => i,
                    Ok(_) => return Err(ed.err(path, Error::NotDir)),
                    Err(Error::NotFound) => {
                        // Parents as GNU mkdir -p makes them: u+wx over the umask's mode.
                        let made = if k + 1 == comps.len() {
                            make(cur, name, mode, mask)
                        } else {
                            make(cur, name, (0o777 & !umask()) | 0o300, Some(0))
                        };
                        made.map_err(|e| ed.err(path, e))?
                    }
                    Err(e) => return Err(ed.err(path, e)),
                };
            }
            return Ok(());
        }
        let (dir, name) = ed.parent(path)?;
        make(dir, &name, mode, mask).map_err(|e| ed.err(path, e))?;
        Ok(())
    })
}

/// Options of `usfs rm`.
#[derive(clap::Args)]
pub(crate) struct RmArgs {
    /// Remove directories and their contents.
    #[arg(short = 'r', short_alias = 'R', long)]
    recursive: bool,
    /// Ignore missing files.
    #[arg(short = 'f', long)]
    force: bool,
    /// What to remove, as IMAGE:PATH.
    #[arg(required = true)]
    paths: Vec<String>,
}

pub(crate) fn rm(a: &RmArgs) -> CliResult {
    each(&a.paths, |ed, path| {
        let (dir, name) = ed.parent(path)?;
        let ino = match ed.fs.lookup(dir, &name) {
            Ok(i) => i,
            Err(Error::NotFound) if a.force => return Ok(()),
            Err(e) => return Err(ed.err(path, e)),
        };
        if ed.is_dir(ino) {
            if !a.recursive {
                return Err(ed.err(path, Error::IsDir));
            }
            remove_tree(ed, ino).map_err(|e| ed.err(path, e))?;
            ed.fs.rmdir(dir, &name).map_err(|e| ed.err(path, e))
        } else {
            ed.fs.unlink(dir, &name).map_err(|e| ed.err(path, e))
        }
    })
}

/// Removes everything inside directory `dir` (depth first, bounded by the tree).
pub(crate) fn remove_tree(ed: &Editor, dir: Ino) -> Result<(), Error> {
    loop {
        let mut batch = Vec::new();
        ed.fs.readdir(dir, 0, &mut |e, _| {
            batch.push(e);
            batch.len() < 256
        })?;
        if batch.is_empty() {
            return Ok(());
        }
        for e in batch {
            if e.file_type == Some(FileType::Directory)
                || (e.file_type.is_none() && ed.is_dir(e.ino))
            {
                remove_tree(ed, e.ino)?;
                ed.fs.rmdir(dir, &e.name)?;
            } else {
                ed.fs.unlink(dir, &e.name)?;
            }
        }
    }
}

/// Options of `usfs mv`.
#[derive(clap::Args)]
pub(crate) struct MvArgs {
    /// Do not replace an existing target.
    #[arg(short = 'n', long)]
    no_clobber: bool,
    /// The source, IMAGE:OLD.
    from: String,
    /// The target, IMAGE:NEW (same image); an existing directory receives the source.
    to: String,
}

pub(crate) fn mv(a: &MvArgs) -> CliResult {
    let (
        Place::Image { image, path: old },
        Place::Image {
            image: image2,
            path: new,
        },
    ) = (parse_place(&a.from), parse_place(&a.to))
    else {
        return Err(CliError("mv: both arguments must be IMAGE:PATH".into()));
    };
    if image != image2 {
        return Err(CliError(
            "mv: source and target must be in the same image (use cp and rm)".into(),
        ));
    }
    let ed = Editor::open(&image)?;
    let (dir, name) = ed.parent(&old)?;
    let (mut ndir, mut nname) = if new.trim_end_matches('/').is_empty() {
        (ed.fs.root(), Vec::new())
    } else {
        ed.parent(&new)?
    };
    // An existing directory as target: move into it.
    let target = if nname.is_empty() {
        Some(ndir)
    } else {
        ed.fs.lookup(ndir, &nname).ok()
    };
    if let Some(t) = target.filter(|&t| ed.is_dir(t)) {
        let src = ed.fs.lookup(dir, &name).map_err(|e| ed.err(&old, e))?;
        if src != t {
            ndir = t;
            nname = name.clone();
        }
    }
    let flags = RenameFlags {
        noreplace: a.no_clobber,
        ..Default::default()
    };
    let r = ed.fs.rename(dir, &name, ndir, &nname, flags);
    if let Err(e) = r {
        if !(a.no_clobber && matches!(e, Error::Exists)) {
            return Err(ed.err(&old, e));
        }
    }
    ed.close()?;
    Ok(ExitCode::SUCCESS)
}

/// Options of `usfs ln`.
#[derive(clap::Args)]
pub(crate) struct LnArgs {
    /// Make a symbolic link holding TARGET's text.
    #[arg(short = 's', long)]
    symbolic: bool,
    /// Replace an existing LINK.
    #[arg(short = 'f', long)]
    force: bool,
    /// What the link points at: a path in the same image for a hard link.
    target: String,
    /// The new link, IMAGE:PATH.
    link: String,
}

pub(crate) fn ln(a: &LnArgs) -> CliResult {
    let Place::Image { image, path } = parse_place(&a.link) else {
        return Err(CliError(format!("{}: not IMAGE:PATH", a.link)));
    };
    let ed = Editor::open(&image)?;
    let (dir, name) = ed.parent(&path)?;
    if a.force {
        match ed.fs.lookup(dir, &name) {
            Ok(i) if !ed.is_dir(i) => ed.fs.unlink(dir, &name).map_err(|e| ed.err(&path, e))?,
            _ => {}
        }
    }
    if a.symbolic {
        let (uid, gid) = creator();
        ed.fs
            .symlink(dir, &name, a.target.as_bytes(), uid, gid)
            .map_err(|e| ed.err(&path, e))?;
    } else {
        let tpath = match parse_place(&a.target) {
            Place::Image {
                image: ti,
                path: tp,
            } if ti == image => tp,
            Place::Image { .. } => {
                return Err(CliError("ln: a hard link must stay in its image".into()))
            }
            Place::Host(p) => p.to_string_lossy().to_string(),
        };
        let t = ed.resolve(&tpath, false).map_err(|e| ed.err(&tpath, e))?;
        ed.fs.link(t, dir, &name).map_err(|e| ed.err(&path, e))?;
    }
    ed.close()?;
    Ok(ExitCode::SUCCESS)
}

/// Options of `usfs chmod`.
#[derive(clap::Args)]
pub(crate) struct ChmodArgs {
    /// Octal bits (0755) or symbolic changes (u+x,go-w).
    mode: String,
    /// Files to change, as IMAGE:PATH.
    #[arg(required = true)]
    paths: Vec<String>,
}

pub(crate) fn chmod(a: &ChmodArgs) -> CliResult {
    each(&a.paths, |ed, path| {
        let ino = ed.resolve(path, true).map_err(|e| ed.err(path, e))?;
        let m = ed.fs.getattr(ino).map_err(|e| ed.err(path, e))?;
        let is_dir = m.file_type == FileType::Directory;
        let perm = apply_mode(&a.mode, m.perm, is_dir)
            .ok_or_else(|| CliError(format!("invalid mode '{}'", a.mode)))?;
        let attr = SetAttr {
            perm: Some(perm),
            ..Default::default()
        };
        ed.fs.setattr(ino, attr).map_err(|e| ed.err(path, e))?;
        Ok(())
    })
}

/// Options of `usfs chown` (`-h` is chown(1)'s --no-dereference; help is `--help`).
#[derive(clap::Args)]
#[command(disable_help_flag = true)]
pub(crate) struct ChownArgs {
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// UID[:GID] (numbers, or names looked up on this host).
    owner: String,
    /// Do not follow a final symbolic link (change the link itself).
    #[arg(short = 'h', long)]
    no_dereference: bool,
    /// Files to change, as IMAGE:PATH.
    #[arg(required = true)]
    paths: Vec<String>,
}

pub(crate) fn chown(a: &ChownArgs) -> CliResult {
    let (u, g) = a
        .owner
        .split_once(':')
        .map_or((a.owner.as_str(), None), |(u, g)| (u, Some(g)));
    let uid = if u.is_empty() {
        None
    } else {
        Some(lookup_id(u, true)?)
    };
    let gid = match g {
        Some(g) if !g.is_empty() => Some(lookup_id(g, false)?),
        _ => None,
    };
    each(&a.paths, |ed, path| {
        let ino = ed
            .resolve(path, !a.no_dereference)
            .map_err(|e| ed.err(path, e))?;
        // chown takes away setuid, setgid when group-executable, and file capabilities,
        // as the kernel's chown does (this command runs as root on the image).
        let attr = SetAttr {
            uid,
            gid,
            ..Default::default()
        };
        let root = attrs::Caller { uid: 0, gid: 0 };
        attrs::setattr(&*ed.fs, ino, root, attr).map_err(|e| ed.err(path, e))?;
        Ok(())
    })
}

/// A user or group by number or by name (this host's database).
fn lookup_id(s: &str, user: bool) -> CliResult<u32> {
    if let Ok(n) = s.parse::<u32>() {
        return Ok(n);
    }
    let c = std::ffi::CString::new(s).map_err(|_| CliError(format!("invalid name '{s}'")))?;
    // SAFETY: valid C string; the returned record is read at once, before any other call.
    let id = unsafe {
        if user {
            let p = libc::getpwnam(c.as_ptr());
            (!p.is_null()).then(|| (*p).pw_uid)
        } else {
            let g = libc::getgrnam(c.as_ptr());
            (!g.is_null()).then(|| (*g).gr_gid)
        }
    };
    id.ok_or_else(|| {
        CliError(format!(
            "invalid {} '{s}'",
            if user { "user" } else { "group" }
        ))
    })
}

/// Parses an octal mode.
pub(crate) fn parse_mode(s: &str, max: u32) -> Option<u32> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|&m| m <= max.max(0o7777) && m <= 0o7777)
}

/// Applies chmod's MODE (octal, or symbolic `[ugoa]*[+-=][rwxXst]*` clauses separated by
/// commas) to `perm`.
pub(crate) fn apply_mode(mode: &str, perm: u32, is_dir: bool) -> Option<u32> {
    if mode.chars().all(|c| c.is_ascii_digit()) {
        return parse_mode(mode, 0o7777);
    }
    let mut p = perm;
    for clause in mode.split(',') {
        let ops_at = clause.find(['+', '-', '='])?;
        let (who, rest) = clause.split_at(ops_at);
        let mut mask = 0u32;
        for c in who.chars() {
            mask |= match c {
                'u' => 0o4700,
                'g' => 0o2070,
                'o' => 0o1007,
                'a' => 0o7777,
                _ => return None,
            };
        }
        let all = who.is_empty();
        if all {
            mask = 0o7777;
        }
        let op = rest.chars().next()?;
        let mut bits = 0u32;
        for c in rest[1..].chars() {
            bits |= match c {
                'r' => 0o444,
                'w' => 0o222,
                'x' => 0o111,
                'X' if is_dir || perm & 0o111 != 0 => 0o111,
                'X' => 0,
                's' => 0o6000,
                't' => 0o1000,
                _ => return None,
            };
        }
        let mut bits = bits & mask;
        if all {
            bits &= !umask() | 0o7000;
        }
        p = match op {
            '+' => p | bits,
            '-' => p & !bits,
            _ => (p & !(mask & 0o777 | if all { 0 } else { mask & 0o7000 })) | bits,
        };
    }
    Some(p & 0o7777)
}
