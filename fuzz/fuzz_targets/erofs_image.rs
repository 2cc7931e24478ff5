//! Fuzz the EROFS reader: any bytes as an image; open it and walk everything (bounded),
//! reading every file (compressed ones through the decompressor and its cache).
//! Run: cargo +nightly fuzz run erofs_image -- -max_len=262144
//! Seed it with small images from `usfs mkfs.erofs` and mkfs.erofs (-zlz4, -zlz4hc,
//! -Eztailpacking, -C16384, -Efragments).
#![no_main]

use libfuzzer_sys::fuzz_target;
use usfs_fs::{FileSystem, FileType};

fuzz_target!(|data: &[u8]| {
    let dev = usfs_dev::MemDevice::new(data.to_vec(), false);
    let Ok(fs) = usfs_erofs::Erofs::open(Box::new(dev)) else { return };
    let _ = fs.describe();
    let _ = fs.statfs();
    let mut stack = vec![(fs.root(), 0)];
    let mut visited = 0;
    let mut buf = vec![0u8; 8192];
    while let Some((dir, depth)) = stack.pop() {
        let mut entries = Vec::new();
        let _ = fs.readdir(dir, 0, &mut |e, _| {
            entries.push(e);
            entries.len() < 256
        });
        for e in entries {
            visited += 1;
            if visited > 2000 {
                return;
            }
            let _ = fs.lookup(dir, &e.name);
            let Ok(m) = fs.getattr(e.ino) else { continue };
            let _ = fs.list_xattrs(e.ino).map(|names| {
                for n in names {
                    let _ = fs.get_xattr(e.ino, &n);
                }
            });
            match m.file_type {
                FileType::Directory if depth < 16 => stack.push((e.ino, depth + 1)),
                FileType::Regular => {
                    let _ = fs.read_at(e.ino, 0, &mut buf);
                    let _ = fs.read_at(e.ino, 5000, &mut buf[..100]);
                    let _ = fs.next_data(e.ino, 0);
                }
                FileType::Symlink => {
                    let _ = fs.readlink(e.ino);
                }
                _ => {}
            }
        }
    }
});
