//! Opening an image (format detection lives in usfs_vfs) and resolving paths in it.

use std::fmt;
use std::path::{Path, PathBuf};
use usfs_fs::FileSystem;

/// An error with the context a user needs (which image, which path).
#[derive(Debug)]
pub(crate) struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl CliError {
    /// An error about `what` (an image or a path).
    pub(crate) fn at(what: impl fmt::Display, e: impl fmt::Display) -> CliError {
        CliError(format!("{what}: {e}"))
    }
}

/// Result of a subcommand.
pub(crate) type CliResult<T = std::process::ExitCode> = Result<T, CliError>;

/// The extra devices of an EROFS image, for the commands that read one.
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct DeviceArgs {
    /// An extra device of an EROFS image, in the order of its device table (the tar of
    /// a `mkfs.erofs --tar=i` image), as `mount -o device=` and `fsck.erofs --device`
    /// name it; repeat for more. Without it such data is read from the image file past
    /// the image (an image and its tar concatenated).
    #[arg(long = "device", value_name = "PATH")]
    pub(crate) devices: Vec<PathBuf>,
}

/// Opens `path` read-only and picks the back end by magic number (the one opener the CLI,
/// `usfs run` and `usfs mount` share: [`usfs_vfs::open_image`]), with the extra devices
/// `dev` names.
pub(crate) fn open(path: &Path, dev: &DeviceArgs) -> CliResult<std::sync::Arc<dyn FileSystem>> {
    usfs_vfs::open_image_with_devices(path, &dev.devices)
        .map_err(|e| CliError::at(path.display(), e))
}

/// Resolves `path` inside the image opened from `image`.
pub(crate) fn resolve(
    fs: &dyn FileSystem,
    image: &Path,
    path: &str,
    follow: bool,
) -> CliResult<usfs_fs::Ino> {
    usfs_fs::path::resolve(fs, path.as_bytes(), follow)
        .map_err(|e| CliError(format!("{}:{path}: {e}", image.display())))
}
