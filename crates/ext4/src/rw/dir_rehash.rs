//! e2fsck's rehash of a directory (pass 3A, rehash.c), for the repair: the live entries
//! of its leaf blocks are read leniently (blocks without a checksum tail included, a
//! broken chain read up to the break), names made legal ('/' and NUL become '.', empty
//! ones dropped) and duplicates fixed as `dir_dups` does; then the old blocks are freed
//! and the directory is written again from nothing: `.`, `..` (the parent its `..`
//! named, else the root), and the entries in inode order (e2fsck's order for a
//! directory it compresses), added as the kernel adds them, so a directory past one
//! block becomes an htree again when dir_index is on, every leaf with its checksum tail.

use super::dir_dups::{resolve, Named};
use super::dir_edit::DirEdit;
use super::dir_leaf::Ent;
use crate::format::dirent::Dirents;
use crate::format::inode::ROOT_INO;
use usfs_fs::Result;

impl DirEdit<'_> {
    /// Rehashes this directory (see the module header).
    pub fn rehash(&mut self) -> Result<()> {
        let (parent, mut ents) = self.leaf_entries()?;
        resolve(&mut ents);
        ents.retain(|e| e.ino != 0 && !e.name.is_empty());
        ents.sort_by_key(|e| e.ino);
        self.d.truncate_blocks(self.m, 0)?;
        self.d.set_indexed(false);
        self.init(parent)?;
        for e in &ents {
            self.add_ent(&Ent {
                name: e.name.clone(),
                ino: e.ino,
                ft: e.ft,
            })?;
        }
        Ok(())
    }

    /// The parent (`..` of block 0, or the root) and the live entries of the leaf
    /// blocks, their names made legal.
    fn leaf_entries(&mut self) -> Result<(u32, Vec<Named>)> {
        let (indexed, bs, has_ft) = (self.indexed(), self.fmt.bs, self.fmt.has_ft);
        let mut parent = ROOT_INO;
        let mut ents = Vec::new();
        for lblk in 0..self.d.nblocks() {
            if indexed && lblk != 0 && self.is_dx_node(lblk).unwrap_or(false) {
                continue;
            }
            let Ok((_, buf)) = self.read_raw(lblk) else {
                continue;
            };
            let is_root = indexed && lblk == 0;
            for (i, e) in Dirents::lenient(&buf, bs, has_ft).in_block().enumerate() {
                let Ok(e) = e else { break };
                if lblk == 0 && i < 2 {
                    if i == 1 && e.name == b".." && e.ino != 0 {
                        parent = e.ino;
                    }
                    continue;
                }
                if is_root {
                    // (The rest of an htree root is its index.)
                    break;
                }
                if e.ino == 0 || e.name == b"." || e.name == b".." {
                    continue;
                }
                let name = e
                    .name
                    .iter()
                    .map(|&c| if c == b'/' || c == 0 { b'.' } else { c });
                ents.push(Named {
                    lblk,
                    off: e.off,
                    ino: e.ino,
                    name: name.collect(),
                    ft: e.file_type,
                    changed: false,
                });
            }
        }
        Ok((parent, ents))
    }
}
