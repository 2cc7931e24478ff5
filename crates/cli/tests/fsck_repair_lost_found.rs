//! A file system with no inode left for `/lost+found`: lost files go to the root, as
//! e2fsck's "Place lost files in root directory instead?" puts them, nothing is
//! allocated for the directory that could not be made, and the repair ends (it does not
//! ask again round after round).

mod common;

use common::*;
use std::process::Command;

#[test]
fn lost_files_go_to_the_root_when_lost_found_cannot_be_made() {
    if !need_tool("lost+found", "debugfs") {
        return;
    }
    let s = Scratch::new("repair-lnf-root");
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    // 32 inodes: 11 reserved and lost+found, the root's files take the other 21.
    for i in 0..21 {
        std::fs::write(src.join(format!("f{i}")), format!("file {i}\n")).unwrap();
    }
    let img = s.path("img");
    mke2fs(
        &img,
        "1M",
        &["-t", "ext4", "-N", "32", "-b", "1024"],
        Some(&src),
    );
    let cmds = s.path("cmds");
    // lost+found goes and its inode is taken by a new file; f3 loses its entry.
    debugfs_write(
        &img,
        &cmds,
        "rmdir /lost+found\nwrite /dev/null g\nunlink /f3\n",
    );
    let free = run_ok(Command::new("dumpe2fs").arg("-h").arg(&img));
    assert!(String::from_utf8_lossy(&free.stdout).contains("Free inodes:              0"));
    let out = Command::new(usfs())
        .args(["fsck", "-fy", "--trace"])
        .arg(&img)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let checks = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("trace: repair check "))
        .count();
    assert_eq!(checks, 2, "reconnected, then asked once more: {text}");
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "{text}");
    let ls = run_ok(Command::new("debugfs").arg("-R").arg("ls -l /").arg(&img));
    let ls = String::from_utf8_lossy(&ls.stdout);
    let name = ls
        .split_whitespace()
        .find(|w| w.starts_with('#'))
        .unwrap_or_else(|| panic!("f3 is in the root as #N:\n{ls}"));
    let cat = run_ok(
        Command::new(usfs())
            .arg("cat")
            .arg(&img)
            .arg(format!("/{name}")),
    );
    assert_eq!(cat.stdout, b"file 3\n");
}
