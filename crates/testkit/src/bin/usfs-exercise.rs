//! `usfs-exercise`: seeded random file operations on a directory, checked against an
//! in-memory model (see `usfs_testkit::exercise`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use usfs_testkit::exercise::{run, FailKind, Options};

/// Run seeded random file operations (create, write with holes, append, truncate,
/// fallocate, rename, link, unlink, mkdir, rmdir, symlink, xattrs, chmod, utimens, fsync)
/// in DIR with several threads, checking every result and finally the whole tree against
/// an in-memory model. Exits 0 when all matched, 1 on a mismatch (printing the seed, the
/// operation number and the last operations), 2 on a usage or setup error.
#[derive(Parser, Debug)]
#[command(name = "usfs-exercise", version)]
struct Args {
    /// Seed of every random choice (the same seed repeats a single-threaded run exactly).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Worker threads, each on its own subtree (plus the shared files).
    #[arg(long, short = 't', default_value_t = 2)]
    threads: usize,
    /// Operations per thread (0: until --duration).
    #[arg(long, short = 'n', default_value_t = 1000)]
    ops: u64,
    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Largest size a file is made to reach, in bytes.
    #[arg(long, default_value_t = 256 << 10)]
    max_file_size: u64,
    /// Most inodes in one thread's subtree.
    #[arg(long, default_value_t = 64)]
    max_nodes: usize,
    /// Files shared by all threads.
    #[arg(long, default_value_t = 4)]
    shared: usize,
    /// Do not use extended attributes.
    #[arg(long)]
    no_xattrs: bool,
    /// Operations shown per thread on a mismatch.
    #[arg(long, default_value_t = 32)]
    tail: usize,
    /// An empty directory (lost+found is allowed) to work in.
    dir: PathBuf,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let duration = match a.duration {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            eprintln!("usfs-exercise: --duration must be a positive number of seconds");
            return ExitCode::from(2);
        }
        d => d.map(Duration::from_secs_f64),
    };
    let opts = Options {
        seed: a.seed,
        threads: a.threads,
        ops: a.ops,
        duration,
        max_file_size: a.max_file_size,
        max_nodes: a.max_nodes,
        shared_files: a.shared,
        xattrs: !a.no_xattrs,
        tail: a.tail,
    };
    match run(&a.dir, &opts) {
        Ok(report) => {
            println!(
                "usfs-exercise: seed {} threads {}: {report}",
                a.seed, a.threads
            );
            ExitCode::SUCCESS
        }
        Err(f) if f.kind == FailKind::Setup => {
            eprintln!("usfs-exercise: {}", f.message);
            ExitCode::from(2)
        }
        Err(f) => {
            eprintln!("usfs-exercise: {f}");
            ExitCode::from(1)
        }
    }
}
