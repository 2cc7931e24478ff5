//! Fuzz the EROFS checker: any bytes as an image; `usfs_erofs::check::check` must return
//! a report or an I/O error, never panic, hang or allocate without bound.
//! Run: cargo +nightly fuzz run erofs_fsck -- -max_len=262144
//! Seed it as erofs_image (small images from `usfs mkfs.erofs` and mkfs.erofs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dev = usfs_dev::MemDevice::new(data.to_vec(), false);
    if let Ok(report) = usfs_erofs::check::check(Box::new(dev)) {
        // Render every problem, as `usfs fsck` does.
        for p in &report.problems {
            let _ = p.to_string();
        }
    }
});
