//! The descriptors a repair leaves, against e2fsck's: its cleanup (ext2fs_set_gdt_csum)
//! sets each group's unused-inodes count from its last inode in use (raising it where
//! files at the end of the table were deleted, which the kernel and libext2fs never
//! do) and the uninit flags of groups left empty. After `usfs fsck -fy` and `e2fsck -fy`
//! of copies of the same image, dumpe2fs shows the same groups (checksums aside): on an
//! image with a problem to fix, and on one that is clean but for the stale counts.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// dumpe2fs's group headings and count lines of `img`, descriptor checksums left out.
fn groups(img: &Path) -> Vec<String> {
    let out = Command::new("dumpe2fs").arg(img).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("Group ") || l.contains("free inodes"))
        .map(|l| match l.find(" csum 0x") {
            Some(i) => {
                let rest = l[i + 8..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
                format!("{}{rest}", &l[..i])
            }
            None => l.to_string(),
        })
        .collect()
}

#[test]
fn descriptors_end_as_e2fsck_leaves_them() {
    if !need_tool("descriptors after a repair", "debugfs") {
        return;
    }
    let s = Scratch::new("repair-gdt");
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..20 {
        std::fs::write(src.join(format!("f{i:02}")), vec![b'x'; 3000]).unwrap();
    }
    let img = s.path("img");
    mke2fs(&img, "16M", &["-t", "ext4", "-N", "4096"], Some(&src));
    for (case, damage) in [
        ("a link count to fix", "sif /f00 links_count 5\n"),
        ("nothing else to fix", ""),
    ] {
        let base = s.path("base");
        std::fs::copy(&img, &base).unwrap();
        // (Freed by libext2fs, as by the kernel: the unused-inodes count stays.)
        debugfs_write(
            &base,
            &s.path("cmd"),
            &format!("rm /f19\nrm /f18\nrm /f17\n{damage}"),
        );
        let (ours, theirs) = (s.path("ours"), s.path("theirs"));
        std::fs::copy(&base, &ours).unwrap();
        std::fs::copy(&base, &theirs).unwrap();
        let (code, text) = usfs_fsck(&ours, &["-fy"]);
        assert!(matches!(code, Some(0 | 1)), "{case}:\n{text}");
        let e2 = Command::new("e2fsck")
            .arg("-fy")
            .arg(&theirs)
            .output()
            .unwrap();
        assert!(matches!(e2.status.code(), Some(0 | 1)), "{case}: {e2:?}");
        assert_eq!(groups(&ours), groups(&theirs), "{case}:\n{text}");
        assert_eq!(e2fsck_exit(&ours, "-fn"), 0, "{case}");
    }
}
