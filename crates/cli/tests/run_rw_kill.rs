//! kill -9 of a whole `usfs run --rw` process tree (the owner and the writer inside it)
//! at random points: after recovery by the next usfs command (and by e2fsck on a copy,
//! and a kernel mount) the image is clean and nothing the mode promised is lost: with
//! `--mode posix` every file whose fsync returned, with `--mode sync` every file whose
//! write and close returned (no fsync at all). A bounded sample of kill points runs here
//! (`USFS_KILL_POINTS`, default 4 per mode); bench/run-rw-kill.sh runs 50 per mode.

mod common;

use common::kill::*;
use common::*;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn points() -> u64 {
    std::env::var("USFS_KILL_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

/// One kill point: the writer runs under `usfs run --rw --mode MODE` until `min` files are
/// durable, then `extra_ms` more, then the process group dies.
fn kill_once(name: &str, mode: &str, min: usize, extra_ms: u64) -> usize {
    let s = Scratch::new(&format!("run-rw-kill-{name}"));
    let img = s.path("img");
    mke2fs(&img, "128M", &["-t", "ext4"], None);
    run_ok(
        Command::new(usfs())
            .arg("mkdir")
            .arg(format!("{}:/w", img.display())),
    );
    let prefix = s.path("p");
    let done = s.path("done");
    let mut cmd = Command::new(usfs());
    cmd.args(["run", "--rw", "--mode", mode, "-m"])
        .arg(format!("{}={}", prefix.display(), img.display()))
        .args(["--", "python3", "-c", WRITER])
        .arg(prefix.join("w"))
        .arg(&done)
        .args(if mode == "sync" {
            &["nofsync"][..]
        } else {
            &[][..]
        })
        .env("TMPDIR", &s.0)
        .stdout(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().unwrap();
    let t = Instant::now();
    while durable(&done).len() < min && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(extra_ms));
    // SAFETY: kill(2) of the process group we made.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    let files = durable(&done);
    assert!(
        files.len() >= min,
        "{name}: the writer made {} files",
        files.len()
    );
    recover_and_check(&s, &img, &files, name);
    files.len()
}

fn kill_points(mode: &str) {
    let mut total = 0;
    for p in 0..points() {
        // Spread the points: after 1..8 durable files, 0..90 ms into the next ones.
        let min = 1 + (p as usize * 5) % 8;
        let extra = (p * 37) % 91;
        total += kill_once(&format!("{mode}-{p}"), mode, min, extra);
    }
    println!(
        "{mode}: {} kill points, {total} durable files, all recovered",
        points()
    );
}

#[test]
fn kill_9_of_usfs_run_rw_loses_nothing_fsynced() {
    if need_root("run_rw_kill")
        && need_tool("run_rw_kill", "python3")
        && need_tool("run_rw_kill", "e2fsck")
    {
        kill_points("posix");
    }
}

#[test]
fn kill_9_of_usfs_run_rw_sync_loses_no_returned_call() {
    if need_root("run_rw_kill sync")
        && need_tool("run_rw_kill sync", "python3")
        && need_tool("run_rw_kill sync", "e2fsck")
    {
        kill_points("sync");
    }
}

/// sync(1) inside `usfs run --rw` (posix mode) makes every change durable: after a kill
/// -9 of the whole tree the file written before it is there, with its data, in a process
/// that never touched the image but to sync.
#[test]
fn sync_inside_usfs_run_rw_survives_a_kill() {
    if !need_tool("run_rw sync(1)", "e2fsck") {
        return;
    }
    let s = Scratch::new("run-rw-sync1");
    let img = s.path("img");
    mke2fs(&img, "32M", &["-t", "ext4"], None);
    let p = s.path("p");
    let flag = s.path("synced");
    let script = format!(
        "echo durable > '{p}/f' && sync && touch '{flag}' && sleep 60",
        p = p.display(),
        flag = flag.display()
    );
    let mut child = Command::new(usfs())
        .args(["run", "--rw", "-m"])
        .arg(format!("{}={}", p.display(), img.display()))
        .args(["--", "sh", "-c", &script])
        .env("TMPDIR", &s.0)
        .process_group(0)
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !flag.exists() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill(2) of the process group we made.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    assert!(flag.exists(), "sync did not return");
    let out = run_ok(Command::new(usfs()).arg("cat").arg(&img).arg("/f"));
    assert_eq!(out.stdout, b"durable\n");
    run_ok(
        Command::new(usfs())
            .arg("mkdir")
            .arg(format!("{}:/after", img.display())),
    );
    let (code, out) = e2fsck(&["-fn"], &img);
    assert_eq!(code, 0, "{out}");
}
