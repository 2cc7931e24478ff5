//! Read-pattern probe for bench/erofs.sh: reads one file of an EROFS image through the
//! usfs reader (pread device) and prints bytes requested, bytes read from the image (the
//! device's I/O counters), and the peak RSS above the idle RSS.
//! Usage: erofs_read IMAGE PATH seq|random|strided

use std::path::Path;
use usfs_fs::FileSystem;

fn vm_hwm_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 4 {
        eprintln!("usage: erofs_read IMAGE PATH seq|random|strided");
        std::process::exit(2);
    }
    let dev =
        usfs_dev::open(Path::new(&a[1]), usfs_dev::OpenMode::File, false).expect("open image");
    let fs = usfs_erofs::Erofs::open(dev).expect("erofs");
    let ino = usfs_fs::path::resolve(&fs, a[2].as_bytes(), true).expect("path");
    let size = fs.getattr(ino).expect("stat").size;
    let idle = vm_hwm_kib();
    let before = fs.io_stats();
    let mut buf = vec![0u8; 128 << 10];
    let mut requested = 0u64;
    match a[3].as_str() {
        "seq" => {
            let mut off = 0;
            while off < size {
                let n = fs.read_at(ino, off, &mut buf).expect("read");
                requested += n as u64;
                off += n as u64;
            }
        }
        "random" => {
            // 4 KiB reads at pseudo-random 4 KiB-aligned offsets covering 1/8 of the file.
            let mut x = 0x9e37_79b9_7f4a_7c15_u64;
            for _ in 0..(size / 4096 / 8).max(1) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let off = (x % size.div_ceil(4096)) * 4096;
                requested += fs.read_at(ino, off, &mut buf[..4096]).expect("read") as u64;
            }
        }
        "strided" => {
            let mut off = 0;
            while off < size {
                requested += fs.read_at(ino, off, &mut buf[..4096]).expect("read") as u64;
                off += 128 << 10;
            }
        }
        p => panic!("unknown pattern {p}"),
    }
    let io = fs.io_stats().since(&before);
    println!(
        "requested {requested} read {} amplification {:.3} peak_rss_above_idle_kib {}",
        io.bytes_read,
        io.bytes_read as f64 / requested.max(1) as f64,
        vm_hwm_kib().saturating_sub(idle)
    );
}
