//! The exerciser passes on a correct file system (the host's) and its model catches a
//! damaged file, a missing name and a changed attribute (it can fail).

use super::*;
use crate::TempDir;

fn small(seed: u64, threads: usize) -> Options {
    Options {
        seed,
        threads,
        ops: 400,
        max_file_size: 64 << 10,
        max_nodes: 32,
        ..Options::default()
    }
}

#[test]
fn runs_clean_on_the_host_file_system() {
    let tmp = TempDir::new("exercise").unwrap();
    let r = run(tmp.path(), &small(7, 2)).unwrap_or_else(|f| panic!("{f}"));
    let s = &r.stats;
    assert_eq!(s.ops, 800);
    assert!(s.done > 400 && s.expected_errors > 0, "{r}");
    assert_eq!(s.per_op.len(), Op::WEIGHTS.len(), "{:?}", s.per_op);
}

/// Every regular file below `dir` with some bytes.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() && e.metadata().unwrap().len() > 0 {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn model_catches_a_corrupted_file() {
    let tmp = TempDir::new("exercise").unwrap();
    let (_, world) = run_ops(tmp.path(), &small(3, 1)).unwrap_or_else(|f| panic!("{f}"));
    world.verify().unwrap();
    let victim = files(&tmp.path().join("t0"))
        .pop()
        .expect("some file with bytes");
    let mut data = std::fs::read(&victim).unwrap();
    let at = data.len() / 2;
    data[at] ^= 0x40;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &data[at..at + 1], at as u64).unwrap();
    let e = world.verify().unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("MISMATCH seed 3 thread 0 final check"),
        "{msg}"
    );
    assert!(msg.contains(&format!("byte {at} ")), "{msg}");
    assert!(!e.tail.is_empty());
}

#[test]
fn model_catches_a_lost_name_and_a_changed_mode() {
    let tmp = TempDir::new("exercise").unwrap();
    let (_, world) = run_ops(tmp.path(), &small(4, 1)).unwrap_or_else(|f| panic!("{f}"));
    let victim = files(&tmp.path().join("t0")).pop().expect("some file");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&victim).unwrap().permissions().mode();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(mode ^ 0o004)).unwrap();
    assert!(world.verify().unwrap_err().message.contains("mode"));
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(mode)).unwrap();
    world.verify().unwrap();
    std::fs::rename(&victim, tmp.path().join("elsewhere")).unwrap();
    let m = world.verify().unwrap_err().message;
    assert!(m.contains("missing") || m.contains("nlink"), "{m}");
}

#[test]
fn refuses_a_directory_in_use() {
    let tmp = TempDir::new("exercise").unwrap();
    std::fs::write(tmp.path().join("x"), b"").unwrap();
    let e = run(tmp.path(), &small(1, 1)).unwrap_err();
    assert!(e.message.contains("not empty"), "{e}");
}

#[test]
fn one_thread_repeats_with_its_seed_and_stops_at_the_duration() {
    let once = |seed| {
        let tmp = TempDir::new("exercise").unwrap();
        let (r, w) = run_ops(tmp.path(), &small(seed, 1)).unwrap_or_else(|f| panic!("{f}"));
        (
            r.stats.done,
            r.stats.expected_errors,
            r.stats.per_op,
            w.logs,
        )
    };
    assert_eq!(once(9), once(9));
    assert_ne!(once(9).3, once(10).3);
    let tmp = TempDir::new("exercise").unwrap();
    let opts = Options {
        ops: 0,
        duration: Some(Duration::from_millis(100)),
        ..small(5, 2)
    };
    let r = run(tmp.path(), &opts).unwrap_or_else(|f| panic!("{f}"));
    assert!(r.stats.ops > 0, "{r}");
}
