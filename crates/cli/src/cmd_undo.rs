//! `usfs undo [-f] UNDO_FILE IMAGE`: put back an image from an undo file written by
//! `usfs fsck -z` or by e2fsprogs' own tools (e2fsck, resize2fs, tune2fs -z), as
//! `e2undo` does. Exit 0 when applied, 1 when refused or failed.

use crate::image::CliResult;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `usfs undo` (named as e2undo's).
#[derive(clap::Args)]
pub(crate) struct UndoArgs {
    /// Apply an unfinished undo file, or one whose superblock copy does not match the
    /// image (at your own risk, as e2undo -f).
    #[arg(short = 'f')]
    force: bool,
    /// The undo file.
    undo_file: PathBuf,
    /// The image to put back.
    image: PathBuf,
}

pub(crate) fn run(a: &UndoArgs) -> CliResult {
    let dev = match usfs_dev::FileDevice::open(&a.image, true) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("usfs undo: {}: {e}", a.image.display());
            return Ok(ExitCode::from(1));
        }
    };
    match usfs_ext4::undo::apply(&a.undo_file, &dev, a.force) {
        Ok(done) => {
            println!(
                "{}: {} bytes in {} runs put back from {}",
                a.image.display(),
                done.bytes,
                done.keys,
                a.undo_file.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("usfs undo: {e}");
            Ok(ExitCode::from(1))
        }
    }
}
