//! Extended attributes: the in-inode area and the xattr block (checksummed), values in
//! place or in EA inodes; POSIX ACLs converted to the generic xattr format.

use super::inode::LoadedInode;
use super::Ext4;
use crate::format::features::incompat;
use crate::format::inode::GOOD_OLD_INODE_SIZE;
use crate::format::xattr::{
    self, XattrBlockHeader, XattrEntry, BLOCK_HEADER_SIZE, ENTRY_HEADER_SIZE, XATTR_MAGIC,
};
use usfs_fs::{Error, Result};

/// One attribute as stored.
pub(crate) struct RawXattr {
    /// Namespace index.
    pub index: u8,
    /// Name within the namespace.
    pub name: Vec<u8>,
    /// The value (ACLs still in ext4's compact encoding).
    pub value: Vec<u8>,
}

/// Largest value we accept from an EA inode (the kernel's limit is 64 KiB for most
/// namespaces; allow more but stay bounded).
const MAX_EA_INODE_VALUE: u64 = 16 << 20;

impl RawXattr {
    /// The full name with its namespace prefix, or `None` for unknown namespaces.
    pub fn full_name(&self) -> Option<Vec<u8>> {
        let mut n = xattr::prefix(self.index)?.as_bytes().to_vec();
        n.extend_from_slice(&self.name);
        Some(n)
    }

    /// The value as getxattr returns it.
    pub fn user_value(&self) -> Vec<u8> {
        if self.index == xattr::INDEX_POSIX_ACL_ACCESS
            || self.index == xattr::INDEX_POSIX_ACL_DEFAULT
        {
            if let Some(v) = xattr::acl_ext4_to_xattr(&self.value) {
                return v;
            }
        }
        self.value.clone()
    }

    /// Is this the hidden `system.data` attribute that holds inline data?
    pub fn is_inline_data(&self) -> bool {
        self.index == xattr::INDEX_SYSTEM && self.name == b"data"
    }
}

impl Ext4 {
    /// All attributes of an inode: in-inode ones first, then the block's.
    pub(crate) fn read_xattrs(&self, inode: &LoadedInode) -> Result<Vec<RawXattr>> {
        let mut out = self.read_ibody_xattrs(inode)?;
        let ino = inode.ino;
        let blk = inode.raw.file_acl();
        if blk != 0 {
            let what = format!("inode {ino}: xattr block");
            let block = self.read_block(blk, &what)?;
            let h = XattrBlockHeader::new(&block[..]).expect("block >= 32");
            if h.h_magic() != XATTR_MAGIC || h.h_blocks() != 1 {
                return Err(Error::corrupt(format!("{what} {blk}: bad header")));
            }
            if let Some(seed) = self.core.csum_seed {
                if h.h_checksum() != xattr::block_checksum(seed, blk, &block) {
                    return Err(Error::corrupt(format!(
                        "{what} {blk}: checksum does not match"
                    )));
                }
            }
            self.parse_entries(ino, &block, BLOCK_HEADER_SIZE, &block, &mut out, &what)?;
        }
        Ok(out)
    }

    /// The attributes stored in the inode itself (after the extra fields), in disk order.
    pub(crate) fn read_ibody_xattrs(&self, inode: &LoadedInode) -> Result<Vec<RawXattr>> {
        let mut out = Vec::new();
        let isz = self.core.geo.inode_size as usize;
        if isz > GOOD_OLD_INODE_SIZE {
            let start = GOOD_OLD_INODE_SIZE + inode.raw.i_extra_isize() as usize;
            let bytes = &inode.raw.bytes()[..isz];
            if start + 4 <= isz
                && u32::from_le_bytes(bytes[start..start + 4].try_into().unwrap()) == XATTR_MAGIC
            {
                let area = &bytes[start + 4..];
                self.parse_entries(inode.ino, area, 0, area, &mut out, "in-inode xattrs")?;
            }
        }
        Ok(out)
    }

    /// Parses entries from `area[first..]`; value offsets are relative to `values`.
    fn parse_entries(
        &self,
        ino: u32,
        area: &[u8],
        first: usize,
        values: &[u8],
        out: &mut Vec<RawXattr>,
        what: &str,
    ) -> Result<()> {
        let bad = |m: String| Err(Error::corrupt(format!("inode {ino}: {what}: {m}")));
        let mut off = first;
        loop {
            if off + 4 > area.len() {
                return bad("entry list runs off the end".into());
            }
            if area[off..off + 4] == [0, 0, 0, 0] {
                return Ok(());
            }
            let Some(e) = XattrEntry::new(&area[off..]) else {
                return bad("truncated entry".into());
            };
            let nlen = e.e_name_len() as usize;
            let esize = xattr::entry_size(nlen);
            if off + esize > area.len() {
                return bad(format!("entry at {off} with name length {nlen}"));
            }
            let name = area[off + ENTRY_HEADER_SIZE..off + ENTRY_HEADER_SIZE + nlen].to_vec();
            let vsize = e.e_value_size() as usize;
            let value = if e.e_value_inum() != 0 {
                if !self.core.geo.features.has_incompat(incompat::EA_INODE) {
                    return bad("value in an inode without the ea_inode feature".into());
                }
                self.ea_inode_value(ino, e.e_value_inum(), vsize as u64)?
            } else {
                let voff = e.e_value_offs() as usize;
                match values.get(voff..voff + vsize) {
                    Some(v) => v.to_vec(),
                    None => return bad(format!("value at {voff}+{vsize} outside its area")),
                }
            };
            out.push(RawXattr {
                index: e.e_name_index(),
                name,
                value,
            });
            off += esize;
        }
    }

    fn ea_inode_value(&self, ino: u32, ea_ino: u32, size: u64) -> Result<Vec<u8>> {
        if size > MAX_EA_INODE_VALUE {
            return Err(Error::corrupt(format!(
                "inode {ino}: xattr value of {size} bytes"
            )));
        }
        let ea = self.load_inode(ea_ino as u64)?;
        if ea.raw.size() != size {
            return Err(Error::corrupt(format!(
                "inode {ino}: EA inode {ea_ino} holds {} bytes, entry says {size}",
                ea.raw.size()
            )));
        }
        let mut v = vec![0u8; size as usize];
        let n = self.read_file(&ea, 0, &mut v)?;
        v.truncate(n);
        Ok(v)
    }

    /// The value of `system.data` (the inline data beyond i_block), or empty.
    pub(crate) fn inline_xattr_data(&self, inode: &LoadedInode) -> Result<Vec<u8>> {
        Ok(self
            .read_xattrs(inode)?
            .into_iter()
            .find(RawXattr::is_inline_data)
            .map(|x| x.value)
            .unwrap_or_default())
    }
}

impl Ext4 {
    /// The `system.data` value of inode `ino` (the inline data past i_block), for the
    /// checker. Fails like any inode load on a damaged inode.
    pub fn inline_data_extra(&self, ino: u32) -> Result<Vec<u8>> {
        let inode = self.load_inode(ino as u64)?;
        self.inline_xattr_data(&inode)
    }
}
