//! The recorder logs what the device saw, and the states rebuilt from the log are the
//! images the device held (flush points) or lie between them as the crash model says.

use super::*;
use crate::MemDevice;

const LEN: usize = 8192;

fn base() -> Vec<u8> {
    (0..LEN as u32).map(|i| (i * 13 % 251) as u8).collect()
}

fn contents(dev: &dyn Device) -> Vec<u8> {
    let mut v = vec![0u8; dev.len() as usize];
    dev.read_at(&mut v, 0).unwrap();
    v
}

/// Records a workload of three epochs and an unflushed tail; returns the recorder and
/// the device contents at each flush and at the end.
fn workload(store: Store) -> (Arc<Recorder>, Vec<Vec<u8>>) {
    let rec = Arc::new(Recorder::with_store(
        Box::new(MemDevice::new(base(), true)),
        store,
    ));
    // The file system owns one handle as a plain device.
    let dev: Box<dyn Device> = Box::new(rec.clone());
    let mut snaps = Vec::new();
    let steps: &[&[(u64, &[u8])]] = &[
        &[(0, &[1; 700]), (1000, &[2; 100])],
        &[(600, &[3; 1000]), (600, &[4; 10]), (4000, &[5; 1536])],
        &[(100, &[6; 5])],
        &[(3000, &[7; 2048]), (3100, &[8; 3])],
    ];
    for (k, step) in steps.iter().enumerate() {
        for (off, data) in step.iter() {
            dev.write_at(data, *off).unwrap();
        }
        if k < 3 {
            dev.flush().unwrap();
        }
        snaps.push(contents(&*dev));
    }
    (rec, snaps)
}

fn rebuild(log: &Log, s: &CrashState) -> Vec<u8> {
    let dev = MemDevice::new(base(), true);
    log.apply(s, &dev).unwrap();
    dev.into_inner()
}

#[test]
fn logs_writes_and_flushes_in_order() {
    let (rec, snaps) = workload(Store::memory(1 << 20));
    let log = rec.log();
    assert_eq!((log.writes(), log.flushes()), (8, 3));
    assert_eq!(
        log.epochs(),
        vec![vec![0, 1], vec![3, 4, 5], vec![7], vec![9, 10]]
    );
    assert_eq!(log.events()[2], Event::Flush);
    assert_eq!(log.data(4).unwrap(), vec![4; 10]);
    assert!(log.data(2).is_err());
    assert_eq!(
        log.payload_bytes(),
        700 + 100 + 1000 + 10 + 1536 + 5 + 2048 + 3
    );
    assert_eq!(contents(&*rec), snaps[3]);
    assert_eq!(rec.stats().snapshot().writes, 8);
}

#[test]
fn flush_points_rebuild_the_images_the_device_held() {
    for store in [
        Store::memory(1 << 20),
        Store::spill(&std::env::temp_dir()).unwrap(),
    ] {
        let (rec, snaps) = workload(store);
        let log = rec.log();
        let plan = CrashPlan {
            prefixes: false,
            ..CrashPlan::default()
        };
        let states = log.states(&plan).unwrap();
        // Flush points 0..=4 (4: everything, including the unflushed tail).
        assert_eq!(states.len(), 5);
        assert_eq!(rebuild(&log, &states[0]), base());
        let beyond = log.epochs_state(5);
        assert!(log.apply(&beyond, &MemDevice::new(base(), true)).is_err());
        for k in 1..5 {
            assert_eq!(states[k].kind, StateKind::Epochs);
            assert_eq!(rebuild(&log, &states[k]), snaps[k - 1], "flush point {k}");
        }
    }
}

#[test]
fn prefixes_lie_between_flush_points() {
    let (rec, _) = workload(Store::memory(1 << 20));
    let log = rec.log();
    let states = log.states(&CrashPlan::default()).unwrap();
    let prefixes: Vec<_> = states
        .iter()
        .filter_map(|s| match s.kind {
            StateKind::Prefix { n } => Some((s.epoch, n)),
            _ => None,
        })
        .collect();
    assert_eq!(prefixes, vec![(0, 1), (1, 1), (1, 2), (3, 1)]);
    // Epoch 1 with its first two writes: the 10-byte write landed over the 1000-byte one,
    // the 1536-byte write did not.
    let s = states
        .iter()
        .find(|s| s.kind == StateKind::Prefix { n: 2 })
        .unwrap();
    let img = rebuild(&log, s);
    assert_eq!(&img[600..610], &[4; 10]);
    assert_eq!(&img[610..1600], &[3; 990][..]);
    assert_eq!(&img[4000..4010], &base()[4000..4010]);
    assert!(s.to_string().contains("first 2 writes of epoch 1"), "{s}");
}

#[test]
fn subsets_are_seeded_and_tears_are_sector_pieces() {
    let (rec, _) = workload(Store::memory(1 << 20));
    let log = rec.log();
    let plan = CrashPlan {
        flush_points: false,
        prefixes: false,
        subsets: 40,
        seed: 9,
        tear: true,
        epochs: InEpochs::Only(vec![1]),
        ..CrashPlan::default()
    };
    let a = log.states(&plan).unwrap();
    assert_eq!(a, log.states(&plan).unwrap());
    assert_eq!(a.len(), 40);
    let other = log
        .states(&CrashPlan {
            seed: 10,
            ..plan.clone()
        })
        .unwrap();
    assert_ne!(a, other);
    let mut torn = 0;
    for s in &a {
        let StateKind::Subset { torn: t, .. } = s.kind else {
            panic!("{s}")
        };
        torn += t;
        for p in &s.pieces {
            assert!([3, 4, 5].contains(&p.event), "{s}");
            let Event::Write { offset, len, .. } = log.events()[p.event] else {
                panic!()
            };
            let whole = p.range == (0..len);
            // A torn piece starts and ends on a device sector boundary (or the write's end).
            if !whole {
                assert!(
                    (offset + p.range.start) % SECTOR == 0 || p.range.start == 0,
                    "{s}"
                );
                assert!(
                    (offset + p.range.end) % SECTOR == 0 || p.range.end == len,
                    "{s}"
                );
            }
        }
        rebuild(&log, s);
    }
    assert!(torn > 0, "40 subsets with tearing on tore nothing");
    // Some subset drops a write and some applies the two overlapping writes out of order.
    assert!(a
        .iter()
        .any(|s| matches!(s.kind, StateKind::Subset { chosen, .. } if chosen < 3)));
    assert!(a.iter().any(|s| {
        let order: Vec<_> = s
            .pieces
            .iter()
            .map(|p| p.event)
            .filter(|&e| e != 5)
            .collect();
        order.first() == Some(&4) && order.contains(&3)
    }));
}

#[test]
fn all_but_one_leaves_out_each_write_once() {
    let (rec, _) = workload(Store::memory(1 << 20));
    let log = rec.log();
    let plan = CrashPlan {
        flush_points: false,
        prefixes: false,
        all_but_one: true,
        epochs: InEpochs::Last,
        ..CrashPlan::default()
    };
    let states = log.states(&plan).unwrap();
    assert_eq!(states.len(), 2);
    assert_eq!(states[0].kind, StateKind::AllBut { dropped: 9 });
    let img = rebuild(&log, &states[0]);
    assert_eq!(&img[3100..3103], &[8; 3]);
    assert_eq!(&img[3000..3100], &base()[3000..3100]);
    assert_eq!(&rebuild(&log, &states[1])[3100..3103], &[7; 3]);
}

#[test]
fn a_saved_log_loads_the_same_and_damage_is_an_error() {
    let (rec, snaps) = workload(Store::memory(1 << 20));
    let log = rec.log();
    let path = std::env::temp_dir().join(format!("usfs-record-test-{}.log", std::process::id()));
    log.save(&path).unwrap();
    let back = Log::load(&path, Store::memory(1 << 20)).unwrap();
    assert_eq!(back.events(), log.events());
    let last = back.epochs_state(back.epochs().len());
    assert_eq!(rebuild(&back, &last), snaps[3]);
    let bytes = std::fs::read(&path).unwrap();
    for cut in [5, 13, 30, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        assert!(
            Log::load(&path, Store::memory(1 << 20)).is_err(),
            "cut at {cut}"
        );
    }
    let mut huge = bytes.clone();
    huge[13 + 8..13 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&path, &huge).unwrap();
    let e = Log::load(&path, Store::memory(1 << 20)).err().unwrap();
    assert!(e.to_string().contains("left in the file"), "{e}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn memory_limit_fails_the_write() {
    let rec = Recorder::with_store(Box::new(MemDevice::new(base(), true)), Store::memory(1000));
    rec.write_at(&[1; 600], 0).unwrap();
    let e = rec.write_at(&[1; 600], 0).unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
}

#[test]
fn failed_writes_are_not_logged() {
    let rec = Recorder::new(Box::new(MemDevice::new(base(), false)));
    rec.write_at(&[1; 4], 0).unwrap_err();
    rec.flush().unwrap();
    assert_eq!(rec.log().events(), &[Event::Flush]);
}
