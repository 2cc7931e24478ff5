//! `usfs run [--mount PREFIX=IMAGE]... [--] CMD [ARGS...]`: runs CMD with the preload
//! library, so CMD and its children read images under the prefixes with no kernel mount
//! and no FUSE.
//!
//! The mount table travels in the environment (usfs_vfs::MountTable::ENV), the library in
//! LD_PRELOAD (libusfs_preload.so next to the usfs binary, or $USFS_PRELOAD_LIB), so
//! every child inherits both. usfs then execs CMD: its exit status is CMD's. A CMD that
//! is (or, by PATH, may be) inside a mount is started by `/bin/sh -c 'exec "$0" "$@"'`:
//! usfs itself runs without the library, the shell with it finds and runs the program.

use crate::image::{CliError, CliResult};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use usfs_vfs::{MountSpec, MountTable};

/// Arguments of `usfs run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Show IMAGE at host path PREFIX (repeatable; prefixes must not nest).
    #[arg(long = "mount", short = 'm', value_name = "PREFIX=IMAGE")]
    mounts: Vec<String>,
    /// The command and its arguments. The command may itself be stored in an image (a path
    /// under a prefix, or a name found through a PATH directory under one).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    cmd: Vec<std::ffi::OsString>,
}

/// The preload library: $USFS_PRELOAD_LIB, else next to this executable.
fn preload_lib() -> CliResult<PathBuf> {
    if let Some(p) = std::env::var_os("USFS_PRELOAD_LIB") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| CliError::at("usfs", e))?;
    let lib = exe
        .parent()
        .unwrap_or(Path::new("."))
        .join("libusfs_preload.so");
    if !lib.is_file() {
        return Err(CliError::at(
            lib.display(),
            "preload library not found (build it: cargo build --release -p usfs-preload)",
        ));
    }
    Ok(lib)
}

fn absolute(p: &str) -> CliResult<String> {
    if p.starts_with('/') {
        return Ok(p.to_string());
    }
    let cwd = std::env::current_dir().map_err(|e| CliError::at("cwd", e))?;
    Ok(cwd.join(p).display().to_string())
}

pub fn run(args: &RunArgs) -> CliResult {
    let mut specs = Vec::new();
    for m in &args.mounts {
        let (prefix, image) = m
            .split_once('=')
            .ok_or_else(|| CliError(format!("run: --mount {m}: expected PREFIX=IMAGE")))?;
        let image = std::fs::canonicalize(image).map_err(|e| CliError::at(image, e))?;
        let spec = MountSpec::parse(&format!("{}={}", absolute(prefix)?, image.display()))
            .map_err(|e| CliError(format!("run: {e}")))?;
        // Open it once now so that a bad image is reported up front; the program still
        // runs and sees EIO under the prefix.
        if let Err(e) = usfs_vfs::open_image(&spec.image) {
            eprintln!(
                "usfs: warning: {}: {e}: paths under {} will fail with EIO",
                spec.image.display(),
                String::from_utf8_lossy(&spec.prefix)
            );
        }
        specs.push(spec);
    }
    let table = MountTable::new(specs.iter().cloned().map(usfs_vfs::Mount::new).collect())
        .map_err(|e| CliError(format!("run: {e}")))?;
    let lib = preload_lib()?;
    let preload = match std::env::var_os("LD_PRELOAD") {
        Some(old) if !old.is_empty() => {
            let mut v = lib.into_os_string();
            v.push(":");
            v.push(old);
            v
        }
        _ => lib.into_os_string(),
    };
    let mut cmd = if may_be_in_mount(&args.cmd[0], &table)? {
        let mut c = std::process::Command::new("/bin/sh");
        c.arg("-c").arg("exec \"$0\" \"$@\"").args(&args.cmd);
        c
    } else {
        let mut c = std::process::Command::new(&args.cmd[0]);
        c.args(&args.cmd[1..]);
        c
    };
    let err = cmd
        .env("LD_PRELOAD", preload)
        .env(MountTable::ENV, MountTable::env_value(&specs))
        .exec();
    Err(CliError::at(args.cmd[0].to_string_lossy(), err))
}

/// Might `cmd` name a program inside a mount: a path that may lie in one, or a name
/// looked up in PATH (execvp's, "/bin:/usr/bin" when unset) where a PATH directory may?
fn may_be_in_mount(cmd: &std::ffi::OsStr, table: &MountTable) -> CliResult<bool> {
    use std::os::unix::ffi::OsStrExt;
    let touches = |p: &str| -> CliResult<bool> { Ok(table.may_touch(absolute(p)?.as_bytes())) };
    if cmd.as_bytes().contains(&b'/') {
        return touches(&cmd.to_string_lossy());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    for dir in path.as_bytes().split(|&c| c == b':') {
        let d = if dir.is_empty() {
            "."
        } else {
            std::str::from_utf8(dir).unwrap_or("/")
        };
        if touches(d)? {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_in_mounts_are_recognised() {
        let spec = |s: &str| usfs_vfs::Mount::new(MountSpec::parse(s).unwrap());
        let table = MountTable::new(vec![spec("/img=/x.img"), spec("/opt/x/=/y.img")]).unwrap();
        for (cmd, inside) in [
            ("/img/bin/tool", true),
            ("/opt/x/bin/tool", true),
            ("/img/../img/tool", true),
            ("/imgs/bin/tool", false),
            ("/bin/true", false),
        ] {
            assert_eq!(
                may_be_in_mount(cmd.as_ref(), &table).unwrap(),
                inside,
                "{cmd}"
            );
        }
    }
}
