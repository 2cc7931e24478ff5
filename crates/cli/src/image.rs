//! Opening an image: detect its format by magic number and hand back the back end.

use std::fmt;
use std::path::Path;
use usfs_fs::FileSystem;

/// An error with the context a user needs (which image, which path).
#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl CliError {
    /// An error about `what` (an image or a path).
    pub fn at(what: impl fmt::Display, e: impl fmt::Display) -> CliError {
        CliError(format!("{what}: {e}"))
    }
}

/// Result of a subcommand.
pub type CliResult<T = std::process::ExitCode> = Result<T, CliError>;

/// Opens `path` read-only and picks the back end by magic number.
pub fn open(path: &Path) -> CliResult<Box<dyn FileSystem>> {
    let shown = path.display();
    let dev = usfs_dev::open(path, usfs_dev::OpenMode::Mmap, false)
        .map_err(|e| CliError::at(&shown, e))?;
    if usfs_ext4::probe(&*dev) {
        let fs = usfs_ext4::Ext4::open(dev).map_err(|e| CliError::at(&shown, e))?;
        return Ok(Box::new(fs));
    }
    if usfs_erofs::probe(&*dev) {
        let fs = usfs_erofs::Erofs::open(dev).map_err(|e| CliError::at(&shown, e))?;
        return Ok(Box::new(fs));
    }
    Err(CliError::at(
        &shown,
        "not a recognised file-system image (no ext2/3/4 or EROFS superblock)",
    ))
}

/// Resolves `path` inside the image opened from `image`.
pub fn resolve(
    fs: &dyn FileSystem,
    image: &Path,
    path: &str,
    follow: bool,
) -> CliResult<usfs_fs::Ino> {
    usfs_fs::path::resolve(fs, path.as_bytes(), follow)
        .map_err(|e| CliError(format!("{}:{path}: {e}", image.display())))
}
