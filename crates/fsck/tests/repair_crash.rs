//! A crash during a repair: the writes of `usfs fsck -y` are recorded, and the image is
//! rebuilt at every flush point, at prefixes of the writes between two flushes, with each
//! write but one, and with random reordered subsets (torn writes included), as a power
//! cut or kill -9 at any write would leave it.
//!
//! On an image with a journal (one made by mke2fs and damaged by debugfs here) every
//! repair round is a transaction: each state must be finished by a re-run (journal
//! replay, then the repair again) into an image e2fsck -fn finds clean. Images without a
//! journal (e2fsprogs' test images, skipped visibly when the corpus is absent) are
//! written with careful ordering, as the kernel's ext2: each state must be finished by
//! the re-run or else repaired by `e2fsck -fy` (run twice where the first run leaves
//! errors, as e2fsprogs' own tests do).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use usfs_dev::record::{CrashPlan, CrashState};
use usfs_dev::{Device, FileDevice, Recorder};
use usfs_fsck::repair::{repair, Mode};
use usfs_fsck::Options;
use usfs_testkit::crash::{check, check_states, Options as CrashOptions};
use usfs_testkit::TempDir;

/// Images without a journal the repair fixes in one or more rounds (bitmaps and counts,
/// link counts, reconnection to a lost+found it makes, entries removed).
const CASES: &[&str] = &["f_bitmaps", "f_reconnect", "f_lpf", "f_bbinode"];

/// Makes at `img` an ext4 image with a journal holding a few files, then damages it with
/// debugfs: a wrong link count, an unlinked file left in use, dtime on a live inode, an
/// inode bitmap bit cleared.
fn seeded_image(dir: &Path, img: &Path, size: &str) {
    let run = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-b", "1024"])
        .arg(img)
        .arg(size));
    let mut cmds = String::from("mkdir d1\nmkdir d2\n");
    for (i, at) in ["f1", "d1/f2", "d1/f3", "d2/f4", "f5", "d2/f6"]
        .iter()
        .enumerate()
    {
        let src = dir.join(format!("src{i}"));
        let data: Vec<u8> = (0..(i + 1) * 3000).map(|k| (k * 7 + i) as u8).collect();
        std::fs::write(&src, data).unwrap();
        cmds += &format!("write {} {at}\n", src.display());
    }
    cmds += "rmdir lost+found\nsif /f1 links_count 5\nunlink /d1/f2\nsif /f5 dtime 12345\nfreei /d2/f6\n";
    let script = dir.join("damage.cmds");
    std::fs::write(&script, cmds).unwrap();
    let out = Command::new("debugfs")
        .arg("-w")
        .arg("-f")
        .arg(&script)
        .arg(img)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "debugfs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Records `usfs fsck -y` of a copy of `base`, checks it repaired the image, and checks
/// every crash state of the recording with `state_ok`; returns the states checked.
fn crash_states(
    tmp: &Path,
    name: &str,
    base: &Path,
    state_ok: &mut dyn FnMut(&Path) -> Result<(), String>,
) -> usize {
    let live = tmp.join(format!("{name}-live.img"));
    std::fs::copy(base, &live).unwrap();
    let rec = Arc::new(Recorder::new(Box::new(
        FileDevice::open(&live, true).unwrap(),
    )));
    let opts = Options {
        threads: 2,
        ..Options::default()
    };
    // (As `usfs fsck -y`: an unusable primary superblock is first written from the
    // backup.)
    let rec_dev: Arc<dyn Device> = rec.clone();
    restore_if_unusable(&rec_dev).unwrap();
    let done = repair(rec.clone(), &opts, Mode::Yes).unwrap();
    assert!(
        !done.rounds.is_empty() && !done.last.has_errors(),
        "{name}: not repaired"
    );
    check::fsck_clean(&live).unwrap_or_else(|e| panic!("{name}: repaired image: {e}"));
    let log = rec.log();
    let plan = CrashPlan {
        max_prefixes: 12,
        all_but_one: true,
        subsets: 8,
        seed: 11,
        // Writes land whole sectors of 4 KiB or not at all, as the write path's sweep
        // assumes: a superblock torn inside itself fails its checksum, and recovering
        // from that (a backup superblock) is not done yet.
        tear: false,
        ..CrashPlan::default()
    };
    let states = log.states(&plan).unwrap();
    let mut checker = |img: &Path, _: &CrashState| state_ok(img);
    // USFS_KEEP_FAILED=DIR keeps failing states' images there.
    let copts = CrashOptions {
        scratch_copy: true,
        keep_failed: std::env::var_os("USFS_KEEP_FAILED").map(PathBuf::from),
        keep_failures: 8,
        ..CrashOptions::default()
    };
    let report = check_states(base, &log, &states, &copts, &mut checker).unwrap();
    println!("{name}: {} flushes, {report}", log.flushes());
    assert_eq!(report.failed, 0, "{name}: {report}");
    report.checked
}

#[test]
fn a_crash_during_a_journaled_repair_is_finished_by_a_rerun() {
    if !check::have_e2fsprogs() {
        println!("SKIP: e2fsck/debugfs not found");
        return;
    }
    let tmp = TempDir::new("repair-crash-j").unwrap();
    let base = tmp.path().join("seeded.img");
    seeded_image(tmp.path(), &base, "8M");
    let mut ok = |img: &Path| {
        rerun(img)?;
        check::fsck_clean(img)
    };
    let n = crash_states(tmp.path(), "seeded", &base, &mut ok);
    println!("crash states during a journaled repair checked: {n}");
    assert!(n >= 50, "too few crash states: {n}");
}

/// As `usfs fsck -y` begins: a primary superblock that does not open is written (with
/// the descriptors) from group 1's backup.
fn restore_if_unusable(dev: &Arc<dyn Device>) -> Result<(), String> {
    use usfs_ext4::backup_sb;
    if backup_sb::primary_unusable(Box::new(dev.clone())).is_none() {
        return Ok(());
    }
    let b = backup_sb::find(&**dev).ok_or("no backup superblock")?;
    backup_sb::restore_primary(&**dev, &b).map_err(|e| format!("restore: {e}"))
}

/// Replays the journal of the image at `img` and repairs it, as `usfs fsck -y` does.
fn rerun(img: &Path) -> Result<(), String> {
    let dev: Arc<dyn Device> = Arc::new(FileDevice::open(img, true).map_err(|e| e.to_string())?);
    restore_if_unusable(&dev)?;
    usfs_ext4::replay_journal(Box::new(dev.clone())).map_err(|e| format!("replay: {e}"))?;
    let opts = Options {
        threads: 2,
        ..Options::default()
    };
    let out = repair(dev, &opts, Mode::Yes).map_err(|e| format!("repair: {e}"))?;
    if out.last.has_errors() {
        return Err(format!("the re-run left errors: {:?}", out.last.problems));
    }
    Ok(())
}

#[test]
fn a_crash_while_the_primary_superblock_is_restored_is_finished_by_a_rerun() {
    if !check::have_e2fsprogs() {
        println!("SKIP: e2fsck/debugfs not found");
        return;
    }
    let tmp = TempDir::new("repair-crash-sb").unwrap();
    let base = tmp.path().join("zeroed.img");
    // (Two groups of 1 KiB blocks: the backup at block 8193.)
    seeded_image(tmp.path(), &base, "16M");
    // The primary superblock and descriptor block zeroed: the restore writes both.
    let mut bytes = std::fs::read(&base).unwrap();
    bytes[1024..3072].fill(0);
    std::fs::write(&base, &bytes).unwrap();
    let mut ok = |img: &Path| {
        rerun(img)?;
        check::fsck_clean(img)
    };
    let n = crash_states(tmp.path(), "zeroed", &base, &mut ok);
    println!("crash states during a repair by the backup superblock checked: {n}");
    assert!(n >= 50, "too few crash states: {n}");
}

/// `e2fsck -fy` repairs `img`, run a second time when the first leaves errors (as
/// e2fsprogs' own test runner does: expect.1, expect.2), and `e2fsck -fn` is clean after.
/// One exception, counted in `no_room`: e2fsck itself gives up for lack of a free inode
/// to make lost+found with ("Insufficient space to recover lost files"; f_lpf has 16
/// inodes, all in use once the repair's lost+found exists, and a crash that keeps its
/// inode but loses the root's entry for it leaves e2fsck nowhere to put it).
fn e2fsck_repairs(img: &Path, no_room: &mut usize) -> Result<(), String> {
    let mut said = String::new();
    for _ in 0..2 {
        let (code, out) = check::e2fsck(&["-fy"], img)?;
        if code >= 8 {
            return Err(format!("e2fsck -fy exit {code}\n{out}"));
        }
        if check::fsck_clean(img).is_ok() {
            return Ok(());
        }
        said += &out;
    }
    if said.contains("Insufficient space to recover lost files") {
        *no_room += 1;
        return Ok(());
    }
    check::fsck_clean(img)
}

#[test]
fn a_crash_during_a_repair_without_journal_leaves_a_repairable_image() {
    let Some(dir) = usfs_testkit::corpus::e2fsprogs_dir() else {
        println!("SKIP: e2fsprogs corpus not found (set USFS_E2FSPROGS_CORPUS)");
        return;
    };
    if !check::have_e2fsprogs() {
        println!("SKIP: e2fsck/debugfs not found");
        return;
    }
    let tmp = TempDir::new("repair-crash").unwrap();
    let (mut total, mut by_e2fsck, mut no_room) = (0, 0, 0);
    for case in CASES {
        let gz = dir.join(case).join("image.gz");
        let out = Command::new("gzip").arg("-dc").arg(&gz).output().unwrap();
        assert!(out.status.success(), "{case}: cannot read {}", gz.display());
        let base = tmp.path().join(format!("{case}.img"));
        std::fs::write(&base, &out.stdout).unwrap();
        let mut ok = |img: &Path| {
            let copy = img.with_extension("copy");
            std::fs::copy(img, &copy).map_err(|e| e.to_string())?;
            if rerun(img).and_then(|()| check::fsck_clean(img)).is_ok() {
                return Ok(());
            }
            by_e2fsck += 1;
            e2fsck_repairs(&copy, &mut no_room)
        };
        total += crash_states(tmp.path(), case, &base, &mut ok);
    }
    println!("crash states during repairs without a journal: {total}, {by_e2fsck} of them needing e2fsck -fy, {no_room} left by e2fsck for lack of a free inode");
    assert!(total >= 100, "too few crash states: {total}");
}
