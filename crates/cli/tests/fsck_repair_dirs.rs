//! Directory repairs against e2fsck: a directory whose `.` entry was overwritten, and
//! one whose `..` was, are repaired by `usfs fsck -fy` into an image `e2fsck -fn` finds
//! clean, with the files `e2fsck -fy` keeps (same names, same contents), with and
//! without metadata_csum.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

fn debugfs(img: &Path, cmd: &str) -> String {
    let out = Command::new("debugfs")
        .args(["-R", cmd])
        .arg(img)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into()
}

/// `usfs ls -R` of the image: every path, for comparing trees.
fn listing(img: &Path) -> Vec<String> {
    let out = Command::new(usfs())
        .args(["ls", "-R"])
        .arg(img)
        .arg("/")
        .output()
        .unwrap();
    assert!(out.status.success(), "usfs ls -R");
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// Overwrites byte `at` of directory `/d`'s first block (1 KiB blocks) with `byte`.
fn poke_dir(img: &Path, at: u64, byte: u8) {
    let blk: u64 = debugfs(img, "bmap /d 0").trim().parse().unwrap();
    let mut data = std::fs::read(img).unwrap();
    data[(blk * 1024 + at) as usize] = byte;
    std::fs::write(img, data).unwrap();
}

fn check(opts: &str, at: u64, byte: u8) {
    let s = Scratch::new(&format!("fsck-repair-dirs-{at}-{opts}"));
    let src = s.path("src");
    std::fs::create_dir_all(src.join("d/e")).unwrap();
    for i in 0..5 {
        std::fs::write(src.join(format!("d/f{i}")), format!("file {i}")).unwrap();
    }
    std::fs::write(src.join("d/e/g"), b"deeper").unwrap();
    let img = s.path("dirs.img");
    mke2fs(
        &img,
        "8M",
        &["-t", "ext4", "-b", "1024", "-O", opts],
        Some(&src),
    );
    poke_dir(&img, at, byte);
    assert_eq!(e2fsck_exit(&img, "-fn"), 4, "the image is damaged");
    let theirs = s.path("e2fsck.img");
    std::fs::copy(&img, &theirs).unwrap();
    assert_eq!(e2fsck_exit(&theirs, "-fy"), 1);
    let out = Command::new(usfs())
        .args(["fsck", "-fy"])
        .arg(&img)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(
        e2fsck_exit(&img, "-fn"),
        0,
        "e2fsck after usfs's repair: {text}"
    );
    assert_eq!(
        listing(&img),
        listing(&theirs),
        "{opts}: trees differ\n{text}"
    );
}

#[test]
fn an_overwritten_dot_is_made_again_as_e2fsck_makes_it() {
    if need_tool("an_overwritten_dot", "debugfs") {
        // The name of `.` (byte 8 of the block) becomes 'x'.
        check("metadata_csum", 8, b'x');
        check("^metadata_csum", 8, b'x');
    }
}

#[test]
fn an_overwritten_dotdot_is_made_again_as_e2fsck_makes_it() {
    if need_tool("an_overwritten_dotdot", "debugfs") {
        // The second name byte of `..` (byte 12 + 9) becomes 'y'.
        check("metadata_csum", 21, b'y');
        check("^metadata_csum", 21, b'y');
    }
}
