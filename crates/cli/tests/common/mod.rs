//! Shared test support: scratch directories, running tools, kernel mounts that clean up.

#![allow(dead_code)]

pub(crate) mod erofs;
pub(crate) mod fuse_rw;
pub(crate) mod kill;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The usfs binary under test.
pub(crate) fn usfs() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_usfs"))
}

/// True when running as root; otherwise prints a visible SKIP line.
pub(crate) fn need_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    eprintln!("SKIP {test}: needs root (loop mounts, mknod, chown)");
    false
}

/// True if `tool` is on PATH; otherwise prints a visible SKIP line.
pub(crate) fn need_tool(test: &str, tool: &str) -> bool {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIP {test}: {tool} not installed");
    }
    ok
}

/// A scratch directory removed on drop (unmount anything inside it first).
pub(crate) struct Scratch(pub PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let base = std::env::var_os("USFS_TEST_TMP")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let p = base.join(format!("usfs-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `usfs fsck ARGS IMAGE`: its exit code and standard output.
pub(crate) fn usfs_fsck(img: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(usfs())
        .arg("fsck")
        .args(args)
        .arg(img)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Runs a command, panicking with its output if it fails.
pub(crate) fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{cmd:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Runs a shell snippet, panicking on failure.
pub(crate) fn sh(script: &str) -> Output {
    run_ok(Command::new("sh").arg("-c").arg(script))
}

/// Runs a command with a time limit; returns (exit code or None if killed, stdout, stderr).
/// Both pipes are drained while the command runs, so large outputs never stall it.
pub(crate) fn run_limited(cmd: &mut Command, limit: Duration) -> (Option<i32>, Vec<u8>, Vec<u8>) {
    use std::io::Read;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped")));
    let err = drain(Box::new(child.stderr.take().expect("piped")));
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    (
        code,
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    )
}

/// A loop mount of an image, unmounted (and its loop device freed) on drop, also when
/// the test fails.
pub(crate) struct Mount {
    pub dir: PathBuf,
}

impl Mount {
    /// `mount -t TYPE -o loop,OPTS IMAGE DIR`.
    pub(crate) fn new(image: &Path, dir: &Path, fstype: &str, opts: &str) -> Mount {
        std::fs::create_dir_all(dir).unwrap();
        let o = if opts.is_empty() {
            "loop".to_string()
        } else {
            format!("loop,{opts}")
        };
        run_ok(
            Command::new("mount")
                .args(["-t", fstype, "-o", &o])
                .arg(image)
                .arg(dir),
        );
        Mount {
            dir: dir.to_path_buf(),
        }
    }
}

impl Mount {
    /// [`Mount::new`], or None when mount fails (the kernel refuses the image).
    pub(crate) fn try_new(image: &Path, dir: &Path, fstype: &str, opts: &str) -> Option<Mount> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", fstype, "-o", &format!("loop,{opts}")])
            .arg(image)
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount {
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        unmount(&self.dir);
    }
}

/// Unmounts the kernel mount at `dir`, retrying for 5 s while it is busy (a reader of
/// it may still be closing its files), then lazily.
pub(crate) fn unmount(dir: &Path) {
    for _ in 0..50 {
        let ok = Command::new("umount")
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("umount").arg("-l").arg(dir).status();
}

/// A `usfs mount -o OPTS` of an image, unmounted with `usfs umount` on drop (which waits
/// for a read-write volume to be committed and closed), also when the test fails.
pub(crate) struct UsfsMount(pub(crate) PathBuf);

impl UsfsMount {
    pub(crate) fn new(img: &Path, dir: &Path, opts: &str) -> UsfsMount {
        std::fs::create_dir_all(dir).unwrap();
        let (code, _, err) = run_limited(
            Command::new(usfs())
                .args(["mount", "-o", opts])
                .arg(img)
                .arg(dir),
            Duration::from_secs(60),
        );
        assert_eq!(
            code,
            Some(0),
            "usfs mount -o {opts}: {}",
            String::from_utf8_lossy(&err)
        );
        UsfsMount(dir.to_path_buf())
    }
}

impl Drop for UsfsMount {
    fn drop(&mut self) {
        for _ in 0..50 {
            let ok = Command::new(usfs())
                .arg("umount")
                .arg(&self.0)
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Makes an ext2/3/4 image of `size` with mke2fs and extra arguments, optionally
/// populated from `src` with `-d`.
pub(crate) fn mke2fs(image: &Path, size: &str, args: &[&str], src: Option<&Path>) {
    let mut c = Command::new("mke2fs");
    c.args(["-q", "-F"]).args(args);
    if let Some(s) = src {
        c.arg("-d").arg(s);
    }
    c.arg(image)
        .arg(size)
        .env("MKE2FS_CONFIG", "/etc/mke2fs.conf");
    run_ok(&mut c);
}

/// e2fsprogs' own test images (tests/f_* of 1.47.0): see [`usfs_testkit::corpus`].
pub(crate) fn e2fsprogs_corpus() -> Option<PathBuf> {
    usfs_testkit::corpus::e2fsprogs_dir()
}

/// The f_* cases of the corpus at `dir` that hold a readable image (`image.gz` or
/// `image.bz2`), in name order: (name, case directory, image bytes).
pub(crate) fn e2fsprogs_images(dir: &Path) -> impl Iterator<Item = (String, PathBuf, Vec<u8>)> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    cases.sort();
    cases.into_iter().filter_map(|case| {
        let name = case.file_name()?.to_string_lossy().into_owned();
        let (gz, bz) = (case.join("image.gz"), case.join("image.bz2"));
        let (tool, image) = if gz.is_file() {
            ("gzip", gz)
        } else {
            ("bzip2", bz)
        };
        if !name.starts_with("f_") || !image.is_file() {
            return None;
        }
        let out = Command::new(tool).arg("-dc").arg(&image).output().ok()?;
        out.status.success().then_some((name, case, out.stdout))
    })
}

/// Runs debugfs's write commands `cmds` (one per line) on `img` from the script file
/// `script`, panicking if debugfs fails.
pub(crate) fn debugfs_write(img: &Path, script: &Path, cmds: &str) {
    std::fs::write(script, cmds).unwrap();
    run_ok(
        Command::new("debugfs")
            .arg("-w")
            .arg("-f")
            .arg(script)
            .arg(img)
            .stdout(Stdio::null()),
    );
}

/// The exit status of `e2fsck OPTS IMAGE` (output discarded).
pub(crate) fn e2fsck_exit(img: &Path, opts: &str) -> i32 {
    Command::new("e2fsck")
        .arg(opts)
        .arg(img)
        .output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1)
}
