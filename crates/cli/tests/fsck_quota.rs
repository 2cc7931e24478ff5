//! Quota usage: `usfs fsck` counts each id's space and inodes as e2fsck does and
//! compares them with the quota files (user, group, project); `-y` writes a file whose
//! usage is off anew, byte for byte the file `e2fsck -fy` writes, limits kept.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// An image with user, group and project quotas, made by mke2fs from a tree whose files
/// belong to a few users and groups.
fn image(s: &Scratch) -> std::path::PathBuf {
    let src = s.path("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..12u32 {
        let f = src.join(format!("d/f{i}"));
        std::fs::write(&f, vec![b'q'; 1500 * (i as usize + 1)]).unwrap();
        std::os::unix::fs::chown(&f, Some(1000 + i % 3), Some(2000 + i % 2)).unwrap();
    }
    let img = s.path("img");
    mke2fs(
        &img,
        "8M",
        &[
            "-t",
            "ext4",
            "-b",
            "1024",
            "-I",
            "256",
            "-O",
            "quota,project",
            "-E",
            "quotatype=usrquota:grpquota:prjquota",
        ],
        Some(&src),
    );
    img
}

/// The quota inodes of `img` (user, group, project), from dumpe2fs.
fn quota_inodes(img: &Path) -> Vec<u32> {
    let out = run_ok(Command::new("dumpe2fs").arg("-h").arg(img));
    let text = String::from_utf8_lossy(&out.stdout);
    [
        "User quota inode:",
        "Group quota inode:",
        "Project quota inode:",
    ]
    .iter()
    .map(|k| {
        let line = text.lines().find(|l| l.starts_with(k));
        line.map_or(0, |l| l[k.len()..].trim().parse().unwrap())
    })
    .collect()
}

/// The bytes of inode `ino` of `img`, dumped by debugfs.
fn dump(img: &Path, ino: u32, to: &Path) -> Vec<u8> {
    run_ok(
        Command::new("debugfs")
            .arg("-R")
            .arg(format!("dump <{ino}> {}", to.display()))
            .arg(img),
    );
    std::fs::read(to).unwrap()
}

/// `usfs fsck OPTS IMG`: exit code and standard output.
fn usfs_fsck(img: &Path, opts: &str) -> (Option<i32>, String) {
    let out = Command::new(usfs())
        .args(["fsck", opts])
        .arg(img)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// e2fsck's quota warnings on `img` with `opts` (it prints them to standard error).
fn e2fsck_warnings(img: &Path, opts: &str) -> Vec<String> {
    let out = Command::new("e2fsck").arg(opts).arg(img).output().unwrap();
    let all =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    all.lines()
        .filter(|l| l.starts_with("[QUOTA WARNING]"))
        .map(str::to_string)
        .collect()
}

/// Repairs `img` with usfs and a copy with e2fsck; both end clean, and each quota file
/// is the same bytes in both.
fn repaired_as_e2fsck(s: &Scratch, img: &Path) {
    let theirs = s.path("theirs");
    std::fs::copy(img, &theirs).unwrap();
    let _ = Command::new("e2fsck")
        .arg("-fy")
        .arg(&theirs)
        .output()
        .unwrap();
    let (code, out) = usfs_fsck(img, "-fy");
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("Update quota info for quota type"), "{out}");
    assert_eq!(e2fsck_exit(img, "-fn"), 0, "e2fsck -fn after usfs fsck -fy");
    assert_eq!(usfs_fsck(img, "-fn").0, Some(0));
    for ino in quota_inodes(img).into_iter().filter(|&i| i != 0) {
        let ours = dump(img, ino, &s.path("ours.q"));
        let e2 = dump(&theirs, ino, &s.path("theirs.q"));
        assert!(!ours.is_empty());
        assert!(
            ours == e2,
            "quota inode {ino}: usfs's file differs from e2fsck's"
        );
    }
}

/// `usfs fsck -fn IMG` finds the quota warnings `e2fsck -fn` prints, and exits 4.
fn warns_as_e2fsck(img: &Path) {
    let expected = e2fsck_warnings(img, "-fn");
    assert!(!expected.is_empty());
    let (code, out) = usfs_fsck(img, "-fn");
    assert_eq!(code, Some(4), "{out}");
    let ours: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("[QUOTA WARNING]"))
        .collect();
    assert_eq!(ours, expected, "the same warnings as e2fsck -fn");
}

#[test]
fn usage_is_counted_per_user_group_and_project_and_written_as_e2fsck_writes_it() {
    if !need_tool("quota", "debugfs") || !need_tool("quota", "dumpe2fs") {
        return;
    }
    let s = Scratch::new("fsck-quota");
    let img = image(&s);
    // mke2fs 1.47.0 writes the quota files before it copies the tree in (so they hold
    // the root and lost+found only).
    warns_as_e2fsck(&img);
    let _ = Command::new("e2fsck")
        .arg("-fy")
        .arg(&img)
        .output()
        .unwrap();
    assert_eq!(
        usfs_fsck(&img, "-fn").0,
        Some(0),
        "e2fsck's quota files are right"
    );
    // Files change owner and project behind the quota files' back.
    debugfs_write(
        &img,
        &s.path("cmds"),
        "sif /d/f1 uid 1234\nsif /d/f2 gid 77\nsif /d/f3 projid 9\nsif /d/f4 projid 9\n",
    );
    warns_as_e2fsck(&img);
    let out = usfs_fsck(&img, "-fn").1;
    for t in 0..3 {
        assert!(
            out.contains(&format!("Update quota info for quota type {t}")),
            "{out}"
        );
    }
    repaired_as_e2fsck(&s, &img);
}

#[test]
fn e2fsprogs_quota_image_keeps_its_limits() {
    let Some(dir) = e2fsprogs_corpus() else {
        eprintln!("SKIP e2fsprogs_quota_image_keeps_its_limits: no e2fsprogs corpus");
        return;
    };
    if !need_tool("quota", "debugfs") || !need_tool("quota", "dumpe2fs") {
        return;
    }
    let Some((_, _, bytes)) = e2fsprogs_images(&dir).find(|(n, _, _)| n == "f_quota") else {
        eprintln!("SKIP e2fsprogs_quota_image_keeps_its_limits: no f_quota");
        return;
    };
    let s = Scratch::new("fsck-quota-corpus");
    let img = s.path("img");
    std::fs::write(&img, bytes).unwrap();
    repaired_as_e2fsck(&s, &img);
    // debugfs's listing: id 100 keeps its limits (32/50 KiB, 20/30 inodes).
    let out = run_ok(Command::new("debugfs").arg("-R").arg("lq user").arg(&img));
    let text = String::from_utf8_lossy(&out.stdout);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some("100"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row, ["100", "2048", "32", "50", "2", "20", "30"]);
}
