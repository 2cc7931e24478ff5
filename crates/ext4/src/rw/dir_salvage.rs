//! e2fsck's salvage of a directory leaf whose chain of entries is broken (pass 2's
//! salvage_directory), for the repair: at the first entry the walker faults on, one of
//! e2fsck's four remedies, in its order, until the chain walks to the end of the block.
//! The entries it keeps are then checked like any other (the next round of a repair).

use super::dir_edit::DirEdit;
use super::dir_leaf::{Ent, LeafFmt};
use super::entry_fix::EntryFix;
use crate::format::dirent::{
    self, encode_rec_len, entry_size, DirEntryHeader, DirentFault, Dirents, DIRENT_HEADER,
};
use usfs_fs::{FileType, Result};

impl DirEdit<'_> {
    /// Salvages leaf block `lblk` (a linear block or an htree leaf, not an index node)
    /// and writes it back with its checksum set; returns whether it changed.
    pub fn salvage(&mut self, lblk: u64) -> Result<bool> {
        if self.indexed() && (lblk == 0 || self.is_dx_node(lblk)?) {
            // A broken index node: the index goes (as e2fsck clears it and rebuilds).
            self.drop_index()?;
            return Ok(true);
        }
        self.fix_at(lblk, 0, EntryFix::Salvage)?;
        Ok(true)
    }

    /// Makes the first two entries of block 0 `.` (naming this directory) and `..` as
    /// e2fsck's pass 2 does: an entry in their place that is something else (or whose
    /// name is not followed by a zero byte) is
    /// overwritten (its file is then unattached, for the next check to reconnect), a
    /// record shorter than 12 bytes grows to 12, a `.` record longer than needed is split
    /// (the rest an unused entry), a new `..` names the root (pass 3 then sets the real
    /// parent). Returns whether anything changed.
    pub fn fix_dots(&mut self) -> Result<bool> {
        let (pblk, mut buf) = self.read_raw(0)?;
        let (bs, usable, dir) = (self.fmt.bs, self.fmt.usable(), self.d.ino());
        let ft = dirent::dirent_file_type(FileType::Directory);
        let header = |b: &[u8], at: usize| {
            let h = DirEntryHeader::new(&b[at..at + DIRENT_HEADER]).expect("8 bytes");
            let len = dirent::decode_rec_len(h.rec_len(), bs) as usize;
            let name_len = h.name_len() as usize;
            let end = at + DIRENT_HEADER + name_len;
            // A name not followed by a zero byte (inside its record) does not count.
            let terminated = end >= at + len || b.get(end).is_none_or(|&c| c == 0);
            let name = b.get(at + DIRENT_HEADER..end).filter(|_| terminated);
            (h.inode(), len, name.map(<[u8]>::to_vec))
        };
        let mut changed = false;
        let (ino, len, name) = header(&buf, 0);
        let mut dot_len = len;
        if ino != dir || name.as_deref() != Some(b".") {
            dot_len = len.clamp(12, usable);
            self.fmt.put(&mut buf, 0, dot_len, b".", dir, ft);
            changed = true;
        }
        if dot_len > 24 {
            // Split: `.` keeps 12 bytes, the rest is an unused entry for `..` to take.
            self.fmt.put(&mut buf, 0, 12, b".", dir, ft);
            self.fmt.put(&mut buf, 12, dot_len - 12, b"", 0, 0);
            dot_len = 12;
            changed = true;
        }
        if dot_len + DIRENT_HEADER > usable {
            return Err(self.corrupt(0, "no room for '..' after '.'".into()));
        }
        let (ino, len, name) = header(&buf, dot_len);
        if ino == 0 || name.as_deref() != Some(b"..") {
            let len = len.clamp(12, usable - dot_len);
            self.fmt.put(
                &mut buf,
                dot_len,
                len,
                b"..",
                crate::format::inode::ROOT_INO,
                ft,
            );
            changed = true;
        }
        if changed {
            self.write_leaf(pblk, buf)?;
        }
        Ok(changed)
    }

    /// Turns an indexed directory whose index is bad into a linear one (e2fsck clears
    /// such an index, then rebuilds it; usfs leaves the directory linear, which the
    /// kernel and e2fsck read as well): the index nodes become empty leaves (block 0
    /// keeps its `.` and `..`), with checksum tails where metadata_csum wants them, and
    /// the INDEX flag is cleared. Leaves are left as they are.
    pub fn drop_index(&mut self) -> Result<()> {
        if !self.d.is_indexed() {
            // Dropped already (or never there): block 0 is a leaf to keep.
            return Ok(());
        }
        let dir = self.d.ino();
        let ft = dirent::dirent_file_type(FileType::Directory);
        for lblk in 0..self.d.nblocks() {
            // (A hole holds no index node: the hole is the next round's to fill.)
            let Ok((pblk, buf)) = self.read_raw(lblk) else {
                continue;
            };
            let ents = if lblk == 0 {
                let first = DirEntryHeader::new(&buf[..DIRENT_HEADER]).expect("8 bytes");
                let at = dirent::decode_rec_len(first.rec_len(), self.fmt.bs) as usize;
                let parent = buf
                    .get(at..at + DIRENT_HEADER)
                    .and_then(DirEntryHeader::new)
                    .map_or(0, |h| h.inode());
                vec![
                    Ent {
                        name: b".".to_vec(),
                        ino: dir,
                        ft,
                    },
                    Ent {
                        name: b"..".to_vec(),
                        ino: parent,
                        ft,
                    },
                ]
            } else if dirent::is_dx_node(&buf) {
                Vec::new()
            } else {
                continue;
            };
            let leaf = self.fmt.pack(&ents);
            self.write_leaf(pblk, leaf)?;
        }
        self.d.set_indexed(false);
        Ok(())
    }

    /// Writes an empty leaf (one unused entry spanning the block, its checksum set) at
    /// physical block `pblk`: e2fsck's new block for a hole in a directory.
    pub fn write_empty_leaf(&mut self, pblk: u64) -> Result<()> {
        let buf = self.fmt.pack(&[]);
        self.write_leaf(pblk, buf)
    }
}

/// Salvages the chain of entries in `area` (see the module header); returns whether it
/// changed anything. Each step makes the chain walk further or the block shorter, so the
/// loop ends; it is bounded besides.
pub(crate) fn salvage_area(fmt: &LeafFmt, area: &mut [u8]) -> bool {
    let mut changed = false;
    for _ in 0..area.len() / 4 + 2 {
        let mut prev = None;
        let mut fault = None;
        for e in Dirents::lenient(area, fmt.bs, fmt.has_ft).in_block() {
            match e {
                Ok(e) => prev = Some((e.off, e.rec_len)),
                Err(f) => fault = Some(f),
            }
        }
        let Some((off, f)) = fault else {
            return changed;
        };
        step(fmt, area, off, f, prev);
        changed = true;
    }
    changed
}

/// One of e2fsck's remedies for the faulty entry at `off` (`prev`: the entry before it,
/// offset and rec_len).
fn step(fmt: &LeafFmt, area: &mut [u8], off: usize, f: DirentFault, prev: Option<(usize, usize)>) {
    let len = area.len();
    let set_rec_len = |area: &mut [u8], at: usize, rec_len: usize| {
        let mut h = DirEntryHeader::new(&mut area[at..at + DIRENT_HEADER]).expect("8 bytes");
        h.set_rec_len(encode_rec_len(rec_len as u32, fmt.bs));
    };
    let (rec_len, name_len) = match f {
        DirentFault::RecLen { rec_len, name_len } | DirentFault::NameLen { rec_len, name_len } => {
            (rec_len, name_len)
        }
        DirentFault::TruncatedHeader | DirentFault::Inode { .. } => (0, 0),
    };
    let rest = len - off;
    // An 8-byte entry with room after it: the rest of the block moves up over it.
    if rec_len == 8 && rest >= 20 {
        area.copy_within(off + 8..len, off);
        area[len - 8..].fill(0);
        return;
    }
    // An entry running past the end whose name fits before it: it ends at the end.
    if rec_len > rest && rest > DIRENT_HEADER + name_len && entry_size(name_len) <= rest {
        let name = &area[off + DIRENT_HEADER..off + DIRENT_HEADER + name_len];
        let ino = DirEntryHeader::new(&area[off..]).map_or(0, |h| h.inode());
        if !name.contains(&0) && ino <= fmt.inodes_count {
            set_rec_len(area, off, rest);
            return;
        }
    }
    // A plausible rec_len: the entry before swallows this one.
    if let Some((p_off, p_len)) = prev {
        if rec_len != 0 && rec_len.is_multiple_of(4) && rec_len <= rest {
            set_rec_len(area, p_off, p_len + rec_len);
            return;
        }
        // Otherwise it swallows the rest of the block.
        set_rec_len(area, p_off, p_len + rest);
        return;
    }
    // The first entry: the block becomes one empty entry (name length and file type
    // both 0: without the filetype feature the two bytes are one 16-bit name length).
    let mut h = DirEntryHeader::new(&mut area[off..off + DIRENT_HEADER]).expect("8 bytes");
    h.set_inode(0);
    h.set_name_len(0);
    h.set_rec_len(encode_rec_len(rest as u32, fmt.bs));
    area[off + 7] = 0;
}

#[cfg(test)]
mod tests {
    use super::salvage_area;
    use crate::format::dirent::Dirents;
    use crate::rw::dir_leaf::LeafFmt;

    fn fmt() -> LeafFmt {
        LeafFmt {
            bs: 1024,
            csum: false,
            has_ft: true,
            inodes_count: 1000,
        }
    }

    fn put(area: &mut [u8], off: usize, ino: u32, rec_len: u16, name: &[u8]) {
        area[off..off + 4].copy_from_slice(&ino.to_le_bytes());
        area[off + 4..off + 6].copy_from_slice(&rec_len.to_le_bytes());
        area[off + 6] = name.len() as u8;
        area[off + 7] = 1;
        area[off + 8..off + 8 + name.len()].copy_from_slice(name);
    }

    fn names(area: &[u8]) -> Vec<Vec<u8>> {
        Dirents::lenient(area, 1024, true)
            .map(|e| e.expect("the chain walks"))
            .filter(|e| e.ino != 0)
            .map(|e| e.name.to_vec())
            .collect()
    }

    #[test]
    fn an_entry_past_the_end_is_cut_to_the_end() {
        let mut a = vec![0u8; 1024];
        put(&mut a, 0, 12, 16, b"a");
        put(&mut a, 16, 13, 2000, b"b");
        assert!(salvage_area(&fmt(), &mut a));
        assert_eq!(names(&a), [b"a".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn a_bad_rec_len_is_swallowed_by_the_entry_before() {
        let mut a = vec![0u8; 1024];
        put(&mut a, 0, 12, 16, b"a");
        put(&mut a, 16, 13, 7, b"b");
        put(&mut a, 32, 14, 992, b"c");
        assert!(salvage_area(&fmt(), &mut a));
        assert_eq!(names(&a), [b"a".to_vec()]);
        assert!(
            !salvage_area(&fmt(), &mut a),
            "a salvaged block stays as it is"
        );
    }

    #[test]
    fn a_name_longer_than_its_record_goes_with_the_rest() {
        let mut a = vec![0u8; 1024];
        put(&mut a, 0, 12, 16, b"a");
        put(&mut a, 16, 13, 16, b"b");
        a[16 + 6] = 200;
        put(&mut a, 32, 14, 992, b"c");
        assert!(salvage_area(&fmt(), &mut a));
        assert_eq!(names(&a), [b"a".to_vec(), b"c".to_vec()]);
    }

    #[test]
    fn a_first_entry_beyond_help_empties_the_block() {
        let mut a = vec![0u8; 1024];
        put(&mut a, 0, 12, 3, b"a");
        assert!(salvage_area(&fmt(), &mut a));
        assert!(names(&a).is_empty());
        assert_eq!(Dirents::lenient(&a, 1024, true).count(), 1);
    }
}
