//! `usfs fsck` on an EROFS image, as fsck.erofs: the checker is `usfs_erofs::check`;
//! this file holds fsck.erofs's options, messages (`<E> erofs: ...` on standard error)
//! and exit codes (0 clean, 1 anything else: corruption, an unsupported feature, an
//! operational error), and `--extract=DIR` through `usfs export`'s tree writer.

use crate::cmd_fsck::FsckArgs;
use crate::export::{export_tree, TreeOptions};
use crate::image::CliResult;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use usfs_erofs::check::Report;

/// fsck.erofs's exit code for a clean image.
const EXIT_CLEAN: u8 = 0;
/// fsck.erofs's exit code for everything else.
const EXIT_ERROR: u8 = 1;

/// fsck.erofs's options (used only on EROFS images).
#[derive(clap::Args)]
#[command(next_help_heading = "EROFS images (fsck.erofs's options; exit 0 clean, 1 otherwise)")]
pub(crate) struct ErofsArgs {
    /// Check that all files decode (always done) and, with DIR, extract the tree into
    /// DIR (created if missing; directories in it are merged; files, symlinks and device
    /// nodes that exist are errors unless --overwrite). Hard links stay links; modes
    /// and times are restored exactly, owners as root (--[no-]preserve-owner), xattrs
    /// with --xattrs.
    #[arg(long, value_name = "DIR", num_args = 0..=1, require_equals = true)]
    extract: Option<Option<PathBuf>>,
    /// With --extract=DIR: allow extracting to `/`.
    #[arg(long = "force")]
    extract_force: bool,
    /// With --extract=DIR: replace files that exist (an empty directory in the way of
    /// a file too).
    #[arg(long)]
    overwrite: bool,
    /// With --extract=DIR: restore owners (the default as root; needs root).
    #[arg(long, overrides_with_all = ["no_preserve_owner", "preserve", "no_preserve"])]
    preserve_owner: bool,
    /// With --extract=DIR: files are owned by the user extracting them.
    #[arg(long, overrides_with_all = ["preserve_owner", "preserve", "no_preserve"])]
    no_preserve_owner: bool,
    /// With --extract=DIR: as --preserve-owner (permissions are always restored exactly).
    #[arg(long, overrides_with_all = ["preserve_owner", "no_preserve_owner", "no_preserve"])]
    preserve: bool,
    /// With --extract=DIR: as --no-preserve-owner.
    #[arg(long, overrides_with_all = ["preserve_owner", "no_preserve_owner", "preserve"])]
    no_preserve: bool,
    /// With --extract=DIR: restore extended attributes.
    #[arg(long, overrides_with = "no_xattrs")]
    xattrs: bool,
    /// With --extract=DIR: do not restore extended attributes (the default).
    #[arg(long, overrides_with = "xattrs")]
    no_xattrs: bool,
}

impl ErofsArgs {
    /// Were any of the EROFS-only options given?
    fn any(&self) -> bool {
        self.extract.is_some()
            || self.extract_force
            || self.overwrite
            || self.preserve_owner
            || self.no_preserve_owner
            || self.preserve
            || self.no_preserve
            || self.xattrs
            || self.no_xattrs
    }
}

/// Does the image hold an EROFS superblock? (An image that cannot be read is left to
/// the ext4 path, which reports it.)
fn is_erofs(image: &Path) -> bool {
    usfs_dev::FileDevice::open(image, false).is_ok_and(|d| usfs_erofs::probe(&d))
}

/// Runs fsck on an EROFS image; `None` for anything else (the ext4 checker's). EROFS
/// options on another image are a usage error.
pub(crate) fn dispatch(a: &FsckArgs) -> Option<CliResult> {
    if is_erofs(&a.image) {
        return Some(run(a));
    }
    if a.erofs.any() {
        eprintln!("usfs fsck: --extract and its options are for EROFS images");
        return Some(Ok(ExitCode::from(crate::cmd_fsck::EXIT_USAGE)));
    }
    None
}

/// Usage errors fsck.erofs reports (it exits 1 on them).
fn usage_error(e: &ErofsArgs) -> Option<&'static str> {
    let dir = e.extract.as_ref().and_then(|d| d.as_ref());
    if dir.is_some_and(|d| d.as_os_str().is_empty()) {
        return Some("empty value given for --extract=X");
    }
    if dir.is_some_and(|d| d == Path::new("/")) && !e.extract_force {
        return Some("--extract=/ must be used together with --force");
    }
    if dir.is_none() {
        if e.extract_force {
            return Some("--force must be used together with --extract=X");
        }
        if e.overwrite {
            return Some("--overwrite must be used together with --extract=X");
        }
        if e.preserve_owner || e.no_preserve_owner || e.preserve || e.no_preserve {
            return Some("--[no-]preserve[-owner/-perms] must be used together with --extract=X");
        }
    }
    None
}

fn run(a: &FsckArgs) -> CliResult {
    let e = &a.erofs;
    if let Some(m) = usage_error(e) {
        eprintln!("<E> erofs: {m}");
        return Ok(ExitCode::from(EXIT_ERROR));
    }
    let name = a.image.display().to_string();
    let opened = |p: &Path| -> std::io::Result<Box<dyn usfs_dev::Device>> {
        Ok(Box::new(usfs_dev::FileDevice::open(p, false)?))
    };
    let extra = a
        .dev
        .devices
        .iter()
        .map(|p| opened(p))
        .collect::<std::io::Result<Vec<_>>>();
    let report = match opened(&a.image)
        .and_then(|d| Ok((d, extra?)))
        .map_err(usfs_fs::Error::Io)
        .and_then(|(d, extra)| usfs_erofs::check::check_with_devices(d, extra))
    {
        Ok(r) => r,
        Err(err) => {
            eprintln!("<E> erofs: {name}: {err}");
            eprintln!("<E> erofs: failed to open image file");
            return Ok(ExitCode::from(EXIT_ERROR));
        }
    };
    let dir = e.extract.as_ref().and_then(|d| d.as_ref());
    let mut failed: Vec<String> = Vec::new();
    if report.clean() {
        if let Some(dir) = dir {
            failed = extract(a, dir);
        }
    }
    let ok = report.clean() && failed.is_empty();
    let code = if ok { EXIT_CLEAN } else { EXIT_ERROR };
    if a.json {
        print_json(&name, &report, &failed, code);
    } else {
        print_text(&report, &failed, dir.is_some());
    }
    Ok(ExitCode::from(code))
}

/// Extracts the (checked) image into `dir`; returns what could not be restored.
fn extract(a: &FsckArgs, dir: &Path) -> Vec<String> {
    let e = &a.erofs;
    if let Err(err) = std::fs::create_dir_all(dir) {
        return vec![format!(
            "failed to create directory: {} ({err})",
            dir.display()
        )];
    }
    let fs = match crate::image::open(&a.image, &a.dev) {
        Ok(fs) => fs,
        Err(err) => return vec![err.to_string()],
    };
    let opts = TreeOptions {
        threads: a.threads,
        owners: !(e.no_preserve_owner || e.no_preserve),
        xattrs: e.xattrs,
        merge: true,
        overwrite: e.overwrite,
        progress: Some(a.progress.is_some()),
        trace: a.trace,
    };
    export_tree(&*fs, dir, &opts).unwrap_or_else(|err| vec![err.to_string()])
}

fn print_text(report: &Report, failed: &[String], extracting: bool) {
    for p in &report.problems {
        eprintln!("<E> erofs: {p}");
    }
    for f in failed {
        eprintln!("<E> erofs: {f}");
    }
    let corrupt = report
        .problems
        .iter()
        .any(|p| p.error.corruption().is_some());
    if corrupt {
        eprintln!("<E> erofs: Found some filesystem corruption");
    } else if !report.clean() {
        eprintln!("<E> erofs: The image uses features usfs does not support: not checked");
    } else if !failed.is_empty() {
        eprintln!("<E> erofs: Failed to extract filesystem");
    } else {
        println!(
            "<I> erofs: No errors found: {} inodes ({} directories), {} compressed extents, {} bytes of data checked",
            report.inodes, report.dirs, report.extents, report.bytes
        );
        if extracting {
            println!("<I> erofs: Extracted filesystem successfully");
        }
    }
}

fn print_json(name: &str, report: &Report, failed: &[String], code: u8) {
    let problems: Vec<_> = report
        .problems
        .iter()
        .map(|p| {
            json!({
                "path": p.path,
                "nid": p.nid,
                "structure": p.error.corruption().map(|c| format!("{:?}", c.structure)),
                "message": p.error.to_string(),
            })
        })
        .collect();
    let v = json!({
        "image": name,
        "format": "erofs",
        "clean": report.clean(),
        "exit": code,
        "problems": problems,
        "extract_failures": failed,
        "summary": {
            "inodes": report.inodes,
            "directories": report.dirs,
            "compressed_extents": report.extents,
            "bytes": report.bytes,
        },
    });
    println!("{v}");
}
