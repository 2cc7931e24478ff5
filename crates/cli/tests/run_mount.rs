//! `usfs run` (LD_PRELOAD) and `usfs mount` (FUSE, both cache modes) against the kernel:
//! on each kind of image, real programs (cat, cp -a, ls -lR, find, du, md5sum, grep -r,
//! tar, dd, python3, sqlite3, git, a shell with cd and `<`) must print the same thing and
//! exit the same way on a kernel mount of the image, under `usfs mount -o cache`, under
//! `usfs mount -o direct_io`, and under `usfs run`. All four see the image at the same
//! path, so outputs compare byte for byte. Then the negative cases: writes fail with
//! EROFS, symbolic links never lead out of an image, missing files are ENOENT, a corrupt
//! image gives EIO and never kills the program.
//!
//! Outputs whose order follows readdir order are sorted (`find`, `grep -r`): the kernel
//! lists htree directories (and, with dir_index, every one-block directory) in hash
//! order, usfs in block order; `tar` uses `--sort=name`
//! and `du` counts hard links with `-l` for the same reason (otherwise which of two links
//! is "first" depends on that order). Python prints os.walk's directories and files as one
//! list: os.walk files a symlink by its target, and a link with an absolute target points
//! into the host on a kernel mount but stays inside the image under `usfs run` (by
//! design: no link in an image reaches a host file).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use usfs_testkit::{compare, generate, CmpOptions, GenOptions, Profile};

/// How an image of a kind is made from a source tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ImageKind {
    /// `mke2fs -t ext4 -d SRC` (linear directories, whole-second times).
    Ext4Mke2fs,
    /// mke2fs, then the kernel copies the tree in (htree directories, nanosecond times).
    Ext4Kernel,
    /// `mkfs.erofs -zlz4hc` (compressed, mkfs.erofs 1.5).
    ErofsLz4hc,
    /// `usfs mkfs.erofs -zlz4hc` (compressed, usfs's own builder).
    ErofsUsfsLz4hc,
}

/// Every kind the programs run on. Adding a kind is one line here (and its builder).
const KINDS: &[ImageKind] = &[
    ImageKind::Ext4Mke2fs,
    ImageKind::Ext4Kernel,
    ImageKind::ErofsLz4hc,
    ImageKind::ErofsUsfsLz4hc,
];

impl ImageKind {
    /// The kernel's file-system type for the oracle mount.
    fn fstype(self) -> &'static str {
        match self {
            ImageKind::Ext4Mke2fs | ImageKind::Ext4Kernel => "ext4",
            ImageKind::ErofsLz4hc | ImageKind::ErofsUsfsLz4hc => "erofs",
        }
    }

    fn is_erofs(self) -> bool {
        self.fstype() == "erofs"
    }

    /// True when usfs reads this format (EROFS arrives with its reader): probed on a tiny
    /// image; otherwise a SKIP line.
    fn supported(self, scratch: &Scratch) -> bool {
        if !self.is_erofs() {
            return true;
        }
        if !need_tool("run_mount erofs", "mkfs.erofs") {
            return false;
        }
        let dir = scratch.path("probe-src");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), "x").unwrap();
        let img = scratch.path("probe.img");
        sh(&format!(
            "mkfs.erofs -zlz4hc '{}' '{}' >/dev/null",
            img.display(),
            dir.display()
        ));
        let o = Command::new(usfs()).arg("info").arg(&img).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        if !o.status.success() && err.contains("not a recognised") {
            eprintln!(
                "SKIP {self:?}: usfs cannot read this format yet ({})",
                err.trim()
            );
            return false;
        }
        true
    }

    /// Builds the image.
    fn build(self, src: &Path, img: &Path, scratch: &Scratch) {
        match self {
            ImageKind::Ext4Mke2fs => mke2fs(img, "256M", &["-t", "ext4", "-b", "4096"], Some(src)),
            ImageKind::Ext4Kernel => {
                mke2fs(img, "256M", &["-t", "ext4", "-b", "4096"], None);
                let m = Mount::new(img, &scratch.path("mnt-populate"), "ext4", "");
                sh(&format!(
                    "cp -a '{}'/. '{}'/",
                    src.display(),
                    m.dir.display()
                ));
            }
            ImageKind::ErofsLz4hc => {
                sh(&format!(
                    "mkfs.erofs -zlz4hc -Eforce-inode-extended '{}' '{}' >/dev/null",
                    img.display(),
                    src.display()
                ));
            }
            ImageKind::ErofsUsfsLz4hc => {
                run_ok(
                    Command::new(usfs())
                        .args(["mkfs.erofs", "--quiet", "-zlz4hc"])
                        .arg(img)
                        .arg(src),
                );
            }
        }
    }
}

/// One way of seeing the image at the root path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Kernel,
    FuseCache,
    FuseDirect,
    Run,
}

const METHODS: &[Method] = &[
    Method::Kernel,
    Method::FuseCache,
    Method::FuseDirect,
    Method::Run,
];

/// Keeps whatever makes the image visible alive while programs run (the mounts are held
/// only for their Drop, which unmounts).
#[allow(dead_code)]
enum Visible {
    Kernel(Mount),
    Fuse(UsfsMount),
    Preload,
}

fn make_visible(m: Method, kind: ImageKind, img: &Path, root: &Path) -> Visible {
    match m {
        Method::Kernel => Visible::Kernel(Mount::new(img, root, kind.fstype(), "ro,noatime")),
        Method::FuseCache => Visible::Fuse(UsfsMount::new(img, root, "cache")),
        Method::FuseDirect => Visible::Fuse(UsfsMount::new(img, root, "direct_io,threads=2")),
        Method::Run => {
            std::fs::create_dir_all(root).unwrap();
            Visible::Preload
        }
    }
}

/// The preload library must sit next to the usfs binary (cargo builds a cdylib only when
/// asked: scripts/test.sh builds the workspace before testing).
fn check_preload_built() {
    let lib = usfs().with_file_name("libusfs_preload.so");
    assert!(
        lib.is_file(),
        "{} is missing: build it with `cargo build -p usfs-preload` in the same profile \
         (scripts/test.sh builds the whole workspace first)",
        lib.display()
    );
}

/// What a program did: exit code (None if killed), stdout, stderr.
type Outcome = (Option<i32>, Vec<u8>, Vec<u8>);

/// Runs a shell script with `$R` = the root path (under `usfs run` for Method::Run);
/// returns (exit code, stdout, stderr).
fn run_script(m: Method, img: &Path, root: &Path, home: &Path, script: &str) -> Outcome {
    let mut c = if m == Method::Run {
        check_preload_built();
        let mut c = Command::new(usfs());
        c.arg("run")
            .arg("--mount")
            .arg(format!("{}={}", root.display(), img.display()))
            .args(["--", "sh", "-c", script]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    };
    c.env("R", root)
        .env("HOME", home)
        // The shared decompressed-data cache in the scratch directory, not /dev/shm.
        .env("USFS_SHARED_CACHE_DIR", home.with_file_name("zcache"))
        .env("LC_ALL", "C")
        .env("TZ", "UTC")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    run_limited(&mut c, Duration::from_secs(300))
}

/// The programs of the issue, by name. Each must exit 0 on the kernel mount.
const PROGRAMS: &[(&str, &str)] = &[
    (
        "cat",
        r#"cat "$R/fx/hello.txt"; cat "$R/fx/big.bin" "$R/fx/hello.txt" | md5sum"#,
    ),
    ("ls -lR", r#"ls -lR "$R""#),
    (
        "inode numbers",
        r#"stat -c '%i %h %n' "$R" "$R/." "$R/fx/.."; ls -iaR "$R" | head -40"#,
    ),
    (
        "find -printf",
        r#"find "$R" -printf '%p %s %m %u %T@\n' | sort"#,
    ),
    ("du -ab", r#"du -abl "$R" | sort; du -sb "$R""#),
    (
        "md5sum",
        r#"cd "$R" && find . -type f -print0 | sort -z | xargs -0 md5sum"#,
    ),
    (
        "grep -r",
        r#"grep -r -I -D skip -c e "$R" | sort; grep -r -D skip -n usfs "$R/fx" | sort"#,
    ),
    (
        "tar",
        r#"tar --sort=name -cf - -C "$R" . 2>/dev/null | tar tvf -"#,
    ),
    (
        "dd",
        r#"dd if="$R/fx/big.bin" bs=4096 skip=3 count=5 status=none | md5sum
           dd if="$R/fx/big.bin" bs=1000 skip=7 count=3 status=none | od -c | head -5
           dd if="$R/fx/hello.txt" bs=1 skip=2 count=4 status=none; echo"#,
    ),
    (
        "python3",
        r#"python3 -c '
import os, sys
R = os.environ["R"]
for d, ds, fs in os.walk(R):
    ds.sort()
    print(repr(d), sorted(map(repr, ds + fs)))
print(open(R + "/fx/hello.txt").read(), end="")
with open(R + "/fx/big.bin", "rb") as f:
    f.seek(12345); print(f.read(16).hex(), f.tell())
sys.path.insert(0, R + "/fx/py")
import usfsmod
print(usfsmod.answer(20), usfsmod.__file__)
'"#,
    ),
    (
        "sqlite3",
        r#"sqlite3 "$R/fx/db.sqlite" 'select count(*), sum(v) from t; select * from t where k like "k1%" order by k limit 7;'"#,
    ),
    (
        "git",
        r#"git -C "$R/fx/repo" log --stat && git -C "$R/fx/repo" show HEAD~1 && git -C "$R/fx/repo" cat-file -p HEAD:a.txt"#,
    ),
    (
        "shell cd and <",
        r#"cd "$R/fx" && cat < hello.txt && pwd && ls && cd sub && wc -c < ../big.bin && read line < ../hello.txt && echo "$line" && cd .. && cd .. && pwd"#,
    ),
];

/// Fixtures the programs need: text, a binary file, a Python module, an SQLite database,
/// a git repository, and links that try to leave the image.
fn make_fixtures(fx: &Path) {
    std::fs::create_dir_all(fx.join("sub")).unwrap();
    std::fs::create_dir_all(fx.join("py")).unwrap();
    std::fs::write(fx.join("hello.txt"), "hello from usfs\nsecond line\n").unwrap();
    let big: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(fx.join("big.bin"), big).unwrap();
    std::fs::write(
        fx.join("py/usfsmod.py"),
        "def answer(x):\n    return x * 2 + 2\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("../../../../../../../../etc/hostname", fx.join("escape")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", fx.join("abs")).unwrap();
    std::os::unix::fs::symlink("loop2", fx.join("loop1")).unwrap();
    std::os::unix::fs::symlink("loop1", fx.join("loop2")).unwrap();
    let db = fx.join("db.sqlite");
    let mut sql = String::from("create table t(k text primary key, v integer);");
    for i in 0..2000 {
        sql.push_str(&format!("insert into t values('k{i}', {});", i * 7 % 1000));
    }
    run_ok(Command::new("sqlite3").arg(&db).arg(sql));
    let repo = fx.join("repo");
    let git = |args: &[&str]| {
        run_ok(
            Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(["-c", "user.name=usfs", "-c", "user.email=usfs@example.org"])
                .args(args)
                .env("GIT_AUTHOR_DATE", "2024-01-02T03:04:05Z")
                .env("GIT_COMMITTER_DATE", "2024-01-02T03:04:05Z"),
        )
    };
    std::fs::create_dir_all(&repo).unwrap();
    git(&["init", "-q", "-b", "main"]);
    for i in 0..3 {
        std::fs::write(repo.join("a.txt"), format!("version {i}\n").repeat(i + 1)).unwrap();
        std::fs::write(repo.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", &format!("commit {i}")]);
    }
    // Pack part of it, so git reads a pack through mmap and an index.
    git(&["gc", "-q"]);
    std::fs::write(repo.join("a.txt"), "after gc\n").unwrap();
    git(&["commit", "-q", "-am", "after gc"]);
}

/// The source tree: a generated tree (odd names, hard links, sparse files, devices,
/// xattrs, a big directory) plus the fixtures.
fn make_source(dir: &Path, kind: ImageKind) {
    let mut opts = GenOptions::new(Profile::Small, 61);
    opts.max_file_size = 4 << 20;
    opts.times_32bit = true;
    opts.hardlinked_symlinks = kind == ImageKind::Ext4Kernel;
    generate(dir, &opts).expect("generate tree");
    if kind.is_erofs() {
        // mkfs.erofs 1.5 fails on paths longer than PATH_MAX.
        std::fs::remove_dir_all(dir.join("names/long")).unwrap();
    }
    make_fixtures(&dir.join("fx"));
}

fn check_kind(kind: ImageKind) {
    let test = format!("run_mount-{kind:?}");
    if !need_root(&test) {
        return;
    }
    for tool in ["mke2fs", "sqlite3", "git", "python3", "tar"] {
        if !need_tool(&test, tool) {
            return;
        }
    }
    let s = Scratch::new(&test);
    if !kind.supported(&s) {
        return;
    }
    let src = s.path("src");
    make_source(&src, kind);
    let img = s.path("image");
    kind.build(&src, &img, &s);
    let root = s.path("root");
    let home = s.path("home");
    std::fs::create_dir_all(&home).unwrap();

    let mut results: Vec<(Method, Vec<Outcome>)> = Vec::new();
    for &m in METHODS {
        let vis = make_visible(m, kind, &img, &root);
        let mut outs = Vec::new();
        for (name, script) in PROGRAMS {
            let r = run_script(m, &img, &root, &home, script);
            if m == Method::Kernel {
                assert_eq!(
                    r.0,
                    Some(0),
                    "{test}: {name} failed on the kernel mount: {}",
                    String::from_utf8_lossy(&r.2)
                );
                assert!(!r.1.is_empty(), "{test}: {name} printed nothing");
            }
            outs.push(r);
        }
        // cp -a image -> host, compared as trees afterwards.
        let dest = s.path(&format!("copy-{m:?}"));
        let cp = run_script(
            m,
            &img,
            &root,
            &home,
            &format!(r#"cp -a "$R/." '{}'"#, dest.display()),
        );
        assert_eq!(
            cp.0,
            Some(0),
            "{test}: cp -a under {m:?} failed: {}",
            String::from_utf8_lossy(&cp.2)
        );
        drop(vis);
        results.push((m, outs));
    }

    let (_, kernel) = &results[0];
    for (m, outs) in &results[1..] {
        for (i, (name, _)) in PROGRAMS.iter().enumerate() {
            let (k, u) = (&kernel[i], &outs[i]);
            assert_eq!(
                u.0,
                k.0,
                "{test}: {name}: exit status under {m:?} differs from the kernel mount; stderr: {}",
                String::from_utf8_lossy(&u.2)
            );
            if u.1 != k.1 {
                panic!(
                    "{test}: {name}: output under {m:?} differs from the kernel mount\n{}\nstderr: {}",
                    first_diff(&k.1, &u.1),
                    String::from_utf8_lossy(&u.2)
                );
            }
        }
        let opts = CmpOptions {
            atime: false,
            ..CmpOptions::default()
        };
        match compare(
            &s.path("copy-Kernel"),
            &s.path(&format!("copy-{m:?}")),
            &opts,
        ) {
            Ok(st) => eprintln!("{test}: cp -a under {m:?} = kernel: {st}"),
            Err(d) => panic!("{test}: cp -a under {m:?} differs from the kernel's: {d}"),
        }
        eprintln!(
            "{test}: {m:?}: {} programs agree with the kernel mount",
            PROGRAMS.len()
        );
    }
}

/// The first differing line of two outputs, for the failure message.
fn first_diff(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n kernel: {x}\n   usfs: {y}", i + 1);
        }
    }
    format!(
        "one output is a prefix of the other ({} vs {} lines)",
        a.lines().count(),
        b.lines().count()
    )
}

#[test]
fn programs_agree_ext4_mke2fs() {
    check_kind(KINDS[0]);
}

#[test]
fn programs_agree_ext4_kernel() {
    check_kind(KINDS[1]);
}

#[test]
fn programs_agree_erofs_mkfs_erofs() {
    check_kind(KINDS[2]);
}

#[test]
fn programs_agree_erofs_usfs() {
    check_kind(KINDS[3]);
}

/// A small image for the negative tests (`mke2fs -d` of the fixtures).
fn small_image(s: &Scratch) -> PathBuf {
    let src = s.path("src");
    make_fixtures(&src.join("fx"));
    let img = s.path("image");
    mke2fs(&img, "64M", &["-t", "ext4", "-b", "4096"], Some(&src));
    img
}

/// What a program sees when it tries to write: errno names, one per attempt, printed by
/// Python (each attempt's own errno, not a shell message).
const WRITE_ATTEMPTS: &str = r#"python3 -c '
import errno, os
R = os.environ["R"]
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
tries = [
    lambda: open(R + "/fx/hello.txt", "w"),
    lambda: open(R + "/fx/hello.txt", "a"),
    lambda: open(R + "/fx/hello.txt", "r+"),
    lambda: open(R + "/fx/new.txt", "w"),
    lambda: os.open(R + "/fx/hello.txt", os.O_RDONLY | os.O_TRUNC),
    lambda: os.mkdir(R + "/fx/d"),
    lambda: os.rmdir(R + "/fx/sub"),
    lambda: os.unlink(R + "/fx/hello.txt"),
    lambda: os.rename(R + "/fx/hello.txt", R + "/fx/x"),
    lambda: os.symlink("x", R + "/fx/l"),
    lambda: os.link(R + "/fx/hello.txt", R + "/fx/h2"),
    lambda: os.rename(R + "/fx/hello.txt", "/tmp/usfs-never-made"),
    lambda: os.rename("/etc/passwd", R + "/fx/x"),
    lambda: os.link(R + "/fx/hello.txt", "/tmp/usfs-never-made"),
    lambda: os.link("/etc/passwd", R + "/fx/x"),
    lambda: os.chmod(R + "/fx/hello.txt", 0o600),
    lambda: os.chown(R + "/fx/hello.txt", 1, 1),
    lambda: os.utime(R + "/fx/hello.txt", (1, 1)),
    lambda: os.truncate(R + "/fx/hello.txt", 0),
    lambda: os.setxattr(R + "/fx/hello.txt", "user.x", b"1"),
    lambda: os.access(R + "/fx/hello.txt", os.W_OK) or (_ for _ in ()).throw(OSError(errno.EROFS, "")),
]
print(" ".join(attempt(t) for t in tries))
fd = os.open(R + "/fx/hello.txt", os.O_RDONLY)
print(attempt(lambda: os.write(fd, b"x")), attempt(lambda: os.ftruncate(fd, 0)))
'"#;

#[test]
fn writes_fail_with_erofs_like_the_kernel() {
    let test = "run_mount-writes";
    if !need_root(test) || !need_tool(test, "python3") {
        return;
    }
    let s = Scratch::new(test);
    let img = small_image(&s);
    let root = s.path("root");
    let home = s.path("home");
    let kernel = {
        let _m = Mount::new(&img, &root, "ext4", "ro,noatime");
        run_script(Method::Kernel, &img, &root, &home, WRITE_ATTEMPTS)
    };
    assert_eq!(kernel.0, Some(0), "{}", String::from_utf8_lossy(&kernel.2));
    let text = String::from_utf8_lossy(&kernel.1).into_owned();
    assert!(
        text.contains("EROFS") && !text.contains("ok"),
        "kernel: {text}"
    );
    for m in [Method::FuseDirect, Method::Run] {
        let _v = make_visible(m, ImageKind::Ext4Mke2fs, &img, &root);
        let u = run_script(m, &img, &root, &home, WRITE_ATTEMPTS);
        assert_eq!(u.0, Some(0), "{m:?}: {}", String::from_utf8_lossy(&u.2));
        assert_eq!(
            String::from_utf8_lossy(&u.1),
            text,
            "{m:?}: write attempts differ from the kernel mount"
        );
    }
}

/// Runs `script` under `usfs run` with the image at `$R`.
fn under_run(img: &Path, root: &Path, script: &str) -> (Option<i32>, String, String) {
    check_preload_built();
    let (code, out, err) = run_limited(
        Command::new(usfs())
            .arg("run")
            .arg("-m")
            .arg(format!("{}={}", root.display(), img.display()))
            .args(["--", "sh", "-c", script])
            .env("R", root)
            .env("USFS_SHARED_CACHE_DIR", root.with_file_name("zcache"))
            .env("LC_ALL", "C"),
        Duration::from_secs(60),
    );
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

#[test]
fn links_never_leave_the_image_and_missing_is_enoent() {
    let test = "run_mount-escape";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let img = small_image(&s);
    let root = s.path("root");
    let host_passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    // An absolute link and a link with many `..` both resolve inside the image, which has
    // no /etc: ENOENT, never the host's file.
    for link in ["abs", "escape"] {
        let (code, out, err) = under_run(&img, &root, &format!(r#"cat "$R/fx/{link}""#));
        assert_eq!(code, Some(1), "{link}: {out}{err}");
        assert!(
            out.is_empty() && err.contains("No such file"),
            "{link}: {err}"
        );
    }
    // The same walk spelled by the caller leaves the mount, as on a kernel mount.
    let (code, out, _) = under_run(
        &img,
        &root,
        r#"cat "$R/../../../../../../../../etc/passwd""#,
    );
    assert_eq!((code, out.as_str()), (Some(0), host_passwd.as_str()));
    // Symlink loops: ELOOP.
    let (code, _, err) = under_run(&img, &root, r#"cat "$R/fx/loop1""#);
    assert_eq!(code, Some(1));
    assert!(err.contains("Too many levels of symbolic links"), "{err}");
    // Missing files: ENOENT from open, stat and opendir alike.
    let (code, _, err) = under_run(
        &img,
        &root,
        r#"cat "$R/nope"; stat "$R/fx/nope"; ls "$R/nope/"; python3 -c 'import os; os.listdir(os.environ["R"] + "/no")'"#,
    );
    assert_eq!(code, Some(1));
    assert_eq!(err.matches("No such file or directory").count(), 4, "{err}");
    // realpath and getcwd report paths inside the mount.
    let (code, out, err) = under_run(
        &img,
        &root,
        r#"realpath "$R/fx/sub/../py/usfsmod.py"; cd "$R/fx/sub" && /bin/pwd -P"#,
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        format!("{r}/fx/py/usfsmod.py\n{r}/fx/sub\n", r = root.display())
    );
}

#[test]
fn corrupt_images_give_eio_not_crashes() {
    let test = "run_mount-corrupt";
    if !need_root(test) || !need_tool(test, "debugfs") {
        return;
    }
    let s = Scratch::new(test);
    let img = small_image(&s);
    let root = s.path("root");
    // 1. A damaged directory block (metadata_csum catches it): listing it fails with EIO,
    //    the rest of the image still reads, and the program exits normally.
    let out = run_ok(
        Command::new("debugfs")
            .args(["-R", "blocks /fx/sub"])
            .arg(&img),
    );
    let blk: u64 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a block of /fx/sub")
        .parse()
        .unwrap();
    let bad = s.path("bad-dir");
    std::fs::copy(&img, &bad).unwrap();
    corrupt(&bad, blk * 4096 + 40, 64);
    let (code, out, err) = under_run(&bad, &root, r#"ls "$R/fx/sub"; cat "$R/fx/hello.txt""#);
    assert_eq!(code, Some(0), "cat must still work: {err}");
    assert!(err.contains("Input/output error"), "{err}");
    assert!(out.contains("hello from usfs"), "{out}");
    // 2. A destroyed superblock: every path under the prefix is EIO; the program runs on.
    let bad = s.path("bad-sb");
    std::fs::copy(&img, &bad).unwrap();
    corrupt(&bad, 1024, 1024);
    let (code, out, err) = under_run(
        &bad,
        &root,
        r#"cat "$R/fx/hello.txt"; ls "$R"; python3 -c 'import os; print(os.path.exists(os.environ["R"] + "/fx"))'; echo still-running"#,
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(err.matches("Input/output error").count() >= 2, "{err}");
    assert!(
        err.contains("warning"),
        "usfs run should warn about the image: {err}"
    );
    assert_eq!(out, "False\nstill-running\n");
}

/// Overwrites `len` bytes at `off` with a pattern.
fn corrupt(img: &Path, off: u64, len: usize) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(img).unwrap();
    f.write_all_at(&vec![0xA5; len], off).unwrap();
}

#[test]
fn descriptors_survive_dup_fork_and_exec() {
    let test = "run_mount-fds";
    if !need_root(test) || !need_tool(test, "python3") {
        return;
    }
    let s = Scratch::new(test);
    let img = small_image(&s);
    let root = s.path("root");
    // dup'd descriptors share one offset; a child process started with an inherited
    // virtual descriptor reads it (handover through exec); dd reads a redirected stdin.
    let script = r#"python3 -c '
import os, subprocess, sys
R = os.environ["R"]
fd = os.open(R + "/fx/hello.txt", os.O_RDONLY)
fd2 = os.dup(fd)
print(os.read(fd, 6), os.read(fd2, 5), os.lseek(fd, 0, os.SEEK_CUR))
os.lseek(fd, 0, os.SEEK_SET)
print(subprocess.run(["cat"], stdin=fd, capture_output=True).stdout)
os.dup2(fd2, 0)
os.lseek(0, 0, os.SEEK_SET)
print(sys.stdin.buffer.read(5))
pid = os.fork()
if pid == 0:
    os.lseek(fd, 6, os.SEEK_SET)
    print("child", os.read(fd, 4), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print(os.fstat(fd).st_size, os.path.getsize(R + "/fx/big.bin"))
'; dd if=/dev/stdin bs=5 count=1 status=none < "$R/fx/hello.txt"; echo"#;
    let (code, out, err) = under_run(&img, &root, script);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "b'hello ' b'from ' 11\n\
         b'hello from usfs\\nsecond line\\n'\n\
         b'hello'\n\
         child b'from'\n\
         28 3000000\n\
         hello\n"
    );
}

/// A description shared by fork or exec shares its offset, as the kernel's do: what a
/// child reads moves the parent's offset (`{ head; cat; } < FILE`, a shell's `read`
/// builtin before a command, a forked Python child).
#[test]
fn offsets_are_shared_between_processes() {
    let test = "run_mount-offsets";
    if !need_root(test) || !need_tool(test, "python3") {
        return;
    }
    let s = Scratch::new(test);
    let img = small_image(&s);
    let root = s.path("root");
    let script = r#"{ head -c 6 >/dev/null; cat; } < "$R/fx/hello.txt"
echo ---
{ read a; echo "read:$a"; cat; } < "$R/fx/hello.txt"
echo ---
exec 3< "$R/fx/hello.txt"; head -c 11 <&3 >/dev/null; dd bs=4 count=1 status=none <&3; echo; exec 3<&-
python3 -c '
import os
fd = os.open(os.environ["R"] + "/fx/hello.txt", os.O_RDONLY)
os.read(fd, 6)
pid = os.fork()
if pid == 0:
    os.read(fd, 5)
    os._exit(0)
os.waitpid(pid, 0)
print(os.lseek(fd, 0, os.SEEK_CUR), os.read(fd, 4))
'"#;
    let home = s.path("home");
    let kernel = {
        let _m = Mount::new(&img, &root, "ext4", "ro,noatime");
        run_script(Method::Kernel, &img, &root, &home, script)
    };
    let run = run_script(Method::Run, &img, &root, &home, script);
    let expected = "from usfs\nsecond line\n\
         ---\n\
         read:hello from usfs\n\
         second line\n\
         ---\n\
         usfs\n\
         11 b'usfs'\n";
    // The kernel mount is the oracle; the literal text keeps the test from passing on
    // two equally wrong outputs.
    assert_eq!(
        (kernel.0, String::from_utf8_lossy(&kernel.1)),
        (Some(0), expected.into()),
        "{}",
        String::from_utf8_lossy(&kernel.2)
    );
    assert_eq!(
        (run.0, String::from_utf8_lossy(&run.1)),
        (Some(0), expected.into()),
        "stderr under usfs run: {}",
        String::from_utf8_lossy(&run.2)
    );
}

/// glibc walks with internal calls our hooks never see: nftw and glob must still list the
/// image under `usfs run` as they do on a kernel mount.
#[test]
fn nftw_and_glob_walk_mounts() {
    let test = "run_mount-walks";
    if !need_root(test) || !need_tool(test, "gcc") {
        return;
    }
    let s = Scratch::new(test);
    let prog = s.path("walk");
    std::fs::write(
        s.path("walk.c"),
        r#"#define _GNU_SOURCE
#include <ftw.h>
#include <glob.h>
#include <stdio.h>
static int cb(const char *p, const struct stat *sb, int t, struct FTW *f) {
    printf("%d %d %s %s %ld\n", t, f->level, p, p + f->base, (long)sb->st_size);
    return 0;
}
static int cb_depth(const char *p, const struct stat *sb, int t, struct FTW *f) {
    (void)sb; (void)f;
    printf("depth %d %s\n", t, p);
    return 0;
}
int main(int argc, char **argv) {
    (void)argc;
    if (nftw(argv[1], cb, 8, FTW_PHYS)) return 1;
    if (nftw(argv[1], cb_depth, 8, FTW_DEPTH | FTW_PHYS)) return 1;
    glob_t g;
    int r = glob(argv[2], 0, NULL, &g);
    printf("glob %d:", r);
    for (size_t i = 0; i < g.gl_pathc; i++) printf(" %s", g.gl_pathv[i]);
    printf("\n");
    return 0;
}
"#,
    )
    .unwrap();
    // Physical walks: followed links would differ by design (the image's links to /etc
    // reach the host on a kernel mount) and the loop makes glibc's walk stop at a point
    // that depends on readdir order.
    let k = c_program_agrees(&s, &prog, r#""$R/fx" "$R/fx/*/*.py" | sort"#);
    assert!(k.contains("usfsmod.py") && k.contains("glob 0:"), "{k}");
}

/// Compiles `PROG.c` (in the scratch dir) to `prog`, runs `'prog' ARGS` on a kernel mount
/// of the small image and under `usfs run`: both must exit 0 and print the same lines.
/// Returns the kernel's output.
fn c_program_agrees(s: &Scratch, prog: &Path, args: &str) -> String {
    let img = small_image(s);
    let root = s.path("root");
    run_ok(
        Command::new("gcc")
            .arg("-o")
            .arg(prog)
            .arg(prog.with_extension("c")),
    );
    let script = format!("'{}' {args}", prog.display());
    let home = s.path("home");
    let kernel = {
        let _m = Mount::new(&img, &root, "ext4", "ro,noatime");
        run_script(Method::Kernel, &img, &root, &home, &script)
    };
    assert_eq!(kernel.0, Some(0), "{}", String::from_utf8_lossy(&kernel.2));
    let run = run_script(Method::Run, &img, &root, &home, &script);
    assert_eq!(run.0, Some(0), "{}", String::from_utf8_lossy(&run.2));
    let k = String::from_utf8_lossy(&kernel.1).into_owned();
    let r = String::from_utf8_lossy(&run.1);
    if let Some((i, (a, b))) = k
        .lines()
        .zip(r.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
    {
        panic!("line {i} differs:\n kernel: {a}\n run:    {b}");
    }
    assert_eq!(
        r.lines().count(),
        k.lines().count(),
        "the outputs differ in length"
    );
    k
}

/// glibc's fts (whose directory reads never reach our hooks) walks a tree inside a mount
/// as on a kernel mount: preorder/postorder, levels, sorted children, fts_children,
/// FTS_SKIP, FTS_SEEDOT, a walk that starts on the host; and freopen of stdin onto a file
/// in the image reads it.
#[test]
fn fts_and_freopen_see_mounts() {
    let test = "run_mount-fts";
    if !need_root(test) || !need_tool(test, "gcc") {
        return;
    }
    let s = Scratch::new(test);
    let prog = s.path("fts");
    std::fs::write(
        s.path("fts.c"),
        r#"#define _GNU_SOURCE
#include <errno.h>
#include <fts.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
static int byname(const FTSENT **a, const FTSENT **b) { return strcmp((*a)->fts_name, (*b)->fts_name); }
static int walk(char *root, int opts, int skip_sub) {
    char *roots[] = { root, NULL };
    FTS *f = fts_open(roots, opts, byname);
    if (!f) { perror("fts_open"); return 1; }
    FTSENT *e;
    while ((e = fts_read(f))) {
        /* glibc's postorder entries of roots and skipped directories carry leftovers
           (a changed fts_name, a trailing '/'), and fts_statp is undefined with
           FTS_NOSTAT: print what is defined. */
        if (e->fts_info == FTS_DP) { printf("DP %d\n", e->fts_level); continue; }
        long size = e->fts_info == FTS_F ? (long)e->fts_statp->st_size : -1;
        /* fts_accpath is relative after glibc's chdir, absolute in ours (no chdir): both
           must reach the file. */
        int acc = (e->fts_info == FTS_F || e->fts_info == FTS_D) ? access(e->fts_accpath, F_OK) == 0 : -1;
        printf("%d %d %s %d %s %ld %d\n", e->fts_info, e->fts_level, e->fts_path, acc,
               e->fts_level ? e->fts_name : "-", size, e->fts_errno);
        if (e->fts_info == FTS_D && e->fts_level == 1) {
            printf("children:");
            for (FTSENT *c = fts_children(f, 0); c; c = c->fts_link) printf(" %s", c->fts_name);
            printf("\n");
        }
        if (skip_sub && e->fts_info == FTS_D && !strcmp(e->fts_name, "sub")) fts_set(f, e, FTS_SKIP);
    }
    fts_close(f);
    return 0;
}
int main(int argc, char **argv) {
    (void)argc;
    if (walk(argv[1], FTS_PHYSICAL, 0)) return 1;
    if (walk(argv[1], FTS_PHYSICAL | FTS_NOCHDIR | FTS_SEEDOT, 1)) return 1;
    if (walk(argv[2], FTS_PHYSICAL | FTS_NOSTAT, 0)) return 1;
    if (!freopen(argv[3], "r", stdin)) { perror("freopen"); return 1; }
    char line[256];
    while (fgets(line, sizeof line, stdin)) printf("stdin: %s", line);
    if (freopen(argv[3], "w", stdout) || errno != EROFS) return 2;
    return 0;
}
"#,
    )
    .unwrap();
    let k = c_program_agrees(&s, &prog, r#""$R/fx" "$R/fx/sub" "$R/fx/hello.txt""#);
    assert!(
        k.contains("stdin: hello from usfs") && k.contains("children:"),
        "{k}"
    );
}

/// statfs (`stat -f`, df's numbers) answers as the kernel's ext4 does for the same image:
/// total blocks less the metadata and journal overhead, available blocks less the
/// reserved ones and the kernel's own reserve; with 1 KiB and 4 KiB blocks, meta_bg,
/// sparse_super2, without a journal, ext2; and as the kernel's erofs.
#[test]
fn statfs_matches_the_kernel() {
    let test = "run_mount-statfs";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a"), "a file\n").unwrap();
    let root = s.path("root");
    let home = s.path("home");
    let script = r#"stat -f -c '%b %f %a %c %d %s %l' "$R""#;
    for (i, (size, args)) in [
        ("64M", &["-t", "ext4"][..]),
        ("300M", &["-t", "ext4", "-b", "4096"]),
        (
            "300M",
            &[
                "-t",
                "ext4",
                "-b",
                "1024",
                "-O",
                "64bit,meta_bg,^resize_inode",
            ],
        ),
        ("300M", &["-t", "ext4", "-O", "sparse_super2,^has_journal"]),
        ("64M", &["-t", "ext2"]),
    ]
    .into_iter()
    .enumerate()
    {
        let img = s.path(&format!("img{i}"));
        mke2fs(&img, size, args, Some(&src));
        let kernel = {
            let _m = Mount::new(&img, &root, "ext4", "ro,noatime");
            run_script(Method::Kernel, &img, &root, &home, script)
        };
        assert_eq!(kernel.0, Some(0), "{}", String::from_utf8_lossy(&kernel.2));
        let run = run_script(Method::Run, &img, &root, &home, script);
        assert_eq!(run.0, Some(0), "{}", String::from_utf8_lossy(&run.2));
        assert_eq!(
            String::from_utf8_lossy(&run.1),
            String::from_utf8_lossy(&kernel.1),
            "mke2fs {args:?} {size}: statfs differs from the kernel's"
        );
    }
    // EROFS: no free blocks, an unlimited inode count.
    let img = s.path("erofs");
    run_ok(
        Command::new(usfs())
            .args(["mkfs.erofs", "--quiet", "-zlz4hc"])
            .arg(&img)
            .arg(&src),
    );
    let kernel = {
        let _m = Mount::new(&img, &root, "erofs", "ro");
        run_script(Method::Kernel, &img, &root, &home, script)
    };
    assert_eq!(kernel.0, Some(0), "{}", String::from_utf8_lossy(&kernel.2));
    let run = run_script(Method::Run, &img, &root, &home, script);
    assert_eq!(
        String::from_utf8_lossy(&run.1),
        String::from_utf8_lossy(&kernel.1),
        "EROFS: statfs differs from the kernel's"
    );
}

/// Every call that would change a file system, on names in the image, fails with the
/// errno a read-only kernel mount gives (EEXIST, ENOENT, ENOTDIR, EISDIR, EINVAL,
/// ENOTEMPTY, EXDEV, EOPNOTSUPP where the kernel's checks come before EROFS), including
/// the `*at`, `l*` and mkstemp spellings and open's O_CREAT/O_TMPFILE cases; host names
/// reached from a working directory inside the image through ".." are changed on the host
/// (not relative to the kernel's working directory); AT_EMPTY_PATH with AT_FDCWD stats the
/// virtual working directory; descriptor links read as the open file's path.
#[test]
fn modifying_calls_fail_like_the_kernel_and_leave_through_dotdot() {
    let test = "run_mount-modify";
    if !need_root(test) || !need_tool(test, "gcc") {
        return;
    }
    let s = Scratch::new(test);
    let prog = s.path("modify");
    std::fs::write(s.path("modify.c"), MODIFY_C).unwrap();
    let k = c_program_agrees(&s, &prog, r#""$R" "$(dirname "$R")""#);
    for line in [
        "mkdir existing               EEXIST",
        "mkdir no parent              ENOENT",
        "unlink missing               EROFS",
        "rename to host               EXDEV",
        "open tmpfile dir             EROFS",
        "mkstemp in cwd               EROFS",
        "  host d2         exists",
        "  filled: 1",
        "readlink fd link 2: the file",
        "  same as '.': 1",
    ] {
        assert!(k.lines().any(|l| l == line), "no {line:?} in:\n{k}");
    }
    // Nothing was left behind: not in the scratch directory, not in the test's cwd.
    for name in [
        "v1", "d1", "d2", "l1", "l2", "h1", "f1", "n1", "hostfile", "never",
    ] {
        assert!(!s.path(name).exists(), "{name} left behind");
    }
}

const MODIFY_C: &str = r#"#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>
/* Every call a program can make to change a file system, on names in a read-only mount
   (R) and on host names reached from a working directory inside it through "..": prints
   each call's result (ok or the errno's name) and whether the host names exist after. */
static const char *R, *H;
static char p1[4096], p2[4096];
static const char *at(const char *base, const char *rel, char *buf) {
    snprintf(buf, 4096, "%s/%s", base, rel);
    return buf;
}
static void show(const char *what, long r) {
    printf("%-28s %s\n", what, r < 0 ? strerrorname_np(errno) : "ok");
}
static void exists(const char *rel) {
    struct stat st;
    printf("  host %-10s %s\n", rel, lstat(at(H, rel, p1), &st) == 0 ? "exists" : "missing");
}
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    R = argv[1]; H = argv[2];
    char b[4096];
    /* Names in the mount. */
    show("mkdir existing", mkdir(at(R, "fx/sub", p1), 0755));
    show("mkdir new", mkdir(at(R, "fx/newdir", p1), 0755));
    show("mkdir no parent", mkdir(at(R, "nodir/x", p1), 0755));
    show("mkdir parent is file", mkdir(at(R, "fx/hello.txt/x", p1), 0755));
    show("mkdir dot", mkdir(at(R, "fx/.", p1), 0755));
    show("mkdir dotdot", mkdir(at(R, "fx/sub/..", p1), 0755));
    show("mkdirat new", mkdirat(AT_FDCWD, at(R, "fx/n2", p1), 0755));
    show("mkfifo existing", mkfifo(at(R, "fx/hello.txt", p1), 0644));
    show("mkfifo new", mkfifo(at(R, "fx/ff", p1), 0644));
    show("mkfifoat new", mkfifoat(AT_FDCWD, at(R, "fx/ff2", p1), 0644));
    show("mknod new", mknod(at(R, "fx/nod", p1), S_IFREG | 0644, 0));
    show("symlink existing", symlink("x", at(R, "fx/hello.txt", p1)));
    show("symlink new", symlink("x", at(R, "fx/newl", p1)));
    show("symlinkat new", symlinkat("x", AT_FDCWD, at(R, "fx/newl2", p1)));
    show("chmod missing", chmod(at(R, "fx/missing", p1), 0600));
    show("chmod file", chmod(at(R, "fx/hello.txt", p1), 0600));
    show("fchmodat nofollow link", fchmodat(AT_FDCWD, at(R, "fx/abs", p1), 0600, AT_SYMLINK_NOFOLLOW));
    show("chown missing", chown(at(R, "fx/missing", p1), 1, 1));
    show("lchown link", lchown(at(R, "fx/abs", p1), 1, 1));
    show("truncate missing", truncate(at(R, "fx/missing", p1), 0));
    show("truncate dir", truncate(at(R, "fx/sub", p1), 0));
    show("truncate file", truncate(at(R, "fx/hello.txt", p1), 0));
    show("setxattr missing", setxattr(at(R, "fx/missing", p1), "user.x", "1", 1, 0));
    show("removexattr file", removexattr(at(R, "fx/hello.txt", p1), "user.x"));
    show("utime file", utime(at(R, "fx/hello.txt", p1), NULL));
    show("utime missing", utime(at(R, "fx/missing", p1), NULL));
    show("lutimes file", lutimes(at(R, "fx/hello.txt", p1), NULL));
    show("futimesat file", futimesat(AT_FDCWD, at(R, "fx/hello.txt", p1), NULL));
    show("utimensat missing", utimensat(AT_FDCWD, at(R, "fx/missing", p1), NULL, 0));
    show("unlink missing", unlink(at(R, "fx/missing", p1)));
    show("unlink dot", unlink(at(R, "fx/.", p1)));
    show("unlink file", unlink(at(R, "fx/hello.txt", p1)));
    show("rmdir dot", rmdir(at(R, "fx/.", p1)));
    show("rmdir dotdot", rmdir(at(R, "fx/sub/..", p1)));
    show("rmdir missing", rmdir(at(R, "fx/missing", p1)));
    show("rmdir no parent", rmdir(at(R, "nodir/x", p1)));
    show("unlinkat removedir", unlinkat(AT_FDCWD, at(R, "fx/sub", p1), AT_REMOVEDIR));
    show("remove file", remove(at(R, "fx/hello.txt", p1)));
    show("remove missing", remove(at(R, "fx/missing", p1)));
    show("remove dir", remove(at(R, "fx/sub", p1)));
    show("remove dot", remove(at(R, "fx/.", p1)));
    int hf = open(at(H, "hostfile", p1), O_CREAT | O_WRONLY, 0644);
    show("host file", hf);
    close(hf);
    show("rename in mount", rename(at(R, "fx/hello.txt", p1), at(R, "fx/x", p2)));
    show("rename missing", rename(at(R, "fx/missing", p1), at(R, "fx/x", p2)));
    show("rename to host", rename(at(R, "fx/hello.txt", p1), at(H, "never", p2)));
    show("renameat from host", renameat(AT_FDCWD, at(H, "hostfile", p1), AT_FDCWD, at(R, "fx/x", p2)));
    exists("hostfile");
    show("link missing", link(at(R, "fx/missing", p1), at(R, "fx/x", p2)));
    show("link onto existing", link(at(R, "fx/hello.txt", p1), at(R, "fx/sub", p2)));
    show("link from host", link(at(H, "hostfile", p1), at(R, "fx/x", p2)));
    show("linkat to host", linkat(AT_FDCWD, at(R, "fx/hello.txt", p1), AT_FDCWD, at(H, "never", p2), 0));
    exists("never");
    show("open create no parent", open(at(R, "nodir/x", p1), O_WRONLY | O_CREAT, 0644));
    show("open create new", open(at(R, "fx/new.txt", p1), O_WRONLY | O_CREAT, 0644));
    show("open create dir", open(at(R, "fx/sub", p1), O_RDONLY | O_CREAT, 0644));
    show("open creat+directory", open(R, O_RDONLY | O_DIRECTORY | O_CREAT, 0644));
    show("open tmpfile dir", open(at(R, "fx", p1), O_TMPFILE | O_RDWR, 0600));
    show("open tmpfile file", open(at(R, "fx/hello.txt", p1), O_TMPFILE | O_RDWR, 0600));
    show("open tmpfile rdonly", open(at(R, "fx", p1), O_TMPFILE | O_RDONLY, 0600));
    show("fopen w no parent", fopen(at(R, "nodir/f", p1), "w") ? 0 : -1);
    show("fopen w dir", fopen(at(R, "fx/sub", p1), "w") ? 0 : -1);
    show("fopen wx existing", fopen(at(R, "fx/hello.txt", p1), "wx") ? 0 : -1);
    show("fopen r+ file", fopen(at(R, "fx/hello.txt", p1), "r+") ? 0 : -1);
    show("fopen a new", fopen(at(R, "fx/new", p1), "a") ? 0 : -1);
    show("freopen w no parent", freopen(at(R, "nodir/f", p1), "w", fopen("/dev/null", "r")) ? 0 : -1);
    show("freopen w dir", freopen(at(R, "fx/sub", p1), "w", fopen("/dev/null", "r")) ? 0 : -1);
    strcpy(b, R); strcat(b, "/fx/tXXXXXX");
    show("mkstemp in mount", mkstemp(b));
    strcpy(b, R); strcat(b, "/fx/tXXXXXX.s");
    show("mkstemps in mount", mkstemps(b, 2));
    strcpy(b, R); strcat(b, "/fx/tXXXXXX");
    show("mkostemp in mount", mkostemp(b, O_CLOEXEC));
    strcpy(b, R); strcat(b, "/fx/dXXXXXX");
    show("mkdtemp in mount", mkdtemp(b) ? 0 : -1);
    strcpy(b, R); strcat(b, "/fx/tXXXX");
    show("mkstemp bad template", mkstemp(b));
    strcpy(b, R); strcat(b, "/fx/tXXXXXX.s");
    show("mkstemps bad suffix", mkstemps(b, 3));
    show("readlink size 0", readlink(at(R, "fx/abs", p1), b, 0));
    /* Descriptor links: the path of the open file. */
    int fd = open(at(R, "fx/hello.txt", p1), O_RDONLY);
    const char *links[] = { "/proc/self/fd/%d", "/dev/fd/%d", "/proc/%d/fd/%d" };
    for (int i = 0; i < 3; i++) {
        if (i == 2) snprintf(p2, sizeof p2, links[i], (int)getpid(), fd);
        else snprintf(p2, sizeof p2, links[i], fd);
        ssize_t n = readlink(p2, b, sizeof b - 1);
        b[n < 0 ? 0 : n] = 0;
        printf("readlink fd link %d: %s\n", i, strcmp(b, at(R, "fx/hello.txt", p1)) == 0 ? "the file" : b);
    }
    char *rp = realpath(p2, NULL);
    printf("realpath fd link: %s\n", rp && !strcmp(rp, at(R, "fx/hello.txt", p1)) ? "the file" : rp ? rp : strerrorname_np(errno));
    /* The working directory inside the mount. */
    if (chdir(at(R, "fx/sub", p1))) return 3;
    struct stat st, st2;
    stat(".", &st2);
    show("fstatat empty cwd", fstatat(AT_FDCWD, "", &st, AT_EMPTY_PATH));
    printf("  same as '.': %d\n", st.st_ino == st2.st_ino && st.st_nlink == st2.st_nlink);
    struct statx sx;
    show("statx empty cwd", statx(AT_FDCWD, "", AT_EMPTY_PATH, STATX_INO, &sx));
    printf("  same as '.': %d\n", sx.stx_ino == st2.st_ino);
    strcpy(b, "tXXXXXX");
    show("mkstemp in cwd", mkstemp(b));
    show("getcwd size 0", getcwd(b, 0) ? 0 : -1);
    show("fchownat empty cwd", fchownat(AT_FDCWD, "", 1, 1, AT_EMPTY_PATH));
    show("utimensat empty cwd", utimensat(AT_FDCWD, "", NULL, AT_EMPTY_PATH));
    int pf = open(at(R, "fx/hello.txt", p1), O_PATH);
    show("flistxattr O_PATH", flistxattr(pf, b, sizeof b));
    show("fgetxattr O_PATH", fgetxattr(pf, "user.x", b, sizeof b));
    close(pf);
    /* Host names reached from the mount's root through "..". */
    if (chdir(R)) return 3;
    show("open ../v1", hf = open("../v1", O_CREAT | O_WRONLY, 0644));
    close(hf);
    show("mkdir ../d1", mkdir("../d1", 0755));
    show("rename ../d1 ../d2", rename("../d1", "../d2"));
    exists("d1"); exists("d2");
    show("symlink ../l1", symlink("x", "../l1"));
    show("symlinkat ../l2", symlinkat("x", AT_FDCWD, "../l2"));
    show("link ../v1 ../h1", link("../v1", "../h1"));
    show("chmod ../v1", chmod("../v1", 0600));
    show("truncate ../v1", truncate("../v1", 0));
    show("utimes ../v1", utimes("../v1", NULL));
    show("mkfifo ../f1", mkfifo("../f1", 0644));
    show("mknod ../n1", mknod("../n1", S_IFREG | 0644, 0));
    show("setxattr ../v1", setxattr("../v1", "user.t", "1", 1, 0));
    show("removexattr ../v1", removexattr("../v1", "user.t"));
    exists("v1"); exists("l1"); exists("l2"); exists("h1"); exists("f1"); exists("n1");
    strcpy(b, "../tXXXXXX");
    int t = mkstemp(b);
    show("mkstemp ../tXXXXXX", t);
    printf("  filled: %d\n", strcmp(b, "../tXXXXXX") != 0); /* the name may hold an X */
    show("unlink it", unlink(b));
    strcpy(b, "../dXXXXXX");
    show("mkdtemp ../dXXXXXX", mkdtemp(b) ? 0 : -1);
    show("rmdir it", rmdir(b));
    show("unlink ../l1", unlink("../l1"));
    show("unlinkat ../l2", unlinkat(AT_FDCWD, "../l2", 0));
    show("unlink ../h1", unlink("../h1"));
    show("unlink ../f1", unlink("../f1"));
    show("unlink ../n1", unlink("../n1"));
    hf = open("../rm1", O_CREAT | O_WRONLY, 0644);
    close(hf);
    show("remove ../rm1", remove("../rm1"));
    exists("rm1");
    show("unlink ../v1", unlink("../v1"));
    show("rmdir ../d2", rmdir("../d2"));
    show("unlink hostfile", unlink(at(H, "hostfile", p1)));
    exists("v1"); exists("d2"); exists("l1");
    return 0;
}
"#;

/// Programs stored in an image run: a binary and a `#!` script, by absolute path, by a
/// relative path from a `cd` into the image, through execv and posix_spawn from Python; a file without
/// execute permission gives EACCES, as on a kernel mount.
#[test]
fn programs_stored_in_an_image_run() {
    let test = "run_mount-exec";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = s.path("src");
    std::fs::create_dir_all(src.join("bin")).unwrap();
    std::fs::copy("/bin/echo", src.join("bin/echo")).unwrap();
    std::fs::write(
        src.join("bin/hello.sh"),
        // ($0 is /dev/fd/N under usfs run, as with fexecve: the script does not use it.)
        "#!/bin/sh\necho \"script says $1\"\n",
    )
    .unwrap();
    std::fs::write(src.join("data.txt"), "data\n").unwrap();
    std::fs::write(src.join("bin/noexec"), "#!/bin/sh\necho never\n").unwrap();
    sh(&format!(
        "chmod 755 '{0}/bin/echo' '{0}/bin/hello.sh' && chmod 644 '{0}/bin/noexec'",
        src.display()
    ));
    let img = s.path("image");
    mke2fs(&img, "16M", &["-t", "ext4"], Some(&src));
    let root = s.path("root");
    let script = r#"
"$R/bin/echo" absolute
"$R/bin/hello.sh" one | head -1
cd "$R/bin" && ./echo relative && ./hello.sh two | head -1
python3 -c 'import os, sys; sys.stdout.flush(); os.execv(sys.argv[1], [sys.argv[1], "from-python"])' "$R/bin/echo"
"$R/bin/noexec"; echo "noexec status $?"
python3 -c 'import os, sys; p = sys.argv[1]; os.waitpid(os.posix_spawn(p, [p, "spawned"], os.environ), 0)' "$R/bin/echo"
python3 -c 'import os, sys; p = sys.argv[1]; os.waitpid(os.posix_spawn(p, [p, "three"], os.environ), 0)' "$R/bin/hello.sh"
env PATH="/nonexistent:$R/bin:/usr/bin:/bin" hello.sh via-path | head -1
env PATH="$R/bin:/usr/bin:/bin" noexec; echo "path noexec status $?"
env PATH="/nonexistent:$R/bin" no-such-program; echo "path missing status $?"
env PATH="$R/bin:/usr/bin:/bin" sh -c 'echo host sh found'
PATH="$R/bin:/usr/bin:/bin" python3 -c 'import os; os.waitpid(os.posix_spawnp("hello.sh", ["hello.sh", "spawnp"], os.environ), 0)'
"#;
    let home = s.path("home");
    let kernel = {
        let _m = Mount::new(&img, &root, "ext4", "ro,noatime");
        run_script(Method::Kernel, &img, &root, &home, script)
    };
    let run = run_script(Method::Run, &img, &root, &home, script);
    let k = String::from_utf8_lossy(&kernel.1);
    assert!(
        k.contains("absolute\n")
            && k.contains("script says two")
            && k.contains("noexec status 126")
            && k.contains("script says via-path")
            && k.contains("path noexec status 126")
            && k.contains("path missing status 127")
            && k.contains("script says spawnp"),
        "{k}\n{}",
        String::from_utf8_lossy(&kernel.2)
    );
    assert_eq!(
        String::from_utf8_lossy(&run.1),
        k,
        "stderr under usfs run: {}",
        String::from_utf8_lossy(&run.2)
    );
    // The command usfs run starts may itself be in the image, by path or through PATH.
    let top = |path_env: Option<String>, cmd: &[&str]| {
        let mut c = Command::new(usfs());
        c.arg("run")
            .arg("-m")
            .arg(format!("{}={}", root.display(), img.display()))
            .arg("--")
            .args(cmd)
            .env("LC_ALL", "C");
        if let Some(p) = path_env {
            c.env("PATH", p);
        }
        let (code, out, err) = run_limited(&mut c, Duration::from_secs(60));
        (
            code,
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    };
    let script_path = format!("{}/bin/hello.sh", root.display());
    let (code, out, err) = top(None, &[&script_path, "top"]);
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "script says top\n"),
        "{err}"
    );
    let path = format!("{}/bin:/usr/bin:/bin", root.display());
    let (code, out, err) = top(Some(path.clone()), &["hello.sh", "by-path"]);
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "script says by-path\n"),
        "{err}"
    );
    let (code, _, _) = top(Some(path), &["no-such-program"]);
    assert_eq!(code, Some(127));
}

/// An unprivileged caller gets EACCES where the kernel says so (search permission on
/// directories, read permission to open), and reads what it may. The same script runs as
/// user `nobody` on a kernel mount and under `usfs run`.
#[test]
fn unprivileged_callers_get_the_kernels_permission_errors() {
    let test = "run_mount-perms";
    if !need_root(test) || !need_tool(test, "setpriv") {
        return;
    }
    check_preload_built();
    let s = Scratch::new(test);
    let src = s.path("src");
    std::fs::create_dir_all(src.join("closed")).unwrap();
    std::fs::create_dir_all(src.join("shut")).unwrap();
    std::fs::write(src.join("closed/inside"), "secret\n").unwrap();
    std::fs::write(src.join("shut/visible-name"), "x\n").unwrap();
    std::fs::write(src.join("private"), "secret\n").unwrap();
    std::fs::write(src.join("public"), "hello\n").unwrap();
    sh(&format!(
        "cd '{}' && chmod 700 closed && chmod 711 shut && chmod 600 private && chmod 644 public",
        src.display()
    ));
    let img = s.path("image");
    mke2fs(&img, "16M", &["-t", "ext4"], Some(&src));
    sh(&format!(
        "chmod 755 '{}' && chmod 644 '{}'",
        s.0.display(),
        img.display()
    ));
    let root = s.path("root");
    let script = r#"cd /; for p in public private closed/inside shut/visible-name; do cat "$R/$p" 2>&1; done
ls "$R/closed" 2>&1; ls "$R/shut" 2>&1; stat -c %n "$R/closed/inside" 2>&1
test -r "$R/private" && echo readable || echo not-readable; echo end"#;
    let as_nobody = |wrap_run: bool| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        if wrap_run {
            c.arg(usfs())
                .arg("run")
                .arg("-m")
                .arg(format!("{}={}", root.display(), img.display()))
                .arg("--");
        }
        c.args(["sh", "-c", script])
            .env("R", &root)
            .env("USFS_SHARED_CACHE_DIR", root.with_file_name("zcache"))
            .env("LC_ALL", "C");
        let (code, out, err) = run_limited(&mut c, Duration::from_secs(60));
        assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&err));
        String::from_utf8_lossy(&out).into_owned()
    };
    let kernel = {
        let _m = Mount::new(&img, &root, "ext4", "ro,noatime");
        as_nobody(false)
    };
    assert!(
        kernel.contains("Permission denied") && kernel.contains("hello"),
        "{kernel}"
    );
    assert_eq!(as_nobody(true), kernel);
}

/// Deterministic compressible text of `len` bytes (words from a small vocabulary).
fn text(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w = (x % 50) as usize;
        out.extend_from_slice(format!("w{w:02}{} ", "ab".repeat(w % 5)).as_bytes());
        if x.is_multiple_of(13) {
            out.push(b'\n');
        }
    }
    out.truncate(len);
    out
}

#[test]
fn erofs_decompressed_cache_is_shared_between_processes_and_keyed_by_image() {
    let test = "run_mount-shared-cache";
    if !need_root(test) || !need_tool(test, "md5sum") {
        return;
    }
    check_preload_built();
    let s = Scratch::new(test);
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    let size = 3 * 1024 * 1024 + 12345;
    let img = s.path("img.erofs");
    let cache = s.path("zcache");
    let root = s.path("root");
    let build = |seed: u64| {
        std::fs::write(src.join("big.txt"), text(size, seed)).unwrap();
        let _ = std::fs::remove_file(&img);
        run_ok(
            Command::new(usfs())
                .args(["mkfs.erofs", "--quiet", "-zlz4hc"])
                .arg(&img)
                .arg(&src),
        );
        String::from_utf8(sh(&format!("cd '{}' && md5sum big.txt", src.display())).stdout).unwrap()
    };
    // Whole-file checksum plus pieces read at scattered offsets with small blocks.
    let script = r#"cd "$R" && md5sum big.txt && for k in 7 700 1500 3100; do dd if=big.txt bs=1000 skip=$k count=3 status=none | md5sum; done"#;
    let expect = |want_md5: &str| {
        let mut e = want_md5.to_string();
        for k in [7, 700, 1500, 3100] {
            e += &String::from_utf8(
                sh(&format!(
                    "dd if='{}' bs=1000 skip={k} count=3 status=none | md5sum",
                    src.join("big.txt").display()
                ))
                .stdout,
            )
            .unwrap();
        }
        e
    };
    let run = |extra: &[(&str, &str)]| {
        check_preload_built();
        let mut cmd = Command::new(usfs());
        cmd.arg("run")
            .arg("-m")
            .arg(format!("{}={}", root.display(), img.display()))
            .args(["--", "sh", "-c", script])
            .env("R", &root)
            .env("USFS_SHARED_CACHE_DIR", &cache);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let (code, out, err) = run_limited(&mut cmd, Duration::from_secs(60));
        assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&err));
        String::from_utf8(out).unwrap()
    };
    let cache_files = || -> Vec<(String, u64)> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::read_dir(&cache) {
            Ok(rd) => rd
                .map(|e| {
                    let e = e.unwrap();
                    let m = e.metadata().unwrap();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        m.blocks() * 512,
                    )
                })
                .collect(),
            Err(_) => Vec::new(),
        }
    };

    // 1. Turned off: correct data, no cache files.
    let first = build(1);
    let want = expect(&first);
    assert_eq!(run(&[("USFS_SHARED_CACHE_MB", "0")]), want);
    assert!(cache_files().is_empty(), "{:?}", cache_files());

    // 2. Four processes at once fill one cache file together; each reads correct data.
    let outs: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4).map(|_| sc.spawn(|| run(&[]))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outs {
        assert_eq!(o, &want);
    }
    let files = cache_files();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].1 >= size as u64,
        "the whole file was read, so all of it is cached: {files:?}"
    );
    // 3. A later process reads from the filled cache: the same bytes.
    assert_eq!(run(&[]), want);
    assert_eq!(cache_files().len(), 1);

    // 4. A new image at the same path, same file size, other content: a new cache file,
    //    never the old bytes.
    let second = build(2);
    assert_ne!(first, second);
    let want2 = expect(&second);
    assert_eq!(run(&[]), want2);
    assert_eq!(cache_files().len(), 2, "{:?}", cache_files());
}

/// Reads at the edges of the shared cache's 2 MiB chunks and of the file (straddling
/// chunk boundaries, at and past the end, whole files by 1 MiB, 4 KiB and 3000-byte
/// reads, random pieces) print the same bytes (as MD5s) under `usfs run` as on a kernel
/// mount: with the cache cold (random reads fill chunks out of order), warm, with a budget
/// too small for the larger files (they are read without the cache) and turned off.
#[test]
fn erofs_reads_at_chunk_edges_match_the_kernel_cold_warm_and_over_budget() {
    let test = "run_mount-chunk-edges";
    if !need_root(test) || !need_tool(test, "python3") || !need_tool(test, "mkfs.erofs") {
        return;
    }
    check_preload_built();
    let s = Scratch::new(test);
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    let mib = 1 << 20;
    // Three chunks with a short last one; exactly two chunks; one short chunk.
    let files = [
        ("big", 5 * mib + 777),
        ("exact", 4 * mib),
        ("small", 100 << 10),
    ];
    for (i, (name, len)) in files.iter().enumerate() {
        std::fs::write(src.join(name), text(*len, 11 + i as u64)).unwrap();
    }
    let img = s.path("img.erofs");
    run_ok(
        Command::new(usfs())
            .args(["mkfs.erofs", "--quiet", "-zlz4hc"])
            .arg(&img)
            .arg(&src),
    );
    let script = s.path("edges.py");
    std::fs::write(
        &script,
        r#"import hashlib, os, random, sys
C = 2 << 20
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    size = os.fstat(fd).st_size
    cases = [(0, 1), (C - 1, 2), (C - 4096, 8192), (2 * C - 10, C + 20), (C, C),
             (3 * C - 7, 4096), (size - 5, 100), (size, 10), (size + 100, 10),
             (max(size - C - 3, 0), C + 3), (0, size + 5)]
    rng = random.Random(size)
    cases += [(rng.randrange(0, size), rng.choice([1, 1000, 4096, 65536, 1 << 20]))
              for _ in range(40)]
    for off, n in cases:
        b = os.pread(fd, n, off)
        print(os.path.basename(p), off, n, len(b), hashlib.md5(b).hexdigest())
    for bs in (1 << 20, 4096, 3000):
        os.lseek(fd, 0, 0)
        h, t = hashlib.md5(), 0
        while True:
            b = os.read(fd, bs)
            if not b:
                break
            h.update(b)
            t += len(b)
        print(os.path.basename(p), "read", bs, t, h.hexdigest())
    os.close(fd)
"#,
    )
    .unwrap();
    let args = |dir: &Path| -> Vec<String> {
        let mut a = vec![script.display().to_string()];
        a.extend(files.iter().map(|(n, _)| dir.join(n).display().to_string()));
        a
    };
    let want = {
        let m = Mount::new(&img, &s.path("kmnt"), "erofs", "ro");
        let o = run_ok(Command::new("python3").args(args(&m.dir)));
        String::from_utf8(o.stdout).unwrap()
    };
    assert!(want.lines().count() > 150, "{want}");
    let root = s.path("root");
    let run = |cache: &Path, mb: &str| {
        let mut cmd = Command::new(usfs());
        cmd.arg("run")
            .arg("-m")
            .arg(format!("{}={}", root.display(), img.display()))
            .arg("--")
            .arg("python3")
            .args(args(&root))
            .env("USFS_SHARED_CACHE_DIR", cache)
            .env("USFS_SHARED_CACHE_MB", mb);
        let (code, out, err) = run_limited(&mut cmd, Duration::from_secs(120));
        assert_eq!(code, Some(0), "{}", String::from_utf8_lossy(&err));
        String::from_utf8(out).unwrap()
    };
    let count = |cache: &Path| std::fs::read_dir(cache).map_or(0, |rd| rd.count());
    let check = |got: String, what: &str| {
        if got != want {
            let (g, w): (Vec<_>, Vec<_>) = (got.lines().collect(), want.lines().collect());
            let i = (0..g.len().max(w.len()))
                .find(|&i| g.get(i) != w.get(i))
                .unwrap();
            panic!(
                "{what}: line {i}: usfs run {:?}, kernel {:?}",
                g.get(i),
                w.get(i)
            );
        }
    };
    let cache = s.path("zcache");
    check(run(&cache, "1024"), "cold cache");
    assert_eq!(count(&cache), files.len(), "one cache file per file");
    check(run(&cache, "1024"), "warm cache");
    // Budget 6 MiB: files over 3 MiB are not cached, the small one is.
    let small = s.path("zcache-small");
    check(run(&small, "6"), "over budget");
    assert_eq!(count(&small), 1);
    check(run(&s.path("zcache-off"), "0"), "cache off");
    assert_eq!(count(&s.path("zcache-off")), 0);
}
