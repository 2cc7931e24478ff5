//! The crash harness on something that exists today: usfs mkfs.ext4 of a small tree,
//! recorded through the crash recorder: format's flush (a complete empty file system),
//! one after populating, and finish's own. mkfs is not transactional, so states before
//! the final flush may be unclean, but the final one must pass e2fsck and hold the
//! files; and the harness must report the states that miss finish's writes (it can
//! fail).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use usfs_dev::record::{CrashPlan, CrashState, InEpochs, Log, StateKind};
use usfs_dev::{Device, FileDevice, MemDevice, Recorder};
use usfs_ext4::write::{format, populate, MkfsOptions, PopulateOptions, Writer};
use usfs_testkit::crash::{check, check_states, Options};
use usfs_testkit::rng::Rng;
use usfs_testkit::TempDir;

const SIZE: u64 = 8 << 20;

/// A small source tree; returns the files' image paths and bytes.
fn tree(src: &Path) -> check::FileSet {
    let mut rng = Rng::new(5);
    let mut expect = Vec::new();
    for (path, len) in [
        ("a/one", 100_000),
        ("a/two", 37),
        ("b/c/three", 300_000),
        ("empty", 0),
    ] {
        let mut data = vec![0u8; len];
        rng.fill(&mut data);
        let p = src.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, &data).unwrap();
        expect.push((format!("/{path}").into_bytes(), data));
    }
    std::os::unix::fs::symlink("a/one", src.join("link")).unwrap();
    std::fs::create_dir(src.join("d")).unwrap();
    expect
}

/// Records mkfs of `src` onto a copy of `base` (zeros); returns the log and the image
/// mkfs left.
fn record_mkfs(tmp: &Path, base: &Path, src: &Path) -> (Log, PathBuf) {
    let live = tmp.join("live.img");
    std::fs::copy(base, &live).unwrap();
    let rec = Arc::new(Recorder::new(Box::new(
        FileDevice::open(&live, true).unwrap(),
    )));
    let mut opts = MkfsOptions::new(SIZE);
    opts.uuid = Some([7; 16]);
    opts.time = Some(1_700_000_000);
    // format flushes the empty file system it writes
    let mut w = Writer::open(format(Box::new(rec.clone()), &opts).unwrap()).unwrap();
    let p = PopulateOptions {
        threads: 2,
        ..PopulateOptions::default()
    };
    populate(&mut w, &usfs_source::HostDir::new(src), &p).unwrap();
    rec.flush().unwrap();
    drop(w.finish().unwrap());
    (rec.log(), live)
}

/// A recorded mkfs: its temporary directory, the base image, the log, the image mkfs
/// left, and the files it holds.
type Recorded = (TempDir, PathBuf, Log, PathBuf, check::FileSet);

fn setup() -> Option<Recorded> {
    if !check::have_e2fsprogs() {
        println!("SKIP: e2fsck/debugfs not found");
        return None;
    }
    let tmp = TempDir::new("crash-mkfs").unwrap();
    let src = tmp.path().join("src");
    let expect = tree(&src);
    let base = tmp.path().join("base.img");
    std::fs::File::create(&base).unwrap().set_len(SIZE).unwrap();
    let (log, live) = record_mkfs(tmp.path(), &base, &src);
    Some((tmp, base, log, live, expect))
}

#[test]
fn final_state_is_clean_and_states_missing_finish_are_caught() {
    let Some((tmp, base, log, live, expect)) = setup() else {
        return;
    };
    let epochs = log.epochs();
    assert_eq!(log.flushes(), 3, "format, populate, finish");
    let plan = CrashPlan {
        max_prefixes: 10,
        all_but_one: true,
        subsets: 6,
        seed: 3,
        tear: true,
        epochs: InEpochs::Last,
        ..CrashPlan::default()
    };
    let states = log.states(&plan).unwrap();
    let last = states.len() - 1;
    let live_bytes = std::fs::read(&live).unwrap();
    let mut checker = |img: &Path, s: &CrashState| -> Result<(), String> {
        check::fsck_clean_after_replay(img)?;
        check::files_hold(img, &expect)?;
        if s.kind == StateKind::Epochs && s.epoch == epochs.len() {
            check::files_hold_debugfs(img, &expect)?;
            // The final state is the image mkfs left, byte for byte (e2fsck -fn and the
            // journal_only replay of a clean image change nothing).
            if std::fs::read(img).unwrap() != live_bytes {
                return Err("final state differs from the recorded image".into());
            }
        }
        Ok(())
    };
    let kept = tmp.path().join("failed");
    std::fs::create_dir(&kept).unwrap();
    let opts = Options {
        keep_failures: 64,
        keep_failed: Some(kept.clone()),
        ..Options::default()
    };
    let report = check_states(&base, &log, &states, &opts, &mut checker).unwrap();
    println!("{report}");
    assert_eq!(report.checked, states.len());
    assert!(
        report.passed[last],
        "the final state must be clean: {report}"
    );
    // The flush point before finish (inodes, bitmaps, descriptors unwritten) is caught.
    let before_finish = states
        .iter()
        .position(|s| s.kind == StateKind::Epochs && s.epoch == epochs.len() - 1)
        .unwrap();
    assert!(!report.passed[before_finish], "{report}");
    // A state with the superblock but without some other write of finish: e2fsck finds
    // errors in a file system it can open (exit 4), not just a missing superblock (8).
    let inconsistent = report.failures.iter().find(|f| {
        matches!(f.state.kind, StateKind::AllBut { .. }) && f.message.contains("e2fsck -fn exit 4")
    });
    assert!(inconsistent.is_some(), "{report}");
    assert!(report
        .to_string()
        .contains(&inconsistent.unwrap().state.to_string()));
}

/// The harness materialises exactly the state asked for, with undo between states: a
/// read-only checker on the working image compares it with the state rebuilt in memory.
#[test]
fn materialised_states_match_the_log_in_place() {
    let Some((_tmp, base, log, _live, _)) = setup() else {
        return;
    };
    let plan = CrashPlan {
        max_prefixes: 6,
        subsets: 4,
        seed: 8,
        tear: true,
        ..CrashPlan::default()
    };
    let states = log.states(&plan).unwrap();
    let base_bytes = std::fs::read(&base).unwrap();
    let mut checker = |img: &Path, s: &CrashState| -> Result<(), String> {
        let mem = MemDevice::new(base_bytes.clone(), true);
        log.apply(s, &mem).map_err(|e| e.to_string())?;
        let want = mem.into_inner();
        let got = std::fs::read(img).map_err(|e| e.to_string())?;
        if got != want {
            return Err(format!("{s}: materialised image differs"));
        }
        Ok(())
    };
    let opts = Options {
        scratch_copy: false,
        ..Options::default()
    };
    let report = check_states(&base, &log, &states, &opts, &mut checker).unwrap();
    assert_eq!(
        (report.checked, report.failed),
        (states.len(), 0),
        "{report}"
    );
    // And the same checker fails when it is handed the wrong state.
    let mut wrong = |img: &Path, s: &CrashState| {
        let mut other = s.clone();
        other.epoch = (s.epoch + 1).min(log.epochs().len());
        other.pieces.clear();
        checker(img, &other)
    };
    let report = check_states(&base, &log, &states, &opts, &mut wrong).unwrap();
    assert!(report.failed > 0, "{report}");
}
