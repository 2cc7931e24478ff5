//! Encoding xattrs: the shared xattr area (entries used by more than `-x` inodes), written
//! right after the superblock's block, and each inode's ibody (header, shared ids, inline
//! entries).

use super::out::{pad_to, Out};
use super::tree::Tree;
use crate::format::xattr::IBODY_HEADER_SIZE;
use std::collections::HashMap;

type Key = (u8, Vec<u8>, Vec<u8>);

/// The shared xattr area and the id of each shared entry.
pub(super) struct Shared {
    /// Bytes of the area (a multiple of 4).
    pub area: Vec<u8>,
    ids: HashMap<Key, u32>,
}

fn encode_entry(out: &mut Vec<u8>, idx: u8, name: &[u8], value: &[u8]) {
    out.push(name.len() as u8);
    out.push(idx);
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(name);
    out.extend_from_slice(value);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// Picks and lays out shared xattrs: those used by more than `tolerance` inodes.
pub(super) fn shared(tree: &Tree<'_>, tolerance: i32) -> Shared {
    let mut count: HashMap<&Key, u32> = HashMap::new();
    for n in &tree.nodes {
        for x in &n.xattrs {
            *count.entry(x).or_default() += 1;
        }
    }
    let mut chosen: Vec<&Key> = if tolerance < 0 {
        Vec::new()
    } else {
        count
            .iter()
            .filter(|(_, &c)| c as i64 > i64::from(tolerance))
            .map(|(k, _)| *k)
            .collect()
    };
    chosen.sort();
    let mut area = Vec::new();
    let mut ids = HashMap::new();
    for k in chosen {
        ids.insert(k.clone(), (area.len() / 4) as u32);
        encode_entry(&mut area, k.0, &k.1, &k.2);
    }
    Shared { area, ids }
}

/// Writes the shared xattr area at the cursor; returns its first block (0: no area).
pub(super) fn write_area(out: &mut Out<'_>, shared: &Shared) -> usfs_fs::Result<u32> {
    if shared.area.is_empty() {
        return Ok(0);
    }
    out.put_blocks(&pad_to(&shared.area, out.bs))
}

impl Shared {
    /// The ibody of a node's xattrs (empty if it has none), and its `i_xattr_icount`.
    pub(super) fn ibody(&self, xattrs: &[Key]) -> (Vec<u8>, u16) {
        if xattrs.is_empty() {
            return (Vec::new(), 0);
        }
        let mut shared_ids: Vec<u32> = Vec::new();
        let mut inline = Vec::new();
        for x in xattrs {
            match self.ids.get(x) {
                Some(&id) if shared_ids.len() < 128 => shared_ids.push(id),
                _ => encode_entry(&mut inline, x.0, &x.1, &x.2),
            }
        }
        let mut body = vec![0u8; IBODY_HEADER_SIZE];
        body[4] = shared_ids.len() as u8;
        for id in shared_ids {
            body.extend_from_slice(&id.to_le_bytes());
        }
        body.extend_from_slice(&inline);
        let icount = ((body.len() - IBODY_HEADER_SIZE) / 4 + 1) as u16;
        (body, icount)
    }
}
