//! How many checks a repair runs: a round whose fixes all settle (link counts, sizes,
//! i_blocks, dtime, bitmaps and counts: values the check computed, which no other fix
//! of the round changes) is the last, as e2fsck does not restart for them; a round with
//! a fix that changes what another pass counted (an inode reconnected) is checked again.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// A small image made by mke2fs from a tree of a few files and a directory.
fn image(s: &Scratch) -> std::path::PathBuf {
    let src = s.path("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..20 {
        std::fs::write(src.join(format!("d/f{i}")), vec![b'x'; 3000 * (i + 1)]).unwrap();
    }
    let img = s.path("img");
    mke2fs(&img, "8M", &["-t", "ext4", "-b", "1024"], Some(&src));
    img
}

/// Damages `img` with debugfs's write commands.
fn debugfs(img: &Path, cmds: &str) {
    debugfs_write(img, &img.with_extension("cmd"), cmds);
    assert_eq!(e2fsck_exit(img, "-fn"), 4, "the damage must be seen");
}

/// `usfs fsck -fy --trace IMG`: its standard output and the checks it ran.
fn repair(img: &Path) -> (String, usize) {
    let out = Command::new(usfs())
        .args(["fsck", "-fy", "--trace"])
        .arg(img)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let checks = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("trace: repair check "))
        .count();
    (stdout, checks)
}

/// The summary line (the last of the output), without the image's name.
fn summary(out: &str) -> String {
    let last = out.lines().rev().find(|l| l.contains(" files (")).unwrap();
    last.split_once(": ").unwrap().1.to_string()
}

#[test]
fn a_round_of_settling_fixes_is_the_last() {
    if !need_tool("settling fixes", "debugfs") {
        return;
    }
    let s = Scratch::new("rounds-settle");
    let img = image(&s);
    debugfs(
        &img,
        "sif /d/f1 links_count 7\nsif /d/f2 size 1\nsif /d/f3 dtime 12345\n\
         sif /d/f4 blocks 999\nfreei /d/f5\nsif /d links_count 9\n",
    );
    let (out, checks) = repair(&img);
    assert_eq!(checks, 1, "one check, no second: {out}");
    let e2 = Command::new("e2fsck")
        .arg("-fn")
        .arg(&img)
        .output()
        .unwrap();
    let e2out = String::from_utf8_lossy(&e2.stdout);
    assert_eq!(e2.status.code(), Some(0), "{e2out}");
    // The summary is of the repaired image (the free counts the fixes wrote).
    assert_eq!(summary(&out), summary(&e2out), "{out}");
}

#[test]
fn a_round_that_reconnects_is_checked_again() {
    if !need_tool("reconnecting fixes", "debugfs") {
        return;
    }
    let s = Scratch::new("rounds-reconnect");
    let img = image(&s);
    debugfs(&img, "unlink /d/f6\nsif /d/f1 links_count 7\n");
    let (out, checks) = repair(&img);
    assert!(checks >= 2, "a reconnection is checked again: {out}");
    assert!(out.contains("Unattached inode"), "{out}");
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "{out}");
}

#[test]
fn an_unusable_journal_is_deleted_and_made_anew() {
    if !need_tool("journal recreation", "debugfs") || !need_tool("journal recreation", "dumpe2fs") {
        return;
    }
    let s = Scratch::new("rounds-journal");
    let img = image(&s);
    // The journal inode cleared: e2fsck deletes the journal, then makes a new one.
    run_ok(
        Command::new("debugfs")
            .args(["-w", "-R", "clri <8>"])
            .arg(&img),
    );
    assert_eq!(
        e2fsck_exit(&img, "-fn"),
        12,
        "e2fsck -n cannot go on without the journal"
    );
    let (out, _) = repair(&img);
    assert!(out.contains("*** journal has been deleted ***"), "{out}");
    assert!(
        out.contains("Creating journal (1024 blocks):  Done."),
        "{out}"
    );
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "{out}");
    let d = run_ok(Command::new("dumpe2fs").arg("-h").arg(&img));
    let d = String::from_utf8_lossy(&d.stdout);
    assert!(
        d.contains("has_journal") && d.contains("Total journal blocks:     1024"),
        "{d}"
    );
    // The repair's summary counts the new journal's blocks, as e2fsck's does.
    let e2 = Command::new("e2fsck")
        .arg("-fn")
        .arg(&img)
        .output()
        .unwrap();
    assert_eq!(summary(&out), summary(&String::from_utf8_lossy(&e2.stdout)));
}

/// Block 0 of the journal of `img` (its superblock): the physical block and the size.
fn journal_sb_block(img: &Path) -> (u64, u64) {
    let out = run_ok(Command::new("debugfs").args(["-R", "bmap <8> 0"]).arg(img));
    let blk: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let d = run_ok(Command::new("dumpe2fs").arg("-h").arg(img));
    let d = String::from_utf8_lossy(&d.stdout).into_owned();
    let bs = d
        .lines()
        .find_map(|l| l.strip_prefix("Block size:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (blk, bs)
}

/// Writes `bytes` at `off` of block 0 of the journal of `img`.
fn poke_journal_sb(img: &Path, off: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let (blk, bs) = journal_sb_block(img);
    let f = std::fs::OpenOptions::new().write(true).open(img).unwrap();
    f.write_all_at(bytes, blk * bs + off).unwrap();
}

#[test]
fn a_journal_without_its_magic_is_deleted_and_inode_8_cleared() {
    if !need_tool("journal superblock", "debugfs") || !need_tool("journal superblock", "dumpe2fs") {
        return;
    }
    let s = Scratch::new("rounds-journal-magic");
    let img = image(&s);
    poke_journal_sb(&img, 0, &[0u8; 4]);
    assert_eq!(e2fsck_exit(&img, "-fn"), 12, "e2fsck -n cannot go on");
    let (out, _) = repair(&img);
    assert!(
        out.contains("Superblock has an invalid journal (inode 8)"),
        "{out}"
    );
    assert!(
        out.contains("Journal inode is not in use, but contains data"),
        "{out}"
    );
    assert!(
        out.contains("Creating journal (1024 blocks):  Done."),
        "{out}"
    );
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "{out}");
}

#[test]
fn v2_journal_fields_left_by_a_v1_journal_are_cleared() {
    if !need_tool("journal superblock", "debugfs") || !need_tool("journal superblock", "dumpe2fs") {
        return;
    }
    let s = Scratch::new("rounds-journal-v2");
    let img = image(&s);
    // Not marked clean either: the fix written in place leaves it to the end to mark.
    debugfs_write(&img, &img.with_extension("cmd"), "ssv state 0");
    // s_nr_users (big-endian, at 0x40) of 2 on an internal journal.
    poke_journal_sb(&img, 0x40, &2u32.to_be_bytes());
    assert_eq!(e2fsck_exit(&img, "-fn"), 12, "e2fsck -n cannot go on");
    let (out, checks) = repair(&img);
    assert!(
        out.contains("Found invalid V2 journal superblock fields"),
        "{out}"
    );
    assert_eq!(checks, 2, "{out}");
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "{out}");
    let d = run_ok(Command::new("dumpe2fs").arg("-h").arg(&img));
    let d = String::from_utf8_lossy(&d.stdout);
    let users = d.lines().find(|l| l.starts_with("Journal number of users"));
    assert!(
        users.is_none_or(|l| l.ends_with(" 0")),
        "the users cleared:\n{d}"
    );
    assert_eq!(state(&img), "clean", "{out}");
}

#[test]
fn a_corrupt_journal_superblock_is_written_anew() {
    if !need_tool("journal superblock", "debugfs") || !need_tool("journal superblock", "dumpe2fs") {
        return;
    }
    let s = Scratch::new("rounds-journal-reset");
    let img = image(&s);
    // Block type 5 (a revoke block's) in place of the superblock's 4.
    poke_journal_sb(&img, 4, &5u32.to_be_bytes());
    assert_eq!(e2fsck_exit(&img, "-fn"), 12, "e2fsck -n cannot go on");
    let (out, _) = repair(&img);
    assert!(out.contains("Journal superblock is corrupt"), "{out}");
    assert!(!out.contains("journal has been deleted"), "{out}");
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "{out}");
    let d = run_ok(Command::new("dumpe2fs").arg("-h").arg(&img));
    let d = String::from_utf8_lossy(&d.stdout);
    assert!(
        d.contains("Total journal blocks:     1024") && d.contains("Journal start:            0"),
        "{d}"
    );
}

/// The superblock's copy of the journal inode (`s_jnl_blocks`, 68 bytes at 0x10C, and
/// `s_jnl_backup_type` at 0xFD) of `img`.
fn jnl_backup(img: &Path) -> Vec<u8> {
    let b = std::fs::read(img).unwrap();
    let sb = &b[1024..2048];
    [&sb[0xFD..0xFE], &sb[0x10C..0x150]].concat()
}

#[test]
fn a_missing_or_stale_copy_of_the_journal_inode_is_made_as_e2fsck_makes_it() {
    if !need_tool("journal backup", "debugfs") {
        return;
    }
    let s = Scratch::new("rounds-journal-backup");
    let img = image(&s);
    let made = jnl_backup(&img);
    // None (backup type 0, as images made before e2fsprogs 1.40 have), then a stale one
    // (a word of the map changed).
    for cmds in ["ssv jnl_backup_type 0", "ssv jnl_blocks[2] 77"] {
        debugfs_write(&img, &img.with_extension("cmd"), cmds);
        assert_ne!(jnl_backup(&img), made, "{cmds}");
        assert_eq!(e2fsck_exit(&img, "-fn"), 0, "not an error for e2fsck -n");
        let n = run_ok(Command::new(usfs()).args(["fsck", "-fn"]).arg(&img));
        let n = String::from_utf8_lossy(&n.stdout);
        assert!(
            !n.contains("Backing up"),
            "a check does not change it:\n{n}"
        );
        let mut copy = img.clone().into_os_string();
        copy.push(".e2fsck");
        std::fs::copy(&img, &copy).unwrap();
        let e = Command::new("e2fsck")
            .arg("-fy")
            .arg(&copy)
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&e.stdout).contains("Backing up journal inode"));
        let out = Command::new(usfs())
            .args(["fsck", "-fy"])
            .arg(&img)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        // Announced, not a fixed problem: exit 0 as e2fsck's.
        assert_eq!(out.status.code(), e.status.code(), "{cmds}:\n{stdout}");
        assert_eq!(out.status.code(), Some(0), "{cmds}:\n{stdout}");
        assert!(
            stdout.contains("Backing up journal inode block information.\n"),
            "{stdout}"
        );
        assert_eq!(jnl_backup(&img), jnl_backup(Path::new(&copy)), "{cmds}");
        assert_eq!(jnl_backup(&img), made, "{cmds}");
        assert_eq!(e2fsck_exit(&img, "-fn"), 0);
    }
    // Made, nothing more: a second repair neither says nor writes anything.
    let before = std::fs::read(&img).unwrap();
    let out = Command::new(usfs())
        .args(["fsck", "-fy"])
        .arg(&img)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains("Backing up"), "{stdout}");
    assert!(std::fs::read(&img).unwrap() == before, "{stdout}");
    // A clean image preened without -f: made before the check is skipped, as e2fsck -p
    // makes it.
    debugfs_write(&img, &img.with_extension("cmd"), "ssv jnl_backup_type 0");
    let mut copy = img.clone().into_os_string();
    copy.push(".e2fsck");
    std::fs::copy(&img, &copy).unwrap();
    let e = Command::new("e2fsck")
        .arg("-p")
        .arg(&copy)
        .output()
        .unwrap();
    let out = Command::new(usfs())
        .args(["fsck", "-p"])
        .arg(&img)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), e.status.code(), "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("Backing up journal inode block information."),
        "{stdout}"
    );
    assert!(stdout.contains(": clean, "), "{stdout}");
    assert_eq!(jnl_backup(&img), made);
    assert_eq!(jnl_backup(&img), jnl_backup(Path::new(&copy)));
}

/// "Filesystem state:" of `img` as dumpe2fs prints it.
fn state(img: &Path) -> String {
    let d = run_ok(Command::new("dumpe2fs").arg("-h").arg(img));
    let d = String::from_utf8_lossy(&d.stdout).into_owned();
    let l = d.lines().find_map(|l| l.strip_prefix("Filesystem state:"));
    l.unwrap().trim().to_string()
}

/// Repairs copies of `img` (its journal needing recovery and unreadable) with `-fy` and
/// `-fp` (answering `answers[0]`, `answers[1]`), each beside e2fsck on another copy: the
/// same exit status, 1, each of `shown` printed, `e2fsck -fn` clean after, the image
/// marked clean and needs_recovery off. Returns `dumpe2fs -h` of each repaired copy.
fn repair_unreplayable(s: &Scratch, img: &Path, answers: [&str; 2], shown: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (mode, says) in ["-fy", "-fp"].into_iter().zip(answers) {
        let copy = s.path(&format!("copy{mode}"));
        std::fs::copy(img, &copy).unwrap();
        let e = Command::new("e2fsck")
            .arg(mode)
            .arg(&copy)
            .output()
            .unwrap();
        std::fs::copy(img, &copy).unwrap();
        let u = Command::new(usfs())
            .args(["fsck", mode])
            .arg(&copy)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&u.stdout);
        assert_eq!(u.status.code(), e.status.code(), "{mode}:\n{stdout}");
        assert_eq!(u.status.code(), Some(1), "{mode}:\n{stdout}");
        for want in shown.iter().chain([&says]) {
            assert!(stdout.contains(want), "{mode}: {want}:\n{stdout}");
        }
        assert_eq!(e2fsck_exit(&copy, "-fn"), 0, "{stdout}");
        assert_eq!(state(&copy), "clean", "{mode}");
        let d = run_ok(Command::new("dumpe2fs").arg("-h").arg(&copy));
        let d = String::from_utf8_lossy(&d.stdout).into_owned();
        assert!(!d.contains("needs_recovery"), "{d}");
        out.push(d);
    }
    out
}

#[test]
fn a_corrupt_journal_superblock_on_an_image_needing_recovery_is_written_anew_first() {
    if !need_tool("journal superblock", "debugfs") || !need_tool("journal superblock", "dumpe2fs") {
        return;
    }
    let s = Scratch::new("rounds-journal-recover");
    let img = image(&s);
    debugfs_write(&img, &img.with_extension("cmd"), "feature needs_recovery");
    // Block type 5 (a revoke block's) in place of the superblock's 4: the log cannot be
    // read, and e2fsck -n cannot go on.
    poke_journal_sb(&img, 4, &5u32.to_be_bytes());
    assert_eq!(e2fsck_exit(&img, "-fn"), 12);
    repair_unreplayable(
        &s,
        &img,
        ["Fix? yes", "FIXED."],
        &["Journal superblock is corrupt"],
    );
}

#[test]
fn an_image_not_marked_clean_with_nothing_to_fix_is_marked_clean() {
    if !need_tool("state", "debugfs") || !need_tool("state", "dumpe2fs") {
        return;
    }
    let s = Scratch::new("rounds-state");
    let img = image(&s);
    debugfs_write(&img, &img.with_extension("cmd"), "ssv state 0");
    assert_eq!(state(&img), "not clean");
    let mut copy = img.clone().into_os_string();
    copy.push(".e2fsck");
    std::fs::copy(&img, &copy).unwrap();
    let e = Command::new("e2fsck")
        .arg("-fy")
        .arg(&copy)
        .output()
        .unwrap();
    let out = Command::new(usfs())
        .args(["fsck", "-fy"])
        .arg(&img)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), e.status.code(), "{stdout}");
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(state(&img), "clean");
    assert_eq!(state(Path::new(&copy)), "clean");
}

#[test]
fn a_journal_without_its_magic_on_an_image_needing_recovery_is_deleted_first_and_made_anew() {
    if !need_tool("journal superblock", "debugfs") || !need_tool("journal superblock", "dumpe2fs") {
        return;
    }
    let s = Scratch::new("rounds-journal-recover-magic");
    let img = image(&s);
    debugfs_write(&img, &img.with_extension("cmd"), "feature needs_recovery");
    poke_journal_sb(&img, 0, &[0; 4]);
    let shown = [
        "Superblock has an invalid journal",
        "journal has been regenerated",
    ];
    for d in repair_unreplayable(&s, &img, ["Clear? yes", "CLEARED."], &shown) {
        assert!(d.contains("has_journal"), "{d}");
        assert!(d.contains("Journal backup:           inode blocks"), "{d}");
    }
}

#[test]
fn a_check_reads_an_image_needing_recovery_as_it_is() {
    if !need_tool("needs_recovery", "debugfs") {
        return;
    }
    let s = Scratch::new("rounds-check-unreplayed");
    let img = image(&s);
    debugfs_write(&img, &img.with_extension("cmd"), "feature needs_recovery");
    let before = std::fs::read(&img).unwrap();
    let e = Command::new("e2fsck")
        .arg("-fn")
        .arg(&img)
        .output()
        .unwrap();
    let out = Command::new(usfs())
        .args(["fsck", "-fn"])
        .arg(&img)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), e.status.code(), "{stdout}");
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("skipping journal recovery"), "{stdout}");
    assert!(std::fs::read(&img).unwrap() == before, "-n writes nothing");
}
