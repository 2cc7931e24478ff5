//! Fuzz jbd2 replay: any bytes as a journal of 1 KiB blocks (journal block i at device
//! block i); plan the replay and read every planned block (bounded, never panics).
//! Run: cargo +nightly fuzz run ext4_journal -- -max_len=65536
//! Seed it with journals debugfs writes (`jo -c`, `jw`, `jc`; see README.md).
#![no_main]

use libfuzzer_sys::fuzz_target;
use usfs_ext4::journal::{plan_replay, JournalMap};

fuzz_target!(|data: &[u8]| {
    let blocks = (data.len() / 1024) as u32;
    let dev = usfs_dev::MemDevice::new(data.to_vec(), false);
    let mut map = JournalMap::new();
    map.push(0, blocks);
    if let Ok(plan) = plan_replay(&dev, &map, 1024) {
        for &b in plan.blocks.keys() {
            let _ = plan.read_block(&dev, &map, b);
        }
    }
});
