//! Fuzz the checker: any bytes as an image; `usfs fsck -n` must give a verdict (a report
//! or a clean error), never panic, on one and on two threads.
//! Run: cargo +nightly fuzz run ext4_fsck -- -max_len=524288 -detect_leaks=0
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for threads in [1, 2] {
        let dev = usfs_dev::MemDevice::new(data.to_vec(), false);
        let opts = usfs_fsck::Options { threads, ..Default::default() };
        if let Ok(r) = usfs_fsck::check(Box::new(dev), &opts) {
            let _ = r.summary.line("fuzz");
            for p in &r.problems {
                let _ = p.message();
            }
        }
    }
});
