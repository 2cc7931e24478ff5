//! What the kill -9 tests share (rw_kill.rs: `usfs mount -o rw`; run_rw_kill.rs:
//! `usfs run --rw`): a writer that logs each file once it is durable, and the checks
//! after recovery by e2fsck, by usfs and by the kernel.

use super::*;
use std::path::Path;
use std::process::Command;

/// A writer in the mount: files `f<i>` of 50-250 KB, each written in pieces, fsync'd
/// (unless its third argument is `nofsync`),
/// then its name printed to the host file `DONE` (so a name there was durable), with an
/// unsynced overwrite of an older file, a rename and an unlink between; all along it holds
/// an unlinked file open and appends to it (an orphan the recovery must free). Runs until
/// the mount dies.
pub(crate) const WRITER: &str = r#"
import os, sys
root, done = sys.argv[1], sys.argv[2]
# 'nofsync': every call is durable when it returns (usfs run --mode sync), so a file is
# logged once written and closed, without fsync.
nofsync = sys.argv[3:] == ['nofsync']
log = open(done, 'a', buffering=1)
held = os.open(os.path.join(root, 'held'), os.O_CREAT | os.O_RDWR, 0o644)
os.write(held, b'h' * 200000)
os.fsync(held)
os.unlink(os.path.join(root, 'held'))
i = 0
try:
    while True:
        os.write(held, b'o' * 5000)
        n = 50000 + (i * 7919) % 200000
        data = bytes(((i * 131 + k * 7) % 251) + 1 for k in range(4096))
        p = os.path.join(root, 'f%d' % i)
        with open(p, 'wb') as f:
            left = n
            while left:
                chunk = data[:min(left, 4096)]
                f.write(chunk)
                left -= len(chunk)
            f.flush()
            if not nofsync:
                os.fsync(f.fileno())
        log.write('f%d %d\n' % (i, n))
        if i >= 3:
            with open(os.path.join(root, 'scratch%d' % (i % 5)), 'wb') as g:
                g.write(b'x' * 30000)
            os.rename(os.path.join(root, 'scratch%d' % (i % 5)), os.path.join(root, 'tmp'))
            if i % 4 == 0:
                os.unlink(os.path.join(root, 'tmp'))
        i += 1
except OSError:
    pass
"#;

/// The bytes `WRITER` puts in file `i` of `n` bytes.
pub(crate) fn expected(i: u64, n: usize) -> Vec<u8> {
    let block: Vec<u8> = (0..4096u64)
        .map(|k| (((i * 131 + k * 7) % 251) + 1) as u8)
        .collect();
    block.iter().copied().cycle().take(n).collect()
}

/// The durable files the writer logged: (index, size).
pub(crate) fn durable(done: &Path) -> Vec<(u64, usize)> {
    let text = std::fs::read_to_string(done).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (name, n) = l.split_once(' ')?;
            Some((name.strip_prefix('f')?.parse().ok()?, n.parse().ok()?))
        })
        .collect()
}

/// Every logged file holds its bytes (read with usfs cat).
pub(crate) fn check_files(img: &Path, files: &[(u64, usize)], what: &str) {
    for &(i, n) in files {
        let out = Command::new(usfs())
            .args(["cat"])
            .arg(img)
            .arg(format!("/w/f{i}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{what}: usfs cat /w/f{i} failed");
        assert!(
            out.stdout == expected(i, n),
            "{what}: /w/f{i}: {} bytes, not the {n} fsync'd ones",
            out.stdout.len()
        );
    }
}

pub(crate) fn e2fsck(args: &[&str], img: &Path) -> (i32, String) {
    let o = Command::new("e2fsck").args(args).arg(img).output().unwrap();
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&o.stderr));
    (o.status.code().unwrap_or(-1), s)
}

/// Recovers `img` after a kill and checks it: e2fsck's replay of a copy, usfs's replay
/// in memory (read-only commands) and onto the image (a writing command), then a kernel
/// mount: `e2fsck -fn` clean each time and every file of `files` holding its data.
pub(crate) fn recover_and_check(s: &Scratch, img: &Path, files: &[(u64, usize)], name: &str) {
    // e2fsck's recovery, on a copy.
    let copy = s.path("copy");
    std::fs::copy(img, &copy).unwrap();
    let (code, out) = e2fsck(&["-E", "journal_only", "-y"], &copy);
    assert!(code <= 1, "{name}: e2fsck replay exit {code}\n{out}");
    let (code, out) = e2fsck(&["-fn"], &copy);
    assert_eq!(code, 0, "{name}: after e2fsck's replay:\n{out}");
    check_files(&copy, files, &format!("{name}, e2fsck's replay"));

    // usfs's: read-only commands replay in memory, a writing one onto the image.
    check_files(img, files, &format!("{name}, usfs's in-memory replay"));
    run_ok(
        Command::new(usfs())
            .arg("mkdir")
            .arg(format!("{}:/after", img.display())),
    );
    let (code, out) = e2fsck(&["-fn"], img);
    assert_eq!(code, 0, "{name}: after usfs's replay:\n{out}");
    check_files(img, files, &format!("{name}, usfs's replay"));

    // The kernel mounts it and sees the same files.
    let m = Mount::new(img, &s.path("k"), "ext4", "ro");
    for &(i, n) in files {
        let got = std::fs::read(m.dir.join(format!("w/f{i}"))).unwrap();
        assert!(got == expected(i, n), "{name}: kernel reads /w/f{i} wrong");
    }
}
