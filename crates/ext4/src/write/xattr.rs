//! Extended attributes: in the inode while they fit (after the extra fields), the rest
//! in one xattr block; identical blocks are shared between inodes (refcount).

use super::writer::{Writer, EXTRA_ISIZE};
use crate::format::inode::GOOD_OLD_INODE_SIZE;
use crate::format::xattr::{
    block_checksum, finish_block_header, lay_out, to_on_disk, XattrBlockHeader, BLOCK_HEADER_SIZE,
    XATTR_MAGIC,
};
use std::collections::HashMap;
use usfs_fs::{Error, Result};

/// Most inodes sharing one xattr block (the kernel's EXT4_XATTR_REFCOUNT_MAX).
pub(super) const REFCOUNT_MAX: u32 = 1024;

/// Xattr blocks made so far, by content, for sharing.
#[derive(Debug, Default)]
pub(crate) struct XattrBlocks {
    by_content: HashMap<Vec<u8>, usize>,
    blocks: Vec<(u64, Vec<u8>, u32)>,
}

impl Writer {
    /// Stores the attributes `attrs` (full names such as `user.x`, values as getxattr
    /// returns them) of inode `ino`: in the inode first, in source order, while they
    /// fit; the others in an xattr block shared with inodes holding the same set.
    pub fn set_xattrs(&mut self, ino: u32, attrs: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        if attrs.is_empty() {
            return Ok(());
        }
        let isz = self.core.geo.inode_size as usize;
        let start = GOOD_OLD_INODE_SIZE + EXTRA_ISIZE as usize;
        let mut inode_set = Vec::new();
        let mut block_set = Vec::new();
        for (n, v) in attrs {
            let a = to_on_disk(ino, n, v)?;
            let mut trial = inode_set.clone();
            trial.push(a.clone());
            let mut scratch = vec![0u8; isz];
            if block_set.is_empty() && lay_out(&mut scratch, start + 4, isz, start + 4, &trial) {
                inode_set = trial;
            } else {
                block_set.push(a);
            }
        }
        if !inode_set.is_empty() {
            let mut i = self.inode_mut(ino);
            let b = i.bytes_mut();
            b[start..start + 4].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
            lay_out(b, start + 4, isz, start + 4, &inode_set);
        }
        if !block_set.is_empty() {
            block_set.sort_by(|a, b| {
                (a.index, a.name.len(), &a.name).cmp(&(b.index, b.name.len(), &b.name))
            });
            let bs = self.core.geo.block_size as usize;
            let mut blk = vec![0u8; bs];
            if !lay_out(&mut blk, BLOCK_HEADER_SIZE, bs, 0, &block_set) {
                return Err(Error::incompatible(format!(
                    "inode {ino}: extended attributes do not fit in the inode and one {bs}-byte block (ea_inode is not supported)"
                )));
            }
            finish_block_header(&mut blk, &block_set);
            let block = match self.xattr_blocks.by_content.get(&blk) {
                Some(&i) if self.xattr_blocks.blocks[i].2 < REFCOUNT_MAX => {
                    self.xattr_blocks.blocks[i].2 += 1;
                    self.xattr_blocks.blocks[i].0
                }
                _ => {
                    let goal = self.data_goal(ino, false);
                    let b = self.alloc_file_block(ino, goal)?;
                    self.xattr_blocks
                        .by_content
                        .insert(blk.clone(), self.xattr_blocks.blocks.len());
                    self.xattr_blocks.blocks.push((b, blk, 1));
                    b
                }
            };
            self.inode_mut(ino).set_file_acl(block);
            self.add_blocks(ino, 1);
        }
        Ok(())
    }

    /// Xattr blocks made so far that more than one inode shares.
    pub fn xattr_blocks_shared(&self) -> u64 {
        self.xattr_blocks.blocks.iter().filter(|b| b.2 > 1).count() as u64
    }

    /// Writes every xattr block with its final reference count and checksum.
    pub(crate) fn write_xattr_blocks(&mut self) -> Result<()> {
        let blocks = std::mem::take(&mut self.xattr_blocks.blocks);
        for (b, mut data, refs) in blocks {
            {
                let mut h = XattrBlockHeader::new(&mut data[..32]).expect("32");
                h.set_h_refcount(refs);
            }
            if let Some(seed) = self.core.csum_seed {
                let c = block_checksum(seed, b, &data);
                let mut h = XattrBlockHeader::new(&mut data[..32]).expect("32");
                h.set_h_checksum(c);
            }
            self.write_blocks(b, &data)?;
        }
        self.xattr_blocks.by_content.clear();
        Ok(())
    }
}
