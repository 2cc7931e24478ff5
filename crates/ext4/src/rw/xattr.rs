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
    acl, block_checksum, finish_block_header, lay_out, split_name, to_on_disk, OnDisk,
    XattrBlockHeader, BLOCK_HEADER_SIZE, INDEX_POSIX_ACL_ACCESS, INDEX_SYSTEM, XATTR_MAGIC,
};
use crate::read::inode::LoadedInode;
use crate::rw::meta::Meta;
use usfs_fs::{Error, Result, Structure};

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
        // A POSIX access ACL sets the permission bits, and one the bits say in full is
        // not stored (the kernel's posix_acl_update_mode).
        let mut value = value;
        let mut equivalent = false;
        if let (Some(v), Some((INDEX_POSIX_ACL_ACCESS, _))) = (value, split_name(name)) {
            let (perm, full) = acl_mode(v).ok_or(Error::Invalid)?;
            let mode = rec.raw.i_mode();
            rec.raw.set_i_mode((mode & !0o777) | perm);
            if full {
                value = None;
                equivalent = true;
            }
        }
        let want = match value {
            Some(v) => to_on_disk(rec.ino, name, v)?,
            None => {
                let (index, suffix) = split_name(name).ok_or(Error::NoData)?;
                OnDisk {
                    index,
                    name: suffix.to_vec(),
                    value: Vec::new(),
                }
            }
        };
        if is_inline_data(&want) {
            // The kernel has no handler for `system.data`: it is the file's own store.
            return Err(Error::Io(std::io::Error::from_raw_os_error(
                libc::EOPNOTSUPP,
            )));
        }
        // An inline inode's `system.data` must stay in the inode: it goes first, where it
        // fitted before.
        set.sort_by_key(|a| !is_inline_data(a));
        let at = set
            .iter()
            .position(|a| a.index == want.index && a.name == want.name);
        match (at, value) {
            (None, None) if equivalent => {}
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

    /// A new inode in directory `dir` takes `dir`'s default ACL, as ext4_init_acl does:
    /// the access ACL is the default one with its permissions masked by the mode asked
    /// for, the mode keeps what the ACL allows, and a directory inherits the default ACL
    /// itself. (The front end leaves the umask out when the parent has a default ACL.)
    pub(crate) fn inherit_acl(&mut self, dir: &InodeRec, rec: &mut InodeRec) -> Result<()> {
        let name: &[u8] = b"system.posix_acl_default";
        let Some(default) = self.get_acl(dir, name)? else {
            return Ok(());
        };
        let mode = rec.raw.i_mode();
        let (access, perm, full) = acl_create(&default, mode & 0o777).ok_or_else(|| {
            Error::corrupt(
                Structure::Xattr,
                format!("inode {}: malformed default ACL", dir.ino),
            )
            .with_ino(dir.ino)
        })?;
        rec.raw.set_i_mode((mode & !0o777) | perm);
        if !full {
            self.set_xattr(rec, b"system.posix_acl_access", Some(&access))?;
        }
        if rec.file_type()? == usfs_fs::FileType::Directory {
            self.set_xattr(rec, name, Some(&default))?;
        }
        Ok(())
    }

    /// A chmod of an inode with an access ACL rewrites the ACL's owner, group class
    /// (the mask, or the owning group without one) and others to the new bits, as
    /// posix_acl_chmod does.
    pub(crate) fn chmod_acl(&mut self, rec: &mut InodeRec, perm: u16) -> Result<()> {
        let name: &[u8] = b"system.posix_acl_access";
        let Some(mut acl) = self.get_acl(rec, name)? else {
            return Ok(());
        };
        let has_mask = acl_entries(&acl).any(|(tag, _)| tag == acl::MASK);
        for e in acl.get_mut(4..).unwrap_or_default().chunks_exact_mut(8) {
            let shift = match u16::from_le_bytes([e[0], e[1]]) {
                acl::USER_OBJ => 6,
                acl::MASK => 3,
                acl::GROUP_OBJ if !has_mask => 3,
                acl::OTHER => 0,
                _ => continue,
            };
            e[2..4].copy_from_slice(&((perm >> shift) & 7).to_le_bytes());
        }
        let mode = rec.raw.i_mode();
        self.set_xattr(rec, name, Some(&acl))?;
        // Setting the ACL derives the same bits; keep the special bits the chmod set.
        rec.raw.set_i_mode(mode);
        Ok(())
    }

    /// ACL `name` of `rec` in xattr form, if it has one.
    fn get_acl(&self, rec: &InodeRec, name: &[u8]) -> Result<Option<Vec<u8>>> {
        let l = LoadedInode {
            ino: rec.ino,
            raw: rec.raw.clone(),
        };
        Ok(self
            .fs
            .read_xattrs(&l)?
            .iter()
            .find(|x| x.full_name().as_deref() == Some(name))
            .map(|x| x.user_value()))
    }

    /// Writes `set` as `rec`'s attributes: in the inode while they fit, else the block.
    fn store_xattrs(&mut self, rec: &mut InodeRec, set: Vec<OnDisk>) -> Result<()> {
        let in_inode_room = ibody_area(rec, self.fs.core.geo.inode_size).is_some();
        let mut inode_set = Vec::new();
        let mut block_set = Vec::new();
        for a in set {
            let mut trial = inode_set.clone();
            trial.push(a.clone());
            if in_inode_room
                && block_set.is_empty()
                && ibody_fits(rec, self.fs.core.geo.inode_size, &trial)
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
            write_ibody(rec, self.fs.core.geo.inode_size, &inode_set);
        }
        if block_set.is_empty() {
            return self.drop_xattr_block(rec);
        }
        block_set.sort_by(|a, b| {
            (a.index, a.name.len(), &a.name).cmp(&(b.index, b.name.len(), &b.name))
        });
        let bs = self.fs.core.geo.block_size as usize;
        let mut blk = vec![0u8; bs];
        if !lay_out(&mut blk, BLOCK_HEADER_SIZE, bs, 0, &block_set) {
            return Err(Error::Io(std::io::Error::from_raw_os_error(libc::ENOSPC)));
        }
        finish_block_header(&mut blk, &block_set);
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
                .core
                .geo
                .group_first_block((rec.ino - 1) / self.fs.core.geo.inodes_per_group);
            let (b, _) = self.alloc_blocks(rec.ino, goal, 1)?;
            rec.raw.set_file_acl(b);
            rec.add_blocks(1, self.fs.core.geo.block_size);
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

/// The permission bits a POSIX access ACL (xattr form) gives, and whether the bits say
/// all of it (only owner, owning group and others: nothing to store). `None` if
/// malformed.
fn acl_mode(v: &[u8]) -> Option<(u16, bool)> {
    if v.len() < 4 || u32::from_le_bytes(v[0..4].try_into().ok()?) != acl::POSIX_ACL_XATTR_VERSION {
        return None;
    }
    let (mut user, mut group, mut other, mut mask) = (None, None, None, None);
    let mut extended = false;
    for e in v[4..].chunks(8) {
        if e.len() != 8 {
            return None;
        }
        let tag = u16::from_le_bytes([e[0], e[1]]);
        let perm = u16::from_le_bytes([e[2], e[3]]) & 7;
        match tag {
            acl::USER_OBJ => user = Some(perm),
            acl::GROUP_OBJ => group = Some(perm),
            acl::OTHER => other = Some(perm),
            acl::MASK => mask = Some(perm),
            acl::USER | acl::GROUP => extended = true,
            _ => return None,
        }
    }
    let g = mask.or(group)?;
    Some((user? << 6 | g << 3 | other?, !extended && mask.is_none()))
}

/// posix_acl_create: the access ACL a new inode of permission bits `perm` gets from the
/// default ACL `default` (xattr form), the permission bits it ends with, and whether the
/// bits say all of it.
fn acl_create(default: &[u8], perm: u16) -> Option<(Vec<u8>, u16, bool)> {
    let mut acl = default.to_vec();
    let has_mask = acl_entries(&acl).any(|(tag, _)| tag == acl::MASK);
    for e in acl.get_mut(4..)?.chunks_mut(8) {
        if e.len() != 8 {
            return None;
        }
        let tag = u16::from_le_bytes([e[0], e[1]]);
        let shift = match tag {
            acl::USER_OBJ => 6,
            acl::MASK => 3,
            acl::GROUP_OBJ if !has_mask => 3,
            acl::OTHER => 0,
            _ => continue,
        };
        let p = u16::from_le_bytes([e[2], e[3]]) & ((perm >> shift) & 7);
        e[2..4].copy_from_slice(&p.to_le_bytes());
    }
    let (bits, full) = acl_mode(&acl)?;
    Some((acl, bits, full))
}

/// The (tag, permission) pairs of an ACL in xattr form (whole entries only).
fn acl_entries(acl: &[u8]) -> impl Iterator<Item = (u16, u16)> + '_ {
    acl.get(4..).unwrap_or_default().chunks_exact(8).map(|e| {
        (
            u16::from_le_bytes([e[0], e[1]]),
            u16::from_le_bytes([e[2], e[3]]),
        )
    })
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
