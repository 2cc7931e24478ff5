//! The builder on devices other than an image file: the crash recorder over a memory device
//! logs the build as writes that cover each block of the image once and one flush at the
//! end, and replaying them gives the image a plain memory device got; a device too small
//! for the image fails with StorageFull (ENOSPC) instead of panicking.

use super::{build, Options, BLOCK_SIZE};
use crate::compress::{Algorithm, LZ4HC_DEFAULT_LEVEL};
use crate::Erofs;
use std::path::PathBuf;
use usfs_dev::record::Event;
use usfs_dev::{Device, MemDevice, Recorder};
use usfs_fs::FileSystem;
use usfs_source::HostDir;

/// A small tree: a compressible 1 MiB file, small files, a subdirectory and a symlink.
fn source(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("usfs-mkfs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let text: Vec<u8> = (0..1u32 << 20)
        .map(|i| b"erofs builds images "[(i % 20) as usize] ^ ((i >> 12) as u8 & 1))
        .collect();
    std::fs::write(dir.join("big"), &text).unwrap();
    for i in 0..20 {
        std::fs::write(
            dir.join("sub").join(format!("f{i}")),
            vec![b'a' + i as u8; 300 * i],
        )
        .unwrap();
    }
    std::os::unix::fs::symlink("sub/f3", dir.join("link")).unwrap();
    dir
}

fn opts() -> Options {
    Options {
        compression: Some(Algorithm::Lz4Hc(LZ4HC_DEFAULT_LEVEL)),
        ztailpacking: true,
        timestamp: Some(0),
        uuid: Some([7; 16]),
        workers: 2,
        ..Options::default()
    }
}

#[test]
fn a_recorded_build_replays_to_the_same_image() {
    let src = source("recorded");
    let cap = 4 << 20;
    let plain = MemDevice::new(vec![0; cap], true);
    let report = build(&plain, &HostDir::new(&src), &opts()).unwrap();
    let rec = Recorder::new(Box::new(MemDevice::new(vec![0; cap], true)));
    assert_eq!(
        build(&rec, &HostDir::new(&src), &opts()).unwrap().blocks,
        report.blocks
    );
    std::fs::remove_dir_all(&src).unwrap();
    let len = (report.blocks * u64::from(BLOCK_SIZE)) as usize;
    assert!(report.compressed_files > 0 && len < 1 << 20);

    let log = rec.log();
    assert_eq!(log.flushes(), 1);
    assert_eq!(log.events().last(), Some(&Event::Flush));
    assert_eq!(rec.stats().snapshot().bytes_written, len as u64);
    let replay = MemDevice::new(vec![0; cap], true);
    log.apply_epochs(0..1, &replay).unwrap();
    let img = plain.into_inner();
    assert!(replay.into_inner()[..len] == img[..len]);

    let fs = Erofs::open(Box::new(MemDevice::new(img[..len].to_vec(), false))).unwrap();
    let ino = usfs_fs::path::resolve(&fs, b"/link", true).unwrap();
    let mut buf = [0u8; 1000];
    assert_eq!(fs.read_at(ino, 0, &mut buf).unwrap(), 900);
    assert!(buf[..900].iter().all(|&b| b == b'd'));
}

#[test]
fn a_device_too_small_fails_with_enospc() {
    let src = source("small");
    let dev = MemDevice::new(vec![0; 8 << 10], true);
    let e = build(&dev, &HostDir::new(&src), &opts()).unwrap_err();
    std::fs::remove_dir_all(&src).unwrap();
    assert_eq!(e.errno(), libc::ENOSPC, "{e}");
}
