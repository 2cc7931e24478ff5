//! Directories: blocks of sorted `erofs_dirent`s followed by their names. Lookup is a
//! binary search over blocks, then within the block.

use super::{Erofs, Inode};
use crate::format::dirent::{to_file_type, Dirent, NAME_LEN};
use usfs_fs::{DirEntry, Error, FileType, Result, Structure};

/// One parsed directory entry.
pub(crate) struct RawEntry<'a> {
    pub nid: u64,
    pub file_type: u8,
    pub name: &'a [u8],
}

/// Parses the entries of one directory block of `len` valid bytes.
pub(crate) fn parse_block<'a>(nid: u64, blk: &'a [u8]) -> Result<Vec<RawEntry<'a>>> {
    let bad = |m: String| {
        Error::corrupt(Structure::ErofsDirectory, format!("directory {nid}: {m}")).with_ino(nid)
    };
    if blk.len() < Dirent::<&[u8]>::SIZE {
        return Err(bad(format!("block of {} bytes", blk.len())));
    }
    let first = Dirent::new(&blk[..12]).expect("12 bytes");
    let nameoff0 = usize::from(first.nameoff());
    if nameoff0 < 12 || nameoff0 % 12 != 0 || nameoff0 > blk.len() {
        return Err(bad(format!("first name offset {nameoff0}")));
    }
    let n = nameoff0 / 12;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let d = Dirent::new(&blk[i * 12..i * 12 + 12]).expect("12 bytes");
        let start = usize::from(d.nameoff());
        let end = if i + 1 < n {
            usize::from(
                Dirent::new(&blk[(i + 1) * 12..(i + 2) * 12])
                    .expect("12")
                    .nameoff(),
            )
        } else {
            let tail = blk.get(start..).unwrap_or(&[]);
            start + tail.iter().position(|&b| b == 0).unwrap_or(tail.len())
        };
        if start < nameoff0 || end <= start || end > blk.len() || end - start > NAME_LEN {
            return Err(bad(format!("entry {i}: name at {start}..{end}")));
        }
        out.push(RawEntry {
            nid: d.nid(),
            file_type: d.file_type(),
            name: &blk[start..end],
        });
    }
    Ok(out)
}

impl Erofs {
    fn dir_check(&self, ino: &Inode) -> Result<u64> {
        if ino.file_type != FileType::Directory {
            return Err(Error::NotDir);
        }
        Ok(ino.size.div_ceil(self.bs()))
    }

    /// Bytes of directory block `b`.
    pub(crate) fn dir_block(&self, ino: &Inode, b: u64) -> Result<Vec<u8>> {
        let bs = self.bs();
        let len = (ino.size - b * bs).min(bs) as usize;
        let mut v = vec![0u8; len];
        self.read_data(ino, b * bs, &mut v)?;
        Ok(v)
    }

    /// Lists a directory from `cookie` (block << 16 | entry index).
    pub(crate) fn list_dir(
        &self,
        ino: &Inode,
        cookie: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        let nblocks = self.dir_check(ino)?;
        let (mut b, mut skip) = (cookie >> 16, (cookie & 0xffff) as usize);
        while b < nblocks {
            let blk = self.dir_block(ino, b)?;
            let entries = parse_block(ino.nid, &blk)?;
            for (i, e) in entries.iter().enumerate().skip(skip) {
                if e.name == b"." || e.name == b".." {
                    continue;
                }
                let next = if i + 1 < entries.len() {
                    (b << 16) | (i as u64 + 1)
                } else {
                    (b + 1) << 16
                };
                let de = DirEntry {
                    name: e.name.to_vec(),
                    ino: e.nid,
                    file_type: to_file_type(e.file_type),
                };
                if !f(de, next) {
                    return Ok(());
                }
            }
            skip = 0;
            b += 1;
        }
        Ok(())
    }

    /// Finds `name` in a directory.
    pub(crate) fn find_entry(&self, ino: &Inode, name: &[u8]) -> Result<u64> {
        let nblocks = self.dir_check(ino)?;
        if name.len() > NAME_LEN {
            return Err(Error::NameTooLong);
        }
        let (mut lo, mut hi) = (0u64, nblocks);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let blk = self.dir_block(ino, mid)?;
            let entries = parse_block(ino.nid, &blk)?;
            let first = entries.first().map(|e| e.name).unwrap_or(&[]);
            let last = entries.last().map(|e| e.name).unwrap_or(&[]);
            if name < first {
                hi = mid;
            } else if name > last {
                lo = mid + 1;
            } else {
                return entries
                    .binary_search_by(|e| e.name.cmp(name))
                    .map(|i| entries[i].nid)
                    .map_err(|_| Error::NotFound);
            }
        }
        Err(Error::NotFound)
    }
}
