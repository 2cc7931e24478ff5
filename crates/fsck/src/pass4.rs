//! Pass 4: reference counts. Every inode in use must be named by some entry, and its
//! link count must equal the entries naming it (`.` and subdirectories' `..` included);
//! a directory with more than 65000 links stores 1 (dir_nlink), and an indexed one may.

use crate::ctx::Worker;
use crate::problem::{Code, Problem};
use crate::state::{InodeKind, Shared};
use usfs_ext4::format::features::ro_compat;
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::format::inode::ROOT_INO;
use usfs_fs::FileType;

/// Most links an inode can record; directories past it store 1.
const LINK_MAX: u16 = 65000;

/// Runs pass 4. `skip` are inodes no entry names by design (the orphan file); `links`
/// are the link counts too large for [`Shared`]'s byte per inode, sorted by inode.
pub(crate) fn run(
    geo: &Geometry,
    shared: &Shared,
    w: &mut Worker,
    skip: &[u32],
    links: &[(u32, u16)],
) {
    let mut other = links.iter().peekable();
    let mut nlink_reported = false;
    for ino in 1..=geo.inodes_count {
        if ino < geo.first_ino && ino != ROOT_INO {
            continue;
        }
        let InodeKind::Used(ft) = shared.kind(ino) else {
            continue;
        };
        if skip.binary_search(&ino).is_ok() || shared.ea_inodes.get(ino as u64) {
            continue;
        }
        let refs = shared.refs(ino);
        while other.next_if(|&&(i, _)| i < ino).is_some() {}
        let links = match (shared.small_links(ino), other.peek()) {
            (Some(n), _) => n,
            (None, Some(&&(i, n))) if i == ino => n,
            (None, _) => 0,
        };
        if refs == 0 {
            if ft != FileType::Directory {
                w.report(Problem::new(Code::UnattachedInode, ino.to_string()).with_ino(ino));
            }
            continue;
        }
        let counted = if ft == FileType::Directory && refs > LINK_MAX {
            if !geo.features.has_ro_compat(ro_compat::DIR_NLINK) && !nlink_reported {
                nlink_reported = true;
                w.report(Problem::new(Code::DirNlinkFeature, "").with_ino(ino));
            }
            1
        } else {
            refs
        };
        if counted != links {
            w.report(
                Problem::new(Code::BadRefCount, "")
                    .with_ino(ino)
                    .values(links as u64, counted as u64),
            );
        }
    }
}
