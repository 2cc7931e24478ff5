//! Directories and long symlinks, whose content goes after the metadata area: their sizes
//! (and whether the tail fits inline) once the file data is written, their blocks once
//! every inode has its nid. Directory contents: entries (with `.` and `..`) sorted by name
//! bytes, packed into blocks of dirents followed by names.

use super::image::Cfg;
use super::inode::{fits_inline, Data, Ino};
use super::out::{pad_to, Out};
use super::tree::Tree;
use crate::format::dirent::{from_file_type, Dirent};
use usfs_fs::{FileType, Result};

/// One entry to store.
pub(super) struct Ent<'a> {
    pub name: &'a [u8],
    pub nid: u64,
    pub file_type: u8,
}

/// How many bytes a directory with these names takes (last block partial), given the
/// block size. Names must be sorted.
pub(super) fn dir_size(names: &[&[u8]], bs: usize) -> u64 {
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
pub(super) fn encode(ents: &[Ent<'_>], bs: usize) -> Vec<u8> {
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

/// Gives every directory and symlink its size and room: contents come after the nids.
pub(super) fn size_late(cfg: &Cfg<'_>, tree: &Tree<'_>, inos: &mut [Ino]) -> Result<()> {
    let bs = cfg.bs;
    for (i, n) in tree.nodes.iter().enumerate() {
        let content = match n.file_type {
            FileType::Directory => {
                let mut names: Vec<&[u8]> = n.children.iter().map(|(nm, _)| &nm[..]).collect();
                names.push(b".");
                names.push(b"..");
                names.sort();
                vec![0u8; dir_size(&names, bs as usize) as usize]
            }
            FileType::Symlink => n.target.clone(),
            _ => continue,
        };
        let tail = content.len() as u64 % bs;
        let inline = tail > 0 && fits_inline(&inos[i], tail, bs);
        inos[i].data = Data::Late {
            content,
            inline,
            blkaddr: 0,
        };
    }
    Ok(())
}

/// Encodes every directory (`node_nid`: each node's nid) and writes the full blocks of
/// directories and symlinks at the cursor.
pub(super) fn write_late(
    cfg: &Cfg<'_>,
    tree: &Tree<'_>,
    out: &mut Out<'_>,
    inos: &mut [Ino],
    node_nid: &[u64],
) -> Result<()> {
    let bs = cfg.bs;
    for (i, n) in tree.nodes.iter().enumerate() {
        if n.file_type == FileType::Directory {
            let bytes = encode_dir(tree, i, node_nid, bs as usize);
            if let Data::Late { content, .. } = &mut inos[i].data {
                debug_assert_eq!(content.len(), bytes.len());
                *content = bytes;
            }
        }
        if let Data::Late {
            content,
            inline,
            blkaddr,
        } = &mut inos[i].data
        {
            let full = if *inline {
                content.len() as u64 / bs * bs
            } else {
                content.len() as u64
            } as usize;
            if full > 0 {
                *blkaddr = out.put_blocks(&pad_to(&content[..full], bs))?;
            }
        }
    }
    Ok(())
}

/// The content of directory node `i`.
fn encode_dir(tree: &Tree<'_>, i: usize, node_nid: &[u64], bs: usize) -> Vec<u8> {
    let n = &tree.nodes[i];
    let mut ents: Vec<Ent> = n
        .children
        .iter()
        .map(|(nm, c)| Ent {
            name: nm,
            nid: node_nid[*c],
            file_type: from_file_type(tree.nodes[*c].file_type),
        })
        .collect();
    ents.push(Ent {
        name: b".",
        nid: node_nid[i],
        file_type: from_file_type(FileType::Directory),
    });
    ents.push(Ent {
        name: b"..",
        nid: node_nid[n.parent],
        file_type: from_file_type(FileType::Directory),
    });
    ents.sort_by(|a, b| a.name.cmp(b.name));
    encode(&ents, bs)
}
