//! Pass 4: reference counts. Every inode in use must be named by some entry, and its
//! link count must equal the entries naming it (`.` and subdirectories' `..` included);
//! a directory with more than 65000 links stores 1 (dir_nlink), and an indexed one may.

use crate::ctx::Worker;
use crate::problem::{Code, Problem};
use crate::refs::ManyRefsCursor;
use crate::state::{InodeKind, Shared};
use usfs_ext4::format::features::ro_compat;
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::format::inode::Inode;
use usfs_ext4::format::inode::ROOT_INO;
use usfs_ext4::Ext4;
use usfs_fs::FileType;

/// The magic of in-inode extended attributes (after i_extra_isize).
const XATTR_MAGIC: u32 = 0xEA02_0000;

/// The link counts listed apart, the fixed i_blocks, the references listed apart and
/// the references to EA inodes (see [`run`]).
type Counts<'a> = (
    &'a [(u32, u16)],
    &'a [(u32, u64)],
    &'a [(u32, u32)],
    &'a [u32],
);

/// Most links an inode can record; directories past it store 1.
const LINK_MAX: u16 = 65000;

/// Runs pass 4. `skip` are inodes no entry names by design (the orphan file); `links`
/// are the link counts too large for [`Shared`]'s byte per inode, sorted by inode;
/// `fixed` the i_blocks pass 1's fixes set, sorted by inode (an unattached inode is
/// empty by those); `many_refs` the references pass 2 counted past [`Shared`]'s nibbles,
/// sorted by inode; `ea_refs` the references xattrs make to EA inodes, one entry each,
/// sorted (an EA inode no directory names counts one link when referenced, as in
/// e2fsck's check_ea_inode).
pub(crate) fn run(
    fs: &Ext4,
    geo: &Geometry,
    shared: &Shared,
    w: &mut Worker,
    skip: &[u32],
    (links, fixed, many_refs, ea_refs): Counts<'_>,
) {
    let mut other = links.iter().peekable();
    let mut many = ManyRefsCursor::new(many_refs);
    let mut nlink_reported = false;
    for ino in 1..=geo.inodes_count {
        if ino < geo.first_ino && ino != ROOT_INO {
            continue;
        }
        let InodeKind::Used(ft) = shared.kind(ino) else {
            continue;
        };
        if skip.binary_search(&ino).is_ok() {
            continue;
        }
        let mut refs = shared.small_refs(ino) + many.of(ino);
        while other.next_if(|&&(i, _)| i < ino).is_some() {}
        let links = match (shared.small_links(ino), other.peek()) {
            (Some(n), _) => n,
            (None, Some(&&(i, n))) if i == ino => n,
            (None, _) => 0,
        };
        if refs == 0 && shared.ea_inodes.get(ino as u64) {
            let lo = ea_refs.partition_point(|&i| i < ino);
            let n = ea_refs[lo..].partition_point(|&i| i == ino) as u64;
            if n > 0 {
                crate::ea_inode::check_refs(fs, w, ino, n);
                refs = 1;
            }
        }
        if refs == 0 {
            if ft != FileType::Directory {
                let i_blocks = |r: &Inode<Vec<u8>>| match fixed.binary_search_by_key(&ino, |f| f.0)
                {
                    Ok(i) => fixed[i].1,
                    Err(_) => r.i_blocks_lo() as u64,
                };
                let empty = fs
                    .read_inode_raw(ino)
                    .is_ok_and(|r| zero_length(&r, geo.inode_size, i_blocks(&r)));
                let code = if empty {
                    Code::UnattachedZeroLen
                } else {
                    Code::UnattachedInode
                };
                w.report(Problem::new(code, ino.to_string()).with_ino(ino));
            }
            continue;
        }
        let counted = if ft == FileType::Directory && refs > LINK_MAX as u32 {
            if !geo.features.has_ro_compat(ro_compat::DIR_NLINK) && !nlink_reported {
                nlink_reported = true;
                w.report(Problem::new(Code::DirNlinkFeature, "").with_ino(ino));
            }
            1
        } else {
            // (Counted up to what i_links_count can hold, as before the lists.)
            refs.min(u16::MAX as u32 - 1) as u16
        };
        if counted != links {
            let indexed = shared.indexed_dirs.get(ino as u64);
            let code = if ft == FileType::Directory && links == 1 && counted > 1 && indexed {
                Code::DirOverflowRefCount
            } else {
                Code::BadRefCount
            };
            w.report(
                Problem::new(code, "")
                    .with_ino(ino)
                    .values(links as u64, counted as u64),
            );
        }
    }
}

/// Is `raw` a file or directory with no blocks and no in-inode extended attributes
/// (which e2fsck offers to clear rather than connect: nothing in it to save)?
fn zero_length(raw: &Inode<Vec<u8>>, inode_size: u32, i_blocks: u64) -> bool {
    const S_IFMT: u16 = 0o170000;
    let fmt = raw.i_mode() & S_IFMT;
    let extra = if inode_size > 128 {
        raw.i_extra_isize() as usize
    } else {
        0
    };
    let at = 128 + extra;
    let b = raw.bytes();
    let magic = (inode_size as usize >= at + 4)
        .then(|| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")));
    i_blocks == 0 && magic != Some(XATTR_MAGIC) && (fmt == 0o100000 || fmt == 0o040000)
}
