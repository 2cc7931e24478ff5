//! kill -9 during `usfs fsck -fy`: at 24 points spread over a repair's writing (after
//! its check, through its commits), the repairing process is killed; a re-run of
//! `usfs fsck -y` (no -f: a half-repaired image must not pass for clean) then finishes the repair (exit 0 or 1) and `e2fsck -fn` finds the image
//! clean. (The crash-recording device of `crates/fsck/tests/repair_crash.rs` covers power
//! cuts, where unflushed writes are lost too; here the page cache keeps every write made
//! before the kill, as after a real kill.)
//!
//! The image: 1 KiB blocks, a 1 MiB journal (so the repair's transaction does not fit
//! in one commit), ~9000 files, damaged by debugfs at ~3000 places (link counts, i_size,
//! dtime, i_blocks, inode bitmap bits; files unlinked, to be reconnected, and inodes
//! cleared, whose entries go), so that the repair writes most of the inode tables in
//! several commits and in more than one round.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use usfs_testkit::rng::Rng;

const DIRS: usize = 30;
const FILES: usize = 300;
const KILLS: usize = 24;

/// The damaged image: made by mke2fs -d from a tree of DIRS x FILES files, then broken
/// with debugfs.
fn damaged_image(s: &Scratch) -> PathBuf {
    let src = s.path("src");
    for d in 0..DIRS {
        let dir = src.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES {
            let len = 200 + (d * 7919 + f * 104_729) % 9000;
            std::fs::write(dir.join(format!("f{f}")), vec![(f % 251) as u8; len]).unwrap();
        }
    }
    let img = s.path("damaged.img");
    mke2fs(
        &img,
        "64M",
        &["-t", "ext4", "-b", "1024", "-N", "12000", "-J", "size=1"],
        Some(&src),
    );
    let mut rng = Rng::new(0x5eed_f5c4);
    let mut cmds = String::new();
    for d in 0..DIRS {
        for f in 0..FILES {
            if rng.below(3) != 0 {
                continue;
            }
            let p = format!("/d{d}/f{f}");
            let line = match rng.below(7) {
                0 => format!("sif {p} links_count 7"),
                1 => format!("sif {p} size 1"),
                2 => format!("sif {p} dtime 12345"),
                3 => format!("sif {p} blocks 999"),
                4 => format!("freei {p}"),
                5 => format!("unlink {p}"),
                _ => format!("clri {p}"),
            };
            cmds.push_str(&line);
            cmds.push('\n');
        }
    }
    debugfs_write(&img, &s.path("damage"), &cmds);
    img
}

/// `usfs fsck -y IMG` (with `-f --trace` when `trace`): exit code and standard error.
/// The re-run after a kill has no -f: the image must not look clean half repaired.
fn repair(img: &Path, trace: bool) -> (Option<i32>, String) {
    let mut c = Command::new(usfs());
    c.args(["fsck", "-y"]);
    if trace {
        c.args(["-f", "--trace"]);
    }
    let (code, _, err) = run_limited(c.arg(img), Duration::from_secs(120));
    (code, String::from_utf8_lossy(&err).into_owned())
}

/// Seconds of the stage `name` in a `--trace` output.
fn stage(trace: &str, name: &str) -> f64 {
    let prefix = format!("trace: repair {name} ");
    trace
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.trim().trim_end_matches(" s").parse().ok())
        .unwrap_or_else(|| panic!("no stage {name} in:\n{trace}"))
}

fn e2fsck_clean(img: &Path) -> Result<(), String> {
    let out = Command::new("e2fsck").arg("-fn").arg(img).output().unwrap();
    match out.status.code() {
        Some(0) => Ok(()),
        c => Err(format!(
            "e2fsck -fn exit {c:?}:\n{}",
            String::from_utf8_lossy(&out.stdout)
        )),
    }
}

#[test]
fn a_repair_killed_anywhere_is_finished_by_a_rerun() {
    if !need_tool("fsck_repair_kill", "debugfs") || !need_tool("fsck_repair_kill", "e2fsck") {
        return;
    }
    let s = Scratch::new("fsck-repair-kill");
    let damaged = damaged_image(&s);
    let orig = std::fs::read(&damaged).unwrap();
    let work = s.path("work.img");

    // One repair uninterrupted: it must succeed, and its stages place the kills. (The
    // shortest of three runs: a slow first one, its reads from cold caches, would send
    // later kills past the end of the quicker ones.)
    let mut runs = Vec::new();
    for _ in 0..3 {
        std::fs::write(&work, &orig).unwrap();
        let t0 = Instant::now();
        let (code, trace) = repair(&work, true);
        runs.push((t0.elapsed().as_secs_f64(), code, trace));
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (total, code, trace) = runs.swap_remove(0);
    assert_eq!(code, Some(1), "the uninterrupted repair: {trace}");
    e2fsck_clean(&work).expect("the uninterrupted repair leaves the image clean");
    let checked = stage(&trace, "check 1");
    let written = stage(&trace, "fields 1") + stage(&trace, "fix 1") + stage(&trace, "commit 1");
    assert!(written > 0.0, "{trace}");
    assert!(
        trace.contains("check 2"),
        "the damage takes more than one round: {trace}"
    );
    // The check before is read-only: each kill comes a time after the repair's first
    // write to the image (its in-use mark, when the fixing starts), spread over the
    // rest of the repair as it ran uninterrupted (its later rounds too, and a little
    // past its end).
    let span = (total - checked) * 1.05;

    let mut rng = Rng::new(0xdead_beef);
    let (mut mid_run, mut failures) = (0, Vec::new());
    for k in 0..KILLS {
        std::fs::write(&work, &orig).unwrap();
        let before = std::fs::metadata(&work).unwrap().modified().unwrap();
        let at = span * (k as f64 + rng.below(1000) as f64 / 1000.0) / KILLS as f64;
        let mut child = Command::new(usfs())
            .args(["fsck", "-fy"])
            .arg(&work)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let waiting = Instant::now();
        while child.try_wait().unwrap().is_none()
            && std::fs::metadata(&work).unwrap().modified().unwrap() == before
            && waiting.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        std::thread::sleep(Duration::from_secs_f64(at));
        if child.try_wait().unwrap().is_none() {
            mid_run += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
        let (code, err) = repair(&work, false);
        let verdict = match code {
            Some(0 | 1) => e2fsck_clean(&work),
            c => Err(format!("the re-run exited {c:?}: {err}")),
        };
        if let Err(e) = verdict {
            let keep = s.path(&format!("failed-{k}.img"));
            let _ = std::fs::copy(&work, &keep);
            failures.push(format!("kill at {at:.3} s: {e}"));
        }
    }
    println!(
        "fsck_repair_kill: {KILLS} kills over {span:.3} s from the first write (repair {total:.3} s, \
         check {checked:.3} s, writing {written:.3} s): {mid_run} landed mid-run, {} failed",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        mid_run * 2 >= KILLS,
        "only {mid_run} of {KILLS} kills landed before the repair ended: the test measured nothing"
    );
}
