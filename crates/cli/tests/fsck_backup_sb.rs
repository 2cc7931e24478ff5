//! A primary superblock that is unusable: `usfs fsck -n` and `-y` read the image by group
//! 1's backup superblock as e2fsck does ("Superblock invalid, trying backup blocks..."),
//! the repair writing the primary made from it (byte for byte what e2fsck -fy writes);
//! `-b` names a backup; preen refuses, as e2fsck -p; `-z` undoes the restored primary.

mod common;

use common::*;
use std::path::{Path, PathBuf};

/// A 4 KiB-block ext4 image with files, its primary superblock zeroed (the backups
/// intact); also a copy for e2fsck.
fn zeroed_primary(s: &Scratch, features: &[&str]) -> (PathBuf, PathBuf) {
    let src = s.path("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..20 {
        std::fs::write(src.join(format!("d/f{i}")), vec![i as u8; 3000 * i]).unwrap();
    }
    let img = s.path("img");
    // (Two groups of 32768 blocks: e2fsck looks for group 1's copy at 8 x the block size.)
    let mut args = vec!["-t", "ext4", "-b", "4096"];
    args.extend_from_slice(features);
    mke2fs(&img, "160M", &args, Some(&src));
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[1024..2048].fill(0);
    std::fs::write(&img, &bytes).unwrap();
    let theirs = s.path("img.e2fsck");
    std::fs::write(&theirs, &bytes).unwrap();
    (img, theirs)
}

#[test]
fn a_zeroed_primary_superblock_is_restored_from_the_backup_as_e2fsck_restores_it() {
    if !need_tool("backup superblock", "mke2fs") {
        return;
    }
    // (Byte for byte where neither repair leaves traces of its own: with a journal,
    // usfs's transactions advance it; with descriptor checksums, e2fsck's closing
    // ext2fs_set_gdt_csum sets uninit flags anew, which usfs does not.)
    let variants: [(&[&str], bool); 3] = [
        (&[], false),
        (&["-O", "^metadata_csum,uninit_bg"], false),
        (&["-O", "^has_journal,^metadata_csum,^uninit_bg"], true),
    ];
    for (features, same_bytes) in variants {
        let s = Scratch::new("backup-sb");
        let (img, theirs) = zeroed_primary(&s, features);
        let (code, out) = usfs_fsck(&img, &["-fn"]);
        assert_eq!(
            code,
            Some(e2fsck_exit(&img, "-fn")),
            "{features:?} -fn:\n{out}"
        );
        assert!(out.contains("trying backup blocks"), "{out}");
        let (code, out) = usfs_fsck(&img, &["-fy"]);
        assert_eq!(
            code,
            Some(e2fsck_exit(&theirs, "-fy")),
            "{features:?} -fy:\n{out}"
        );
        assert!(out.contains("FILE SYSTEM WAS MODIFIED"), "{out}");
        assert_eq!(
            e2fsck_exit(&img, "-fn"),
            0,
            "{features:?}: e2fsck -fn after the repair"
        );
        // (But for s_kbytes_written: each tool counts its own writes.)
        let masked = |p: &Path| {
            let mut b = std::fs::read(p).unwrap();
            b[1024 + 0x178..1024 + 0x180].fill(0);
            b
        };
        assert!(
            !same_bytes || masked(&img) == masked(&theirs),
            "{features:?}: the repaired image differs from e2fsck's"
        );
    }
}

#[test]
fn dash_b_names_the_backup_and_preen_refuses_as_e2fsck_p() {
    if !need_tool("backup superblock", "mke2fs") {
        return;
    }
    let s = Scratch::new("backup-sb-b");
    let (img, _) = zeroed_primary(&s, &[]);
    let before = std::fs::read(&img).unwrap();
    let (code, _) = usfs_fsck(&img, &["-p"]);
    assert_eq!(
        code,
        Some(8),
        "preen does not fall back (e2fsck -p exits 8)"
    );
    assert!(
        std::fs::read(&img).unwrap() == before,
        "preen changed the image"
    );
    let (code, out) = usfs_fsck(&img, &["-n", "-b", "32769"]);
    assert_eq!(code, Some(8), "no superblock at 32769:\n{out}");
    let (code, out) = usfs_fsck(&img, &["-fy", "-b", "32768", "-B", "4096"]);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(e2fsck_exit(&img, "-fn"), 0);
}

#[test]
fn an_undo_file_gives_back_the_zeroed_primary() {
    if !need_tool("backup superblock", "e2undo") {
        return;
    }
    let s = Scratch::new("backup-sb-undo");
    let (img, _) = zeroed_primary(&s, &[]);
    let before = std::fs::read(&img).unwrap();
    let undo = s.path("undo");
    let (code, out) = usfs_fsck(&img, &["-fy", "-z", undo.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(std::fs::read(&img).unwrap() != before);
    run_ok(std::process::Command::new("e2undo").arg(&undo).arg(&img));
    assert!(
        std::fs::read(&img).unwrap() == before,
        "e2undo did not give back the image"
    );
}
