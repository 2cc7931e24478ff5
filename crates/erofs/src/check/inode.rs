//! Per-inode checks: the xattr area (inline entries and shared ids, through the reader,
//! plus the header-only area the kernel refuses), a symlink's target length, and the data.

use super::{data, Report};
use crate::format::xattr::IBODY_HEADER_SIZE;
use crate::read::Inode;
use crate::Erofs;
use usfs_fs::{Error, FileType, Structure};

/// Longest symlink target (PATH_MAX without its NUL).
const SYMLINK_MAX: u64 = 4095;

/// Checks one inode; returns whether its data maps and decodes (a directory whose data
/// does not is not parsed further).
pub(super) fn check(fs: &Erofs, report: &mut Report, ino: &Inode, path: &str) -> bool {
    let nid = ino.nid;
    if ino.xattr_isize == IBODY_HEADER_SIZE as u64 {
        report.push(
            path,
            Some(nid),
            Error::corrupt(
                Structure::ErofsXattr,
                format!(
                    "inode {nid}: xattr area of {IBODY_HEADER_SIZE} bytes (a header without entries; the kernel refuses it)"
                ),
            )
            .with_ino(nid),
        );
    } else if let Err(e) = fs.xattrs(ino) {
        report.push(path, Some(nid), e);
    }
    if ino.file_type == FileType::Symlink && ino.size > SYMLINK_MAX {
        report.push(
            path,
            Some(nid),
            Error::corrupt(
                Structure::Symlink,
                format!("symlink {nid}: target of {} bytes", ino.size),
            )
            .with_ino(nid),
        );
        return false;
    }
    data::check(fs, report, ino, path)
}
