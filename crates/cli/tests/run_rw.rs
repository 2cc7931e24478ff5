//! `usfs run --rw` against the kernel: the workload of `usfs mount -o rw`'s tests (tar,
//! cp -a, make, git, sqlite3, python, ACLs, renames, hard links, 3000-entry directories,
//! what writes and chown take away, a process that changed its user writing through
//! inherited descriptors) runs under `usfs run --rw` on one copy of an image and on a
//! kernel loop mount of another: the trees must be equal, `e2fsck -fn` clean, and the
//! kernel must keep writing the usfs-written image with e2fsck clean after. Then the
//! refusals: an EROFS image, a second writer, and what a read-only `usfs run` still says.

mod common;

use common::fuse_rw::{fsck_clean, judge_against_kernel, make_tarball, run_workload, WORKLOAD};
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Runs the workload under `usfs run --rw --mode MODE`, the image at `prefix`.
fn run_workload_rw(img: &Path, prefix: &Path, tarball: &Path, mode: &str) {
    let script = format!("cd '{}' || exit 99\n{WORKLOAD}", prefix.display());
    let (code, out, err) = run_limited(
        Command::new(usfs())
            .args(["run", "--rw", "--mode", mode, "-m"])
            .arg(format!("{}={}", prefix.display(), img.display()))
            .args(["--", "bash", "-c", &script])
            .env("TARBALL", tarball),
        Duration::from_secs(600),
    );
    assert_eq!(
        code,
        Some(0),
        "workload under usfs run --rw failed:\n{}\n{}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&err)
    );
}

fn check(name: &str, args: &[&str], mode: &str) {
    let s = Scratch::new(&format!("run-rw-{name}"));
    let tarball = make_tarball(&s.0);
    let a = s.path("usfs.img");
    mke2fs(&a, "128M", args, None);
    let b = s.path("kernel.img");
    std::fs::copy(&a, &b).unwrap();
    run_workload_rw(&a, &s.path("prefix"), &tarball, mode);
    fsck_clean(&a, &format!("{name}: after usfs run --rw"));
    {
        let m = Mount::new(&b, &s.path("mb"), "ext4", "");
        run_workload(&m.dir, &tarball);
    }
    judge_against_kernel(&s, &a, &b, &format!("{name}: usfs run --rw"));
}

fn ready(test: &str) -> bool {
    common::fuse_rw::ready(test)
}

#[test]
fn run_rw_matches_the_kernel_ext4() {
    if ready("run_rw ext4") {
        check("ext4", &["-t", "ext4", "-b", "4096"], "posix");
    }
}

#[test]
fn run_rw_sync_mode_matches_the_kernel_1k_nocsum() {
    if ready("run_rw sync") {
        check(
            "sync-1k",
            &["-t", "ext4", "-b", "1024", "-O", "^metadata_csum"],
            "sync",
        );
    }
}

/// `usfs run` with CMD's arguments, returning (exit code, stdout, stderr).
fn usfs_run(args: &[&str]) -> (Option<i32>, String, String) {
    let (code, out, err) = run_limited(
        Command::new(usfs()).arg("run").args(args),
        Duration::from_secs(60),
    );
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

#[test]
fn run_rw_refuses_what_it_cannot_change() {
    if !need_tool("run_rw refusals", "mke2fs") {
        return;
    }
    let s = Scratch::new("run-rw-refuse");
    let img = s.path("a.img");
    mke2fs(&img, "16M", &["-t", "ext4"], None);
    let mnt = format!("{}={}", s.path("p").display(), img.display());
    let p = s.path("p");
    // A second writer while the first runs: refused by name, the image unchanged.
    let script = format!(
        "echo x > '{p}/f' && '{u}' mkdir '{i}:/second'; echo \"second=$?\"",
        p = p.display(),
        u = usfs().display(),
        i = img.display()
    );
    let (code, out, err) = usfs_run(&["--rw", "-m", &mnt, "--", "sh", "-c", &script]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        !out.contains("second=0"),
        "a second writer was let in: {out}{err}"
    );
    assert!(err.contains("in use by another usfs writer"), "{err}");
    let (_, ls, _) = usfs_run(&["-m", &mnt, "--", "ls", &p.display().to_string()]);
    assert_eq!(ls, "f\nlost+found\n");
    // The exit status is CMD's.
    let (code, _, _) = usfs_run(&["--rw", "-m", &mnt, "--", "sh", "-c", "exit 7"]);
    assert_eq!(code, Some(7));
    // Read-only as before without --rw.
    let (code, out, _) = usfs_run(&[
        "-m",
        &mnt,
        "--",
        "sh",
        "-c",
        &format!("echo y > '{}/g'; echo $?", p.display()),
    ]);
    assert_eq!(code, Some(0));
    assert_ne!(out.trim(), "0", "a read-only run wrote");
    // An EROFS image cannot be opened for writing.
    let erofs = s.path("e.img");
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    run_ok(Command::new(usfs()).arg("mkfs.erofs").arg(&erofs).arg(&src));
    let emnt = format!("{}={}", p.display(), erofs.display());
    let o = Command::new(usfs())
        .args(["run", "--rw", "-m", &emnt, "--", "true"])
        .env("TMPDIR", &s.0)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0));
    assert!(err.contains("only ext4 images can be changed"), "{err}");
    // A command that cannot start: an error, the image closed clean, nothing left behind.
    let o = Command::new(usfs())
        .args(["run", "--rw", "-m", &mnt, "--", "/nonexistent/cmd"])
        .env("TMPDIR", &s.0)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let left: Vec<_> = std::fs::read_dir(&s.0)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("usfs-run-"))
        .collect();
    assert!(left.is_empty(), "socket directories left behind: {left:?}");
    fsck_clean(&img, "after the refusals");
}

/// Between processes under one `usfs run --rw`: record locks exclude (fcntl, as sqlite
/// and lockf use them), O_APPEND writes from two processes never tear or overwrite each
/// other, and a file unlinked while open keeps its data until closed.
#[test]
fn run_rw_processes_lock_and_append_as_on_the_kernel() {
    if !need_tool("run_rw processes", "mke2fs") || !need_tool("run_rw processes", "python3") {
        return;
    }
    let s = Scratch::new("run-rw-procs");
    let img = s.path("a.img");
    mke2fs(&img, "64M", &["-t", "ext4"], None);
    let p = s.path("p");
    let script = r#"
import fcntl, os, sys, subprocess
os.chdir(sys.argv[1])
with open('locked', 'w') as f:
    fcntl.lockf(f, fcntl.LOCK_EX)
    probe = "import fcntl\nf = open('locked', 'r+')\ntry:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('got')\nexcept OSError:\n    print('busy')\n"
    held = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True).stdout.strip()
    fcntl.lockf(f, fcntl.LOCK_UN)
    free = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True).stdout.strip()
print('lock', held, free)
writer = "import os, sys\nfd = os.open('log', os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)\nfor i in range(300):\n    os.write(fd, (sys.argv[1] * 99 + '\\n').encode())\n"
procs = [subprocess.Popen([sys.executable, '-c', writer, c]) for c in 'ab']
for q in procs:
    q.wait()
lines = open('log').read().split('\n')[:-1]
print('append', len(lines), all(len(l) == 99 and len(set(l)) == 1 for l in lines))
fd = os.open('gone', os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b'still here')
os.unlink('gone')
print('unlinked', os.pread(fd, 10, 0).decode(), os.path.exists('gone'))
os.close(fd)
"#;
    let (code, out, err) = usfs_run(&[
        "--rw",
        "-m",
        &format!("{}={}", p.display(), img.display()),
        "--",
        "python3",
        "-c",
        script,
        &p.display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("lock busy got"), "{out}{err}");
    assert!(out.contains("append 600 True"), "{out}{err}");
    assert!(out.contains("unlinked still here False"), "{out}{err}");
    fsck_clean(&img, "after locks and appends");
}

/// The seeded random-operation exerciser (usfs-exercise: creates, writes with holes,
/// appends, truncates, fallocate modes, renames, links, unlinks, directories, symbolic
/// links, xattrs, chmod, utimens, fsync; several threads, files shared between them)
/// runs inside `usfs run --rw`, every result checked against its model, then the whole
/// tree; the image is e2fsck clean after. (The binary is built by `cargo build
/// --workspace`, as scripts/test.sh does first.)
#[test]
fn run_rw_exerciser_matches_its_model() {
    let ex = usfs().with_file_name("usfs-exercise");
    if !ex.is_file() {
        eprintln!("SKIP run_rw exerciser: {} not built", ex.display());
        return;
    }
    if !need_tool("run_rw exerciser", "mke2fs") {
        return;
    }
    for (seed, threads, mode, mkfs) in [
        (1, "2", "posix", &["-t", "ext4"][..]),
        (2, "3", "posix", &["-t", "ext4", "-b", "4096"][..]),
        (3, "2", "sync", &["-t", "ext4", "-O", "^metadata_csum"][..]),
    ] {
        let s = Scratch::new(&format!("run-rw-exercise-{seed}"));
        let img = s.path("a.img");
        mke2fs(&img, "256M", mkfs, None);
        let p = s.path("p");
        let (code, out, err) = usfs_run(&[
            "--rw",
            "--mode",
            mode,
            "-m",
            &format!("{}={}", p.display(), img.display()),
            "--",
            &ex.display().to_string(),
            "--seed",
            &seed.to_string(),
            "-t",
            threads,
            "-n",
            "800",
            &p.display().to_string(),
        ]);
        assert_eq!(code, Some(0), "seed {seed}: {out}{err}");
        fsck_clean(&img, &format!("after the exerciser, seed {seed}"));
    }
}

/// Shared writable mappings under `usfs run --rw`: two processes mapping one file see
/// each other's stores, what they changed reaches the image at msync, munmap and exit
/// (and only what they changed), and sqlite in WAL mode (its index is such a mapping)
/// keeps every row with two writers at once.
#[test]
fn run_rw_shared_mappings_and_sqlite_wal() {
    if !need_tool("run_rw mmap", "mke2fs") || !need_tool("run_rw mmap", "sqlite3") {
        return;
    }
    let s = Scratch::new("run-rw-mmap");
    let img = s.path("a.img");
    mke2fs(&img, "64M", &["-t", "ext4"], None);
    let p = s.path("p");
    let script = r#"
import mmap, os, subprocess, sys
os.chdir(sys.argv[1])
fd = os.open('m.bin', os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b'a' * 10000)
m = mmap.mmap(fd, 8192)
m[100:105] = b'HELLO'
m.flush()
# Another process maps the same file: it sees the store, and its own store is seen here.
other = "import mmap, os\nfd = os.open('m.bin', os.O_RDWR)\nm = mmap.mmap(fd, 8192)\nprint(m[100:105].decode())\nm[200:203] = b'abc'\n"
seen = subprocess.run([sys.executable, '-c', other], capture_output=True, text=True).stdout.strip()
print('other saw', seen, 'here', m[200:203].decode())
# A plain write past the mapped bytes, then more stores: the write is kept.
os.pwrite(fd, b'W', 9000)
m[5000:5003] = b'xyz'
m.close()
os.close(fd)
d = open('m.bin', 'rb').read()
print('file', len(d), d[100:105].decode(), d[200:203].decode(), d[5000:5003].decode(), d[9000:9001].decode())
"#;
    let mnt = format!("{}={}", p.display(), img.display());
    let (code, out, err) = usfs_run(&[
        "--rw",
        "-m",
        &mnt,
        "--",
        "python3",
        "-c",
        script,
        &p.display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("other saw HELLO here abc"), "{out}{err}");
    assert!(out.contains("file 10000 HELLO abc xyz W"), "{out}{err}");
    let wal = format!(
        "cd '{p}' && sqlite3 w.db 'pragma journal_mode=wal; create table t(a);' >/dev/null && \
         for w in 1 2; do (for i in $(seq 1 60); do sqlite3 -cmd '.timeout 5000' w.db \"insert into t values($w$i);\" || exit 1; done) & done; wait && \
         sqlite3 w.db 'select count(*) from t'",
        p = p.display()
    );
    let (code, out, err) = usfs_run(&["--rw", "-m", &mnt, "--", "sh", "-c", &wal]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(out.trim(), "120", "{err}");
    fsck_clean(&img, "after shared mappings and sqlite WAL");
    // Read-only, as a kernel read-only mount reads it: a WAL database needs its index
    // file written unless opened immutable (the last writer checkpointed it).
    let rows = run_ok(Command::new("sh").arg("-c").arg(format!(
        "'{}' run -m '{mnt}' -- sqlite3 'file:{}/w.db?immutable=1' 'select count(*) from t'",
        usfs().display(),
        p.display()
    )));
    assert_eq!(String::from_utf8_lossy(&rows.stdout).trim(), "120");
}

/// Descriptors and stdio across exec, dup and fclose under `usfs run --rw`: an exec'd
/// program keeps writing a file the shell opened with `>` without truncating it again;
/// `close(1)` then `dup` sends stdio to the image; `fclose(stdout)` then `dup2` onto 1
/// is not a double free; a failing `freopen` for writing leaves the file's bytes alone;
/// and a background job that outlives CMD still writes before the image closes.
#[test]
fn run_rw_descriptors_across_exec_dup_and_fclose() {
    if !need_tool("run_rw descriptors", "mke2fs") || !need_tool("run_rw descriptors", "gcc") {
        return;
    }
    let s = Scratch::new("run-rw-fds");
    let img = s.path("a.img");
    mke2fs(&img, "32M", &["-t", "ext4"], None);
    let p = s.path("p");
    let prog = s.path("fds");
    std::fs::write(
        s.path("fds.c"),
        r#"#include <stdio.h>
#include <fcntl.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (chdir(argv[1])) return 2;
    /* close(1) + dup: stdio follows into the image. */
    int fd = open("dup.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int saved = dup(1);
    close(1);
    if (dup(fd) != 1) return 3;
    printf("via dup\n");
    fflush(stdout);
    /* fclose(stdout), then a new file onto 1. */
    fclose(stdout);
    int g = open("after.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(g, 1);
    dup2(saved, 1);
    /* freopen for writing over a file with data: it may fail, it must not empty it. */
    int k = open("keep.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write(k, "kept\n", 5);
    close(k);
    FILE *f = freopen("keep.txt", "w", stderr);
    (void)f;
    return 0;
}
"#,
    )
    .unwrap();
    run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(&prog)
            .arg(s.path("fds.c")),
    );
    let mnt = format!("{}={}", p.display(), img.display());
    let script = format!(
        "cd '{p}' && echo old-and-long > log && sh -c 'exec > log; echo start; /bin/true; echo end' && \
         '{prog}' '{p}' || exit 1; \
         (cd /; sleep 0.5; echo late > '{p}/late') & exit 0",
        p = p.display(),
        prog = prog.display()
    );
    let (code, out, err) = usfs_run(&["--rw", "-m", &mnt, "--", "sh", "-c", &script]);
    assert_eq!(code, Some(0), "{out}{err}");
    let cat = |f: &str| {
        let o = Command::new(usfs())
            .arg("cat")
            .arg(&img)
            .arg(f)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert_eq!(
        cat("/log"),
        "start\nend\n",
        "exec truncated the shell's file again"
    );
    assert_eq!(cat("/dup.txt"), "via dup\n");
    assert_eq!(
        cat("/keep.txt"),
        "kept\n",
        "a failed freopen emptied the file"
    );
    assert_eq!(
        cat("/late"),
        "late\n",
        "the image closed before a background job ended"
    );
    fsck_clean(&img, "after the descriptor cases");
}
