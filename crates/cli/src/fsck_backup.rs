//! `usfs fsck` on an image whose primary superblock is unusable, as e2fsck: `-b` names a
//! backup superblock (`-B` its block size), else, not when preening, a primary that does
//! not open (bad magic, checksum, impossible fields) sends the check to group 1's backup
//! ("Superblock invalid, trying backup blocks..."). A check reads the image through the
//! primary made from the backup, in memory; a repair writes that primary first.

use crate::cmd_fsck::{FsckArgs, EXIT_OPERATIONAL};
use std::process::ExitCode;
use std::sync::Arc;
use usfs_dev::Device;
use usfs_ext4::backup_sb::{self, Backup};

/// The backup superblock to read `dev` by, if any, saying so (on standard error when
/// `quiet_stdout`, for --json); the exit code when `-b` names none.
pub(crate) fn choose(
    a: &FsckArgs,
    dev: &Arc<dyn Device>,
    preen: bool,
    quiet_stdout: bool,
) -> Result<Option<Backup>, ExitCode> {
    let say = |s: String| match quiet_stdout {
        true => eprintln!("{s}"),
        false => println!("{s}"),
    };
    if let Some(block) = a.superblock {
        return match backup_sb::at(&**dev, block, a.blocksize.unwrap_or(0)) {
            Some(b) => Ok(Some(b)),
            None => {
                eprintln!(
                    "usfs fsck: {}: no superblock at block {block}{}",
                    a.image.display(),
                    a.blocksize
                        .map_or(String::new(), |bs| format!(" of {bs} bytes"))
                );
                Err(ExitCode::from(EXIT_OPERATIONAL))
            }
        };
    }
    if preen {
        return Ok(None);
    }
    let Some(why) = backup_sb::primary_unusable(Box::new(dev.clone())) else {
        return Ok(None);
    };
    say(format!("usfs fsck: {why}"));
    let found = backup_sb::find(&**dev);
    if found.is_some() {
        say("usfs fsck: Superblock invalid, trying backup blocks...".to_string());
    }
    Ok(found)
}

/// `dev` as a check reads it: through the primary made from `backup` when there is one.
pub(crate) fn view(
    dev: Arc<dyn Device>,
    backup: Option<Backup>,
) -> usfs_fs::Result<Box<dyn Device>> {
    Ok(match backup {
        Some(b) => Box::new(backup_sb::overlay(Box::new(dev), &b)?),
        None => Box::new(dev),
    })
}
