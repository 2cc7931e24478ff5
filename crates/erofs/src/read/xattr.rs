//! Extended attributes: the inline ibody (header, shared ids, entries) and the shared
//! xattr area.

use super::{Erofs, Inode};
use crate::format::xattr::{prefix, Entry, IbodyHeader, ENTRY_HEADER_SIZE, IBODY_HEADER_SIZE};
use usfs_fs::{Error, Result, Structure};

impl Erofs {
    /// All xattrs of an inode as (full name, value), inline ones after shared ones.
    pub(crate) fn xattrs(&self, ino: &Inode) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        if ino.xattr_isize == 0 {
            return Ok(out);
        }
        let nid = ino.nid;
        if ino.xattr_isize < IBODY_HEADER_SIZE as u64 {
            return Err(Error::corrupt(
                Structure::ErofsXattr,
                format!("inode {nid}: xattr area of {} bytes", ino.xattr_isize),
            )
            .with_ino(nid));
        }
        let start = ino.pos + ino.isize;
        let body = self.meta(start, ino.xattr_isize)?;
        let h = IbodyHeader::new(&body[..]).expect("12 bytes");
        let shared = usize::from(h.h_shared_count());
        let mut p = IBODY_HEADER_SIZE + shared * 4;
        if p > body.len() {
            return Err(Error::corrupt(
                Structure::ErofsXattr,
                format!("inode {nid}: {shared} shared xattrs overflow the xattr area"),
            )
            .with_ino(nid));
        }
        for i in 0..shared {
            let o = IBODY_HEADER_SIZE + i * 4;
            let id = u32::from_le_bytes(body[o..o + 4].try_into().unwrap());
            let pos = (u64::from(self.sb.xattr_blkaddr()) << self.blkbits) + u64::from(id) * 4;
            let hdr = self.meta(pos, 4)?;
            let e = Entry::new(&hdr[..]).expect("4 bytes");
            let len = usize::from(e.e_name_len()) + usize::from(e.e_value_size());
            let all = self.meta(pos + 4, len as u64)?;
            out.push(self.decode_entry(nid, &e, &all)?);
        }
        while p + ENTRY_HEADER_SIZE <= body.len() {
            let e = Entry::new(&body[p..p + 4]).expect("4 bytes");
            let len = usize::from(e.e_name_len()) + usize::from(e.e_value_size());
            let end = p + 4 + len;
            if end > body.len() {
                return Err(Error::corrupt(
                    Structure::ErofsXattr,
                    format!("inode {nid}: xattr entry passes the xattr area"),
                )
                .with_ino(nid));
            }
            out.push(self.decode_entry(nid, &e, &body[p + 4..end])?);
            p = (end + 3) & !3;
        }
        Ok(out)
    }

    fn decode_entry(&self, nid: u64, e: &Entry<&[u8]>, rest: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        let nl = usize::from(e.e_name_len());
        let idx = e.e_name_index();
        if idx & 0x80 != 0 {
            return Err(Error::incompatible(format!(
                "inode {nid}: long xattr name prefixes"
            )));
        }
        let pre = prefix(idx).ok_or_else(|| {
            Error::corrupt(
                Structure::ErofsXattr,
                format!("inode {nid}: xattr name index {idx}"),
            )
            .with_ino(nid)
        })?;
        let mut name = pre.to_vec();
        name.extend_from_slice(&rest[..nl]);
        Ok((name, rest[nl..].to_vec()))
    }
}
