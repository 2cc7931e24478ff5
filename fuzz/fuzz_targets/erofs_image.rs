//! Fuzz the EROFS reader: any bytes as an image; open it and walk everything (bounded,
//! see usfs_fs::exercise), reading files (compressed ones through the decompressor).
//! Run: cargo +nightly fuzz run erofs_image -- -max_len=262144
//! Seed it with small images from `usfs mkfs.erofs` and mkfs.erofs (-zlz4, -zlz4hc,
//! -zlzma, -zdeflate, -zzstd, -Eztailpacking, -C16384, -Efragments).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dev = usfs_dev::MemDevice::new(data.to_vec(), false);
    if let Ok(fs) = usfs_erofs::Erofs::open(Box::new(dev)) {
        usfs_fs::exercise(&fs);
    }
});
