//! Pass 2's fixes of single directory entries, named by their place (directory, block,
//! offset): an entry naming an inode that is out of range, unused or stored in a bad
//! block, or naming the root (other than `..` of a top directory), is removed, as
//! e2fsck clears it; a block whose chain of entries is broken is salvaged as e2fsck does;
//! a first block whose first entries are not `.` and `..` gets them; a wrong file type is
//! set to the inode's (pass 1 has decided by then whether the inode's mode was the wrong
//! one, e.g. a "socket" whose blocks hold a directory).

use crate::problem::{Code, Problem};
use std::collections::{BTreeMap, HashSet};
use usfs_ext4::rw::Volume;
use usfs_fs::Result;

/// Applies `p`'s fix if it is an entry's.
pub(super) fn apply(v: &mut Volume, p: &Problem) -> Result<()> {
    if let (Code::DirBadDot | Code::DirBadDotDot, Some(dir)) = (p.code, p.ino()) {
        // '.' and '..' made as e2fsck makes them (a new '..' names the root until the
        // next round's pass 3 sets the parent).
        return v.fix_dots(dir);
    }
    if let (Code::DirDuplicateEntry, Some(dir)) = (p.code, p.ino()) {
        // The whole directory at once (its first problem does it; the rest find nothing).
        return v.fix_duplicate_entries(dir);
    }
    // (A leaf without its checksum tail, a bad htree index: the directory is rehashed,
    // once, after the round's other fixes: `rehash_dirs`.)
    let (Some(dir), Some(at)) = (p.ino(), p.entry()) else {
        return Ok(());
    };
    let (lblk, off) = (at.lblk as u64, at.off as usize);
    match p.code {
        Code::DirUnusedInode
        | Code::DirBadInode
        | Code::DirBadBlockInode
        | Code::DirEntryToRoot
        | Code::DirLinkToDir
        | Code::EncryptShortName
        | Code::EncryptUnencryptedFile
        | Code::EncryptPolicyDiffers => v.remove_entry(dir, lblk, off),
        // '/' and NUL become '.' (e2fsck's check_name); an empty name goes.
        Code::DirBadName => v.fix_entry_name(dir, lblk, off),
        // e2fsck's salvage of the block: what it keeps is checked in the next round.
        Code::DirCorruptEntry => v.salvage_dir_block(dir, lblk, off),
        // The type the entry's inode has (e2fsck's check_filetype).
        Code::DirBadFileType => {
            let ft = p.expected().ok_or(usfs_fs::Error::Invalid)? as u8;
            v.set_entry_type(dir, lblk, off, ft)
        }
        _ => Ok(()),
    }
}

/// The directories a round rehashes, as e2fsck's pass 3A does, each with its first
/// problem: those with a leaf lacking its checksum tail, those whose htree index is
/// bad (e2fsck clears the index and builds it again), and large ones without an index
/// that have nothing else to fix in the round (e2fsck queues those only when pass 1
/// finds the inode sound; the next round looks again at the others).
pub(super) fn rehash_dirs(problems: &[Problem]) -> BTreeMap<u32, &Problem> {
    let others: HashSet<u32> = (problems.iter())
        .filter(|p| p.code != Code::DirOptimize)
        .filter_map(|p| p.ino())
        .collect();
    let mut dirs = BTreeMap::new();
    for p in problems.iter() {
        let wanted = match p.code {
            Code::DirNoTail | Code::HtreeBad => true,
            Code::DirOptimize => p.ino().is_some_and(|i| !others.contains(&i)),
            _ => false,
        };
        if let (true, Some(dir)) = (wanted, p.ino()) {
            dirs.entry(dir).or_insert(p);
        }
    }
    dirs
}
