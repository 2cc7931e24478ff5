//! Directory repairs against e2fsck: a directory whose `.` entry was overwritten, and
//! one whose `..` was, are repaired by `usfs fsck -fy` into an image `e2fsck -fn` finds
//! clean, with the files `e2fsck -fy` keeps (same names, same contents), with and
//! without metadata_csum; a large directory without an index is indexed (pass 3A).

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
    let (code, text) = usfs_fsck(&img, &["-fy"]);
    assert_eq!(code, Some(1), "{text}");
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

/// A directory of 3 blocks or more without an htree index (mke2fs -d makes them) is
/// indexed by a repair, as e2fsck's pass 3A does: `usfs fsck -fy` prints pass 3A's
/// heading and "MODIFIED" and exits 0 (not a fix, as for e2fsck), the directory gets the
/// INDEX flag and keeps its names, and e2fsck finds the image clean; `usfs fsck -fn`
/// reports nothing (e2fsck looks for such directories only when it may write).
#[test]
fn a_large_directory_without_an_index_is_indexed_as_e2fsck_pass_3a_does() {
    if !need_tool("pass 3A", "debugfs") || !need_tool("pass 3A", "e2fsck") {
        return;
    }
    let s = Scratch::new("fsck-repair-dirs-3a");
    let src = s.path("src");
    std::fs::create_dir_all(src.join("big")).unwrap();
    for i in 0..300 {
        std::fs::write(src.join(format!("big/a_long_enough_file_name_{i}")), b"x").unwrap();
    }
    let img = s.path("3a.img");
    mke2fs(&img, "8M", &["-t", "ext4", "-b", "1024"], Some(&src));
    let flags = |img: &Path| debugfs(img, "stat /big").contains("Flags: 0x81000");
    assert!(!flags(&img), "mke2fs -d made /big without an index");
    let before = listing(&img);
    let (code, text) = usfs_fsck(&img, &["-fn"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("3A"), "{text}");
    let (code, text) = usfs_fsck(&img, &["-fy"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("Pass 3A: Optimizing directories\n"), "{text}");
    assert!(
        text.contains("***** FILE SYSTEM WAS MODIFIED *****"),
        "{text}"
    );
    assert!(
        flags(&img),
        "/big is indexed: {}",
        debugfs(&img, "stat /big")
    );
    assert_eq!(e2fsck_exit(&img, "-fn"), 0);
    assert_eq!(listing(&img), before);
    // Nothing left for a second run.
    assert!(!usfs_fsck(&img, &["-fy"]).1.contains("3A"));
}

/// An indexed directory whose link count is 1 (what the kernel stores once a directory
/// passes 65000 links) while it has fewer: `e2fsck -fn` says nothing (not an error), and
/// `e2fsck -fy` sets the exact count (PR_4_DIR_OVERFLOW_REF_COUNT), exit 1. usfs does
/// both, with e2fsck's words.
#[test]
fn an_overflowed_directory_link_count_is_set_exactly_on_repair_only() {
    if !need_tool("dir overflow", "debugfs") || !need_tool("dir overflow", "e2fsck") {
        return;
    }
    let s = Scratch::new("fsck-repair-dirs-overflow");
    let src = s.path("src");
    for i in 0..3 {
        std::fs::create_dir_all(src.join(format!("big/sub{i}"))).unwrap();
    }
    for i in 0..300 {
        std::fs::write(src.join(format!("big/a_long_enough_file_name_{i}")), b"x").unwrap();
    }
    let img = s.path("o.img");
    mke2fs(&img, "8M", &["-t", "ext4", "-b", "1024"], Some(&src));
    // (e2fsck -D indexes /big; links 1 is the overflow mark.)
    let out = Command::new("e2fsck")
        .arg("-fyD")
        .arg(&img)
        .output()
        .unwrap();
    assert!(out.status.code().is_some_and(|c| c <= 1), "e2fsck -fyD");
    assert!(debugfs(&img, "stat /big").contains("Flags: 0x81000"));
    debugfs_write(&img, &s.path("cmd"), "sif /big links_count 1\n");
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "e2fsck -n is silent");
    let (code, text) = usfs_fsck(&img, &["-fn"]);
    assert_eq!(code, Some(0), "{text}");
    let mut copy = img.clone();
    copy.set_extension("e2fsck");
    std::fs::copy(&img, &copy).unwrap();
    let e2 = Command::new("e2fsck")
        .arg("-fy")
        .arg(&copy)
        .output()
        .unwrap();
    let e2text = String::from_utf8_lossy(&e2.stdout);
    let (code, text) = usfs_fsck(&img, &["-fy"]);
    assert_eq!(code, e2.status.code(), "{text}\n--- e2fsck:\n{e2text}");
    let ino = debugfs(&img, "stat /big");
    let ino = ino.split_whitespace().nth(1).unwrap_or("").to_string();
    let line = format!(
        "Directory inode {ino} ref count set to overflow but could be exact value 5.  Fix? yes"
    );
    assert!(e2text.contains(&line), "{e2text}");
    assert!(text.contains(&line), "{text}");
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "clean after usfs fsck -fy");
    assert!(debugfs(&img, "stat /big").contains("Links: 5"));
}

/// An extent-mapped directory whose extent starts past the block after the previous one
/// (e2fsprogs' f_holedir2, f_holedir3): reported in pass 1 as e2fsck reports it ("block
/// 5 should be at block 2"), and a repair moves the extent down before pass 2 reads the
/// directory, so its htree index stays (e2fsck keeps it) and only its i_size follows,
/// with e2fsck's lines; e2fsck finds the result clean. Skipped without the corpus.
#[test]
fn a_directory_hole_between_extents_is_collapsed_in_pass_1() {
    let Some(dir) = e2fsprogs_corpus() else {
        eprintln!("SKIP dir collapse: no e2fsprogs corpus");
        return;
    };
    if !need_tool("dir collapse", "e2fsck") || !need_tool("dir collapse", "debugfs") {
        return;
    }
    let s = Scratch::new("fsck-repair-dirs-collapse");
    for (name, want) in [
        (
            "f_holedir3",
            &[
                "Directory inode 12 block 5 should be at block 2.  Fix? yes",
                "Inode 12, i_size is 6144, should be 3072.  Fix? yes",
            ][..],
        ),
        (
            "f_holedir2",
            &["Directory inode 13 block 2 should be at block 1.  Fix? yes"][..],
        ),
    ] {
        let Some((_, _, bytes)) = e2fsprogs_images(&dir).find(|(n, _, _)| n == name) else {
            continue;
        };
        let img = s.path(&format!("{name}.img"));
        std::fs::write(&img, &bytes).unwrap();
        let (code, text) = usfs_fsck(&img, &["-fn"]);
        assert_eq!(code, Some(4), "{text}");
        assert!(
            text.contains(&want[0][..want[0].len() - 11]),
            "{name}: {text}"
        );
        let flags = |img: &Path| debugfs(img, "stat <12>").contains("Flags: 0x81000");
        let indexed = flags(&img);
        let (code, text) = usfs_fsck(&img, &["-fy"]);
        assert_eq!(code, Some(1), "{text}");
        for w in want {
            assert!(text.contains(w), "{name}: no {w:?} in:\n{text}");
        }
        assert_eq!(
            e2fsck_exit(&img, "-fn"),
            0,
            "{name}: clean after usfs fsck -fy"
        );
        assert_eq!(flags(&img), indexed, "{name}: the index is kept");
    }
}
