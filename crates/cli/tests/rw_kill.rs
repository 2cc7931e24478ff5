//! kill -9 of `usfs mount -o rw` in the middle of a workload: after recovery (usfs's
//! replay, and e2fsck's on a copy, then a kernel mount) the image is clean and every
//! file whose fsync had returned holds exactly its data.

mod common;

use common::kill::*;
use common::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

    recover_and_check(&s, &img, &files, name);
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
