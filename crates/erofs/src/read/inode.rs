//! Loading inodes (compact or extended) by nid.

use super::Erofs;
use crate::format::inode::{
    decode_dev, layout, xattr_ibody_size, CompactInode, ExtendedInode, I_VERSION_EXTENDED,
};
use usfs_fs::{Error, FileType, Metadata, Result, Structure, Timestamp};

/// An inode, decoded from either on-disk form.
#[derive(Clone, Debug)]
pub(crate) struct Inode {
    /// Its nid.
    pub nid: u64,
    /// Byte position in the image.
    pub pos: u64,
    /// 32 or 64.
    pub isize: u64,
    /// Bytes of inline xattrs after the inode.
    pub xattr_isize: u64,
    /// Data layout (format::inode::layout).
    pub layout: u8,
    pub mode: u32,
    pub file_type: FileType,
    pub nlink: u32,
    pub size: u64,
    /// raw_blkaddr / compressed_blocks / rdev / chunk format.
    pub i_u: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: i64,
    pub mtime_nsec: u32,
}

impl Inode {
    /// Byte after the inode and its inline xattrs.
    pub(crate) fn meta_end(&self) -> u64 {
        self.pos + self.isize + self.xattr_isize
    }

    /// Is the data compressed?
    pub(crate) fn compressed(&self) -> bool {
        self.layout == layout::COMPRESSED_FULL || self.layout == layout::COMPRESSED_COMPACT
    }
}

impl Erofs {
    /// Reads inode `nid`.
    pub(crate) fn inode(&self, nid: u64) -> Result<Inode> {
        let pos = self.nid_pos(nid)?;
        let head = self.meta_cached(pos, 2).map_err(|_| {
            Error::corrupt(
                Structure::ErofsInode,
                format!("inode {nid}: position {pos} is outside the image"),
            )
            .with_ino(nid)
            .with_offset(pos)
        })?;
        let format = u16::from_le_bytes([head[0], head[1]]);
        if format & !0x1f != 0 {
            return Err(Error::corrupt(
                Structure::ErofsInode,
                format!("inode {nid}: unknown i_format bits {format:#x}"),
            )
            .with_ino(nid));
        }
        let lay = ((format >> 1) & 7) as u8;
        let extended = format & I_VERSION_EXTENDED != 0;
        let ino = if extended {
            let raw = self.meta_cached(pos, 64).map_err(|_| {
                Error::corrupt(Structure::ErofsInode, format!("inode {nid}: truncated"))
                    .with_ino(nid)
                    .with_offset(pos)
            })?;
            let d = ExtendedInode::new(&raw[..]).expect("64 bytes");
            Inode {
                nid,
                pos,
                isize: 64,
                xattr_isize: xattr_ibody_size(d.i_xattr_icount()),
                layout: lay,
                mode: u32::from(d.i_mode()),
                file_type: FileType::Regular,
                nlink: d.i_nlink(),
                size: d.i_size(),
                i_u: d.i_u(),
                uid: d.i_uid(),
                gid: d.i_gid(),
                mtime: d.i_mtime() as i64,
                mtime_nsec: d.i_mtime_nsec(),
            }
        } else {
            let raw = self.meta_cached(pos, 32).map_err(|_| {
                Error::corrupt(Structure::ErofsInode, format!("inode {nid}: truncated"))
                    .with_ino(nid)
                    .with_offset(pos)
            })?;
            let d = CompactInode::new(&raw[..]).expect("32 bytes");
            let mtime_extra =
                if self.sb.feature_compat() & crate::format::superblock::compat::MTIME != 0 {
                    i64::from(d.i_mtime())
                } else {
                    0
                };
            Inode {
                nid,
                pos,
                isize: 32,
                xattr_isize: xattr_ibody_size(d.i_xattr_icount()),
                layout: lay,
                mode: u32::from(d.i_mode()),
                file_type: FileType::Regular,
                nlink: u32::from(d.i_nlink()),
                size: u64::from(d.i_size()),
                i_u: d.i_u(),
                uid: u32::from(d.i_uid()),
                gid: u32::from(d.i_gid()),
                mtime: self.sb.build_time() as i64 + mtime_extra,
                mtime_nsec: self.sb.build_time_nsec(),
            }
        };
        let file_type = FileType::from_mode(ino.mode).ok_or_else(|| {
            Error::corrupt(
                Structure::ErofsInode,
                format!("inode {nid}: bad mode {:#o}", ino.mode),
            )
            .with_ino(nid)
        })?;
        if ino.layout > layout::CHUNK_BASED {
            return Err(Error::corrupt(
                Structure::ErofsInode,
                format!("inode {nid}: unknown data layout {}", ino.layout),
            )
            .with_ino(nid));
        }
        // (A chunk-based inode needs no feature bit: the kernel reads one without
        // CHUNKED_FILE, which mkfs.erofs --tar=i images do not set.)
        if ino.mtime_nsec >= 1_000_000_000 {
            return Err(Error::corrupt(
                Structure::ErofsInode,
                format!("inode {nid}: nanoseconds {} out of range", ino.mtime_nsec),
            )
            .with_ino(nid));
        }
        Ok(Inode { file_type, ..ino })
    }

    /// The attributes of an inode, as the kernel reports them.
    pub(crate) fn metadata(&self, ino: &Inode) -> Metadata {
        let t = Timestamp {
            sec: ino.mtime,
            nsec: ino.mtime_nsec,
        };
        let size = ino.size;
        let rdev = match ino.file_type {
            FileType::CharDevice | FileType::BlockDevice => decode_dev(ino.i_u),
            _ => 0,
        };
        let blocks = if ino.compressed() {
            u64::from(ino.i_u) << (self.blkbits - 9)
        } else {
            size.div_ceil(self.bs()) * (self.bs() / 512)
        };
        Metadata {
            ino: ino.nid,
            file_type: ino.file_type,
            perm: ino.mode & 0o7777,
            uid: ino.uid,
            gid: ino.gid,
            nlink: u64::from(ino.nlink),
            size,
            blocks,
            rdev,
            blksize: self.bs() as u32,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: None,
            generation: 0,
        }
    }
}
