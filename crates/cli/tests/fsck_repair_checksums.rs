//! Blocks that pass every check but their checksum (metadata_csum) are repaired by
//! setting the checksum, the rest of the block kept: an htree root here (e2fsprogs' test
//! images have none where that is the only damage).

mod common;

use common::*;
use std::os::unix::fs::FileExt;
use std::process::Command;

#[test]
fn an_htree_root_with_a_bad_checksum_gets_it_set() {
    if !need_tool("htree checksum", "debugfs") {
        return;
    }
    let s = Scratch::new("htree-csum");
    let src = s.path("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..300 {
        std::fs::write(src.join(format!("d/file-with-a-long-name-{i:04}")), b"x").unwrap();
    }
    let img = s.path("img");
    mke2fs(
        &img,
        "8M",
        &["-t", "ext4", "-b", "1024", "-O", "metadata_csum"],
        Some(&src),
    );
    // e2fsck -D indexes the directory (mke2fs -d leaves it linear).
    let _ = Command::new("e2fsck")
        .arg("-fyD")
        .arg(&img)
        .output()
        .unwrap();
    let dump = run_ok(Command::new("debugfs").args(["-R", "htree /d"]).arg(&img));
    let dump = String::from_utf8_lossy(&dump.stdout);
    assert!(dump.contains("Root node dump"), "no htree: {dump}");
    let out = run_ok(Command::new("debugfs").args(["-R", "bmap /d 0"]).arg(&img));
    let blk: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    // The root's checksum is the last 4 bytes of its block (the tail after `limit`
    // entries fills the block).
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&img)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, blk * 1024 + 1020).unwrap();
    f.write_all_at(&[b[0] ^ 0x5a], blk * 1024 + 1020).unwrap();
    drop(f);
    let before = Command::new("e2fsck")
        .arg("-fn")
        .arg(&img)
        .output()
        .unwrap();
    assert_eq!(before.status.code(), Some(4), "the damage must be seen");
    let fixed = Command::new(usfs())
        .args(["fsck", "-fy"])
        .arg(&img)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&fixed.stdout);
    assert_eq!(fixed.status.code(), Some(1), "{said}");
    assert!(said.contains("node fails checksum"), "{said}");
    run_ok(Command::new("e2fsck").arg("-fn").arg(&img));
    let ls = run_ok(Command::new(usfs()).arg("ls").arg(&img).arg("/d"));
    assert_eq!(String::from_utf8_lossy(&ls.stdout).lines().count(), 300);
}
