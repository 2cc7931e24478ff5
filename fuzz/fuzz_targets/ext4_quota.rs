//! Fuzz the quota-file reader: any bytes as a quota file of each type (user, group,
//! project); reading returns entries or a clean error, and entries read from a file
//! built of them read back the same (bounded, never panics).
//! Run: cargo +nightly fuzz run ext4_quota -- -max_len=65536
//! Seed it with quota files mke2fs writes (`debugfs -R 'dump <3> seed' IMAGE`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use usfs_ext4::format::quota::{build, read, QT_BLOCK};

fuzz_target!(|data: &[u8]| {
    let mut block = |n: u32, buf: &mut [u8]| {
        let at = n as usize * QT_BLOCK;
        let src = data.get(at..at + QT_BLOCK).ok_or("past the end")?;
        buf.copy_from_slice(src);
        Ok(())
    };
    for t in 0..3 {
        if let Ok(f) = read(t, data.len() as u64, &mut block) {
            let mut ids: Vec<_> = f.dquots.clone();
            ids.sort_by_key(|q| q.id);
            ids.dedup_by_key(|q| q.id);
            let again = build(t, f.bgrace, f.igrace, &ids);
            let mut b2 = |n: u32, buf: &mut [u8]| {
                let at = n as usize * QT_BLOCK;
                buf.copy_from_slice(&again[at..at + QT_BLOCK]);
                Ok(())
            };
            let back = read(t, again.len() as u64, &mut b2).expect("a built file reads");
            assert_eq!(back.dquots, ids);
        }
    }
});
