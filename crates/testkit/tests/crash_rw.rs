//! Crash consistency of usfs's read-write ext4 volume, a bounded sample (the full sweep
//! is `bench/crash-rw.sh`): B3-style workloads of one to three operations on a small
//! tree, each crash state of each recorded run recovered by usfs, by e2fsck and (every
//! so often, as root) by a kernel mount, and judged against the workload's model
//! (`usfs_testkit::crash::rw`).

use usfs_testkit::crash::check::have_e2fsprogs;
use usfs_testkit::crash::rw::{judge, Recorded, Seen};
use usfs_testkit::crash::sweep::{sweep, SweepOptions};
use usfs_testkit::crash::workload::{self, Model, Op, Persist, Step};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn opts() -> SweepOptions {
    SweepOptions {
        block_sizes: vec![1024, 4096],
        per_epoch: 2,
        kernel_every: if is_root() { 40 } else { 0 },
        threads: 2,
        keep_failures: 6,
    }
}

#[test]
fn one_operation_workloads_recover_to_a_durable_state() {
    if !have_e2fsprogs() {
        println!("SKIP: e2fsck/debugfs not found");
        return;
    }
    if !is_root() {
        println!("SKIP (kernel mounts only): not root");
    }
    // Every 7th of B3's seq-1 workloads (all kinds of operation and persistence calls
    // appear), on 1K and 4K blocks.
    let all = workload::seq1();
    let some: Vec<_> = all.iter().step_by(7).cloned().collect();
    let report = sweep(&some, &opts()).unwrap();
    println!("seq-1 sample: {report}");
    assert_eq!(report.failed, 0, "{report}");
    assert!(report.states > 300, "{report}");
}

#[test]
fn two_and_three_operation_workloads_recover_to_a_durable_state() {
    if !have_e2fsprogs() {
        println!("SKIP: e2fsck/debugfs not found");
        return;
    }
    let mut w = workload::random(11, 12, 2);
    w.extend(workload::random(12, 12, 3));
    // Found by the full sweep: a write past a shrunk end zeroed the bytes it was about
    // to write in a separate device write, so a crash between showed zeros no step had
    // written there.
    let p = |s: &str| s.as_bytes().to_vec();
    w.push(vec![
        Step {
            op: Op::Truncate {
                path: p("/bar"),
                size: 100,
            },
            persist: Persist::None,
        },
        Step {
            op: Op::Write {
                path: p("/bar"),
                off: 2000,
                len: 100,
            },
            persist: Persist::Fdatasync(p("/bar")),
        },
    ]);
    let report = sweep(&w, &opts()).unwrap();
    println!("seq-2/3 sample: {report}");
    assert_eq!(report.failed, 0, "{report}");
}

/// The judge rejects what it must: a tree missing a durable step, a byte never written,
/// a split hard link.
#[test]
fn the_judge_rejects_lost_and_wrong_data() {
    let steps = [Step {
        op: Op::Append {
            path: b"/bar".to_vec(),
            len: 5000,
        },
        persist: Persist::Sync,
    }];
    let mut after = Model::base();
    after.apply(1, &steps[0].op);
    let rec = Recorded {
        log: usfs_dev::Recorder::new(Box::new(usfs_dev::MemDevice::new(vec![0; 4096], true))).log(),
        snaps: vec![Model::base(), after.clone()],
        durable: vec![Some(1)],
    };
    let tree_of = |m: &Model| {
        let mut t = usfs_testkit::crash::rw::Tree::new();
        for (i, (p, n)) in m.paths.iter().enumerate() {
            let seen = match n {
                workload::Node::Dir => Seen::Dir,
                workload::Node::File(id) => Seen::File(m.files[*id].clone()),
                workload::Node::Symlink(t) => Seen::Symlink(t.clone()),
            };
            t.insert(p.clone(), (100 + i as u64, seen));
        }
        t
    };
    assert_eq!(judge(&tree_of(&after), &rec, 1), Ok(1));
    assert_eq!(judge(&tree_of(&Model::base()), &rec, 0), Ok(0));
    assert!(
        judge(&tree_of(&Model::base()), &rec, 1).is_err(),
        "lost a sync'd append"
    );
    let mut wrong = tree_of(&after);
    if let Some((_, Seen::File(f))) = wrong.get_mut(&b"/bar"[..]) {
        f.data[4000] ^= 0x55;
    }
    assert!(judge(&wrong, &rec, 1).is_err(), "a byte never written");
}
