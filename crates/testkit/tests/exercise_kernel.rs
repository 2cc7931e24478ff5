//! usfs-exercise on a kernel ext4 loop mount of a fresh mke2fs image (root only): the
//! run matches the model, and after unmounting `e2fsck -fn` finds the image clean.

use std::path::{Path, PathBuf};
use std::process::Command;
use usfs_testkit::crash::check;
use usfs_testkit::TempDir;

/// A loop device with `image` mounted on `dir`; unmounted and detached on drop, also when
/// the test fails.
struct LoopMount {
    dir: PathBuf,
    dev: Option<String>,
    mounted: bool,
}

impl LoopMount {
    fn new(image: &Path, dir: &Path) -> LoopMount {
        std::fs::create_dir_all(dir).unwrap();
        let mut m = LoopMount {
            dir: dir.to_path_buf(),
            dev: None,
            mounted: false,
        };
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(image)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        m.dev = Some(dev.clone());
        let st = Command::new("mount")
            .args(["-t", "ext4", &dev])
            .arg(dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount {dev}");
        m.mounted = true;
        m
    }

    fn unmount(&mut self) {
        if self.mounted {
            let st = Command::new("umount").arg(&self.dir).status();
            self.mounted = !st.is_ok_and(|s| s.success());
        }
        if let Some(dev) = self.dev.take() {
            let _ = Command::new("losetup").arg("-d").arg(dev).status();
        }
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        self.unmount();
    }
}

#[test]
fn exercise_on_a_kernel_ext4_mount_then_e2fsck_clean() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 || !check::have_e2fsprogs() {
        println!("SKIP: needs root and e2fsprogs (loop mount of an ext4 image)");
        return;
    }
    let tmp = TempDir::new("exercise-kernel").unwrap();
    let img = tmp.path().join("fs.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let st = Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4"])
        .arg(&img)
        .status()
        .unwrap();
    assert!(st.success());
    let mnt = tmp.path().join("mnt");
    let mut m = LoopMount::new(&img, &mnt);
    let out = Command::new(env!("CARGO_BIN_EXE_usfs-exercise"))
        .args([
            "--seed",
            "21",
            "--threads",
            "2",
            "--ops",
            "600",
            "--max-file-size",
            "131072",
        ])
        .arg(&mnt)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("1200 ops") && text.contains("ops/s"),
        "{text}"
    );
    m.unmount();
    assert!(!m.mounted);
    check::fsck_clean(&img).unwrap();
}
