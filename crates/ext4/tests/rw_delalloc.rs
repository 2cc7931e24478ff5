//! Delayed allocation in the read-write volume, against debugfs and e2fsck: files
//! written in small interleaved pieces get one extent each at the flush, buffered data
//! reads back (read, SEEK_DATA, st_blocks) before it has blocks, and a full disk fails
//! the write itself with ENOSPC, leaving a clean image.

mod common;

use common::{fsck, have, mke2fs, open_rw as open, read_all, regular, temp};
use std::path::{Path, PathBuf};
use std::process::Command;
use usfs_ext4::rw::Ext4Rw;
use usfs_fs::{path::resolve, FileSystem, FileSystemWrite, FileType, Ino, NewNode};

fn image(name: &str, size: &str) -> PathBuf {
    let p = temp("delalloc", name);
    mke2fs(&p, &["-t", "ext4", "-b", "4096"], size);
    p
}

fn create(fs: &Ext4Rw, name: &str) -> Ino {
    fs.create(fs.root(), name.as_bytes(), regular(0o644))
        .unwrap()
        .ino
}

/// Extents of `path` as debugfs lists them (`ex`: one line per extent after a header).
fn extents(img: &Path, path: &str) -> usize {
    let o = Command::new("debugfs")
        .args(["-R", &format!("ex {path}")])
        .arg(img)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count()
}

fn fsck_clean(img: &Path) {
    let (ok, text) = fsck(img);
    assert!(ok, "e2fsck -fn:\n{text}");
}

#[test]
fn interleaved_appends_get_one_extent_per_file() {
    if !have("mke2fs") || !have("debugfs") {
        println!("SKIP: mke2fs/debugfs missing");
        return;
    }
    let img = image("interleaved", "64M");
    let fs = open(&img);
    let (a, b) = (create(&fs, "a"), create(&fs, "b"));
    let piece = |i: usize, f: u8| vec![f ^ (i as u8); 4096];
    let mut want = (Vec::new(), Vec::new());
    for i in 0..200 {
        fs.write_at(a, (i * 4096) as u64, &piece(i, 0xa0)).unwrap();
        want.0.extend(piece(i, 0xa0));
        fs.write_at(b, (i * 4096) as u64, &piece(i, 0xb0)).unwrap();
        want.1.extend(piece(i, 0xb0));
    }
    // Before the flush: readable, counted in st_blocks, found by SEEK_DATA.
    assert_eq!(read_all(&fs, a, want.0.len()), want.0);
    assert_eq!(fs.getattr(a).unwrap().blocks, 200 * 8);
    assert_eq!(fs.next_data(b, 5000).unwrap(), Some(5000..200 * 4096));
    fs.sync().unwrap();
    assert_eq!(read_all(&fs, b, want.1.len()), want.1);
    assert_eq!(fs.getattr(a).unwrap().blocks, 200 * 8);
    fs.shutdown().unwrap();
    drop(fs);
    fsck_clean(&img);
    assert_eq!(extents(&img, "/a"), 1, "a is fragmented");
    assert_eq!(extents(&img, "/b"), 1, "b is fragmented");
    let _ = std::fs::remove_file(&img);
}

#[test]
fn buffered_data_survives_truncate_unlink_and_holes() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("SKIP: mke2fs/e2fsck missing");
        return;
    }
    let img = image("ops", "32M");
    let fs = open(&img);
    let f = create(&fs, "f");
    fs.write_at(f, 1 << 20, b"far out").unwrap();
    assert_eq!(fs.next_data(f, 0).unwrap(), Some((1 << 20)..(1 << 20) + 7));
    fs.write_at(f, 10, &[7u8; 9000]).unwrap();
    // A truncate flushes the file first, then cuts it.
    let attr = usfs_fs::SetAttr {
        size: Some(5000),
        ..Default::default()
    };
    fs.setattr(f, attr).unwrap();
    let mut want = vec![0u8; 5000];
    want[10..].fill(7);
    assert_eq!(read_all(&fs, f, 5000), want);
    // A buffered file unlinked before any flush leaves nothing behind.
    let g = create(&fs, "g");
    fs.write_at(g, 0, &[1u8; 100_000]).unwrap();
    fs.unlink(fs.root(), b"g").unwrap();
    assert!(resolve(&fs, b"/g", false).is_err());
    fs.shutdown().unwrap();
    drop(fs);
    fsck_clean(&img);
    let _ = std::fs::remove_file(&img);
}

#[test]
fn a_full_disk_fails_the_write_not_the_flush() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("SKIP: mke2fs/e2fsck missing");
        return;
    }
    let img = image("full", "16M");
    let fs = open(&img);
    let f = create(&fs, "big");
    let chunk = vec![0x5au8; 1 << 20];
    let mut written = 0u64;
    let err = loop {
        match fs.write_at(f, written, &chunk) {
            Ok(n) => written += n as u64,
            Err(e) => break e,
        }
        assert!(written < 64 << 20, "a 16M image took {written} bytes");
    };
    assert_eq!(err.errno(), libc::ENOSPC, "{err}");
    fs.sync().unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, written);
    fs.shutdown().unwrap();
    drop(fs);
    fsck_clean(&img);
    let _ = std::fs::remove_file(&img);
}

/// Blocks promised to buffered data are not given to metadata: with the disk full of
/// buffered data, new directories fail with ENOSPC and the flush still places every
/// buffered byte (without the reservation on every allocation the directories took the
/// promised blocks and the flush lost the data).
#[test]
fn metadata_does_not_take_blocks_promised_to_buffered_data() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("SKIP: mke2fs/e2fsck missing");
        return;
    }
    let img = image("promised", "16M");
    let fs = open(&img);
    let f = create(&fs, "big");
    let chunk: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut written = 0u64;
    while fs.write_at(f, written, &chunk).is_ok() {
        written += chunk.len() as u64;
        assert!(written < 64 << 20, "a 16M image took {written} bytes");
    }
    let mut made = 0;
    for i in 0..64 {
        let node = NewNode {
            file_type: FileType::Directory,
            ..regular(0o755)
        };
        match fs.mkdir(fs.root(), format!("d{i}").as_bytes(), node) {
            Ok(_) => made += 1,
            Err(e) => assert_eq!(e.errno(), libc::ENOSPC, "{e}"),
        }
    }
    assert!(
        made < 64,
        "64 directories fit on a disk full of buffered data"
    );
    fs.sync().unwrap();
    fs.shutdown().unwrap();
    drop(fs);
    fsck_clean(&img);
    let fs = open(&img);
    let f = resolve(&fs, b"/big", true).unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, written);
    let data = read_all(&fs, f, written as usize);
    for (i, c) in data.chunks(4096).enumerate() {
        assert_eq!(c, &chunk[..], "block {i} of the file lost its data");
    }
    fs.shutdown().unwrap();
    let _ = std::fs::remove_file(&img);
}

/// A device whose writes fail while `failing` is set (an I/O error under the flush).
struct Flaky {
    inner: Box<dyn usfs_dev::Device>,
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl usfs_dev::Device for Flaky {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        self.inner.flush()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn stats(&self) -> &usfs_dev::IoStats {
        self.inner.stats()
    }
}

/// A flush that fails on an I/O error keeps the data buffered: the next sync writes it
/// (without the restore the failed flush dropped the file's buffered blocks).
#[test]
fn a_failed_flush_keeps_the_buffered_data() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("SKIP: mke2fs/e2fsck missing");
        return;
    }
    let img = image("flaky", "32M");
    let failing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dev = usfs_dev::open(&img, usfs_dev::OpenMode::File, true).unwrap();
    let flaky = Flaky {
        inner: dev,
        failing: failing.clone(),
    };
    let fs = Ext4Rw::open(Box::new(flaky)).unwrap();
    let f = create(&fs, "data");
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    fs.write_at(f, 0, &bytes).unwrap();
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let err = fs.sync().unwrap_err();
    assert_eq!(err.errno(), libc::EIO, "{err}");
    failing.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        read_all(&fs, f, bytes.len()),
        bytes,
        "after the failed flush"
    );
    fs.sync().unwrap();
    fs.shutdown().unwrap();
    drop(fs);
    fsck_clean(&img);
    let fs = open(&img);
    let f = resolve(&fs, b"/data", true).unwrap();
    assert_eq!(read_all(&fs, f, bytes.len()), bytes, "after reopening");
    fs.shutdown().unwrap();
    let _ = std::fs::remove_file(&img);
}

/// Block buffers are reused after a flush: a block of a new file written only in part
/// must read as zeros around the write, never as a flushed file's old bytes; and a file
/// flushed as one large run (written past the host's cache from the block buffers, one
/// writev) reads back whole after the volume is closed.
#[test]
fn reused_block_buffers_hold_no_old_bytes() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("SKIP: mke2fs/e2fsck missing");
        return;
    }
    let img = image("reuse", "64M");
    let fs = open(&img);
    let a = create(&fs, "a");
    let big: Vec<u8> = (0..(4 << 20)).map(|i: u32| (i % 251) as u8 | 1).collect();
    fs.write_at(a, 0, &big).unwrap();
    fs.sync().unwrap();
    let b = create(&fs, "b");
    fs.write_at(b, 100, b"partial").unwrap();
    fs.write_at(b, 8192 + 4000, &[7u8; 200]).unwrap();
    let mut want = vec![0u8; 8192 + 4200];
    want[100..107].copy_from_slice(b"partial");
    want[8192 + 4000..].fill(7);
    assert_eq!(read_all(&fs, b, want.len()), want, "before the flush");
    fs.sync().unwrap();
    assert_eq!(read_all(&fs, b, want.len()), want, "after the flush");
    fs.shutdown().unwrap();
    drop(fs);
    fsck_clean(&img);
    let fs = open(&img);
    let ino = |n: &str| resolve(&fs, n.as_bytes(), true).unwrap();
    assert_eq!(read_all(&fs, ino("/a"), big.len()), big);
    assert_eq!(read_all(&fs, ino("/b"), want.len()), want);
    drop(fs);
    let _ = std::fs::remove_file(&img);
}

/// Buffered data of files nobody holds open is written back once 2 MiB of it waits, with
/// no commit (as the kernel's write-back of dirty pages; the buffers are reused for the
/// next files); a file held open stays buffered until the commit.
#[test]
fn closed_files_are_written_back_without_a_commit() {
    if !have("mke2fs") || !have("e2fsck") {
        println!("SKIP: mke2fs/e2fsck missing");
        return;
    }
    let img = image("writeback", "64M");
    let fs = open(&img);
    let marker = |i: u32| {
        let mut b = vec![0u8; 8192];
        for (k, c) in b.chunks_mut(16).enumerate() {
            c.copy_from_slice(format!("usfs-wb-{i:04}-{k:03}").as_bytes());
        }
        b
    };
    let held = create(&fs, "held");
    fs.open_file(held).unwrap();
    fs.write_at(held, 0, &marker(9999)).unwrap();
    for i in 0..300 {
        let ino = create(&fs, &format!("f{i}"));
        fs.write_at(ino, 0, &marker(i)).unwrap();
    }
    let raw = std::fs::read(&img).unwrap();
    let on_disk = |i: u32| {
        let m = marker(i);
        raw.windows(16).any(|w| w == &m[..16])
    };
    assert!(on_disk(0), "the first closed file was not written back");
    assert!(!on_disk(9999), "a file held open was written back");
    assert!(!on_disk(299), "the last file was written back at once");
    fs.release_file(held).unwrap();
    fs.shutdown().unwrap();
    drop(fs);
    fsck_clean(&img);
    let fs = open(&img);
    for i in [0, 150, 299] {
        let ino = resolve(&fs, format!("/f{i}").as_bytes(), true).unwrap();
        assert_eq!(read_all(&fs, ino, 8192), marker(i));
    }
    let ino = resolve(&fs, b"/held", true).unwrap();
    assert_eq!(read_all(&fs, ino, 8192), marker(9999));
    drop(fs);
    let _ = std::fs::remove_file(&img);
}
