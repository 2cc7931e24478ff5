//! `usfs-gentree`: generate a seeded test tree (see `usfs_testkit::generate`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use usfs_testkit::{generate, GenOptions, Profile};

/// Generate a deterministic directory tree for testing file-system images: files of many
/// sizes, holes, odd and long names, deep paths, big directories, symlinks, hard links,
/// fifos, devices, sockets, xattrs, modes, owners and nanosecond times.
#[derive(Parser, Debug)]
#[command(name = "usfs-gentree", version)]
struct Args {
    /// Seed: the same seed and options give the same tree.
    #[arg(long)]
    seed: u64,
    /// Size preset: small (~800 entries + 3000-entry dir), medium (~5000 + 10000), full
    /// (medium + 100000-entry dir + 4.5 GiB sparse file).
    #[arg(long, default_value = "small", value_parser = parse_profile)]
    profile: Profile,
    /// Number of random files under tree/ (default: from the profile).
    #[arg(long)]
    files: Option<usize>,
    /// Entries in bigdir/ (default: from the profile).
    #[arg(long)]
    big_dir_entries: Option<usize>,
    /// Make the 4.5 GiB sparse file even if the profile does not.
    #[arg(long, conflicts_with = "no_sparse_huge")]
    sparse_huge: bool,
    /// Do not make the 4.5 GiB sparse file.
    #[arg(long)]
    no_sparse_huge: bool,
    /// Do not make device nodes.
    #[arg(long)]
    no_devices: bool,
    /// Do not set extended attributes.
    #[arg(long)]
    no_xattrs: bool,
    /// Largest regular file, in bytes (suffixes K, M, G allowed).
    #[arg(long, value_parser = parse_size)]
    max_file_size: Option<u64>,
    /// Longest symlink target in bytes (default 4000).
    #[arg(long)]
    max_symlink_len: Option<usize>,
    /// Largest xattr value in bytes (default 3000).
    #[arg(long)]
    max_xattr_size: Option<usize>,
    /// Most xattrs on one file (default 40).
    #[arg(long)]
    max_xattrs_per_file: Option<usize>,
    /// Keep all timestamps within 1901..2038 (signed 32-bit seconds), as mke2fs -d needs.
    #[arg(long)]
    times_32bit: bool,
    /// Do not give a symlink a second hard link (mke2fs -d does not keep such links).
    #[arg(long)]
    no_hardlinked_symlinks: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Directory to fill: must be empty or not exist yet.
    dir: PathBuf,
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    Profile::parse(s).ok_or_else(|| format!("unknown profile '{s}' (small, medium, full)"))
}

fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|e| format!("bad size '{s}': {e}"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' too large"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut opts = GenOptions::new(args.profile, args.seed);
    if let Some(n) = args.files {
        opts.files = n;
    }
    if let Some(n) = args.big_dir_entries {
        opts.big_dir_entries = n;
    }
    if args.sparse_huge {
        opts.sparse_huge = true;
    }
    if args.no_sparse_huge {
        opts.sparse_huge = false;
    }
    opts.devices = !args.no_devices;
    opts.xattrs = !args.no_xattrs;
    if let Some(n) = args.max_file_size {
        opts.max_file_size = n;
    }
    if let Some(n) = args.max_symlink_len {
        opts.max_symlink_len = n;
    }
    if let Some(n) = args.max_xattr_size {
        opts.max_xattr_size = n;
    }
    if let Some(n) = args.max_xattrs_per_file {
        opts.max_xattrs_per_file = n;
    }
    opts.times_32bit = args.times_32bit;
    opts.hardlinked_symlinks = !args.no_hardlinked_symlinks;
    match generate(&args.dir, &opts) {
        Ok(report) => {
            if args.json {
                println!("{}", report.to_json());
            } else {
                println!("{report}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("usfs-gentree: {}: {e}", args.dir.display());
            ExitCode::from(1)
        }
    }
}
