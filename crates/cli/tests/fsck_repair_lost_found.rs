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

/// An unattached file whose i_blocks says 0 but which maps its data is connected to
/// /lost+found with its data, as e2fsck does (pass 4 reads i_blocks after pass 1 fixed
/// it); one that truly holds nothing is cleared as e2fsck's "Unattached zero-length
/// inode" clears it.
#[test]
fn an_unattached_file_is_cleared_only_when_empty_after_pass_1s_fixes() {
    if !need_tool("zero-length", "debugfs") || !need_tool("zero-length", "e2fsck") {
        return;
    }
    let s = Scratch::new("repair-lnf-zero");
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(src.join("data"), &data).unwrap();
    std::fs::write(src.join("empty"), b"").unwrap();
    let img = s.path("img");
    mke2fs(&img, "4M", &["-t", "ext4", "-b", "1024"], Some(&src));
    let ino = |name: &str| {
        let o = run_ok(
            Command::new("debugfs")
                .arg("-R")
                .arg(format!("stat /{name}"))
                .arg(&img),
        );
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        t.split_whitespace().nth(1).unwrap().parse::<u32>().unwrap()
    };
    let (d, e) = (ino("data"), ino("empty"));
    let cmds = s.path("cmds");
    debugfs_write(
        &img,
        &cmds,
        &format!("unlink /data\nunlink /empty\nsif <{d}> blocks 0\n"),
    );
    let (code, text) = usfs_fsck(&img, &["-fy"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains(&format!("Unattached inode {d}.")), "{text}");
    assert!(
        text.contains(&format!("Unattached zero-length inode {e}.")),
        "{text}"
    );
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "{text}");
    let cat = run_ok(
        Command::new(usfs())
            .arg("cat")
            .arg(&img)
            .arg(format!("/lost+found/#{d}")),
    );
    assert_eq!(cat.stdout, data);
}
