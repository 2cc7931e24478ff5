//! [`FileSystem`] for [`Erofs`].

use super::flat::FlatRun;
use super::{Erofs, Inode};
use crate::format::inode::layout;
use crate::format::superblock::EROFS_MAGIC;
use usfs_fs::{DirEntry, Error, FileSystem, FileType, Ino, Metadata, Result, StatFs, Structure};

impl Erofs {
    /// Reads file data at `off` (any layout); returns the bytes read.
    pub(crate) fn read_data(&self, ino: &Inode, off: u64, buf: &mut [u8]) -> Result<usize> {
        if off >= ino.size {
            return Ok(0);
        }
        let n = (ino.size - off).min(buf.len() as u64) as usize;
        let buf = &mut buf[..n];
        if ino.compressed() {
            self.read_compressed(ino, off, buf)
        } else {
            self.read_flat(ino, off, buf)
        }
    }
}

impl FileSystem for Erofs {
    fn format_name(&self) -> &'static str {
        "erofs"
    }

    fn root(&self) -> Ino {
        u64::from(self.sb.root_nid())
    }

    fn lookup(&self, dir: Ino, name: &[u8]) -> Result<Ino> {
        let d = self.inode(dir)?;
        if name == b"." {
            return if d.file_type == FileType::Directory {
                Ok(dir)
            } else {
                Err(Error::NotDir)
            };
        }
        self.find_entry(&d, name)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        let i = self.inode(ino)?;
        Ok(self.metadata(&i))
    }

    fn readdir(
        &self,
        dir: Ino,
        cookie: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        let d = self.inode(dir)?;
        self.list_dir(&d, cookie, f)
    }

    fn read_at(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let i = self.inode(ino)?;
        match i.file_type {
            FileType::Directory => return Err(Error::IsDir),
            FileType::Regular | FileType::Symlink => {}
            _ => return Err(Error::Invalid),
        }
        self.read_data(&i, offset, buf)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let i = self.inode(ino)?;
        if i.file_type != FileType::Symlink {
            return Err(Error::Invalid);
        }
        if i.size > 4096 {
            return Err(Error::corrupt(
                Structure::Symlink,
                format!("symlink {ino}: target of {} bytes", i.size),
            )
            .with_ino(ino));
        }
        let mut v = vec![0u8; i.size as usize];
        let n = self.read_data(&i, 0, &mut v)?;
        v.truncate(n);
        Ok(v)
    }

    fn list_xattrs(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let i = self.inode(ino)?;
        Ok(self.xattrs(&i)?.into_iter().map(|(n, _)| n).collect())
    }

    fn get_xattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let i = self.inode(ino)?;
        self.xattrs(&i)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
            .ok_or(Error::NoData)
    }

    fn next_data(&self, ino: Ino, offset: u64) -> Result<Option<std::ops::Range<u64>>> {
        let i = self.inode(ino)?;
        if offset >= i.size {
            return Ok(None);
        }
        if i.layout != layout::CHUNK_BASED {
            return Ok(Some(offset..i.size));
        }
        let mut pos = offset;
        let mut start = None;
        while pos < i.size {
            match self.flat_run(&i, pos, i.size - pos)? {
                FlatRun::Hole(n) => {
                    if let Some(s) = start {
                        return Ok(Some(s..pos));
                    }
                    pos += n;
                }
                FlatRun::Image(_, n) | FlatRun::Device(_, _, n) => {
                    start.get_or_insert(pos);
                    pos += n;
                }
            }
        }
        Ok(start.map(|s| s..i.size))
    }

    fn mapped_data(&self, ino: Ino, offset: u64, max: usize) -> Result<Option<&[u8]>> {
        let Some(image) = self.dev.as_slice() else {
            return Ok(None);
        };
        let i = self.inode(ino)?;
        if i.file_type != FileType::Regular {
            return Err(Error::Invalid);
        }
        if offset >= i.size || max == 0 || i.compressed() {
            return Ok(None);
        }
        match self.flat_run(&i, offset, max as u64)? {
            FlatRun::Image(at, len) => {
                let end = at
                    .checked_add(len)
                    .filter(|&e| e <= image.len() as u64)
                    .ok_or_else(|| {
                        Error::corrupt(
                            Structure::ErofsInode,
                            format!("inode {ino}: data past the image end"),
                        )
                        .with_ino(ino)
                        .with_offset(at)
                    })?;
                self.dev.stats().record_read(len as usize);
                Ok(Some(&image[at as usize..end as usize]))
            }
            // (Data on an extra device is read, not mapped.)
            FlatRun::Hole(_) | FlatRun::Device(..) => Ok(None),
        }
    }

    /// As the kernel's erofs_statfs answers: no free blocks, and an inode count with no
    /// limit (u64::MAX total, less the image's inodes free).
    fn statfs(&self) -> Result<StatFs> {
        Ok(StatFs {
            block_size: self.bs() as u32,
            blocks: u64::from(self.sb.blocks()),
            blocks_free: 0,
            blocks_avail: 0,
            files: u64::MAX,
            files_free: u64::MAX - self.sb.inos(),
            name_max: 255,
            magic: u64::from(EROFS_MAGIC),
        })
    }

    fn io_stats(&self) -> usfs_dev::IoSnapshot {
        self.dev.stats().snapshot()
    }

    fn describe(&self) -> Vec<(String, String)> {
        self.describe_superblock()
    }
}
