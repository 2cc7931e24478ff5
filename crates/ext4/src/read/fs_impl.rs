//! The [`FileSystem`] implementation: file data, symlinks, attributes, and the trait glue.

use super::inode::LoadedInode;
use super::map::map_structure;
use super::Ext4;
use crate::format::features::{incompat, ro_compat};
use crate::format::inode::{flags, I_BLOCK_SIZE, ROOT_INO};
use std::ops::Range;
use usfs_fs::{DirEntry, Error, FileSystem, FileType, Ino, Metadata, Result, StatFs, Structure};

impl Ext4 {
    /// Reads file data of `inode` at `offset` into `buf`; returns bytes read.
    pub(crate) fn read_file(
        &self,
        inode: &LoadedInode,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        let size = inode.raw.size();
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let n = (size - offset).min(buf.len() as u64) as usize;
        let buf = &mut buf[..n];
        if inode.has_flag(flags::INLINE_DATA) {
            return self.read_inline(inode, offset, buf);
        }
        let log = self.core.geo.block_size_log;
        let mut done = 0usize;
        while done < n {
            let pos = offset + done as u64;
            let run = self.map_block(inode, pos >> log)?;
            let run_end = (run.lblk + run.len).saturating_mul(1 << log);
            let chunk = (run_end.min(offset + n as u64) - pos) as usize;
            let dst = &mut buf[done..done + chunk];
            match run.pblk {
                Some(p) => {
                    let first = pos >> log;
                    let phys = ((p + (first - run.lblk)) << log) + (pos & ((1 << log) - 1));
                    let end_blk = (phys + chunk as u64).div_ceil(1 << log);
                    if end_blk > self.core.geo.blocks_count {
                        return Err(Error::corrupt(
                            map_structure(inode),
                            format!(
                                "inode {}: data block beyond the end of the file system",
                                inode.ino
                            ),
                        )
                        .with_ino(inode.ino));
                    }
                    self.core.dev.read_at(dst, phys)?;
                }
                None => dst.fill(0),
            }
            done += chunk;
        }
        Ok(n)
    }

    /// The bytes an inline-data inode stores: i_block, then the `system.data` value.
    pub(crate) fn inline_bytes(&self, inode: &LoadedInode) -> Result<Vec<u8>> {
        let mut data = inode.raw.i_block().to_vec();
        if inode.raw.size() > I_BLOCK_SIZE as u64 {
            data.extend_from_slice(&self.inline_xattr_data(inode)?);
        }
        Ok(data)
    }

    /// Reads inline data; bytes past what the inode stores read as zeros (mke2fs -d makes
    /// such inodes for all-zero files, and the kernel reads them this way).
    fn read_inline(&self, inode: &LoadedInode, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let data = self.inline_bytes(inode)?;
        let stored = (data.len() as u64).min(inode.raw.size());
        let n = buf.len();
        let have = stored.saturating_sub(offset).min(n as u64) as usize;
        if have > 0 {
            let off = offset as usize;
            buf[..have].copy_from_slice(&data[off..off + have]);
        }
        buf[have..].fill(0);
        Ok(n)
    }

    fn read_symlink(&self, inode: &LoadedInode) -> Result<Vec<u8>> {
        if inode.file_type()? != FileType::Symlink {
            return Err(Error::Invalid);
        }
        let size = inode.raw.size();
        if size >= self.core.geo.block_size as u64 || size > 4095 {
            return Err(Error::corrupt(
                Structure::Symlink,
                format!("inode {}: symlink of {size} bytes", inode.ino),
            )
            .with_ino(inode.ino));
        }
        let huge = self.core.geo.features.has_ro_compat(ro_compat::HUGE_FILE);
        // (An xattr block takes a cluster with bigalloc.)
        let ea_blocks = if inode.raw.file_acl() != 0 {
            (self.core.geo.block_size as u64) << self.core.geo.cluster_shift >> 9
        } else {
            0
        };
        let data_blocks = inode
            .raw
            .blocks_512(huge, self.core.geo.block_size)
            .saturating_sub(ea_blocks);
        if !inode.has_flag(flags::INLINE_DATA) && data_blocks == 0 {
            // Fast symlink: the target sits in i_block.
            if size as usize >= I_BLOCK_SIZE {
                return Err(Error::corrupt(
                    Structure::Symlink,
                    format!("inode {}: fast symlink of {size} bytes", inode.ino),
                )
                .with_ino(inode.ino));
            }
            return Ok(to_nul(inode.raw.i_block()[..size as usize].to_vec()));
        }
        let mut v = vec![0u8; size as usize];
        let n = self.read_file(inode, 0, &mut v)?;
        v.truncate(n);
        Ok(to_nul(v))
    }

    pub(crate) fn metadata(&self, inode: &LoadedInode) -> Result<Metadata> {
        let r = &inode.raw;
        let isz = self.core.geo.inode_size as usize;
        let file_type = inode.file_type()?;
        let huge = self.core.geo.features.has_ro_compat(ro_compat::HUGE_FILE);
        let rdev = match file_type {
            FileType::CharDevice | FileType::BlockDevice => r.rdev(),
            _ => 0,
        };
        Ok(Metadata {
            ino: inode.ino as u64,
            file_type,
            perm: r.i_mode() as u32 & 0o7777,
            uid: r.uid(),
            gid: r.gid(),
            nlink: r.i_links_count() as u64,
            size: r.size(),
            blocks: r.blocks_512(huge, self.core.geo.block_size),
            rdev,
            blksize: self.core.geo.block_size,
            atime: r.atime(isz),
            mtime: r.mtime(isz),
            ctime: r.ctime(isz),
            crtime: r.crtime(isz),
            generation: r.i_generation(),
        })
    }

    /// The first stored data at or after `offset` (unwritten extents count as holes).
    fn seek_data(&self, inode: &LoadedInode, offset: u64) -> Result<Option<Range<u64>>> {
        let size = inode.raw.size();
        if offset >= size {
            return Ok(None);
        }
        if inode.has_flag(flags::INLINE_DATA) {
            let stored = (self.inline_bytes(inode)?.len() as u64).min(size);
            return Ok((offset < stored).then_some(offset..stored));
        }
        let log = self.core.geo.block_size_log;
        let mut lblk = offset >> log;
        let last = (size - 1) >> log;
        while lblk <= last {
            let run = self.map_block(inode, lblk)?;
            if run.pblk.is_some() {
                // Merge following data runs.
                let start = (lblk << log).max(offset);
                let mut end_blk = run.lblk + run.len;
                while end_blk <= last {
                    let next = self.map_block(inode, end_blk)?;
                    if next.pblk.is_none() {
                        break;
                    }
                    end_blk += next.len;
                }
                return Ok(Some(start..(end_blk << log).min(size)));
            }
            lblk = run.lblk.saturating_add(run.len);
        }
        Ok(None)
    }

    /// Blocks of an internal journal (the journal inode's size), which the kernel counts
    /// as overhead in statfs; 0 without one, or with an external journal device.
    fn journal_blocks(&self) -> u64 {
        let f = &self.core.geo.features;
        let ino = self.core.sb.s_journal_inum();
        if !f.has_compat(crate::format::features::compat::HAS_JOURNAL) || ino == 0 {
            return 0;
        }
        self.read_inode_raw(ino)
            .map_or(0, |i| i.size() >> self.core.geo.block_size_log)
    }
}

impl FileSystem for Ext4 {
    fn format_name(&self) -> &'static str {
        let f = &self.core.geo.features;
        if f.has_incompat(incompat::EXTENTS | incompat::FLEX_BG | incompat::BIT64)
            || f.has_ro_compat(
                ro_compat::METADATA_CSUM | ro_compat::HUGE_FILE | ro_compat::GDT_CSUM,
            )
        {
            "ext4"
        } else if f.has_compat(crate::format::features::compat::HAS_JOURNAL) {
            "ext3"
        } else {
            "ext2"
        }
    }

    fn root(&self) -> Ino {
        ROOT_INO as Ino
    }

    fn lookup(&self, dir: Ino, name: &[u8]) -> Result<Ino> {
        let d = self.load_inode(dir)?;
        if name == b"." {
            if d.file_type()? != FileType::Directory {
                return Err(Error::NotDir);
            }
            return Ok(dir);
        }
        let ino = self.dir_lookup(&d, name)? as Ino;
        self.check_ino(ino)?;
        Ok(ino)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        self.metadata(&self.load_inode(ino)?)
    }

    fn readdir(
        &self,
        dir: Ino,
        cookie: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        let d = self.load_inode(dir)?;
        self.list_dir(&d, cookie, &mut |e| {
            if e.name == b"." || e.name == b".." {
                return true;
            }
            f(Ext4::to_dir_entry(e), e.next)
        })
    }

    /// The kernel's order and positions (see read/readdir.rs); the same positions as
    /// [`readdir`](FileSystem::readdir)'s cookies.
    fn readdir_with_dots(
        &self,
        dir: Ino,
        pos: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        let d = self.load_inode(dir)?;
        self.list_dir(&d, pos, &mut |e| f(Ext4::to_dir_entry(e), e.next))
    }

    fn read_at(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let inode = self.load_inode(ino)?;
        match inode.file_type()? {
            FileType::Directory => Err(Error::IsDir),
            FileType::Regular | FileType::Symlink => self.read_file(&inode, offset, buf),
            _ => Err(Error::Invalid),
        }
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        self.read_symlink(&self.load_inode(ino)?)
    }

    fn list_xattrs(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let inode = self.load_inode(ino)?;
        Ok(self
            .read_xattrs(&inode)?
            .iter()
            .filter(|x| !x.is_inline_data())
            .filter_map(|x| x.full_name())
            .collect())
    }

    fn get_xattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let inode = self.load_inode(ino)?;
        self.read_xattrs(&inode)?
            .iter()
            .filter(|x| !x.is_inline_data())
            .find(|x| x.full_name().as_deref() == Some(name))
            .map(|x| x.user_value())
            .ok_or(Error::NoData)
    }

    fn next_data(&self, ino: Ino, offset: u64) -> Result<Option<Range<u64>>> {
        self.seek_data(&self.load_inode(ino)?, offset)
    }

    fn mapped_data(&self, ino: Ino, offset: u64, max: usize) -> Result<Option<&[u8]>> {
        let Some(image) = self.core.dev.as_slice() else {
            return Ok(None);
        };
        let inode = self.load_inode(ino)?;
        let size = inode.raw.size();
        if offset >= size || max == 0 || inode.has_flag(flags::INLINE_DATA) {
            return Ok(None);
        }
        if inode.file_type()? != FileType::Regular {
            return Err(Error::Invalid);
        }
        let log = self.core.geo.block_size_log;
        let run = self.map_block(&inode, offset >> log)?;
        let Some(p) = run.pblk else { return Ok(None) };
        let phys = ((p + ((offset >> log) - run.lblk)) << log) + (offset & ((1 << log) - 1));
        let run_end = (run.lblk + run.len).saturating_mul(1 << log).min(size);
        let len = (run_end - offset).min(max as u64);
        let end = phys.checked_add(len).filter(|&e| {
            e <= image.len() as u64 && e.div_ceil(1 << log) <= self.core.geo.blocks_count
        });
        match end {
            Some(end) => {
                // Count the bytes handed out, so I/O figures stay honest.
                self.core.dev.stats().record_read(len as usize);
                Ok(Some(&image[phys as usize..end as usize]))
            }
            None => Err(Error::corrupt(
                map_structure(&inode),
                format!("inode {ino}: data block beyond the end of the file system"),
            )
            .with_ino(ino)),
        }
    }

    /// As the kernel's ext4_statfs answers for this image: total blocks less the
    /// overhead (the metadata the kernel counts plus an internal journal; the kernel
    /// recounts it rather than trust s_overhead_clusters when there is no bigalloc; with
    /// bigalloc it takes s_overhead_clusters where set), and available blocks less the
    /// reserved ones and the kernel's own reserve for extent-mapped file systems (2% of
    /// the clusters, at most 4096 clusters).
    fn statfs(&self) -> Result<StatFs> {
        let is64 = self.core.geo.is64();
        let free = self.core.sb.free_blocks_count(is64);
        let reserved = self.core.sb.r_blocks_count(is64);
        let bigalloc = self.core.geo.features.has_ro_compat(ro_compat::BIGALLOC);
        // Blocks per cluster (1 without bigalloc).
        let ratio = 1u64 << self.core.geo.cluster_shift;
        let overhead = match self.core.sb.s_overhead_clusters() {
            n if bigalloc && n != 0 => n as u64 * ratio,
            _ => {
                self.core
                    .geo
                    .metadata_overhead(u32::from(self.core.sb.s_reserved_gdt_blocks()))
                    + self.journal_blocks()
            }
        };
        let kernel_reserve = if self.core.geo.features.has_incompat(incompat::EXTENTS) {
            (self.core.geo.blocks_count / ratio / 50).min(4096) * ratio
        } else {
            0
        };
        Ok(StatFs {
            block_size: self.core.geo.block_size,
            blocks: self.core.geo.blocks_count.saturating_sub(overhead),
            blocks_free: free,
            blocks_avail: free.saturating_sub(reserved + kernel_reserve),
            files: self.core.geo.inodes_count as u64,
            files_free: self.core.sb.s_free_inodes_count() as u64,
            name_max: 255,
            magic: 0xEF53,
        })
    }

    fn io_stats(&self) -> usfs_dev::IoSnapshot {
        self.core.dev.stats().snapshot()
    }

    fn describe(&self) -> Vec<(String, String)> {
        self.describe_superblock()
    }
}

/// A symlink's target as the kernel reads it: a C string, ending at the first NUL
/// byte within i_size (e2fsck accepts an inline target padded with NULs).
fn to_nul(mut target: Vec<u8>) -> Vec<u8> {
    if let Some(end) = target.iter().position(|&b| b == 0) {
        target.truncate(end);
    }
    target
}
