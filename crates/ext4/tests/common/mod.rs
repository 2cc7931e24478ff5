//! Shared support of the read-write volume's integration tests: tool checks, scratch
//! paths, mke2fs and e2fsck runs, opening an image for writing.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use usfs_ext4::rw::{Ext4Rw, Volume};
use usfs_fs::{FileSystem, FileType, Ino, NewNode};

/// Is `tool` on PATH?
pub(crate) fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A fresh scratch path in the temporary directory (whatever was there is removed).
pub(crate) fn temp(prefix: &str, name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("usfs-{prefix}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::remove_file(&p);
    p
}

/// `mke2fs -q -F ARGS PATH SIZE` with the system's configuration.
pub(crate) fn mke2fs(path: &Path, args: &[&str], size: &str) {
    let st = Command::new("mke2fs")
        .args(["-q", "-F"])
        .args(args)
        .arg(path)
        .arg(size)
        .env("MKE2FS_CONFIG", "/etc/mke2fs.conf")
        .status()
        .unwrap();
    assert!(st.success(), "mke2fs {args:?} {}", path.display());
}

/// `e2fsck -fn`: clean, and what it printed.
pub(crate) fn fsck(path: &Path) -> (bool, String) {
    let o = Command::new("e2fsck")
        .arg("-fn")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code() == Some(0), text)
}

/// The image at `path` opened as a read-write volume.
pub(crate) fn open_volume(path: &Path) -> Volume {
    let dev = usfs_dev::open(path, usfs_dev::OpenMode::File, true).unwrap();
    Volume::open(dev).unwrap()
}

/// The image at `path` opened as the shared read-write file system.
pub(crate) fn open_rw(path: &Path) -> Ext4Rw {
    let dev = usfs_dev::open(path, usfs_dev::OpenMode::File, true).unwrap();
    Ext4Rw::open(dev).unwrap()
}

/// A regular file owned by root with permission bits `perm`.
pub(crate) fn regular(perm: u32) -> NewNode {
    NewNode {
        file_type: FileType::Regular,
        perm,
        uid: 0,
        gid: 0,
        rdev: 0,
    }
}

/// The first `len` bytes of file `ino` (panics on a short read).
pub(crate) fn read_all(fs: &Ext4Rw, ino: Ino, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        let n = fs.read_at(ino, done as u64, &mut buf[done..]).unwrap();
        assert!(n > 0, "short read at {done}");
        done += n;
    }
    buf
}
