//! Fuzz the tar reader (mkfs.erofs --tar's input): any bytes as a tar stream (plain, or
//! gzip/zstd when the bytes start with their magic); parse it, scan the tree and read
//! every file back. Errors are fine; a panic, a hang or an allocation the input's size
//! does not bound is not.
//! Run: cargo +nightly fuzz run tar_source -- -max_len=65536
//! Seed it with small tars from GNU tar (`--format=gnu`, `--format=pax --xattrs`,
//! `--sparse`) and Python's tarfile.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use usfs_source::{Hold, Kind, ScanOptions, Source, TarOptions, TarSource, Tree};

fuzz_target!(|data: &[u8]| {
    let opts = TarOptions {
        aufs: data.len() % 2 == 0,
        ovlfs_strip: data.len() % 3 == 0,
        ..TarOptions::default()
    };
    let Ok(src) = TarSource::from_reader(
        Box::new(std::io::Cursor::new(data.to_vec())),
        Path::new("fuzz"),
        &opts,
    ) else {
        return;
    };
    let tree = Tree::new(ScanOptions {
        block_size: Some(4096),
        hold: Hold::new(0, 0),
        background: false,
    });
    if src.scan(&tree, 1).is_err() {
        return;
    }
    let mut r = src.reader(&tree);
    let mut buf = vec![0u8; 1 << 16];
    for i in 0..tree.len() {
        if let Kind::File(_) = tree.node(i).kind {
            let size = r.size(i).unwrap_or(0);
            // Sparse files may be huge: read their start and end only.
            let _ = r.read_at(i, &mut buf, 0);
            let tail = size.saturating_sub(buf.len() as u64);
            let _ = r.read_at(i, &mut buf, tail);
        }
    }
});
