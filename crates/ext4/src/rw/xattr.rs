//! Extended attributes in the read-write volume: set and remove. The inode's whole set
//! is laid out again as mkfs lays it out (in the inode after the extra fields while they
//! fit, the rest in one xattr block, sorted); a block shared with other inodes
//! (refcount > 1) is never changed in place: the inode gets its own copy and the shared
//! block loses one reference. An inline inode's `system.data` (its bytes past i_block,
//! see [`super::inline`]) is kept first in the inode and is not a user attribute.

use super::inode::InodeRec;
use super::volume::Volume;
use crate::format::inode::GOOD_OLD_INODE_SIZE;
use crate::format::xattr::{
    block_checksum, finish_block_header, lay_out, to_on_disk, OnDisk, XattrBlockHeader,
    BLOCK_HEADER_SIZE, INDEX_SYSTEM, XATTR_MAGIC,
};
use crate::read::inode::LoadedInode;
use crate::rw::meta::Meta;
use usfs_fs::{Error, Result};

impl Volume {
    /// Sets (`Some`) or removes (`None`) attribute `name` of `rec` (full name with its
    /// namespace prefix; values as setxattr takes them). Removing an absent one is
    /// [`Error::NoData`].
    pub fn set_xattr(
        &mut self,
        rec: &mut InodeRec,
        name: &[u8],
        value: Option<&[u8]>,
    ) -> Result<()> {
        let want = to_on_disk(rec.ino, name, value.unwrap_or(&[]))?;
        if is_inline_data(&want) {
            // The kernel has no handler for `system.data`: it is the file's own store.
            return Err(Error::Io(std::io::Error::from_raw_os_error(
                libc::EOPNOTSUPP,
            )));
        }
        let l = LoadedInode {
            ino: rec.ino,
            raw: rec.raw.clone(),
        };
        let mut set: Vec<OnDisk> = self
            .fs
            .read_xattrs(&l)?
            .into_iter()
            .map(|x| OnDisk {
                index: x.index,
                name: x.name,
                value: x.value,
            })
            .collect();
        // An inline inode's `system.data` must stay in the inode: it goes first, where it
        // fitted before.
        set.sort_by_key(|a| !is_inline_data(a));
        let at = set
            .iter()
            .position(|a| a.index == want.index && a.name == want.name);
        match (at, value) {
            (None, None) => return Err(Error::NoData),
            (Some(i), None) => {
                set.remove(i);
            }
            (Some(i), Some(_)) => set[i] = want,
            (None, Some(_)) => set.push(want),
        }
        self.store_xattrs(rec, set)?;
        self.touch(rec, false);
        Ok(())
    }

    /// Writes `set` as `rec`'s attributes: in the inode while they fit, else the block.
    fn store_xattrs(&mut self, rec: &mut InodeRec, set: Vec<OnDisk>) -> Result<()> {
        let in_inode_room = ibody_area(rec, self.fs.geo.inode_size).is_some();
        let mut inode_set = Vec::new();
        let mut block_set = Vec::new();
        for a in set {
            let mut trial = inode_set.clone();
            trial.push(a.clone());
            if in_inode_room
                && block_set.is_empty()
                && ibody_fits(rec, self.fs.geo.inode_size, &trial)
            {
                inode_set = trial;
            } else {
                block_set.push(a);
            }
        }
        if block_set.iter().any(is_inline_data) {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::ENOSPC)));
        }
        if in_inode_room {
            write_ibody(rec, self.fs.geo.inode_size, &inode_set);
        }
        if block_set.is_empty() {
            return self.drop_xattr_block(rec);
        }
        block_set.sort_by(|a, b| {
            (a.index, a.name.len(), &a.name).cmp(&(b.index, b.name.len(), &b.name))
        });
        let bs = self.fs.geo.block_size as usize;
        let mut blk = vec![0u8; bs];
        if !lay_out(&mut blk, BLOCK_HEADER_SIZE, bs, 0, &block_set) {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::ENOSPC)));
        }
        finish_block_header(&mut blk);
        let old = rec.raw.file_acl();
        let own = old != 0 && {
            let cur = self.read_meta(old)?;
            XattrBlockHeader::new(&cur[..32])
                .expect("32 bytes")
                .h_refcount()
                == 1
        };
        let target = if own {
            old
        } else {
            self.drop_xattr_block(rec)?;
            let goal = self
                .fs
                .geo
                .group_first_block((rec.ino - 1) / self.fs.geo.inodes_per_group);
            let (b, _) = self.alloc_blocks(rec.ino, goal, 1)?;
            rec.raw.set_file_acl(b);
            rec.add_blocks(1, self.fs.geo.block_size);
            b
        };
        XattrBlockHeader::new(&mut blk[..32])
            .expect("32 bytes")
            .set_h_refcount(1);
        if let Some(seed) = self.csum_seed() {
            let c = block_checksum(seed, target, &blk);
            XattrBlockHeader::new(&mut blk[..32])
                .expect("32 bytes")
                .set_h_checksum(c);
        }
        self.write_meta(target, blk)
    }
}

/// Is this the `system.data` attribute (an inline inode's bytes past i_block)?
pub(crate) fn is_inline_data(a: &OnDisk) -> bool {
    a.index == INDEX_SYSTEM && a.name == b"data"
}

/// Where `rec`'s in-inode attribute area lies (from its 4-byte magic to the end of the
/// inode), or `None` when the inode has no room for one.
pub(crate) fn ibody_area(rec: &InodeRec, inode_size: u32) -> Option<(usize, usize)> {
    let isz = inode_size as usize;
    let start = GOOD_OLD_INODE_SIZE + rec.raw.i_extra_isize() as usize;
    (isz > GOOD_OLD_INODE_SIZE && start + 4 < isz).then_some((start, isz))
}

/// Do attributes `set` fit in `rec`'s in-inode area?
pub(crate) fn ibody_fits(rec: &InodeRec, inode_size: u32, set: &[OnDisk]) -> bool {
    match ibody_area(rec, inode_size) {
        None => set.is_empty(),
        Some((start, end)) => {
            let mut scratch = vec![0u8; end];
            lay_out(&mut scratch, start + 4, end, start + 4, set)
        }
    }
}

/// Lays `set` out as `rec`'s in-inode attributes (the area is cleared first; an empty set
/// leaves it without a magic). Returns false, changing nothing, when they do not fit.
pub(crate) fn write_ibody(rec: &mut InodeRec, inode_size: u32, set: &[OnDisk]) -> bool {
    if !ibody_fits(rec, inode_size, set) {
        return false;
    }
    let Some((start, end)) = ibody_area(rec, inode_size) else {
        return true;
    };
    let b = rec.raw.bytes_mut();
    b[start..end].fill(0);
    if !set.is_empty() {
        b[start..start + 4].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
        lay_out(b, start + 4, end, start + 4, set);
    }
    true
}
