//! Superblock checks beyond what opening the image checks (magic, checksum, block size,
//! incompat features and compression configurations are the reader's): the areas it
//! points at lie inside the image, the image holds the blocks it declares, and the root
//! (and the packed inode, with fragments) is an inode of the right kind.

use super::Report;
use crate::Erofs;
use usfs_fs::{Error, FileType, Structure};

/// Every extra device of the device table is there: given and as large as the table
/// says, or else after the image in its file (its unified address). One problem for a
/// missing device, rather than one per file on it.
fn check_devices(fs: &Erofs, report: &mut Report) {
    let bs = fs.bs();
    for (k, d) in fs.devices.iter().enumerate() {
        let id = k + 1;
        let want = d.blocks.saturating_mul(bs);
        let problem = match &d.dev {
            Some(dev) if dev.len() < want => Error::corrupt(
                Structure::ErofsSuperblock,
                format!(
                    "extra device {id} has {} bytes, the device table says {} blocks",
                    dev.len(),
                    d.blocks
                ),
            ),
            None if d.uniaddr.saturating_add(d.blocks).saturating_mul(bs) > fs.image_len() => {
                Error::incompatible(format!(
                    "extra device {id} ({} blocks: the tar of a --tar=i image) is not given \
                     (--device) and does not follow the image in its file",
                    d.blocks
                ))
            }
            _ => continue,
        };
        report.push("/", None, problem);
    }
}

/// Checks the superblock of an opened image.
pub(super) fn check(fs: &Erofs, report: &mut Report) {
    let sb = fs.superblock();
    let bs = fs.bs();
    let len = fs.image_len();
    let mut bad = |m: String| {
        report.push(
            "/",
            None,
            Error::corrupt(Structure::ErofsSuperblock, format!("superblock: {m}")),
        )
    };
    let blocks_end = u64::from(sb.blocks()).saturating_mul(bs);
    if blocks_end > len {
        bad(format!(
            "{} blocks of {bs} bytes declared, the image has {len} bytes",
            sb.blocks()
        ));
    }
    if u64::from(sb.meta_blkaddr()).saturating_mul(bs) >= len {
        bad(format!(
            "metadata area at block {} is past the image end",
            sb.meta_blkaddr()
        ));
    }
    if u64::from(sb.xattr_blkaddr()).saturating_mul(bs) > len {
        bad(format!(
            "shared xattr area at block {} is past the image end",
            sb.xattr_blkaddr()
        ));
    }
    if !report.clean() {
        return;
    }
    check_devices(fs, report);
    if !report.clean() {
        return;
    }
    let root = u64::from(sb.root_nid());
    match fs.inode(root) {
        Ok(i) if i.file_type == FileType::Directory => {}
        Ok(i) => report.push(
            "/",
            Some(root),
            Error::corrupt(
                Structure::ErofsSuperblock,
                format!(
                    "root inode {root} is a {}, not a directory",
                    format!("{:?}", i.file_type).to_lowercase()
                ),
            ),
        ),
        Err(e) => report.push("/", Some(root), e),
    }
}
