//! The standard crash checkers against images with known faults: a committed journal
//! transaction that zeroes the bitmaps (debugfs's journal writer) is invisible to
//! `e2fsck -fn` but caught after replay; the content checkers reject a wrong byte, a wrong
//! length and a missing file, through usfs's reader and through debugfs.

use std::path::{Path, PathBuf};
use std::process::Command;
use usfs_testkit::crash::check;
use usfs_testkit::TempDir;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A 16 MiB ext4 image (1 KiB blocks) made by mke2fs, from `src` when given.
fn mke2fs(dir: &Path, src: Option<&Path>) -> PathBuf {
    let img = dir.join("fs.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let mut c = Command::new("mke2fs");
    c.args(["-q", "-F", "-t", "ext4", "-b", "1024"]);
    if let Some(s) = src {
        c.arg("-d").arg(s);
    }
    run(c.arg(&img));
    img
}

/// The first number after `what` in dumpe2fs's output.
fn dumpe2fs_field(img: &Path, what: &str) -> u64 {
    let out = run(Command::new("dumpe2fs").arg(img));
    let at = out.find(what).unwrap() + what.len();
    out[at..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn journal_replay_is_what_reveals_a_bad_transaction() {
    if !check::have_e2fsprogs() {
        println!("SKIP: e2fsprogs not found");
        return;
    }
    let tmp = TempDir::new("crash-checkers").unwrap();
    let img = mke2fs(tmp.path(), None);
    check::fsck_clean_after_replay(&img).unwrap();
    let bb = dumpe2fs_field(&img, "Block bitmap at");
    let ib = dumpe2fs_field(&img, "Inode bitmap at");
    let cmds = tmp.path().join("cmds");
    std::fs::write(&cmds, format!("jo\njw -b {bb},{ib} /dev/zero\njc\n")).unwrap();
    run(Command::new("debugfs")
        .arg("-w")
        .arg("-f")
        .arg(&cmds)
        .arg(&img));
    let copy = |name: &str| {
        let p = tmp.path().join(name);
        std::fs::copy(&img, &p).unwrap();
        p
    };
    // Without replay the transaction is not looked at.
    check::fsck_clean(&copy("a.img")).unwrap();
    let e = check::fsck_clean_after_replay(&copy("b.img")).unwrap_err();
    assert!(
        e.contains("e2fsck -fn exit 4") && e.contains("bitmap"),
        "{e}"
    );
    // e2fsck -fy repairs it: the weaker checker passes.
    check::fsck_repairable(&copy("c.img")).unwrap();
}

/// A file unlinked while open when the crash came sits on the orphan list: legitimate.
/// `e2fsck -fn` alone calls it errors; `e2fsck -E journal_only -y` also releases orphans
/// (as the kernel does at mount), so the replay checker accepts it.
#[test]
fn an_orphan_list_is_accepted_after_replay() {
    if !check::have_e2fsprogs() {
        println!("SKIP: e2fsprogs not found");
        return;
    }
    let tmp = TempDir::new("crash-checkers").unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"hello").unwrap();
    let img = mke2fs(tmp.path(), Some(&src));
    let cmds = tmp.path().join("cmds");
    std::fs::write(
        &cmds,
        "unlink /f\nsif <12> links_count 0\nssv last_orphan 12\n",
    )
    .unwrap();
    run(Command::new("debugfs")
        .arg("-w")
        .arg("-f")
        .arg(&cmds)
        .arg(&img));
    let copy = tmp.path().join("a.img");
    std::fs::copy(&img, &copy).unwrap();
    assert!(check::fsck_clean(&copy).unwrap_err().contains("exit 4"));
    check::fsck_clean_after_replay(&img).unwrap();
}

#[test]
fn content_checkers_reject_wrong_bytes_lengths_and_names() {
    if !check::have_e2fsprogs() {
        println!("SKIP: e2fsprogs not found");
        return;
    }
    let tmp = TempDir::new("crash-checkers").unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    let big: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(src.join("d/big"), &big).unwrap();
    std::fs::write(src.join("small"), b"hello").unwrap();
    let img = mke2fs(tmp.path(), Some(&src));
    let good = vec![
        (b"/d/big".to_vec(), big.clone()),
        (b"/small".to_vec(), b"hello".to_vec()),
    ];
    let mut flipped = big.clone();
    flipped[65_000] ^= 1;
    let cases: Vec<(check::FileSet, &str)> = vec![
        (vec![(b"/d/big".to_vec(), flipped)], "byte 65000"),
        (
            vec![(b"/small".to_vec(), b"hell".to_vec())],
            "5 bytes, expected 4",
        ),
        (
            vec![(b"/small".to_vec(), b"hello!".to_vec())],
            "5 bytes, expected 6",
        ),
        (vec![(b"/nope".to_vec(), Vec::new())], "/nope"),
    ];
    check::files_hold(&img, &good).unwrap();
    check::files_hold_debugfs(&img, &good).unwrap();
    for (want, says) in &cases {
        let e = check::files_hold(&img, want).unwrap_err();
        let d = check::files_hold_debugfs(&img, want).unwrap_err();
        assert!(e.contains(says), "usfs: {e}");
        assert!(d.contains(says), "debugfs: {d}");
    }
}
