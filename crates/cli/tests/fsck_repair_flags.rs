//! Inode fields e2fsck's pass 1 fixes, on images damaged with debugfs: the imagic flag
//! without the imagic_inodes feature, the casefold flag on a file (and on any inode
//! without the casefold feature), EXTENTS_FL on the bad-blocks inode of a file system
//! without extents (the inode is cleared), a dtime holding an inode number (left by a
//! broken orphan list), and an indirect block that is an inode-table block. `usfs fsck
//! -fn` sees each as `e2fsck -fn` does, and after `usfs fsck -fy` e2fsck finds the image
//! clean.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// An image of a few files made by mke2fs with `args`.
fn image(s: &Scratch, args: &[&str]) -> std::path::PathBuf {
    let src = s.path("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..4 {
        std::fs::write(src.join(format!("d/f{i}")), vec![b'f'; 2000 * (i + 1)]).unwrap();
    }
    let img = s.path("img");
    mke2fs(&img, "4M", args, Some(&src));
    img
}

/// Damages `img` with `cmds`, then checks that usfs names the damage, repairs it, and
/// leaves what e2fsck finds clean.
fn damaged_then_repaired(img: &Path, cmds: &str, says: &str) {
    debugfs_write(img, &img.with_extension("cmd"), cmds);
    assert_eq!(e2fsck_exit(img, "-fn"), 4, "e2fsck sees the damage");
    let out = Command::new(usfs())
        .args(["fsck", "-fn"])
        .arg(img)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(text.contains(says), "{text}");
    let out = Command::new(usfs())
        .args(["fsck", "-fy"])
        .arg(img)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(e2fsck_exit(img, "-fn"), 0, "clean after usfs fsck -fy");
}

#[test]
fn imagic_and_casefold_flags_are_cleared() {
    if !need_tool("flags", "debugfs") {
        return;
    }
    let s = Scratch::new("repair-flags");
    let img = image(&s, &["-t", "ext4"]);
    // (0x80000: the extents flag the files have; 0x2000 imagic, 0x40000000 casefold.)
    damaged_then_repaired(&img, "sif /d/f1 flags 0x82000\n", "has imagic flag set");
    damaged_then_repaired(
        &img,
        "sif /d/f2 flags 0x40080000\n",
        "has the casefold flag set but is not a directory",
    );
    damaged_then_repaired(
        &img,
        "sif /d flags 0x40080000\n",
        "the casefold feature is not enabled",
    );
}

#[test]
fn bad_blocks_inode_with_extents_flag_is_cleared() {
    if !need_tool("flags", "debugfs") {
        return;
    }
    let s = Scratch::new("repair-flags-bb");
    let img = image(&s, &["-t", "ext2"]);
    damaged_then_repaired(
        &img,
        "sif <1> flags 0x80000\n",
        "Inode 1 has EXTENTS_FL flag set on filesystem without extents support",
    );
}

#[test]
fn a_dtime_left_by_a_broken_orphan_list_is_cleared() {
    if !need_tool("flags", "debugfs") {
        return;
    }
    let s = Scratch::new("repair-low-dtime");
    let img = image(&s, &["-t", "ext4"]);
    damaged_then_repaired(
        &img,
        "sif /d/f1 dtime 5\n",
        "was part of the orphaned inode list",
    );
    let out = run_ok(Command::new(usfs()).arg("cat").arg(&img).arg("/d/f1"));
    assert_eq!(
        out.stdout,
        vec![b'f'; 4000],
        "the file in use keeps its data"
    );
}

#[test]
fn an_indirect_block_over_the_inode_table_leaves_the_table_alone() {
    if !need_tool("flags", "debugfs") || !need_tool("flags", "dumpe2fs") {
        return;
    }
    let s = Scratch::new("repair-ind-itable");
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("big"), vec![7u8; 40000]).unwrap();
    for i in 1..=3 {
        std::fs::write(src.join(format!("s{i}")), format!("small {i}\n")).unwrap();
    }
    let img = s.path("img");
    mke2fs(&img, "4M", &["-t", "ext2", "-b", "1024"], Some(&src));
    let info = run_ok(Command::new("dumpe2fs").arg(&img));
    let text = String::from_utf8_lossy(&info.stdout);
    let table = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Inode table at "))
        .and_then(|r| r.split('-').next())
        .unwrap()
        .to_string();
    // /big's indirect block becomes the first inode-table block (inodes 1-8 as pointers).
    damaged_then_repaired(
        &img,
        &format!("sif /big block[IND] {table}\n"),
        "illegal block",
    );
    for i in 1..=3 {
        let out = run_ok(
            Command::new(usfs())
                .arg("cat")
                .arg(&img)
                .arg(format!("/s{i}")),
        );
        assert_eq!(out.stdout, format!("small {i}\n").as_bytes());
    }
}

#[test]
fn a_large_file_without_the_large_file_feature_turns_it_on() {
    if !need_tool("flags", "debugfs") {
        return;
    }
    let s = Scratch::new("repair-large-file");
    let img = image(&s, &["-t", "ext4"]);
    // A sparse file of 3 GiB, the feature off.
    damaged_then_repaired(
        &img,
        "sif /d/f1 size 0xC0000000\nfeature -large_file\n",
        "Filesystem contains large files, but lacks LARGE_FILE flag in superblock",
    );
    let out = run_ok(Command::new("dumpe2fs").arg("-h").arg(&img));
    assert!(String::from_utf8_lossy(&out.stdout).contains("large_file"));
}

/// A block bitmap at block 0 on a flex_bg file system (group 2's, its BLOCK_UNINIT
/// flag cleared, the descriptor's checksum set): e2fsck takes it for missing, not
/// misplaced, and gives it the first block pass 1 left free, unasked, in preen too, on
/// the primary descriptors (e2fsck -p never falls back to the backup ones). `usfs fsck
/// -fp` exits as `e2fsck -fp` on a copy, relocates to the block e2fsck names, and
/// leaves what e2fsck finds clean.
#[test]
fn a_missing_block_bitmap_is_relocated_by_preen_as_e2fsck_does() {
    if !need_tool("missing bitmap", "debugfs") || !need_tool("missing bitmap", "e2fsck") {
        return;
    }
    let s = Scratch::new("repair-missing-bitmap");
    let img = s.path("img");
    mke2fs(
        &img,
        "512M",
        &["-t", "ext4", "-b", "4096", "-N", "8192"],
        None,
    );
    let cmds = "set_bg 2 flags 0\nset_bg 2 block_bitmap 0\nset_bg 2 checksum calc\n";
    debugfs_write(&img, &s.path("cmd"), cmds);
    let copy = s.path("copy");
    std::fs::copy(&img, &copy).unwrap();
    let e2 = Command::new("e2fsck")
        .arg("-fp")
        .arg(&copy)
        .output()
        .unwrap();
    let e2out = String::from_utf8_lossy(&e2.stdout);
    let relocated = e2out
        .lines()
        .find(|l| l.contains("Relocating group 2's block bitmap to "))
        .map(|l| l.split(": ").nth(1).unwrap_or(l).to_string())
        .unwrap_or_else(|| panic!("e2fsck -p did not relocate:\n{e2out}"));
    let (code, text) = usfs_fsck(&img, &["-fp"]);
    assert_eq!(code, e2.status.code(), "usfs:\n{text}\ne2fsck:\n{e2out}");
    assert!(text.contains(&relocated), "usfs:\n{text}\ne2fsck:\n{e2out}");
    assert_eq!(e2fsck_exit(&img, "-fn"), 0, "clean after usfs fsck -fp");
}

/// An orphan on an encrypted image marked clean: `usfs fsck -y` and `-p`, without -f,
/// release it before deciding the image is clean, as e2fsck does, and a repair opens an
/// encrypted image for its orphans (the reader refuses encrypt; a repair changes only
/// structure).
#[test]
fn orphans_are_released_on_a_clean_encrypted_image_without_f() {
    if !need_tool("orphans on a clean image", "debugfs") {
        return;
    }
    let s = Scratch::new("repair-orphan-encrypt");
    let img = s.path("img");
    mke2fs(&img, "32M", &["-t", "ext4", "-O", "encrypt"], None);
    let data = s.path("data");
    std::fs::write(&data, b"hello\n").unwrap();
    let cmds = format!(
        "write {} f\nunlink f\nsif <12> links_count 0\nset_super_value last_orphan 12\n",
        data.display()
    );
    debugfs_write(&img, &s.path("cmd"), &cmds);
    for opt in ["-y", "-p"] {
        let copy = s.path("copy");
        std::fs::copy(&img, &copy).unwrap();
        let (code, text) = usfs_fsck(&copy, &[opt]);
        assert_eq!(code, Some(0), "{opt}:\n{text}");
        assert_eq!(
            e2fsck_exit(&copy, "-fn"),
            0,
            "{opt}: the orphan is left:\n{text}"
        );
    }
}

/// An orphan list usfs cannot release (its head out of range, or an inode not in use):
/// the list is dropped as e2fsck drops it ("Illegal orphaned inode 5 in superblock."),
/// the image checked in full, exit 1, and e2fsck finds it clean; `-n` reports the list
/// and changes nothing.
#[test]
fn an_orphan_list_that_cannot_be_released_is_dropped() {
    if !need_tool("orphan list", "debugfs") {
        return;
    }
    let s = Scratch::new("repair-orphan-drop");
    let img = image(&s, &["-t", "ext4"]);
    for (head, says) in [
        ("5", "Illegal orphaned inode 5 in superblock."),
        ("99999", "Illegal orphaned inode 99999 in superblock."),
        ("40", "Orphaned inode list not released"),
    ] {
        let copy = s.path("copy");
        std::fs::copy(&img, &copy).unwrap();
        debugfs_write(
            &copy,
            &s.path("cmd"),
            &format!("set_super_value last_orphan {head}\n"),
        );
        let before = std::fs::read(&copy).unwrap();
        let (code, text) = usfs_fsck(&copy, &["-fn"]);
        assert_eq!(code, Some(0), "-n, head {head}:\n{text}");
        assert!(
            std::fs::read(&copy).unwrap() == before,
            "-n changed the image"
        );
        for opt in ["-y", "-p"] {
            let (code, text) = usfs_fsck(&copy, &[opt]);
            assert_eq!(code, Some(1), "{opt}, head {head}:\n{text}");
            assert!(text.contains(says), "{opt}, head {head}:\n{text}");
            assert_eq!(e2fsck_exit(&copy, "-fn"), 0, "{opt}, head {head}:\n{text}");
            std::fs::write(&copy, &before).unwrap();
        }
    }
}
