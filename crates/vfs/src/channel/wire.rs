//! The channel's byte encoding: little-endian integers, byte strings with a u32 length,
//! and the file-system types built from them. A decoder never panics: a short or
//! malformed message gives `None`, and the side that received it drops the connection.

use usfs_fs::{DirEntry, FileType, Metadata, NewNode, SetAttr, StatFs, Timestamp};

/// Builds a message.
#[derive(Default)]
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn i64(&mut self, v: i64) -> &mut Self {
        self.u64(v as u64)
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
    pub(crate) fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            Some(v) => self.u8(1).u32(v),
            None => self.u8(0),
        }
    }
    pub(crate) fn opt_u64(&mut self, v: Option<u64>) -> &mut Self {
        match v {
            Some(v) => self.u8(1).u64(v),
            None => self.u8(0),
        }
    }
    pub(crate) fn time(&mut self, t: Timestamp) -> &mut Self {
        self.i64(t.sec).u32(t.nsec)
    }
    pub(crate) fn opt_time(&mut self, t: Option<Timestamp>) -> &mut Self {
        match t {
            Some(t) => self.u8(1).time(t),
            None => self.u8(0),
        }
    }
    pub(crate) fn file_type(&mut self, t: FileType) -> &mut Self {
        self.u32(t.mode_bits())
    }
    pub(crate) fn meta(&mut self, m: &Metadata) -> &mut Self {
        self.u64(m.ino)
            .file_type(m.file_type)
            .u32(m.perm)
            .u32(m.uid)
            .u32(m.gid)
            .u64(m.nlink)
            .u64(m.size)
            .u64(m.blocks)
            .u64(m.rdev)
            .u32(m.blksize)
            .time(m.atime)
            .time(m.mtime)
            .time(m.ctime)
            .opt_time(m.crtime)
            .u32(m.generation)
    }
    pub(crate) fn entry(&mut self, e: &DirEntry) -> &mut Self {
        self.bytes(&e.name).u64(e.ino);
        match e.file_type {
            Some(t) => self.u8(1).file_type(t),
            None => self.u8(0),
        }
    }
    pub(crate) fn node(&mut self, n: &NewNode) -> &mut Self {
        self.file_type(n.file_type)
            .u32(n.perm)
            .u32(n.uid)
            .u32(n.gid)
            .u64(n.rdev)
    }
    pub(crate) fn set_attr(&mut self, a: &SetAttr) -> &mut Self {
        self.opt_u32(a.perm)
            .opt_u32(a.uid)
            .opt_u32(a.gid)
            .opt_u64(a.size)
            .opt_time(a.atime)
            .opt_time(a.mtime)
    }
    pub(crate) fn statfs(&mut self, s: &StatFs) -> &mut Self {
        self.u32(s.block_size)
            .u64(s.blocks)
            .u64(s.blocks_free)
            .u64(s.blocks_avail)
            .u64(s.files)
            .u64(s.files_free)
            .u32(s.name_max)
            .u64(s.magic)
    }
}

/// Reads a message.
pub(crate) struct Dec<'a>(pub(crate) &'a [u8]);

impl<'a> Dec<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    pub(crate) fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub(crate) fn i64(&mut self) -> Option<i64> {
        Some(self.u64()? as i64)
    }
    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn flag(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    pub(crate) fn opt_u32(&mut self) -> Option<Option<u32>> {
        Some(if self.flag()? {
            Some(self.u32()?)
        } else {
            None
        })
    }
    pub(crate) fn opt_u64(&mut self) -> Option<Option<u64>> {
        Some(if self.flag()? {
            Some(self.u64()?)
        } else {
            None
        })
    }
    pub(crate) fn time(&mut self) -> Option<Timestamp> {
        Some(Timestamp {
            sec: self.i64()?,
            nsec: self.u32()?,
        })
    }
    pub(crate) fn opt_time(&mut self) -> Option<Option<Timestamp>> {
        Some(if self.flag()? {
            Some(self.time()?)
        } else {
            None
        })
    }
    pub(crate) fn file_type(&mut self) -> Option<FileType> {
        FileType::from_mode(self.u32()?)
    }
    pub(crate) fn meta(&mut self) -> Option<Metadata> {
        Some(Metadata {
            ino: self.u64()?,
            file_type: self.file_type()?,
            perm: self.u32()?,
            uid: self.u32()?,
            gid: self.u32()?,
            nlink: self.u64()?,
            size: self.u64()?,
            blocks: self.u64()?,
            rdev: self.u64()?,
            blksize: self.u32()?,
            atime: self.time()?,
            mtime: self.time()?,
            ctime: self.time()?,
            crtime: self.opt_time()?,
            generation: self.u32()?,
        })
    }
    pub(crate) fn entry(&mut self) -> Option<DirEntry> {
        Some(DirEntry {
            name: self.bytes()?.to_vec(),
            ino: self.u64()?,
            file_type: if self.flag()? {
                Some(self.file_type()?)
            } else {
                None
            },
        })
    }
    pub(crate) fn node(&mut self) -> Option<NewNode> {
        Some(NewNode {
            file_type: self.file_type()?,
            perm: self.u32()?,
            uid: self.u32()?,
            gid: self.u32()?,
            rdev: self.u64()?,
        })
    }
    pub(crate) fn set_attr(&mut self) -> Option<SetAttr> {
        Some(SetAttr {
            perm: self.opt_u32()?,
            uid: self.opt_u32()?,
            gid: self.opt_u32()?,
            size: self.opt_u64()?,
            atime: self.opt_time()?,
            mtime: self.opt_time()?,
        })
    }
    pub(crate) fn statfs(&mut self) -> Option<StatFs> {
        Some(StatFs {
            block_size: self.u32()?,
            blocks: self.u64()?,
            blocks_free: self.u64()?,
            blocks_avail: self.u64()?,
            files: self.u64()?,
            files_free: self.u64()?,
            name_max: self.u32()?,
            magic: self.u64()?,
        })
    }
    /// True when everything was read.
    pub(crate) fn done(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_round_trip_and_short_input_is_refused() {
        let t = Timestamp { sec: -5, nsec: 7 };
        let m = Metadata {
            ino: 12,
            file_type: FileType::Symlink,
            perm: 0o4755,
            uid: 1,
            gid: 2,
            nlink: 3,
            size: 4,
            blocks: 5,
            rdev: 6,
            blksize: 4096,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: None,
            generation: 9,
        };
        let a = SetAttr {
            perm: Some(0o644),
            size: Some(1 << 40),
            mtime: Some(t),
            ..SetAttr::default()
        };
        let mut e = Enc::default();
        e.meta(&m).set_attr(&a).bytes(b"name");
        let mut d = Dec(&e.0);
        assert_eq!(d.meta(), Some(m));
        assert_eq!(d.set_attr(), Some(a));
        assert_eq!(d.bytes(), Some(&b"name"[..]));
        assert!(d.done());
        for cut in 0..e.0.len() {
            let mut d = Dec(&e.0[..cut]);
            let whole = d.meta().is_some() && d.set_attr().is_some() && d.bytes().is_some();
            assert!(!whole, "a message cut at {cut} decoded");
        }
    }
}
