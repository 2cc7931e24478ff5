//! `usfs ls`: directory listings.

use crate::display::{major_minor, mode_string, show_name};
use crate::image::{self, CliError, CliResult};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use usfs_fs::{DirEntry, FileSystem, FileType, Ino};

/// What to show.
pub(crate) struct LsOptions {
    pub long: bool,
    pub all: bool,
    pub recursive: bool,
    pub inode: bool,
    /// Directory order (readdir's) instead of sorted by name.
    pub unsorted: bool,
}

pub(crate) fn run(
    image_path: &Path,
    path: &str,
    dev: &image::DeviceArgs,
    opts: LsOptions,
) -> CliResult {
    let fs = image::open(image_path, dev)?;
    let ino = image::resolve(&*fs, image_path, path, true)?;
    let err = |e: usfs_fs::Error| CliError(format!("{}:{path}: {e}", image_path.display()));
    let meta = fs.getattr(ino).map_err(err)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let w = |out: &mut dyn Write, s: String| {
        writeln!(out, "{s}").map_err(|e| CliError::at("standard output", e))
    };
    if !meta.is_dir() {
        w(
            &mut out,
            line(&*fs, ino, path.as_bytes(), &opts).map_err(err)?,
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut stack: Vec<(Vec<u8>, Ino)> = vec![(path.as_bytes().to_vec(), ino)];
    // A corrupt image can link a directory into its own subtree: list each once.
    let mut seen = std::collections::HashSet::from([ino]);
    let mut first = true;
    let mut failed = false;
    while let Some((dpath, dino)) = stack.pop() {
        let entries = match list(&*fs, dino, &opts) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("usfs: {}:{}: {e}", image_path.display(), show_name(&dpath));
                failed = true;
                continue;
            }
        };
        if opts.recursive {
            if !first {
                w(&mut out, String::new())?;
            }
            w(&mut out, format!("{}:", show_name(&dpath)))?;
        }
        first = false;
        let mut subdirs = Vec::new();
        for e in &entries {
            match line(&*fs, e.ino, &e.name, &opts) {
                Ok(l) => w(&mut out, l)?,
                Err(err) => {
                    eprintln!(
                        "usfs: {}:{}: {err}",
                        image_path.display(),
                        show_name(&e.name)
                    );
                    failed = true;
                    continue;
                }
            }
            let is_dir = match e.file_type {
                Some(t) => t == FileType::Directory,
                None => fs.getattr(e.ino).is_ok_and(|m| m.is_dir()),
            };
            if opts.recursive && is_dir && !is_dot(&e.name) {
                if !seen.insert(e.ino) {
                    eprintln!(
                        "usfs: {}:{}: directory loop (inode {} already listed)",
                        image_path.display(),
                        show_name(&e.name),
                        e.ino
                    );
                    failed = true;
                    continue;
                }
                let mut p = dpath.clone();
                if !p.ends_with(b"/") {
                    p.push(b'/');
                }
                p.extend_from_slice(&e.name);
                subdirs.push((p, e.ino));
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    out.flush()
        .map_err(|e| CliError::at("standard output", e))?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn is_dot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// The entries of a directory to show: in readdir order with `-U`, else sorted by name
/// (`.` and `..` first with `-a`).
fn list(fs: &dyn FileSystem, dir: Ino, opts: &LsOptions) -> usfs_fs::Result<Vec<DirEntry>> {
    let mut entries: Vec<DirEntry> = Vec::new();
    fs.readdir_with_dots(dir, 0, &mut |e, _| {
        if opts.all || !is_dot(&e.name) {
            entries.push(e);
        }
        true
    })?;
    if !opts.unsorted {
        entries.sort_by(|a, b| (!is_dot(&a.name), &a.name).cmp(&(!is_dot(&b.name), &b.name)));
    }
    Ok(entries)
}

fn line(fs: &dyn FileSystem, ino: Ino, name: &[u8], opts: &LsOptions) -> usfs_fs::Result<String> {
    let mut s = String::new();
    if opts.inode {
        s.push_str(&format!("{ino:>8} "));
    }
    if !opts.long {
        s.push_str(&show_name(name));
        return Ok(s);
    }
    let m = fs.getattr(ino)?;
    let size = match m.file_type {
        FileType::CharDevice | FileType::BlockDevice => {
            let (ma, mi) = major_minor(m.rdev);
            format!("{ma}, {mi}")
        }
        _ => m.size.to_string(),
    };
    s.push_str(&format!(
        "{} {:>3} {:>5} {:>5} {:>10} {} {}",
        mode_string(&m),
        m.nlink,
        m.uid,
        m.gid,
        size,
        &m.mtime.to_utc_string()[..19],
        show_name(name)
    ));
    if m.file_type == FileType::Symlink {
        s.push_str(" -> ");
        s.push_str(&show_name(&fs.readlink(ino)?));
    }
    Ok(s)
}
