//! The read-write volume against e2fsck: images made by Debian's mke2fs, changed through
//! `usfs_ext4::rw::Volume`, must stay clean under `e2fsck -fn`.

mod common;

use common::{fsck, have, mke2fs, open_volume as open, temp};
use usfs_ext4::rw::{Freed, Meta};

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
        let img = temp("rwvol", name);
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
        let (ok, text) = fsck(&img);
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
        let (ok, text) = fsck(&img);
        assert!(
            !ok && text.contains("Block bitmap differences"),
            "{name}: {text}"
        );
        let _ = std::fs::remove_file(&img);
    }
}
