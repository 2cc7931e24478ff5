//! The read-write volume against e2fsck: images made by Debian's mke2fs, changed through
//! `usfs_ext4::rw::Volume`, must stay clean under `e2fsck -fn`.

use std::path::{Path, PathBuf};
use std::process::Command;
use usfs_ext4::rw::{Freed, Meta, Volume};

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("usfs-rwvol-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&d);
    d
}

fn mke2fs(path: &Path, args: &[&str], size: &str) {
    let st = Command::new("mke2fs")
        .args(["-q", "-F"])
        .args(args)
        .arg(path)
        .arg(size)
        .env("MKE2FS_CONFIG", "/etc/mke2fs.conf")
        .status()
        .unwrap();
    assert!(st.success());
}

fn fsck_clean(path: &Path) -> (bool, String) {
    let o = Command::new("e2fsck")
        .args(["-fn"])
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code() == Some(0), text)
}

fn open(path: &Path) -> Volume {
    let dev = usfs_dev::open(path, usfs_dev::OpenMode::File, true).unwrap();
    Volume::open(dev).unwrap()
}

#[test]
fn allocate_and_free_leaves_the_image_clean() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("SKIP: mke2fs/e2fsck missing");
        return;
    }
    for (name, args) in [
        ("default", vec!["-t", "ext4"]),
        ("nocsum", vec!["-t", "ext4", "-O", "^metadata_csum"]),
        ("1k", vec!["-t", "ext4", "-b", "1024"]),
        ("ext2", vec!["-t", "ext2"]),
        ("no64", vec!["-t", "ext4", "-O", "^64bit"]),
    ] {
        let img = temp(name);
        mke2fs(&img, &args, "64M");
        let before = std::fs::read(&img).unwrap();
        {
            let mut v = open(&img);
            let free0 = v.free_block_count();
            let (b, n) = v.alloc_blocks(12, 0, 100).unwrap();
            assert!(n >= 1);
            v.free_blocks(12, b, n as u64, Freed::Data).unwrap();
            let mut rec = v
                .new_inode(2, usfs_fs::FileType::Regular, 0o644, 0, 0)
                .unwrap();
            rec.raw.set_i_links_count(1);
            v.put_inode(&mut rec).unwrap();
            v.free_inode(&mut rec).unwrap();
            v.close().unwrap();
            assert_eq!(v.free_block_count(), free0, "{name}");
        }
        let (ok, text) = fsck_clean(&img);
        assert!(ok, "{name}: e2fsck after alloc+free:\n{text}");
        let after = std::fs::read(&img).unwrap();
        assert_ne!(before, after, "{name}: the commit wrote something");
        // A block allocated and kept is seen by e2fsck as marked but unused: proof the
        // bitmaps really are written.
        {
            let mut v = open(&img);
            v.alloc_blocks(12, 0, 1).unwrap();
            v.close().unwrap();
        }
        let (ok, text) = fsck_clean(&img);
        assert!(
            !ok && text.contains("Block bitmap differences"),
            "{name}: {text}"
        );
        let _ = std::fs::remove_file(&img);
    }
}
