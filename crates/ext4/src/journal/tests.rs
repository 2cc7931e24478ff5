//! Unit tests of the journal on an in-memory device: the writer's transactions replay to
//! exactly what was committed (features, escaping, revokes, wrap-around), and mutated
//! journals never panic. The oracle tests (debugfs, e2fsck, the kernel) are in
//! crates/cli/tests/journal.rs.

use super::*;
use usfs_dev::MemDevice;

const BS: u32 = 1024;
const JSTART: u64 = 64;
const JLEN: u32 = 1100;

/// A device of 2048 1K blocks with a journal of `JLEN` blocks at block `JSTART`.
fn device(compat: u32, incompat: u32) -> (MemDevice, JournalMap) {
    let dev = MemDevice::new(vec![0u8; 2048 * BS as usize], true);
    let mut map = JournalMap::new();
    map.push(JSTART, 500);
    map.push(JSTART + 600, JLEN - 500);
    let mut raw = vec![0u8; BS as usize];
    let mut sb = JournalSuperblock::new(&mut raw[..]).unwrap();
    sb.set_h_magic(JBD2_MAGIC);
    sb.set_h_blocktype(blocktype::SUPERBLOCK_V2);
    sb.set_s_blocksize(BS);
    sb.set_s_maxlen(JLEN);
    sb.set_s_first(1);
    sb.set_s_sequence(7);
    sb.set_s_feature_compat(compat);
    sb.set_s_feature_incompat(incompat);
    sb.set_s_uuid(&[0x42; 16]);
    sb.set_s_nr_users(1);
    if incompat & (feature::CSUM_V2 | feature::CSUM_V3) != 0 {
        sb.set_s_checksum_type(superblock::CHECKSUM_CRC32C);
    }
    sb.update_checksum();
    dev.write_at(&raw, JSTART * BS as u64).unwrap();
    (dev, map)
}

fn block(seed: u8) -> Vec<u8> {
    (0..BS as usize)
        .map(|i| (i as u8).wrapping_mul(seed))
        .collect()
}

fn replayed(dev: &MemDevice, map: &JournalMap) -> (ReplayPlan, Vec<(u64, Vec<u8>)>) {
    let plan = plan_replay(dev, map, BS).unwrap();
    let blocks = plan
        .blocks
        .keys()
        .map(|&b| (b, plan.read_block(dev, map, b).unwrap().unwrap()))
        .collect();
    (plan, blocks)
}

#[test]
fn writer_transactions_replay_exactly() {
    let flavours = [
        (0, 0),
        (feature::COMPAT_CHECKSUM, 0),
        (0, feature::BIT64 | feature::CSUM_V2),
        (0, feature::CSUM_V3),
        (0, feature::BIT64 | feature::CSUM_V3 | feature::ASYNC_COMMIT),
    ];
    for (compat, incompat) in flavours {
        let (dev, map) = device(compat, incompat);
        let mut w = JournalWriter::open(&dev, map.clone(), BS).unwrap();
        let mut escaped = block(3);
        escaped[..4].copy_from_slice(&JBD2_MAGIC.to_be_bytes());
        let many: Vec<Vec<u8>> = (0..150).map(|i| block(i as u8 + 5)).collect();
        let mut t1: Vec<(u64, &[u8])> = vec![(1500, &escaped[..]), (1501, &many[0][..])];
        t1.extend(
            many.iter()
                .enumerate()
                .map(|(i, d)| (1600 + i as u64, &d[..])),
        );
        assert_eq!(w.commit(&dev, &t1, &[]).unwrap(), 7);
        let b2 = block(9);
        assert_eq!(
            w.commit(&dev, &[(1501, &b2[..])], &[1600, 1601]).unwrap(),
            8
        );
        let (plan, got) = replayed(&dev, &map);
        assert_eq!((plan.first_tid, plan.end_tid, plan.transactions), (7, 9, 2));
        assert_eq!(plan.next_sequence, 10);
        assert!(plan.error.is_none(), "{:?}", plan.error);
        let get = |b: u64| got.iter().find(|(x, _)| *x == b).map(|(_, d)| d.clone());
        assert_eq!(get(1500).unwrap(), escaped, "escaped block restored");
        assert_eq!(get(1501).unwrap(), b2, "the later transaction wins");
        assert!(get(1600).is_none() && get(1601).is_none(), "revoked");
        assert_eq!(get(1602).unwrap(), many[2]);
        assert_eq!(got.len(), 2 + 150 - 2);
        w.checkpointed(&dev).unwrap();
        let plan = plan_replay(&dev, &map, BS).unwrap();
        assert!(plan.blocks.is_empty() && plan.next_sequence == 10);
    }
}

#[test]
fn wrap_around_and_capacity() {
    let (dev, map) = device(0, feature::CSUM_V3);
    let mut w = JournalWriter::open(&dev, map.clone(), BS).unwrap();
    let cap = w.capacity();
    assert!(cap > 1000 && cap < JLEN as usize);
    let data: Vec<Vec<u8>> = (0..cap + 1).map(|i| block(i as u8)).collect();
    let too_many: Vec<(u64, &[u8])> = data
        .iter()
        .enumerate()
        .map(|(i, d)| (i as u64, &d[..]))
        .collect();
    assert!(w.commit(&dev, &too_many, &[]).is_err());
    w.set_head_for_test(JLEN - 3);
    let t: Vec<(u64, &[u8])> = too_many[..10].to_vec();
    w.commit(&dev, &t, &[]).unwrap();
    let (plan, got) = replayed(&dev, &map);
    assert_eq!(plan.info.start, JLEN - 3);
    assert_eq!(got.len(), 10);
    for (b, d) in got {
        assert_eq!(d, data[b as usize]);
    }
}

#[test]
fn torn_transactions_are_not_replayed() {
    let (dev, map) = device(0, feature::CSUM_V3);
    let mut w = JournalWriter::open(&dev, map.clone(), BS).unwrap();
    let (a, b) = (block(1), block(2));
    w.commit(&dev, &[(1500, &a[..])], &[]).unwrap();
    w.commit(&dev, &[(1501, &b[..])], &[]).unwrap();
    // Corrupt the second commit block (log block 5: desc 1, data 2, commit 3, desc 4,
    // data 5, commit 6).
    let off = map.fs_block(6).unwrap() * BS as u64 + 100;
    dev.write_at(&[0xFF], off).unwrap();
    let plan = plan_replay(&dev, &map, BS).unwrap();
    assert_eq!(plan.blocks.keys().copied().collect::<Vec<_>>(), vec![1500]);
    assert_eq!(plan.failed_commit, Some(8));
    assert_eq!(plan.end_tid, 8);
}

#[test]
fn mutated_journals_never_panic() {
    let (dev, map) = device(0, feature::BIT64 | feature::CSUM_V2);
    let mut w = JournalWriter::open(&dev, map.clone(), BS).unwrap();
    let d: Vec<Vec<u8>> = (0..40).map(|i| block(i as u8)).collect();
    for k in 0..3 {
        let t: Vec<(u64, &[u8])> = d
            .iter()
            .enumerate()
            .map(|(i, x)| (k * 50 + i as u64, &x[..]))
            .collect();
        w.commit(&dev, &t, &[k * 50 + 1]).unwrap();
    }
    let pristine = dev.into_inner();
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let jbytes = (JSTART * BS as u64) as usize..((JSTART + 140) * BS as u64) as usize;
    for _ in 0..400 {
        let img = pristine.clone();
        let m = MemDevice::new(img, true);
        for _ in 0..(next() % 8 + 1) {
            let off = jbytes.start + (next() as usize % jbytes.len());
            let mut byte = [0u8];
            m.read_at(&mut byte, off as u64).unwrap();
            let v = match next() % 3 {
                0 => byte[0] ^ (1 << (next() % 8)),
                1 => 0xFF,
                _ => next() as u8,
            };
            m.write_at(&[v], off as u64).unwrap();
        }
        if let Ok(plan) = plan_replay(&m, &map, BS) {
            assert!(plan.blocks.len() <= 120);
            for &b in plan.blocks.keys() {
                let _ = plan.read_block(&m, &map, b);
            }
        }
    }
}

#[test]
fn version_1_superblock_has_no_features() {
    // A v1 superblock's feature words are ignored (e2fsck clears them): 8-byte tags.
    let (dev, map) = device(0, feature::CSUM_V3);
    let mut raw = vec![0u8; BS as usize];
    dev.read_at(&mut raw, JSTART * BS as u64).unwrap();
    JournalSuperblock::new(&mut raw[..])
        .unwrap()
        .set_h_blocktype(blocktype::SUPERBLOCK_V1);
    dev.write_at(&raw, JSTART * BS as u64).unwrap();
    let mut w = JournalWriter::open(&dev, map.clone(), BS).unwrap();
    assert_eq!((w.info().version, w.info().tag_bytes()), (1, 8));
    let d = block(7);
    w.commit(&dev, &[(1700, &d[..])], &[]).unwrap();
    let (plan, got) = replayed(&dev, &map);
    assert_eq!(plan.transactions, 1);
    assert_eq!(got, vec![(1700, d)]);
}

#[test]
fn unusable_superblocks_are_refused_by_name() {
    let (dev, map) = device(0, 0x40);
    let e = plan_replay(&dev, &map, BS).unwrap_err().to_string();
    assert!(e.contains("FEATURE_I6"), "{e}");
    let (dev, map) = device(0, feature::CSUM_V3);
    dev.write_at(&[1], JSTART * BS as u64 + 0x30).unwrap();
    let e = plan_replay(&dev, &map, BS).unwrap_err().to_string();
    assert!(e.contains("checksum"), "{e}");
    let (dev, map) = device(0, 0);
    assert!(
        plan_replay(&dev, &map, 4096).is_err(),
        "block size mismatch"
    );
}

#[test]
fn a_full_log_asks_for_a_checkpoint() {
    let (dev, map) = device(0, feature::CSUM_V2);
    let mut w = JournalWriter::open(&dev, map.clone(), BS).unwrap();
    let data: Vec<Vec<u8>> = (0..300).map(|i| block(i as u8)).collect();
    let t: Vec<(u64, &[u8])> = data
        .iter()
        .enumerate()
        .map(|(i, d)| (i as u64, &d[..]))
        .collect();
    let mut full = None;
    for _ in 0..5 {
        if let Err(e) = w.commit(&dev, &t, &[]) {
            full = Some(e);
            break;
        }
    }
    match full {
        Some(usfs_fs::Error::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::StorageFull),
        other => panic!("expected a full log, got {other:?}"),
    }
    // Three transactions of 302 blocks are in the log and replay.
    let plan = plan_replay(&dev, &map, BS).unwrap();
    assert_eq!(plan.transactions, 3);
    w.checkpointed(&dev).unwrap();
    let tid = w.commit(&dev, &t, &[]).unwrap();
    assert_eq!(tid, 7 + 3);
    let plan = plan_replay(&dev, &map, BS).unwrap();
    assert_eq!((plan.first_tid, plan.transactions), (10, 1));
}
