//! Inode placement: where each inode goes, which is its nid (meta_blkaddr is 0, so nids are
//! absolute byte positions / 32). The root (and whatever else fits) goes into block 0
//! after the superblock, so its 16-bit nid is small; the rest follows the data, 32-byte
//! aligned. An inline tail or inline pcluster must not cross a block (the kernel's rule):
//! inodes with one are placed first, and the gaps they leave before block boundaries are
//! filled first-fit by the others (`gaps.rs`).

use super::gaps::Gaps;
use super::image::Cfg;
use super::inode::{meta_size, Data, Ino};
use super::out::Out;
use super::tree::Tree;
use crate::format::round_up;
use crate::format::superblock::SUPER_OFFSET;
use std::io;
use usfs_fs::{Error, Result};

/// Where the metadata area is and each node's nid.
pub(super) struct Placement {
    /// Byte range of the metadata area after the data (whole blocks).
    pub(super) meta_start: u64,
    pub(super) meta_end: u64,
    /// Per tree node: its nid.
    pub(super) node_nid: Vec<u64>,
}

/// Places every inode (sets `pos`) and moves the cursor past the metadata area.
pub(super) fn place(
    cfg: &Cfg<'_>,
    tree: &Tree<'_>,
    out: &mut Out<'_>,
    inos: &mut [Ino],
) -> Result<Placement> {
    let (bs, head) = (cfg.bs, cfg.head);
    let sb_end = match cfg.opts.blob_blocks {
        Some(_) => (cfg.devt_slotoff + 1) * 128,
        None => SUPER_OFFSET + 128 + cfg.compr_cfgs.len() as u64,
    };
    let mut b0 = round_up(sb_end, 32);
    // Does the last `keep` bytes' span of `total` stay in one block from `at`?
    let fits_at =
        |at: u64, (total, keep): (u64, u64)| keep == 0 || (at + total - keep) % bs + keep <= bs;
    // A root directory too large for the head with its tail inline keeps the tail in a
    // block.
    let root_too_big =
        b0 + meta_size(&inos[0], bs).0 > head || !fits_at(b0, meta_size(&inos[0], bs));
    if let Data::Late { inline, .. } = &mut inos[0].data {
        if root_too_big {
            *inline = false;
        }
    }
    if b0 + meta_size(&inos[0], bs).0 > head {
        return Err(Error::incompatible(
            "the root directory's xattrs do not fit in block 0",
        ));
    }
    let meta_start = out.cursor * bs;
    let mut pos = meta_start;
    // Gaps left by padding to a block start, filled first-fit by later inodes.
    let mut gaps = Gaps::new();
    // Inodes with inline data first: they leave gaps before block boundaries, which the
    // others (free to cross a block) then fill.
    let mut order: Vec<usize> = (0..inos.len()).collect();
    order[1..].sort_by_key(|&k| meta_size(&inos[k], bs).1 == 0);
    for k in order {
        let ino = &mut inos[k];
        let (total, keep) = meta_size(ino, bs);
        // Does the last `keep` bytes' span stay in one block if the inode starts at `at`?
        let fits = |at: u64| fits_at(at, (total, keep));
        if b0 + total <= head && fits(b0) {
            ino.pos = b0;
            b0 = round_up(b0 + total, 32);
            continue;
        }
        if let Some(at) = gaps.take_first(total, fits) {
            ino.pos = at;
            continue;
        }
        if !fits(pos) {
            // Start the kept part at the next block (the inode before it may end the
            // block the kept part would have crossed).
            let next = round_up(round_up(pos + total - keep, bs) - (total - keep), 32);
            if !fits(next) {
                return Err(io::Error::other(format!(
                    "internal: an inline tail of {keep} bytes cannot be placed"
                ))
                .into());
            }
            if next - pos >= 32 {
                gaps.push(pos, next);
            }
            pos = next;
        }
        ino.pos = pos;
        pos = round_up(pos + total, 32);
    }
    let meta_end = round_up(pos, bs);
    out.check_room(meta_end / bs)?;
    out.cursor = meta_end / bs;
    let mut node_nid = vec![0u64; tree.nodes.len()];
    for ino in inos.iter() {
        if ino.node != usize::MAX {
            node_nid[ino.node] = ino.nid();
        }
    }
    if node_nid[0] > u64::from(u16::MAX) {
        return Err(Error::incompatible(
            "root inode beyond the first 2 MiB of metadata",
        ));
    }
    Ok(Placement {
        meta_start,
        meta_end,
        node_nid,
    })
}
