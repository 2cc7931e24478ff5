//! Fuzz the ext4 reader: any bytes as an image; open it and walk everything (bounded,
//! see usfs_fs::exercise).
//! Run: cargo +nightly fuzz run ext4_image -- -max_len=262144
//! Seed it with small real images (see README.md in this directory).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dev = usfs_dev::MemDevice::new(data.to_vec(), false);
    if let Ok(fs) = usfs_ext4::Ext4::open(Box::new(dev)) {
        usfs_fs::exercise(&fs);
    }
});
