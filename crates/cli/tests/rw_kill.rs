//! kill -9 of `usfs mount -o rw` in the middle of a workload: after recovery (usfs's
//! replay, and e2fsck's on a copy, then a kernel mount) the image is clean and every
//! file whose fsync had returned holds exactly its data.

mod common;

use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A writer in the mount: files `f<i>` of 50-250 KB, each written in pieces, fsync'd,
/// then its name printed to the host file `DONE` (so a name there was durable), with an
/// unsynced overwrite of an older file, a rename and an unlink between; all along it holds
/// an unlinked file open and appends to it (an orphan the recovery must free). Runs until
/// the mount dies.
const WRITER: &str = r#"
import os, sys
root, done = sys.argv[1], sys.argv[2]
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
fn expected(i: u64, n: usize) -> Vec<u8> {
    let block: Vec<u8> = (0..4096u64)
        .map(|k| (((i * 131 + k * 7) % 251) + 1) as u8)
        .collect();
    block.iter().copied().cycle().take(n).collect()
}

fn mounted(dir: &Path) -> bool {
    let m = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let d = dir.to_string_lossy();
    m.lines().any(|l| l.split(' ').nth(1) == Some(&*d))
}

/// The usfs server in the foreground, killed and its mount lazily detached on drop.
struct Server {
    child: Child,
    dir: std::path::PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// The durable files the writer logged: (index, size).
fn durable(done: &Path) -> Vec<(u64, usize)> {
    let text = std::fs::read_to_string(done).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (name, n) = l.split_once(' ')?;
            Some((name.strip_prefix('f')?.parse().ok()?, n.parse().ok()?))
        })
        .collect()
}

/// Every logged file holds its bytes (read with usfs cat).
fn check_files(img: &Path, files: &[(u64, usize)], what: &str) {
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

fn e2fsck(args: &[&str], img: &Path) -> (i32, String) {
    let o = Command::new("e2fsck").args(args).arg(img).output().unwrap();
    let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&o.stderr));
    (o.status.code().unwrap_or(-1), s)
}

fn kill_run(name: &str, mkfs: &[&str], opts: &str) {
    let s = Scratch::new(&format!("rw-kill-{name}"));
    let img = s.path("img");
    mke2fs(&img, "256M", mkfs, None);
    run_ok(
        Command::new(usfs())
            .arg("mkdir")
            .arg(format!("{}:/w", img.display())),
    );
    let dir = s.path("mnt");
    std::fs::create_dir_all(&dir).unwrap();
    let child = Command::new(usfs())
        .args(["mount", "-f", "-o", opts])
        .arg(&img)
        .arg(&dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        dir: dir.clone(),
    };
    let t = Instant::now();
    while !mounted(&dir) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "mount did not appear"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let done = s.path("done");
    let mut writer = Command::new("python3")
        .arg("-c")
        .arg(WRITER)
        .arg(dir.join("w"))
        .arg(&done)
        .spawn()
        .unwrap();
    // Let it make a few durable files, then kill the server mid-write.
    let t = Instant::now();
    while durable(&done).len() < 12 && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(37));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(server.child.id() as i32, libc::SIGKILL) };
    drop(server);
    let _ = writer.wait();
    let files = durable(&done);
    assert!(files.len() >= 12, "the writer made {} files", files.len());

    // e2fsck's recovery, on a copy.
    let copy = s.path("copy");
    std::fs::copy(&img, &copy).unwrap();
    let (code, out) = e2fsck(&["-E", "journal_only", "-y"], &copy);
    assert!(code <= 1, "{name}: e2fsck replay exit {code}\n{out}");
    let (code, out) = e2fsck(&["-fn"], &copy);
    assert_eq!(code, 0, "{name}: after e2fsck's replay:\n{out}");
    check_files(&copy, &files, &format!("{name}, e2fsck's replay"));

    // usfs's: read-only commands replay in memory, a writing one onto the image.
    check_files(&img, &files, &format!("{name}, usfs's in-memory replay"));
    run_ok(
        Command::new(usfs())
            .arg("mkdir")
            .arg(format!("{}:/after", img.display())),
    );
    let (code, out) = e2fsck(&["-fn"], &img);
    assert_eq!(code, 0, "{name}: after usfs's replay:\n{out}");
    check_files(&img, &files, &format!("{name}, usfs's replay"));

    // The kernel mounts it and sees the same files.
    let m = Mount::new(&img, &s.path("k"), "ext4", "ro");
    for &(i, n) in &files {
        let got = std::fs::read(m.dir.join(format!("w/f{i}"))).unwrap();
        assert!(got == expected(i, n), "{name}: kernel reads /w/f{i} wrong");
    }
    println!(
        "{name}: killed after {} durable files; recovered by usfs, e2fsck and the kernel",
        files.len()
    );
}

#[test]
fn kill_9_of_a_rw_mount_loses_nothing_fsynced() {
    if !(need_root("rw_kill") && need_tool("rw_kill", "python3") && need_tool("rw_kill", "e2fsck"))
    {
        return;
    }
    kill_run("4k-cache", &["-t", "ext4", "-b", "4096"], "rw");
    kill_run("1k-direct", &["-t", "ext4", "-b", "1024"], "rw,direct_io");
    kill_run("orphan-file", &["-t", "ext4", "-O", "orphan_file"], "rw");
}
