//! `usfs-treecmp`: compare two directory trees (see `usfs_testkit::compare`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use usfs_testkit::{compare, CmpOptions, TimeGranularity};

/// Compare two directory trees: names, types, contents, sizes, modes, owners, symlink
/// targets, device numbers, times, xattrs and hard-link structure. Prints the first
/// difference and exits 1, or a one-line summary and exits 0; exits 2 on an I/O error.
#[derive(Parser, Debug)]
#[command(name = "usfs-treecmp", version)]
struct Args {
    /// Do not compare access times.
    #[arg(long)]
    no_atime: bool,
    /// Also compare symlink atimes (readlink updates them on relatime mounts, so only a
    /// freshly generated tree compares equal).
    #[arg(long)]
    symlink_atime: bool,
    /// Time granularity: ns, us, ms or s (mke2fs -d keeps whole seconds).
    #[arg(long, default_value = "ns", value_parser = parse_granularity)]
    time_granularity: TimeGranularity,
    /// Do not compare directory mtimes.
    #[arg(long)]
    ignore_dir_mtime: bool,
    /// Do not compare the attributes of the two roots (their contents still are).
    #[arg(long)]
    ignore_root_attrs: bool,
    /// Leave out a top-level name on both sides (repeatable), e.g. lost+found.
    #[arg(long, value_name = "NAME")]
    ignore: Vec<OsString>,
    /// Do not compare extended attributes.
    #[arg(long)]
    no_xattrs: bool,
    /// Also compare system.* extended attributes.
    #[arg(long)]
    with_system_xattrs: bool,
    /// Print nothing when the trees are equal.
    #[arg(long, short)]
    quiet: bool,
    /// First tree.
    a: PathBuf,
    /// Second tree.
    b: PathBuf,
}

fn parse_granularity(s: &str) -> Result<TimeGranularity, String> {
    TimeGranularity::parse(s).ok_or_else(|| format!("unknown granularity '{s}' (ns, us, ms, s)"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let opts = CmpOptions {
        atime: !args.no_atime,
        symlink_atime: args.symlink_atime,
        time_granularity: args.time_granularity,
        ignore_dir_mtime: args.ignore_dir_mtime,
        ignore_root_attrs: args.ignore_root_attrs,
        ignore: args.ignore,
        xattrs: !args.no_xattrs,
        system_xattrs: args.with_system_xattrs,
    };
    match compare(&args.a, &args.b, &opts) {
        Ok(stats) => {
            if !args.quiet {
                println!("{stats}");
            }
            ExitCode::SUCCESS
        }
        Err(d) if d.is_io() => {
            eprintln!("usfs-treecmp: {d}");
            ExitCode::from(2)
        }
        Err(d) => {
            println!("{d}");
            ExitCode::from(1)
        }
    }
}
