//! Edits inside one directory leaf block, in memory: find room for an entry (a deleted
//! entry, or the slack of a live one), write an entry, delete one (merge into its
//! predecessor), and pack a list of entries into a fresh block. The block's checksum tail
//! is the caller's ([`super::dir_edit`] sets it when it writes the block). Entries are
//! read with the one walker, [`Dirents`].

use crate::format::dirent::{
    encode_rec_len, entry_size, DirEntryHeader, DirTail, Dirent, DirentFault, Dirents,
    TAIL_FILE_TYPE, TAIL_SIZE,
};

/// A live entry held in memory while blocks are rebuilt (split, conversion to an htree).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ent {
    /// The name.
    pub name: Vec<u8>,
    /// Inode number.
    pub ino: u32,
    /// File type code (0 without the filetype feature).
    pub ft: u8,
}

/// How leaf blocks of this file system look.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeafFmt {
    /// Block size.
    pub bs: u32,
    /// metadata_csum: leaves end with a 12-byte tail.
    pub csum: bool,
    /// The filetype feature.
    pub has_ft: bool,
    /// Inodes in the file system (live entries point at 1..=this).
    pub inodes_count: u32,
}

/// A place for a new entry found by [`LeafFmt::find_slot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Offset of the entry whose space is used.
    off: usize,
    /// Its rec_len.
    rec_len: usize,
    /// Bytes its own (live) record keeps: 0 when it is unused.
    keep: usize,
}

impl LeafFmt {
    /// Bytes of a leaf that hold entries (the block minus the checksum tail).
    pub(crate) fn usable(&self) -> usize {
        self.bs as usize - if self.csum { TAIL_SIZE } else { 0 }
    }

    /// The walker over `area` (a leaf's usable part, or a dx root's `.`/`..`).
    pub(crate) fn walk<'a>(&self, area: &'a [u8]) -> Dirents<'a> {
        Dirents::new(area, self.bs, self.has_ft, self.inodes_count)
    }

    /// The live entries of `area`, in disk order.
    pub(crate) fn live<'a>(&self, area: &'a [u8]) -> Result<Vec<Dirent<'a>>, (usize, DirentFault)> {
        let mut out = Vec::new();
        for e in self.walk(area) {
            let e = e?;
            if e.ino != 0 {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// The first place in `area` where an entry with an `name_len`-byte name fits: an
    /// unused entry large enough, or a live entry whose slack is (the kernel's
    /// ext4_find_dest_de). `Err` if the chain is damaged.
    pub(crate) fn find_slot(
        &self,
        area: &[u8],
        name_len: usize,
    ) -> Result<Option<Slot>, (usize, DirentFault)> {
        let need = entry_size(name_len);
        for e in self.walk(area) {
            let e = e?;
            let keep = if e.ino != 0 {
                entry_size(e.name.len())
            } else {
                0
            };
            if e.rec_len >= keep + need {
                return Ok(Some(Slot {
                    off: e.off,
                    rec_len: e.rec_len,
                    keep,
                }));
            }
        }
        Ok(None)
    }

    /// Writes an entry into `slot` (found in the same, unchanged `area`).
    pub(crate) fn insert(&self, area: &mut [u8], slot: Slot, name: &[u8], ino: u32, ft: u8) {
        let mut at = slot.off;
        let mut len = slot.rec_len;
        if slot.keep > 0 {
            self.set_rec_len(area, at, slot.keep);
            at += slot.keep;
            len -= slot.keep;
        }
        self.put(area, at, len, name, ino, ft);
    }

    /// Writes a complete entry at `at` owning `rec_len` bytes.
    pub(crate) fn put(
        &self,
        area: &mut [u8],
        at: usize,
        rec_len: usize,
        name: &[u8],
        ino: u32,
        ft: u8,
    ) {
        let mut h = DirEntryHeader::new(&mut area[at..at + 8]).expect("8 bytes");
        h.set_inode(ino);
        h.set_rec_len(encode_rec_len(rec_len as u32, self.bs));
        h.set_name_len(name.len() as u8);
        h.set_file_type(if self.has_ft { ft } else { 0 });
        area[at + 8..at + 8 + name.len()].copy_from_slice(name);
        // Clear the rest of the record (an old name's bytes would only leak).
        let end = (at + entry_size(name.len())).min(at + rec_len);
        area[at + 8 + name.len()..end].fill(0);
    }

    fn set_rec_len(&self, area: &mut [u8], at: usize, rec_len: usize) {
        let mut h = DirEntryHeader::new(&mut area[at..at + 8]).expect("8 bytes");
        h.set_rec_len(encode_rec_len(rec_len as u32, self.bs));
    }

    /// Deletes the live entry at `off` whose predecessor in the chain starts at `prev`:
    /// its space joins the predecessor, or (first entry of the area) its inode becomes 0
    /// (the kernel's ext4_generic_delete_entry).
    /// `prev` is the predecessor's (offset, rec_len).
    pub(crate) fn delete(
        &self,
        area: &mut [u8],
        off: usize,
        rec_len: usize,
        prev: Option<(usize, usize)>,
    ) {
        match prev {
            Some((p_off, p_len)) => self.set_rec_len(area, p_off, p_len + rec_len),
            None => {
                let mut h = DirEntryHeader::new(&mut area[off..off + 8]).expect("8 bytes");
                h.set_inode(0);
            }
        }
    }

    /// Replaces the inode and type of the live entry at `off`.
    pub(crate) fn retarget(&self, area: &mut [u8], off: usize, ino: u32, ft: u8) {
        let mut h = DirEntryHeader::new(&mut area[off..off + 8]).expect("8 bytes");
        h.set_inode(ino);
        if self.has_ft {
            h.set_file_type(ft);
        }
    }

    /// A fresh leaf block holding `ents` packed from its start, the last one reaching the
    /// tail (an empty list gives one unused entry spanning the block); the tail's fixed
    /// fields are set, its checksum is the writer's. The entries must fit.
    pub(crate) fn pack(&self, ents: &[Ent]) -> Vec<u8> {
        let mut b = vec![0u8; self.bs as usize];
        let usable = self.usable();
        let mut at = 0;
        for (i, e) in ents.iter().enumerate() {
            let len = if i + 1 == ents.len() {
                usable - at
            } else {
                entry_size(e.name.len())
            };
            self.put(&mut b, at, len, &e.name, e.ino, e.ft);
            at += len;
        }
        if ents.is_empty() {
            self.set_rec_len(&mut b, 0, usable);
        }
        self.init_tail(&mut b);
        b
    }

    /// Sets the fixed fields of the checksum tail (when metadata_csum is on).
    pub(crate) fn init_tail(&self, block: &mut [u8]) {
        if self.csum {
            let t = block.len() - TAIL_SIZE;
            let mut tail = DirTail::new(&mut block[t..]).expect("12 bytes");
            tail.set_det_reserved_zero1(0);
            tail.set_det_rec_len(TAIL_SIZE as u16);
            tail.set_det_reserved_zero2(0);
            tail.set_det_reserved_ft(TAIL_FILE_TYPE);
        }
    }
}
