//! Regular files through delayed allocation, symbolic links (fast and slow) and device
//! nodes.

use super::writer::{no_space, Writer};
use crate::alloc::{plan_extents, DelayedFile, Mapping};
use crate::format::inode::encode_rdev;
use usfs_fs::{Error, Result};

impl Writer {
    /// Writes regular file `ino`'s data from a delayed-allocation buffer: the blocks are
    /// chosen now, knowing the size, then written; sets the extent tree and the size.
    pub fn write_file(&mut self, ino: u32, file: DelayedFile) -> Result<()> {
        let size = file.size();
        let goal = self.data_goal(ino, false);
        let parts = file
            .flush(&mut self.blocks, ino, goal)
            .map_err(|e| no_space(&format!("inode {ino}"), e))?;
        let maps: Vec<Mapping> = parts.iter().map(|p| p.0).collect();
        for (m, data) in &parts {
            self.write_blocks(m.pblk, data)?;
        }
        self.set_extents(ino, &maps)?;
        self.inode_mut(ino).set_size(size);
        Ok(())
    }

    /// Makes `ino` a symbolic link to `target` (1 to block size - 1 bytes): in `i_block`
    /// below 60 bytes, else in one data block. The mode is the caller's.
    pub fn write_symlink(&mut self, ino: u32, target: &[u8]) -> Result<()> {
        let bs = self.block_size() as usize;
        if target.is_empty() || target.len() >= bs {
            return Err(Error::Incompatible(format!(
                "symlink target of {} bytes (1..{} allowed)",
                target.len(),
                bs - 1
            )));
        }
        self.inode_mut(ino).set_size(target.len() as u64);
        if target.len() < 60 {
            let mut b = [0u8; 60];
            b[..target.len()].copy_from_slice(target);
            self.inode_mut(ino).set_i_block(&b);
            return Ok(());
        }
        let goal = self.data_goal(ino, false);
        let maps = plan_extents(&mut self.blocks, ino, goal, &[(0, 1)])
            .map_err(|e| no_space(&format!("symlink inode {ino}"), e))?;
        let mut blk = vec![0u8; bs];
        blk[..target.len()].copy_from_slice(target);
        self.write_blocks(maps[0].pblk, &blk)?;
        self.set_extents(ino, &maps)
    }

    /// Stores a device number in character or block device `ino`.
    pub fn set_device(&mut self, ino: u32, major: u32, minor: u32) {
        let mut b = [0u8; 60];
        b[..8].copy_from_slice(&encode_rdev(major, minor));
        self.inode_mut(ino).set_i_block(&b);
    }
}
