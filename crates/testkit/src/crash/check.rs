//! Standard crash-state checkers. Each takes the image file of one state and says `Ok` or
//! what is wrong; compose them in a closure for [`super::check_states`] (they may change
//! the image: run them on scratch copies, the harness's default).
//!
//! `e2fsck -fn` does not replay the journal and exits 0 on a dirty one (FACTS.md), so the
//! e2fsck checkers replay first. The content checkers read the home locations only: run
//! them after a checker that replayed the journal.

use std::path::Path;
use std::process::Command;

/// Files a state must hold: (absolute path in the image, exact bytes).
pub type FileSet = Vec<(Vec<u8>, Vec<u8>)>;

/// Runs e2fsck with `args` on `image`: its exit code and its output (stdout then stderr).
pub fn e2fsck(args: &[&str], image: &Path) -> Result<(i32, String), String> {
    let out = Command::new("e2fsck")
        .args(args)
        .arg(image)
        .env("E2FSCK_FORCE_INTERACTIVE", "0")
        .output()
        .map_err(|e| format!("cannot run e2fsck: {e}"))?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.code().unwrap_or(-1), text))
}

/// The first `n` lines of `text`, for messages.
fn head(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut s = lines[..lines.len().min(n)].join("\n");
    if lines.len() > n {
        s.push_str(&format!("\n... ({} more lines)", lines.len() - n));
    }
    s
}

/// What a journaled file system must satisfy after any crash: once the journal is
/// replayed (`e2fsck -E journal_only -y`, exit 0 or 1; it also releases the inodes on the
/// orphan list, as the kernel does at mount), `e2fsck -fn` finds nothing (exit 0).
/// Changes the image (the replay).
pub fn fsck_clean_after_replay(image: &Path) -> Result<(), String> {
    let (code, out) = e2fsck(&["-E", "journal_only", "-y"], image)?;
    if code > 1 {
        return Err(format!(
            "journal replay: e2fsck exit {code}\n{}",
            head(&out, 12)
        ));
    }
    fsck_clean(image)
}

/// `e2fsck -fn` exits 0 (the image as it is: no replay).
pub fn fsck_clean(image: &Path) -> Result<(), String> {
    let (code, out) = e2fsck(&["-fn"], image)?;
    if code != 0 {
        return Err(format!("e2fsck -fn exit {code}\n{}", head(&out, 16)));
    }
    Ok(())
}

/// The weaker property: `e2fsck -fy` repairs the image (exit below 4) and `e2fsck -fn`
/// then finds nothing. Changes the image.
pub fn fsck_repairable(image: &Path) -> Result<(), String> {
    let (code, out) = e2fsck(&["-fy"], image)?;
    if code >= 4 {
        return Err(format!("e2fsck -fy exit {code}\n{}", head(&out, 16)));
    }
    fsck_clean(image).map_err(|e| format!("after e2fsck -fy (exit {code}): {e}"))
}

/// Compares what was read for `path` with what was expected: the first differing offset.
fn same(path: &[u8], got: &[u8], want: &[u8]) -> Result<(), String> {
    let p = crate::escape(path);
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        return Err(format!(
            "{p}: byte {i} is {:#04x}, expected {:#04x}",
            got[i], want[i]
        ));
    }
    if got.len() != want.len() {
        return Err(format!("{p}: {} bytes, expected {}", got.len(), want.len()));
    }
    Ok(())
}

/// Every `(path, bytes)` of `expect` (absolute paths in the image) is a regular file
/// holding exactly `bytes`, read through usfs's own ext4 reader.
#[cfg(feature = "ext4")]
pub fn files_hold(image: &Path, expect: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String> {
    use usfs_fs::FileSystem;
    let dev = usfs_dev::FileDevice::open(image, false).map_err(|e| format!("open: {e}"))?;
    let fs = usfs_ext4::Ext4::open(Box::new(dev)).map_err(|e| format!("usfs ext4 open: {e}"))?;
    for (path, want) in expect {
        let p = crate::escape(path);
        let ino = usfs_fs::path::resolve(&fs, path, false).map_err(|e| format!("{p}: {e}"))?;
        let meta = fs.getattr(ino).map_err(|e| format!("{p}: {e}"))?;
        if meta.file_type != usfs_fs::FileType::Regular {
            return Err(format!("{p}: a {:?}, not a regular file", meta.file_type));
        }
        // Read at most one byte past what is expected: a longer file shows as such.
        let size = meta.size.min(want.len() as u64 + 1) as usize;
        let mut got = vec![0u8; size];
        let mut done = 0;
        while done < size {
            let n = fs
                .read_at(ino, done as u64, &mut got[done..])
                .map_err(|e| format!("{p}: read at {done}: {e}"))?;
            if n == 0 {
                break;
            }
            done += n;
        }
        got.truncate(done);
        same(path, &got, want)?;
        if meta.size != want.len() as u64 {
            return Err(format!("{p}: {} bytes, expected {}", meta.size, want.len()));
        }
    }
    Ok(())
}

/// As [`files_hold`], read with `debugfs -R "cat PATH"` (paths must not hold `"`, and
/// should be plain enough for debugfs's argument parsing).
pub fn files_hold_debugfs(image: &Path, expect: &[(Vec<u8>, Vec<u8>)]) -> Result<(), String> {
    for (path, want) in expect {
        let p = crate::escape(path);
        let out = Command::new("debugfs")
            .arg("-R")
            .arg(format!("cat \"{}\"", String::from_utf8_lossy(path)))
            .arg(image)
            .output()
            .map_err(|e| format!("cannot run debugfs: {e}"))?;
        let err = String::from_utf8_lossy(&out.stderr);
        // The banner is the only line debugfs prints on stderr when all goes well.
        let complaints: Vec<&str> = err.lines().filter(|l| !l.starts_with("debugfs ")).collect();
        if !out.status.success() || !complaints.is_empty() {
            return Err(format!("{p}: debugfs: {}", complaints.join("; ")));
        }
        same(path, &out.stdout, want)?;
    }
    Ok(())
}

/// True when e2fsck and debugfs can be run (tests skip visibly otherwise).
pub fn have_e2fsprogs() -> bool {
    ["e2fsck", "debugfs"].iter().all(|t| {
        Command::new(t)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}
