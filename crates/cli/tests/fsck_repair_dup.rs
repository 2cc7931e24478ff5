//! Multiply-claimed blocks (e2fsck's pass 1B-1D): files whose maps point into another
//! file's blocks or into an inode table are repaired by `usfs fsck -fy` as `e2fsck -fy`
//! repairs a copy: e2fsck -fn clean after, and every file holds what it holds after
//! e2fsck's repair (the shared blocks cloned, so each claimant keeps their contents).
//! Extent trees (ext4) and block maps (ext2) both.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// Physical block of logical block 0 of `path` in `img` (debugfs bmap).
fn first_block(img: &Path, path: &str) -> u64 {
    let out = Command::new("debugfs")
        .args(["-R", &format!("bmap {path} 0")])
        .arg(img)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn debugfs_w(img: &Path, cmd: &str) {
    let out = Command::new("debugfs")
        .args(["-w", "-R", cmd])
        .arg(img)
        .output()
        .unwrap();
    assert!(out.status.success(), "debugfs {cmd}");
}

/// An image of `fstype` whose /b starts with /a's first blocks and whose /c starts in
/// the inode table of group 0.
fn shared_image(s: &Scratch, fstype: &str) -> std::path::PathBuf {
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    for (name, byte, len) in [("a", b'A', 5000), ("b", b'B', 3000), ("c", b'C', 2500)] {
        let data: Vec<u8> = (0..len).map(|i| byte + (i % 7) as u8).collect();
        std::fs::write(src.join(name), data).unwrap();
    }
    std::fs::write(src.join("d"), b"untouched").unwrap();
    let img = s.path("shared.img");
    mke2fs(&img, "4M", &["-t", fstype, "-b", "1024"], Some(&src));
    let a = first_block(&img, "/a");
    // i_block word of the first block: the first extent's start (after the 12-byte
    // header and the extent's logical block and length) or the first direct pointer.
    let word = if fstype == "ext4" { 5 } else { 0 };
    debugfs_w(&img, &format!("sif /b block[{word}] {a}"));
    let out = Command::new("dumpe2fs").arg(&img).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let itable: u64 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Inode table at "))
        .and_then(|r| r.split('-').next())
        .and_then(|n| n.trim().parse().ok())
        .expect("inode table of group 0");
    debugfs_w(&img, &format!("sif /c block[{word}] {}", itable + 3));
    img
}

fn cat(img: &Path, path: &str) -> Vec<u8> {
    let out = Command::new(usfs())
        .arg("cat")
        .arg(img)
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "usfs cat {path}");
    out.stdout
}

fn check(fstype: &str) {
    let s = Scratch::new(&format!("fsck-dup-{fstype}"));
    let img = shared_image(&s, fstype);
    assert_eq!(e2fsck_exit(&img, "-fn"), 4, "the image is damaged");
    let theirs = s.path("e2fsck.img");
    std::fs::copy(&img, &theirs).unwrap();
    assert_eq!(e2fsck_exit(&theirs, "-fy"), 1);
    let (code, text) = usfs_fsck(&img, &["-fy"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("Multiply-claimed"), "{text}");
    assert_eq!(
        e2fsck_exit(&img, "-fn"),
        0,
        "e2fsck after usfs's repair: {text}"
    );
    for f in ["/a", "/b", "/c", "/d"] {
        assert!(
            cat(&img, f) == cat(&theirs, f),
            "{fstype}: {f} differs from e2fsck's repair"
        );
    }
    // The clone is a copy: /a and /b begin with the same bytes in different blocks.
    assert_eq!(cat(&img, "/b")[..1024], cat(&img, "/a")[..1024]);
    assert_ne!(first_block(&img, "/a"), first_block(&img, "/b"));
}

#[test]
fn shared_blocks_in_extent_trees_are_cloned_as_e2fsck_clones_them() {
    if need_tool("shared_blocks_in_extent_trees", "debugfs") {
        check("ext4");
    }
}

#[test]
fn shared_blocks_in_block_maps_are_cloned_as_e2fsck_clones_them() {
    if need_tool("shared_blocks_in_block_maps", "debugfs") {
        check("ext2");
    }
}
