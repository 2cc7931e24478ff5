//! Helpers shared by the vfs integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Makes an 8 MiB ext4 image of `src` with `mke2fs -d` at `dir/img`; None (with a SKIP
/// line) when mke2fs is not available.
pub(crate) fn mke2fs_image(src: &Path, dir: &Path) -> Option<PathBuf> {
    let img = dir.join("img");
    let ok = Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-d"])
        .arg(src)
        .arg(&img)
        .arg("8M")
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIP: mke2fs not available");
        return None;
    }
    Some(img)
}
