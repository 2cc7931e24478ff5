//! Deferred checkpoints against e2fsck: committed transactions stay in the journal until
//! the log fills or the volume closes. Directory blocks logged since the last checkpoint
//! and then freed (rmdir) are reused as file data; a crash before the checkpoint must not
//! let replay (e2fsck's or usfs's) write the old directory blocks over that data, and a
//! clean close must not write them home over it either.

mod common;

use common::{fsck, have, mke2fs, open_rw, read_all, regular, temp};
use std::path::Path;
use std::process::Command;
use usfs_ext4::rw::Ext4Rw;
use usfs_fs::{path::resolve, FileSystem, FileSystemWrite, FileType, NewNode};

const DIRS: usize = 60;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i / 4096 * 31 + i % 251) as u8).collect()
}

/// Makes and removes DIRS directories (one block each; emptied in one transaction,
/// removed in the next), then writes a file that reuses their blocks; every step
/// committed, nothing checkpointed. Returns the file's bytes.
fn churn(fs: &Ext4Rw) -> Vec<u8> {
    let root = fs.root();
    let dir = NewNode {
        file_type: FileType::Directory,
        ..regular(0o755)
    };
    for i in 0..DIRS {
        let d = fs.mkdir(root, format!("d{i}").as_bytes(), dir).unwrap().ino;
        fs.create(d, b"f", regular(0o644)).unwrap();
    }
    fs.sync().unwrap();
    for i in 0..DIRS {
        let d = fs.lookup(root, format!("d{i}").as_bytes()).unwrap();
        fs.unlink(d, b"f").unwrap();
    }
    fs.sync().unwrap();
    // (Removed in a transaction of their own: their blocks are logged, not changed.)
    for i in 0..DIRS {
        fs.rmdir(root, format!("d{i}").as_bytes()).unwrap();
    }
    fs.sync().unwrap();
    let data = pattern(DIRS * 2 * 4096);
    let f = fs.create(root, b"data", regular(0o644)).unwrap().ino;
    fs.write_at(f, 0, &data).unwrap();
    fs.sync().unwrap();
    data
}

fn check_data(img: &Path, data: &[u8], what: &str) {
    let fs = open_rw(img);
    let f = resolve(&fs, b"/data", true).unwrap();
    let got = read_all(&fs, f, data.len());
    for (i, (a, b)) in got.chunks(4096).zip(data.chunks(4096)).enumerate() {
        assert!(a == b, "{what}: block {i} of the file lost its data");
    }
    fs.shutdown().unwrap();
}

#[test]
fn freed_directory_blocks_never_come_back_over_file_data() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("SKIP: mke2fs/e2fsck missing");
        return;
    }
    let img = temp("ckpt", "img");
    mke2fs(&img, &["-t", "ext4", "-b", "4096"], "32M");
    let fs = open_rw(&img);
    let data = churn(&fs);
    // A crash now: the image file as it is, the journal holding every transaction.
    let crashed = temp("ckpt", "crashed");
    std::fs::copy(&img, &crashed).unwrap();
    let by_e2fsck = temp("ckpt", "e2fsck");
    std::fs::copy(&img, &by_e2fsck).unwrap();
    fs.shutdown().unwrap();
    drop(fs);
    let (ok, text) = fsck(&img);
    assert!(ok, "after a clean close: e2fsck -fn:\n{text}");
    check_data(&img, &data, "after a clean close");
    // Replay by usfs (opening read-write replays onto the image).
    check_data(&crashed, &data, "after usfs replayed the crashed image");
    let (ok, text) = fsck(&crashed);
    assert!(ok, "after usfs replay: e2fsck -fn:\n{text}");
    // Replay by e2fsck.
    let st = Command::new("e2fsck")
        .args(["-fy"])
        .arg(&by_e2fsck)
        .output()
        .unwrap();
    assert!(st.status.code().unwrap_or(8) < 4, "e2fsck -fy: {st:?}");
    let (ok, text) = fsck(&by_e2fsck);
    assert!(ok, "after e2fsck replay: e2fsck -fn:\n{text}");
    check_data(&by_e2fsck, &data, "after e2fsck replayed the crashed image");
    for p in [&img, &crashed, &by_e2fsck] {
        let _ = std::fs::remove_file(p);
    }
}
