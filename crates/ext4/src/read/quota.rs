//! Reading a quota file (the quota tree format e2fsprogs and the kernel write) from the
//! inode that holds it: the one reader the checker and the read-write volume share.

use super::Ext4;
use crate::format::quota::{self, QuotaFile, QT_BLOCK};
use usfs_fs::FileSystem;

impl Ext4 {
    /// The quota file of type `qtype` (0 user, 1 group, 2 project) in inode `ino`, as
    /// the image holds it, or why it cannot be read.
    pub fn read_quota_file(&self, ino: u32, qtype: usize) -> Result<QuotaFile, String> {
        let size = self.read_inode_raw(ino).map_err(|e| e.to_string())?.size();
        let mut block = |n: u32, buf: &mut [u8]| match self.read_at(
            ino as u64,
            n as u64 * QT_BLOCK as u64,
            buf,
        ) {
            Ok(got) if got == buf.len() => Ok(()),
            Ok(_) => Err(format!("block {n} past the end of the file")),
            Err(e) => Err(e.to_string()),
        };
        quota::read(qtype, size, &mut block)
    }
}
