//! Undo files: `usfs fsck -y -z FILE` saves every block it overwrites in e2fsprogs'
//! E2UNDO02 format, so Debian's `e2undo FILE IMAGE` gives back the original bytes (and so
//! does `usfs undo`); `usfs undo` also applies an undo file e2fsck wrote, and refuses one
//! made for another state of the image.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// An ext4 image with a journal and files, damaged by debugfs (a wrong link count, an
/// unlinked file in use, lost+found gone, a cleared inode bitmap bit).
fn damaged_image(s: &Scratch) -> std::path::PathBuf {
    let src = s.path("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..5 {
        std::fs::write(
            src.join(format!("d/f{i}")),
            vec![i as u8 + 1; 5000 * (i + 1)],
        )
        .unwrap();
    }
    let img = s.path("img");
    mke2fs(&img, "8M", &["-t", "ext4", "-b", "1024"], Some(&src));
    let cmds = s.path("damage");
    std::fs::write(
        &cmds,
        "sif /d/f0 links_count 4\nunlink /d/f1\nrmdir lost+found\nfreei /d/f3\n",
    )
    .unwrap();
    run_ok(
        Command::new("debugfs")
            .arg("-w")
            .arg("-f")
            .arg(&cmds)
            .arg(&img),
    );
    img
}

fn fsck_yz(img: &Path, undo: &Path) -> i32 {
    let out = Command::new(usfs())
        .args(["fsck", "-fy", "-z"])
        .arg(undo)
        .arg(img)
        .output()
        .unwrap();
    out.status.code().unwrap_or(-1)
}

#[test]
fn e2undo_gives_back_the_image_usfs_repaired() {
    if !need_tool("undo", "e2undo") || !need_tool("undo", "debugfs") {
        return;
    }
    let s = Scratch::new("undo");
    let img = damaged_image(&s);
    let orig = std::fs::read(&img).unwrap();
    let undo = s.path("fsck.e2undo");
    assert_eq!(fsck_yz(&img, &undo), 1, "the repair corrects errors");
    assert_ne!(
        std::fs::read(&img).unwrap(),
        orig,
        "the repair changed nothing"
    );
    run_ok(Command::new("e2fsck").arg("-fn").arg(&img));
    run_ok(Command::new("e2undo").arg(&undo).arg(&img));
    assert!(
        std::fs::read(&img).unwrap() == orig,
        "e2undo did not restore the original bytes"
    );

    // usfs undo does the same; a second time the image is not the repaired one: refused.
    assert_eq!(fsck_yz(&img, &undo), 1);
    run_ok(Command::new(usfs()).arg("undo").arg(&undo).arg(&img));
    assert!(
        std::fs::read(&img).unwrap() == orig,
        "usfs undo did not restore the original bytes"
    );
    let again = Command::new(usfs())
        .arg("undo")
        .arg(&undo)
        .arg(&img)
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(1),
        "an undo file applied to another state must be refused"
    );
    assert!(
        std::fs::read(&img).unwrap() == orig,
        "a refused undo changed the image"
    );
}

#[test]
fn usfs_undo_applies_an_undo_file_e2fsck_wrote() {
    if !need_tool("undo", "e2fsck") || !need_tool("undo", "debugfs") {
        return;
    }
    let s = Scratch::new("undo-e2");
    let img = damaged_image(&s);
    let orig = std::fs::read(&img).unwrap();
    let undo = s.path("e2fsck.e2undo");
    let st = Command::new("e2fsck")
        .arg("-fy")
        .arg("-z")
        .arg(&undo)
        .arg(&img)
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(1), "e2fsck -fy corrects errors");
    run_ok(Command::new(usfs()).arg("undo").arg(&undo).arg(&img));
    assert!(
        std::fs::read(&img).unwrap() == orig,
        "usfs undo did not restore e2fsck's original"
    );
}
