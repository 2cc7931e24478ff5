//! `usfs-exercise`: seeded random file operations on a directory, checked against an
//! in-memory model (see `usfs_testkit::exercise`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use usfs_testkit::exercise::{run_ops, FailKind, Options, World};

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
    /// After the run and its check, wait until this path exists, then compare DIR with
    /// the model again (meanwhile DIR can be unmounted and the image mounted there by
    /// another implementation, e.g. the kernel after `usfs mount -o rw`). DIR must not
    /// be needed open in between: the exerciser holds nothing in it while it waits.
    #[arg(long, value_name = "PATH")]
    reverify_when: Option<PathBuf>,
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
    let checked = run_ops(&a.dir, &opts).and_then(|(report, world)| {
        world.verify()?;
        Ok((report, world))
    });
    match checked {
        Ok((report, world)) => {
            println!(
                "usfs-exercise: seed {} threads {}: {report}",
                a.seed, a.threads
            );
            match a.reverify_when {
                Some(flag) => reverify(&flag, &world),
                None => ExitCode::SUCCESS,
            }
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

/// Waits for `flag` to exist, then compares the directory with the model again.
fn reverify(flag: &std::path::Path, world: &World) -> ExitCode {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    while !flag.exists() {
        std::thread::sleep(Duration::from_millis(50));
    }
    match world.verify() {
        Ok(()) => {
            println!("usfs-exercise: the tree matches the model again");
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("usfs-exercise: on re-verifying: {f}");
            ExitCode::from(1)
        }
    }
}
