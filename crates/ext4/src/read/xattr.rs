//! Extended attributes: the in-inode area and the xattr block (checksummed), values in
//! place or in EA inodes; POSIX ACLs converted to the generic xattr format.

use super::inode::LoadedInode;
use super::Ext4;
use crate::format::features::incompat;
use crate::format::xattr;
use crate::walk;
use crate::walk::xattr::{Area, Entry, Value, XattrCtx};
use usfs_fs::{Error, Result, Structure};

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
    pub(crate) fn full_name(&self) -> Option<Vec<u8>> {
        let mut n = xattr::prefix(self.index)?.as_bytes().to_vec();
        n.extend_from_slice(&self.name);
        Some(n)
    }

    /// The value as getxattr returns it.
    pub(crate) fn user_value(&self) -> Vec<u8> {
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
    pub(crate) fn is_inline_data(&self) -> bool {
        self.index == xattr::INDEX_SYSTEM && self.name == b"data"
    }
}

impl Ext4 {
    /// What the xattr walker needs to know about inode `ino`.
    fn xattr_ctx(&self, ino: u32) -> XattrCtx {
        XattrCtx {
            ino,
            ea_inode: self.core.geo.features.has_incompat(incompat::EA_INODE),
            seed: self.core.csum_seed,
        }
    }

    /// All attributes of an inode: in-inode ones first, then the block's.
    pub(crate) fn read_xattrs(&self, inode: &LoadedInode) -> Result<Vec<RawXattr>> {
        let mut out = self.read_ibody_xattrs(inode)?;
        let ino = inode.ino;
        let blk = inode.raw.file_acl();
        if blk != 0 {
            let block =
                self.read_block(blk, Structure::Xattr, &format!("inode {ino}: xattr block"))?;
            let cx = self.xattr_ctx(ino);
            for e in walk::xattr::block_entries(&block, blk, &cx)? {
                out.push(self.raw_xattr(ino, &e)?);
            }
        }
        Ok(out)
    }

    /// The attributes stored in the inode itself (after the extra fields), in disk order.
    pub(crate) fn read_ibody_xattrs(&self, inode: &LoadedInode) -> Result<Vec<RawXattr>> {
        let isz = self.core.geo.inode_size as usize;
        let bytes = inode.raw.bytes();
        let Some(area) = walk::xattr::ibody(bytes, isz, inode.raw.i_extra_isize()) else {
            return Ok(Vec::new());
        };
        let cx = self.xattr_ctx(inode.ino);
        walk::xattr::entries(area, 0, &cx, Area::Inode)?
            .iter()
            .map(|e| self.raw_xattr(inode.ino, e))
            .collect()
    }

    /// An entry the walker found, its value read (from an EA inode if there).
    fn raw_xattr(&self, ino: u32, e: &Entry<'_>) -> Result<RawXattr> {
        let value = match e.value {
            Value::Here(v) => v.to_vec(),
            Value::Outside => Vec::new(),
            Value::Inode { ino: ea, size } => self.ea_inode_value(ino, ea, size as u64)?,
        };
        Ok(RawXattr {
            index: e.index,
            name: e.name.to_vec(),
            value,
        })
    }

    fn ea_inode_value(&self, ino: u32, ea_ino: u32, size: u64) -> Result<Vec<u8>> {
        if size > MAX_EA_INODE_VALUE {
            return Err(Error::corrupt(
                Structure::Xattr,
                format!("inode {ino}: xattr value of {size} bytes"),
            )
            .with_ino(ino));
        }
        let ea = self.load_inode(ea_ino as u64)?;
        if ea.raw.size() != size {
            return Err(Error::corrupt(
                Structure::Xattr,
                format!(
                    "inode {ino}: EA inode {ea_ino} holds {} bytes, entry says {size}",
                    ea.raw.size()
                ),
            )
            .with_ino(ino));
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
