//! `usfs mount` over FUSE's io_uring transport (fuse's enable_uring parameter, switched on
//! for this test and put back after): the read-write checks of rw_fuse.rs (the workload
//! against the kernel, the exerciser against its model) and a read-only mount of the
//! result against the kernel's view. Each check also proves the io_uring queue threads
//! served requests (they were woken for thousands), so a silent fall-back to /dev/fuse
//! fails the test.
//! One test function: the parameter is global, the checks run in turn.

mod common;

use common::fuse_rw::*;
use common::*;
use std::path::Path;
use usfs_testkit::{compare, CmpOptions};

const PARAM: &str = "/sys/module/fuse/parameters/enable_uring";
/// Fewer wake-ups than this: the rings did not carry the check's requests (each check
/// makes thousands).
const MIN_WAKEUPS: u64 = 200;

/// Switches enable_uring on; the old value is written back on drop (also when a check
/// fails).
struct UringOn(String);

impl UringOn {
    fn new() -> Option<UringOn> {
        let old = std::fs::read_to_string(PARAM).ok()?;
        std::fs::write(PARAM, "Y").ok()?;
        Some(UringOn(old.trim().to_string()))
    }
}

impl Drop for UringOn {
    fn drop(&mut self) {
        let _ = std::fs::write(PARAM, &self.0);
    }
}

/// How often the io_uring queue threads of the usfs server of `img` were woken
/// (voluntary context switches: one or more per request served; a few for setting up).
fn ring_wakeups(img: &Path) -> u64 {
    let img = img.to_string_lossy().into_owned();
    let mut n = 0;
    for p in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmd = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if !cmd.contains(" mount ") || !cmd.contains(&img) {
            continue;
        }
        for t in std::fs::read_dir(p.path().join("task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if !comm.starts_with("usfs-uring-") {
                continue;
            }
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            n += status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    n
}

fn served_by_rings(what: &str) -> impl Fn(&Path) + '_ {
    move |img: &Path| {
        let n = ring_wakeups(img);
        assert!(
            n > MIN_WAKEUPS,
            "{what}: the io_uring queue threads were woken {n} times: they served nothing (fell back to /dev/fuse?)"
        );
        eprintln!("{what}: io_uring queue threads woken {n} times");
    }
}

/// A read-only `usfs mount -o OPTS` of `img` equals the kernel's read-only view.
fn read_only_matches_the_kernel(img: &Path, opts: &str) {
    let s = Scratch::new("rw-fuse-uring-ro");
    let m = UsfsMount::new(img, &s.path("u"), opts);
    let u = m.0.clone();
    let k = Mount::new(img, &s.path("k"), "ext4", "ro");
    let cmp = CmpOptions {
        atime: false,
        system_xattrs: true,
        ..Default::default()
    };
    // Every file opened and read, every directory listed: a thousand requests or more.
    sh(&format!(
        "find '{}' -type f -exec cat {{}} + >/dev/null && ls -lR '{}' >/dev/null",
        u.display(),
        u.display()
    ));
    let woken = ring_wakeups(img);
    let r = compare(&u, &k.dir, &cmp);
    drop(m);
    if let Err(d) = r {
        panic!("usfs mount -o {opts} over io_uring and the kernel differ: {d}");
    }
    assert!(
        woken > MIN_WAKEUPS,
        "read-only mount -o {opts}: the io_uring queue threads were woken {woken} times: they served nothing"
    );
}

#[test]
fn fuse_over_io_uring_matches_the_kernel_and_the_model() {
    if !ready("fuse_rw io_uring") {
        return;
    }
    if !Path::new(PARAM).exists() {
        eprintln!("SKIP fuse_rw io_uring: this kernel has no FUSE over io_uring ({PARAM})");
        return;
    }
    let Some(_on) = UringOn::new() else {
        eprintln!("SKIP fuse_rw io_uring: cannot switch {PARAM} on");
        return;
    };
    check_layout_with(
        "uring",
        &["-t", "ext4", "-b", "4096"],
        "rw",
        &served_by_rings("uring workload"),
    );
    exercise_with(
        "uring-direct",
        &["-t", "ext4"],
        "rw,direct_io",
        &served_by_rings("uring exerciser"),
    );
    let s = Scratch::new("rw-fuse-uring-src");
    let img = s.path("ro.img");
    let tree = s.path("tree");
    sh(&format!(
        "mkdir -p '{t}/d/e' && head -c 3000000 /dev/urandom > '{t}/big' && echo hi > '{t}/d/f' && ln -s d/f '{t}/l' && python3 -c \"import os; os.setxattr('{t}/d/f', 'user.k', b'v')\" && for i in $(seq 1 500); do echo $i > \"{t}/d/e/n$i\"; done",
        t = tree.display()
    ));
    mke2fs(&img, "64M", &["-t", "ext4"], Some(&tree));
    read_only_matches_the_kernel(&img, "ro");
    read_only_matches_the_kernel(&img, "ro,direct_io");
}
