//! `usfs run [--mount PREFIX=IMAGE]... [--] CMD [ARGS...]`: runs CMD with the preload
//! library, so CMD and its children read images under the prefixes with no kernel mount
//! and no FUSE.
//!
//! The mount table travels in the environment (usfs_vfs::MountTable::ENV), the library in
//! LD_PRELOAD (libusfs_preload.so next to the usfs binary, or $USFS_PRELOAD_LIB), so
//! every child inherits both. usfs then execs CMD: its exit status is CMD's. A CMD that
//! is (or, by PATH, may be) inside a mount is started by `/bin/sh -c 'exec "$0" "$@"'`:
//! usfs itself runs without the library, the shell with it finds and runs the program.
//! A CMD on the host that is statically linked gets a warning: no preload library reaches
//! it, so it sees the host's files under the prefixes.
//!
//! With `--rw` the images are changed: usfs becomes each image's owner (cmd_run_rw) and
//! runs CMD as a child instead of exec'ing it.

use crate::image::{CliError, CliResult};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use usfs_vfs::{MountSpec, MountTable};

/// Arguments of `usfs run`.
#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// Show IMAGE at host path PREFIX (repeatable; prefixes must not nest).
    #[arg(long = "mount", short = 'm', value_name = "PREFIX=IMAGE")]
    mounts: Vec<String>,
    /// Let CMD change the images (ext4 only): usfs holds each image as its one writer
    /// and serves CMD's changes; the images are committed and closed when CMD and every
    /// process it started have exited. The exit status is CMD's.
    #[arg(long)]
    pub(crate) rw: bool,
    /// Durability of --rw: posix (data and metadata are durable at fsync, sync and the
    /// end of the run) or sync (every change is durable when its call returns).
    #[arg(long, value_enum, default_value = "posix", requires = "rw")]
    pub(crate) mode: crate::cmd_run_rw::Mode,
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

pub(crate) fn run(args: &RunArgs) -> CliResult {
    let mut specs = Vec::new();
    for m in &args.mounts {
        let (prefix, image) = m
            .split_once('=')
            .ok_or_else(|| CliError(format!("run: --mount {m}: expected PREFIX=IMAGE")))?;
        let image = std::fs::canonicalize(image).map_err(|e| CliError::at(image, e))?;
        let spec = MountSpec::parse(&format!("{}={}", absolute(prefix)?, image.display()))
            .map_err(|e| CliError(format!("run: {e}")))?;
        // Open it once now so that a bad image is reported up front; the program still
        // runs and sees EIO under the prefix. (--rw opens it for writing below instead.)
        if args.rw {
            specs.push(spec);
            continue;
        }
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
    let owners = if args.rw {
        Some(crate::cmd_run_rw::Owners::start(&mut specs, args.mode)?)
    } else {
        None
    };
    let in_mount = may_be_in_mount(&args.cmd[0], &table)?;
    if !in_mount {
        if let Some(prog) = host_program(&args.cmd[0]).filter(|p| statically_linked(p)) {
            eprintln!(
                "usfs: warning: {}: statically linked: LD_PRELOAD cannot reach it, so it \
                 sees the host's files, not the images (use `usfs mount`)",
                prog.display()
            );
        }
    }
    let mut cmd = if in_mount {
        let mut c = std::process::Command::new("/bin/sh");
        c.arg("-c").arg("exec \"$0\" \"$@\"").args(&args.cmd);
        c
    } else {
        let mut c = std::process::Command::new(&args.cmd[0]);
        c.args(&args.cmd[1..]);
        c
    };
    cmd.env("LD_PRELOAD", preload)
        .env(MountTable::ENV, MountTable::env_value(&specs));
    if let Some(owners) = owners {
        cmd.env(MountTable::OWNERS_ENV, MountTable::owners_value(&specs));
        return owners.run(cmd, &args.cmd[0].to_string_lossy());
    }
    let err = cmd.exec();
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

/// The host file `cmd` runs: itself when it has a '/', else the first executable regular
/// file named `cmd` in PATH ("/bin:/usr/bin" when unset), as execvp looks it up.
fn host_program(cmd: &std::ffi::OsStr) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    if cmd.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(cmd));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&path)
        .map(|d| {
            if d.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                d
            }
            .join(cmd)
        })
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Is `path` an ELF executable with no program interpreter (PT_INTERP), i.e. one the
/// dynamic loader never runs for, so LD_PRELOAD has no effect? False for anything that
/// cannot be read or is not ELF (scripts, which run an interpreter that may be dynamic).
fn statically_linked(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    // Program headers lie near the start of every executable the toolchains make.
    if f.take(64 << 10).read_to_end(&mut head).is_err() {
        return false;
    }
    elf_without_interp(&head).unwrap_or(false)
}

/// For the first bytes of an ELF file (header and program headers): `Some(true)` when it
/// is an executable or shared object with no PT_INTERP entry, `None` when these bytes are
/// not such an ELF header or its program headers lie beyond them.
fn elf_without_interp(b: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    const ET_EXEC: u16 = 2;
    const ET_DYN: u16 = 3;
    if b.get(..4)? != b"\x7fELF" {
        return None;
    }
    let wide = match b.get(4)? {
        1 => false,
        2 => true,
        _ => return None,
    };
    let le = *b.get(5)? == 1;
    let u16_at = |o: usize| -> Option<u16> {
        let x: [u8; 2] = b.get(o..o + 2)?.try_into().ok()?;
        Some(if le {
            u16::from_le_bytes(x)
        } else {
            u16::from_be_bytes(x)
        })
    };
    let u32_at = |o: usize| -> Option<u32> {
        let x: [u8; 4] = b.get(o..o + 4)?.try_into().ok()?;
        Some(if le {
            u32::from_le_bytes(x)
        } else {
            u32::from_be_bytes(x)
        })
    };
    let u64_at = |o: usize| -> Option<u64> {
        let x: [u8; 8] = b.get(o..o + 8)?.try_into().ok()?;
        Some(if le {
            u64::from_le_bytes(x)
        } else {
            u64::from_be_bytes(x)
        })
    };
    if !matches!(u16_at(16)?, ET_EXEC | ET_DYN) {
        return None;
    }
    // e_phoff, e_phentsize, e_phnum (ELF32 / ELF64 header layouts).
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(32)?, u16_at(54)?, u16_at(56)?)
    } else {
        (u64::from(u32_at(28)?), u16_at(42)?, u16_at(44)?)
    };
    let phoff = usize::try_from(phoff).ok()?;
    let mut interp = false;
    for i in 0..usize::from(phnum) {
        let at = phoff.checked_add(i.checked_mul(usize::from(phentsize))?)?;
        if u32_at(at)? == PT_INTERP {
            interp = true;
        }
    }
    // A shared object without PT_INTERP is a library, or a static-pie executable (it has
    // no PT_DYNAMIC-driven loader either); both run without ld.so when exec'd.
    Some(!interp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal little-endian ELF64 header with one program header of type `pt`.
    fn elf64(pt: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        b[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        b[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        b[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        b[64..68].copy_from_slice(&pt.to_le_bytes());
        b
    }

    #[test]
    fn static_executables_are_told_from_dynamic_ones() {
        assert_eq!(elf_without_interp(&elf64(3)), Some(false)); // PT_INTERP
        assert_eq!(elf_without_interp(&elf64(1)), Some(true)); // PT_LOAD only
        assert_eq!(elf_without_interp(b"#!/bin/sh\n"), None);
        let cut = elf64(3);
        assert_eq!(elf_without_interp(&cut[..66]), None); // program header cut off
                                                          // The host's own programs: the shell is dynamic; ldconfig is static on Debian.
        assert!(!statically_linked(Path::new("/bin/sh")));
        if Path::new("/sbin/ldconfig").exists() {
            assert!(statically_linked(Path::new("/sbin/ldconfig")));
        }
        assert!(!statically_linked(Path::new("/nonexistent")));
        assert_eq!(
            host_program("sh".as_ref()).map(|p| statically_linked(&p)),
            Some(false)
        );
    }

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
