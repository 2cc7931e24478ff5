//! `usfs fsck`: check an ext4 image like `e2fsck -fn`, in parallel; `-y` and `-p` repair
//! (`fsck_repair`), and so does a run on a terminal without -n, asking (`fsck_ask`). An EROFS image goes to `cmd_fsck_erofs` (fsck.erofs's behaviour).

use crate::image::CliResult;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use usfs_dev::Device;
use usfs_fsck::problem::{Code, Pass, Severity};
use usfs_fsck::repair::Mode;

/// e2fsck's exit codes.
pub(crate) const EXIT_CLEAN: u8 = 0;
/// Errors left uncorrected.
pub(crate) const EXIT_UNCORRECTED: u8 = 4;
/// Operational error.
pub(crate) const EXIT_OPERATIONAL: u8 = 8;
/// Usage error.
pub(crate) const EXIT_USAGE: u8 = 16;

/// Options of `usfs fsck` (named as e2fsck's).
#[derive(clap::Args)]
pub(crate) struct FsckArgs {
    #[command(flatten)]
    pub(crate) dev: crate::image::DeviceArgs,
    /// Open read-only and answer "no" to every question (the default without -y or -p
    /// when standard input or output is not a terminal; on a terminal usfs fsck asks
    /// before each fix, as e2fsck).
    #[arg(short = 'n')]
    no: bool,
    /// Force checking even if the file system seems clean (-n always checks; -y and -p
    /// skip a cleanly unmounted file system without it).
    #[arg(short = 'f')]
    pub(crate) force: bool,
    /// Repair: answer "yes" to every question (problems without a repair yet leave the
    /// image unchanged, exit 4).
    #[arg(short = 'y', conflicts_with = "no")]
    yes: bool,
    /// Preen (also -a, as e2fsck): repair what e2fsck's preen repairs; anything else
    /// stops with "UNEXPECTED INCONSISTENCY" and exit 4, the image unchanged.
    #[arg(short = 'p', short_alias = 'a', conflicts_with = "no")]
    preen: bool,
    /// Worker threads (default: CPU count).
    #[arg(short = 'j', long = "threads")]
    pub(crate) threads: Option<usize>,
    /// With -y or -p: save every block the repair overwrites to this undo file first
    /// (e2fsprogs' E2UNDO02 format: `e2undo FILE IMAGE` or `usfs undo FILE IMAGE` puts the
    /// image back).
    #[arg(short = 'z', value_name = "UNDO_FILE")]
    pub(crate) undo: Option<PathBuf>,
    /// Show a progress bar on standard error (the argument, a file descriptor, is
    /// accepted for e2fsck compatibility and ignored).
    #[arg(short = 'C', num_args = 0..=1, default_missing_value = "0")]
    pub(crate) progress: Option<i32>,
    /// Print problems and the summary as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Print per-stage times and thread allocation over time to standard error.
    #[arg(long)]
    pub(crate) trace: bool,
    /// Resource-aware: workers at SCHED_IDLE, core budget from idle CPUs (/proc/stat).
    #[arg(long)]
    nice: bool,
    /// Read the file system by the superblock at this block (e2fsck's -b): a backup, and
    /// the descriptors after it; a repair writes them over the primary. Without it, a
    /// primary superblock that is unusable sends -n and -y to group 1's backup.
    #[arg(short = 'b', value_name = "SUPERBLOCK")]
    pub(crate) superblock: Option<u64>,
    /// The block size of the -b superblock (e2fsck's -B; default: each from 1 KiB to 64
    /// KiB until one fits).
    #[arg(short = 'B', value_name = "BLOCKSIZE", requires = "superblock")]
    pub(crate) blocksize: Option<u32>,
    /// Extended options, comma-separated (e2fsck's -E): `journal_only` replays the
    /// journal onto the image (with -y or -p) and stops.
    #[arg(short = 'E', value_delimiter = ',')]
    extended: Vec<String>,
    /// EROFS images: fsck.erofs's options.
    #[command(flatten)]
    pub(crate) erofs: crate::cmd_fsck_erofs::ErofsArgs,
    /// The image.
    pub(crate) image: PathBuf,
}

pub(crate) fn run(a: &FsckArgs) -> CliResult {
    if let Some(r) = crate::cmd_fsck_erofs::dispatch(a) {
        return r;
    }
    if let Some(bad) = a.extended.iter().find(|e| e.as_str() != "journal_only") {
        eprintln!("usfs fsck: unknown extended option: {bad}");
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    if a.extended.iter().any(|e| e == "journal_only") {
        return journal_only(a);
    }
    let mut opts = usfs_fsck::Options::default();
    if let Some(j) = a.threads {
        opts.threads = j.max(1);
    }
    opts.nice = a.nice;
    if a.yes || a.preen {
        let mode = if a.yes { Mode::Yes } else { Mode::Preen };
        return crate::fsck_repair::run(a, Some(mode), &opts);
    }
    if !a.no && !a.json && crate::fsck_ask::interactive() {
        return crate::fsck_repair::run(a, None, &opts);
    }
    let path_name = a.image.display().to_string();
    let dev: Arc<dyn Device> = match usfs_dev::FileDevice::open(&a.image, false) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            eprintln!("usfs fsck: {path_name}: {e}");
            return Ok(ExitCode::from(EXIT_OPERATIONAL));
        }
    };
    let backup = match crate::fsck_backup::choose(a, &dev, false, a.json) {
        Ok(b) => b,
        Err(code) => return Ok(code),
    };
    let dev = match crate::fsck_backup::view(dev, backup) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("usfs fsck: {path_name}: {e}");
            return Ok(ExitCode::from(EXIT_OPERATIONAL));
        }
    };
    if a.progress.is_some() {
        eprintln!("{path_name}: checking with {} threads", opts.threads);
    }
    if needs_recovery(&*dev) && !a.json {
        println!("Warning: skipping journal recovery because doing a read-only filesystem check.");
    }
    let report = match usfs_fsck::check(dev, &opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("usfs fsck: {path_name}: {e}");
            if a.json {
                println!(
                    "{}",
                    json!({
                        "image": path_name,
                        "error": e.to_string(),
                        "corruption": corruption_json(&e),
                        "exit": EXIT_OPERATIONAL,
                    })
                );
            }
            return Ok(ExitCode::from(EXIT_OPERATIONAL));
        }
    };
    let code = if report.has_errors() {
        EXIT_UNCORRECTED
    } else {
        EXIT_CLEAN
    };
    // e2fsck names the file system by its label when it has one.
    let name = display_name(&report.label, &path_name);
    if a.json {
        let problems: Vec<_> = report
            .problems
            .iter()
            .map(|p| {
                let d = p.code.def();
                json!({
                    "code": format!("{:#08x}", d.code),
                    "name": d.name,
                    "pass": d.pass.label(),
                    "severity": if d.severity == Severity::Error { "error" } else { "info" },
                    "ino": p.ino(),
                    "block": p.block(),
                    "group": p.group(),
                    "message": p.message(),
                })
            })
            .collect();
        let s = report.summary;
        let v = json!({
            "image": name,
            "clean": !report.has_errors(),
            "exit": code,
            "problems": problems,
            "summary": {
                "line": s.line(&name),
                "inodes_used": s.inodes_used, "inodes": s.inodes,
                "blocks_used": s.blocks_used, "blocks": s.blocks,
                "fragmented_tenths_percent": s.fragmented_tenths,
            },
        });
        println!("{v}");
    } else {
        print_text(&name, &report);
    }
    if a.trace {
        print_trace(&report.trace);
    }
    Ok(ExitCode::from(code))
}

/// Where the damage that stopped the check lies, for `--json`: the structure and, where
/// known, the inode, block and byte offset (null for an error that is not a damaged image).
fn corruption_json(e: &usfs_fs::Error) -> serde_json::Value {
    match e.corruption() {
        Some(c) => json!({
            "structure": format!("{:?}", c.structure),
            "ino": c.ino,
            "block": c.block,
            "offset": c.offset,
        }),
        None => serde_json::Value::Null,
    }
}

/// `-E journal_only`: replay the journal onto the image and stop, as e2fsck does (exit 0
/// whether or not there was anything to replay; a read-only run only warns).
fn journal_only(a: &FsckArgs) -> CliResult {
    let name = a.image.display().to_string();
    let writable = a.yes || a.preen;
    let dev = match usfs_dev::FileDevice::open(&a.image, writable) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("usfs fsck: {name}: {e}");
            return Ok(ExitCode::from(EXIT_OPERATIONAL));
        }
    };
    if !writable {
        let mut f = [0u8; 4];
        if usfs_dev::Device::read_at(&dev, &mut f, 1024 + 0x60).is_ok()
            && u32::from_le_bytes(f) & 4 != 0
        {
            println!(
                "Warning: skipping journal recovery because doing a read-only filesystem check."
            );
        }
        return Ok(ExitCode::from(EXIT_CLEAN));
    }
    match usfs_ext4::replay_journal(Box::new(dev)) {
        Ok(None) => Ok(ExitCode::from(EXIT_CLEAN)),
        Ok(Some(plan)) => {
            println!("{name}: recovering journal");
            if let Some(e) = &plan.error {
                println!("Journal checksum error or corruption found in {name}: {e}");
            }
            if let Some(t) = plan.failed_commit {
                println!("Journal transaction {t} was corrupt, replay was aborted.");
            }
            Ok(ExitCode::from(EXIT_CLEAN))
        }
        Err(e) => {
            eprintln!("usfs fsck: {name}: while recovering journal: {e}");
            Ok(ExitCode::from(EXIT_OPERATIONAL))
        }
    }
}

/// The label if set, else the path; whitespace and ':' become '_' (as e2fsck prints it).
pub(crate) fn display_name(label: &[u8], path: &str) -> String {
    if label.is_empty() {
        return path.to_string();
    }
    String::from_utf8_lossy(label)
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == ':' {
                '_'
            } else {
                c
            }
        })
        .collect()
}

/// Does the superblock on `dev` say the journal needs recovery?
fn needs_recovery(dev: &dyn Device) -> bool {
    let mut raw = vec![0u8; 1024];
    dev.read_at(&mut raw, usfs_ext4::format::superblock::SUPERBLOCK_OFFSET)
        .ok()
        .and_then(|()| usfs_ext4::format::superblock::Superblock::new(&raw[..]))
        .is_some_and(|sb| {
            sb.s_feature_incompat() & usfs_ext4::format::features::incompat::RECOVER != 0
        })
}

fn print_text(name: &str, report: &usfs_fsck::Report) {
    println!("usfs fsck {} (check only)", env!("CARGO_PKG_VERSION"));
    print_problem_lines(&report.problems, None);
    if report.has_errors() {
        println!("\n{name}: ********** WARNING: Filesystem still has errors **********\n");
    }
    println!("{}", report.summary.line(name));
}

/// The pass headings and each problem's message under its pass, as e2fsck prints them,
/// each followed, where e2fsck asks, by its question's word and `answer` ("Clear? yes");
/// without an answer, by nothing (`-n`). (Buffered: a line per write
/// would cost a system call per problem.)
pub(crate) fn print_problem_lines(problems: &[usfs_fsck::problem::Problem], answer: Option<&str>) {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    for pass in PASSES {
        let mut in_pass = problems
            .iter()
            .filter(|p| p.code.def().pass == pass)
            .peekable();
        if let Some(h) = heading(pass) {
            let _ = writeln!(out, "{h}");
        }
        if pass == Pass::P1B && in_pass.peek().is_some() {
            let _ = writeln!(out, "{PASS1B_HEADING}");
        }
        // (Pass 3A's directories are not named: its heading says what happens.)
        let (optimized, in_pass): (Vec<_>, Vec<_>) =
            in_pass.partition(|p| p.code == Code::DirOptimize);
        for p in in_pass {
            // (What e2fsck only announces is printed as its table words it.)
            let _ = match p.code.asks() {
                true => match answer {
                    Some(a) => writeln!(out, "{}.  {}? {a}", p.message(), p.code.prompt()),
                    None => writeln!(out, "{}. ", p.message()),
                },
                false => writeln!(out, "{}\n", p.message()),
            };
        }
        if pass == Pass::P3 && !optimized.is_empty() {
            let _ = writeln!(out, "Pass 3A: Optimizing directories");
        }
    }
    let _ = out.flush();
}

/// The problems as `e2fsck -p` prints them: no pass headings, each line named by the
/// file system `name`, a fix followed by `answer` (what e2fsck only announces, by
/// nothing).
pub(crate) fn print_preen_lines(
    name: &str,
    problems: &[usfs_fsck::problem::Problem],
    answer: &str,
) {
    use std::io::Write;
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    for pass in PASSES {
        let in_pass = problems.iter().filter(|p| p.code.def().pass == pass);
        for p in in_pass.filter(|p| p.code != Code::DirOptimize) {
            let _ = match p.code.asks() {
                true => writeln!(out, "{name}: {}.  {answer}", p.message()),
                false => writeln!(out, "{name}: {}", p.message()),
            };
        }
    }
    let _ = out.flush();
}

/// The passes in the order e2fsck runs them.
pub(crate) const PASSES: [Pass; 8] = [
    Pass::P0,
    Pass::P1,
    Pass::P1B,
    Pass::P2,
    Pass::P3,
    Pass::P4,
    Pass::P5,
    Pass::P6,
];

/// Prints e2fsck's heading of `pass` (pass 0 has none, and pass 1B's is printed only
/// when it has problems: [`print_pass1b_heading`]).
pub(crate) fn print_heading(pass: Pass) {
    if let Some(h) = heading(pass) {
        println!("{h}");
    }
}

/// e2fsck's heading of `pass` ([`print_heading`]).
fn heading(pass: Pass) -> Option<&'static str> {
    Some(match pass {
        Pass::P0 | Pass::P1B | Pass::P6 => return None,
        Pass::P1 => "Pass 1: Checking inodes, blocks, and sizes",
        Pass::P2 => "Pass 2: Checking directory structure",
        Pass::P3 => "Pass 3: Checking directory connectivity",
        Pass::P4 => "Pass 4: Checking reference counts",
        Pass::P5 => "Pass 5: Checking group summary information",
    })
}

/// e2fsck's heading of the passes that resolve multiply-claimed blocks.
const PASS1B_HEADING: &str = "\nRunning additional passes to resolve blocks claimed by more than one inode...\nPass 1B: Rescanning for multiply-claimed blocks";

/// Prints [`PASS1B_HEADING`].
pub(crate) fn print_pass1b_heading() {
    println!("{PASS1B_HEADING}");
}

/// Time-weighted number of workers in each stage between `from` and `to` ms, from each
/// worker's stage switches (a worker stays in a stage until its next switch, and in the
/// last one until `end`).
fn allocation(timelines: &[Vec<(u32, u8)>], from: f64, to: f64, end: f64) -> [f64; 2] {
    let mut out = [0.0; 2];
    for tl in timelines {
        for (i, &(start, stage)) in tl.iter().enumerate() {
            let stop = tl.get(i + 1).map_or(end, |n| n.0 as f64);
            let overlap = stop.min(to) - (start as f64).max(from);
            if overlap > 0.0 {
                out[usize::from(stage.min(1))] += overlap / (to - from);
            }
        }
    }
    out
}

fn print_trace(t: &usfs_fsck::Trace) {
    let mut e = String::new();
    for (p, s) in &t.phases {
        e.push_str(&format!("trace: {p:<16} {:.3} s\n", s));
    }
    e.push_str(&format!(
        "trace: measured cost: {} ns per inode, {} ns per directory block; {} inodes, {} directory blocks, {} entries\n",
        t.costs[0], t.costs[1], t.counters.inodes, t.counters.dir_blocks, t.counters.entries
    ));
    e.push_str(&format!(
        "trace: directory reads: {} requests of {} blocks (neighbours read together)\n",
        t.counters.dir_reads, t.counters.dir_read_blocks
    ));
    for (i, b) in t.busy.iter().enumerate() {
        e.push_str(&format!(
            "trace: worker {i}: busy {:.3} s in pass 1, {:.3} s in pass 2\n",
            b[0], b[1]
        ));
    }
    let span_ms = t
        .phases
        .iter()
        .find(|(p, _)| *p == "passes 1+2")
        .map_or(0.0, |(_, s)| s * 1000.0);
    if span_ms > 0.0 {
        e.push_str("trace: threads per stage over time (pass 1 inodes / pass 2 directories):\n");
        let slices = 10;
        for k in 0..slices {
            let (from, to) = (
                span_ms * k as f64 / slices as f64,
                span_ms * (k + 1) as f64 / slices as f64,
            );
            let [a, b] = allocation(&t.timelines, from, to, span_ms);
            e.push_str(&format!(
                "trace:   {from:>8.0}-{to:<8.0} ms  {a:.1} / {b:.1}\n"
            ));
        }
    }
    eprint!("{e}");
}
