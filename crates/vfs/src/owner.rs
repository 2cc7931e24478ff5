//! The image owner: the one process that has an image open read-write. Opening takes an
//! exclusive lock on the image file (a second usfs writer, an editing command or
//! `usfs mount -o rw`, is refused by name) and refuses an image a kernel loop device is
//! attached to (the kernel may have it mounted: two writers would corrupt it).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use usfs_ext4::rw::Ext4Rw;
use usfs_fs::{Error, Result};

/// An image open read-write, with its writer lock held as long as this lives.
pub struct Owned {
    /// The volume.
    pub fs: Arc<Ext4Rw>,
    _lock: File,
}

/// Opens `image` read-write as its only writer.
pub fn open_rw(image: &Path) -> Result<Owned> {
    let lock = File::options().read(true).write(true).open(image)?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(Error::Busy(
            "in use by another usfs writer (usfs mount -o rw, or an editing command)".into(),
        ));
    }
    if let Some(dev) = kernel_user(image) {
        return Err(Error::Busy(format!(
            "attached to {dev}: the kernel may have it mounted; unmount and detach it first"
        )));
    }
    let dev = usfs_dev::open(image, usfs_dev::OpenMode::File, true)?;
    if !usfs_ext4::probe(&*dev) {
        return Err(Error::incompatible(
            "not an ext2/3/4 image (only ext4 images can be changed)",
        ));
    }
    Ok(Owned {
        fs: Arc::new(Ext4Rw::open(dev)?),
        _lock: lock,
    })
}

/// The loop device the kernel has attached to `image`, if any.
fn kernel_user(image: &Path) -> Option<String> {
    let want = std::fs::canonicalize(image).ok()?;
    for e in std::fs::read_dir("/sys/block").ok()?.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.starts_with("loop") {
            continue;
        }
        if let Ok(b) = std::fs::read_to_string(e.path().join("loop/backing_file")) {
            if Path::new(b.trim()) == want {
                return Some(format!("/dev/{name}"));
            }
        }
    }
    None
}
