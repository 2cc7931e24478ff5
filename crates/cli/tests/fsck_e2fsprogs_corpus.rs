//! Check-mode fidelity on e2fsprogs' own test images (tests/f_* of 1.47.0, kept outside
//! the project in ../shared/corpus or $USFS_E2FSPROGS_CORPUS). For every image:
//! `usfs fsck -n` and `e2fsck -fn` agree on clean vs not; on clean ones the summary
//! lines are identical; usfs never panics or hangs, and refuses (exit 8) only with a
//! named reason. Disagreements fail the test unless listed below with the reason.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

/// Cases where usfs does not (yet) see what e2fsck sees, and why.
const KNOWN_DISAGREEMENTS: &[(&str, &str)] = &[];

#[test]
fn usfs_fsck_agrees_with_e2fsck_on_e2fsprogs_images() {
    let Some(dir) = e2fsprogs_corpus() else {
        eprintln!("SKIP e2fsprogs corpus: not found (set USFS_E2FSPROGS_CORPUS or provide ../shared/corpus)");
        return;
    };
    if !need_tool("e2fsprogs corpus", "e2fsck") || !need_tool("e2fsprogs corpus", "gzip") {
        return;
    }
    let s = Scratch::new("e2fsprogs-corpus");
    let img = s.path("image");
    let (mut total, mut agree, mut refused, mut known) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for (name, _, bytes) in e2fsprogs_images(&dir) {
        std::fs::write(&img, &bytes).unwrap();
        total += 1;
        let (e2_code, e2_stdout, _) = run_limited(
            Command::new("e2fsck").arg("-fn").arg(&img),
            Duration::from_secs(15),
        );
        let Some(e2_code) = e2_code else {
            eprintln!("{name}: e2fsck -fn did not finish; skipped");
            continue;
        };
        let e2_out = String::from_utf8_lossy(&e2_stdout).into_owned();
        let (code, stdout, stderr) = run_limited(
            Command::new(usfs())
                .args(["fsck", "-n", "-j", "2"])
                .arg(&img),
            Duration::from_secs(30),
        );
        let stdout = String::from_utf8_lossy(&stdout).into_owned();
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
        let known_reason = KNOWN_DISAGREEMENTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, r)| *r);
        match code {
            None => failures.push(format!("{name}: usfs fsck hung or died by a signal")),
            Some(8)
                if stderr.contains("unsupported feature") || stderr.contains("corrupt image") =>
            {
                refused += 1;
                eprintln!("{name}: refused: {}", stderr.trim());
            }
            Some(c @ (0 | 4)) => {
                if (c == 0) == (e2_code == 0) {
                    agree += 1;
                    // (Some images make e2fsck stop without a summary line.)
                    if c == 0 && e2_out.contains(" non-contiguous), ") {
                        // The summary line (e2fsck may print more after it).
                        let last = |s: &str| {
                            s.lines()
                                .rfind(|l| l.contains(" non-contiguous), "))
                                .unwrap_or("")
                                .to_string()
                        };
                        if last(&stdout) != last(&e2_out) {
                            failures.push(format!(
                                "{name}: summary lines differ:\n  usfs:   {}\n  e2fsck: {}",
                                last(&stdout),
                                last(&e2_out)
                            ));
                        }
                    }
                    if known_reason.is_some() {
                        failures.push(format!(
                            "{name}: listed as a known disagreement but now agrees: remove it"
                        ));
                    }
                } else if let Some(r) = known_reason {
                    known += 1;
                    eprintln!("{name}: known disagreement (e2fsck {e2_code}, usfs {c}): {r}");
                } else {
                    failures.push(format!(
                        "{name}: e2fsck -fn exit {e2_code}, usfs fsck -n exit {c}\n{stdout}"
                    ));
                }
            }
            Some(c) => failures.push(format!("{name}: usfs fsck exited {c}: {stderr}")),
        }
    }
    eprintln!(
        "e2fsprogs corpus: {total} images, {agree} agree, {refused} refused by name (unsupported or unreadable), {known} known disagreements, {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
