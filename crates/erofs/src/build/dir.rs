//! Directory contents: entries (with `.` and `..`) sorted by name bytes, packed into
//! blocks of dirents followed by names.

use crate::format::dirent::Dirent;

/// One entry to store.
pub struct Ent<'a> {
    pub name: &'a [u8],
    pub nid: u64,
    pub file_type: u8,
}

/// How many bytes a directory with these names takes (last block partial), given the
/// block size. Names must be sorted.
pub fn dir_size(names: &[&[u8]], bs: usize) -> u64 {
    let mut blocks = 0u64;
    let mut used = 0usize;
    for n in names {
        let need = 12 + n.len();
        if used + need > bs {
            blocks += 1;
            used = 0;
        }
        used += need;
    }
    blocks * bs as u64 + used as u64
}

/// Encodes the directory (`ents` sorted by name); the result is `dir_size` bytes.
pub fn encode(ents: &[Ent<'_>], bs: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ents.len() {
        // Entries of this block.
        let mut used = 0;
        let mut j = i;
        while j < ents.len() && used + 12 + ents[j].name.len() <= bs {
            used += 12 + ents[j].name.len();
            j += 1;
        }
        let mut blk = vec![0u8; bs];
        let mut nameoff = (j - i) * 12;
        for (k, e) in ents[i..j].iter().enumerate() {
            let mut d = Dirent::new(&mut blk[k * 12..k * 12 + 12]).expect("12 bytes");
            d.set_nid(e.nid);
            d.set_nameoff(nameoff as u16);
            d.set_file_type(e.file_type);
            blk[nameoff..nameoff + e.name.len()].copy_from_slice(e.name);
            nameoff += e.name.len();
        }
        if j == ents.len() {
            blk.truncate(used);
        }
        out.extend_from_slice(&blk);
        i = j;
    }
    out
}
