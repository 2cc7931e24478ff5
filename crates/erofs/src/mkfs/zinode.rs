//! A compressed inode: its compression settings (how much room an inline pcluster has),
//! what it costs beside the plain file (so the smaller is stored), writing its pclusters
//! (shared with `-E dedupe`), and the bytes after its xattrs: map header, full or compact
//! indexes, inline pcluster.

use super::image::Cfg;
use super::inode::{fits_inline, Data, Ino};
use super::out::Out;
use super::zfile::{ZFile, ZParams, ZTail};
use super::zindex;
use crate::format::inode::layout;
use crate::format::lcluster::CompactLayout;
use crate::format::map_header::*;
use crate::format::round_up;
use usfs_fs::Result;

/// Compression settings for an inode of `size` bytes.
pub(super) fn zparams(cfg: &Cfg<'_>, ino: &Ino, size: u64) -> ZParams {
    let (opts, bs) = (cfg.opts, cfg.bs);
    let inline_room = if opts.ztailpacking {
        let head = round_up(ino.head_len(), 8);
        // Shared pclusters are out of file order, which compact indexes cannot express:
        // leave room for full indexes.
        let idx = index_area(head, size, bs, !opts.legacy_compress && !cfg.dedupe);
        // Only the inline pcluster must stay in one block: the inode is placed so that it
        // starts a block, (head + idx) % 32 bytes in (inodes are 32-byte aligned).
        bs.saturating_sub((head + idx) % 32) as usize
    } else {
        0
    };
    ZParams {
        bs: bs as usize,
        pcluster: opts.pcluster_bytes as usize,
        zero_padding: cfg.zero_padding,
        inline_room,
        fragments: opts.fragments,
        alg: 0,
    }
}

/// Bytes of map header + indexes for a file of `size` bytes whose map header is at
/// (32-byte aligned inode start +) `head`.
fn index_area(head: u64, size: u64, bs: u64, compact: bool) -> u64 {
    let total = size.div_ceil(bs);
    if compact {
        let cl = CompactLayout::new(head + 8, total, true);
        cl.end() - head
    } else {
        16 + total * 8
    }
}

/// Bytes a compressed file takes (blocks, map header and indexes, inline pcluster);
/// fragments are not counted (a file with a fragment tail counts as zero here, so it stays
/// compressed).
pub(super) fn z_cost(cfg: &Cfg<'_>, z: &ZFile, ino: &Ino, size: u64) -> u64 {
    if z.whole_fragment || matches!(z.tail, ZTail::Fragment(_)) {
        return 0;
    }
    let base = ino.head_len();
    let head = round_up(base, 8);
    let compact = !cfg.opts.legacy_compress && !cfg.dedupe;
    let inline = match &z.tail {
        ZTail::Inline(t) => t.len() as u64,
        _ => 0,
    };
    z.data.len() as u64 + (head - base) + index_area(head, size, cfg.bs, compact) + inline
}

/// Bytes a plain file takes: its full blocks, and the tail inline when it fits, a block
/// otherwise.
pub(super) fn flat_cost(ino: &Ino, size: u64, bs: u64) -> u64 {
    let tail = size % bs;
    if tail == 0 || fits_inline(ino, tail, bs) {
        size
    } else {
        round_up(size, bs)
    }
}

/// Writes a compressed file's pclusters and returns its data: `frag_off` is where its
/// fragment tail (if any) starts in the packed inode.
pub(super) fn store(
    cfg: &Cfg<'_>,
    out: &mut Out<'_>,
    z: &ZFile,
    size: u64,
    ino: &Ino,
    frag_off: Option<u64>,
) -> Result<Data> {
    let addrs = place_pclusters(out, z)?;
    let (blob, layout) = z_blob(cfg, z, size, &addrs, ino, frag_off);
    let inline = match &z.tail {
        ZTail::Inline(t) => t.len() as u64,
        _ => 0,
    };
    Ok(Data::Z {
        blob,
        layout,
        blocks: (z.data.len() as u64 / cfg.bs) as u32,
        inline,
    })
}

/// Writes a compressed file's pclusters; returns each extent's first block (0 for extents
/// without blocks). With `-E dedupe`, a pcluster equal to one already written is shared.
fn place_pclusters(out: &mut Out<'_>, z: &ZFile) -> Result<Vec<u32>> {
    if out.dedupe.is_none() {
        let base = if z.data.is_empty() {
            0
        } else {
            out.put_blocks(&z.data)?
        };
        return Ok(z.extents.iter().map(|e| base + e.rel_blk).collect());
    }
    let bs = out.bs as usize;
    let mut addrs = Vec::with_capacity(z.extents.len());
    for e in &z.extents {
        if e.blocks == 0 {
            addrs.push(0);
            continue;
        }
        let start = e.rel_blk as usize * bs;
        let bytes = &z.data[start..start + e.blocks as usize * bs];
        let dd = out.dedupe.as_mut().expect("dedupe");
        let addr = match dd.find(out.dev, out.bs, bytes)? {
            Some(a) => a,
            None => {
                let a = out.put_blocks(bytes)?;
                out.dedupe.as_mut().expect("dedupe").insert(bytes, a);
                a
            }
        };
        addrs.push(addr);
    }
    Ok(addrs)
}

/// The map header, indexes and inline pcluster of a compressed file, and its layout
/// (compact indexes unless `-E legacy-compress` or the block addresses do not allow them).
fn z_blob(
    cfg: &Cfg<'_>,
    z: &ZFile,
    size: u64,
    addrs: &[u32],
    ino: &Ino,
    frag_off: Option<u64>,
) -> (Vec<u8>, u8) {
    let mut lay = if cfg.opts.legacy_compress {
        layout::COMPRESSED_FULL
    } else {
        layout::COMPRESSED_COMPACT
    };
    let head = round_up(ino.head_len(), 8);
    let mut h = MapHeader::new(vec![0u8; 8]).expect("8");
    if z.whole_fragment {
        let off = frag_off.expect("fragment offset") | (1u64 << 63);
        return (off.to_le_bytes().to_vec(), lay);
    }
    let mut advise = 0u16;
    if cfg.big {
        advise |= ADVISE_BIG_PCLUSTER_1 | ADVISE_BIG_PCLUSTER_2;
    }
    let inline = match &z.tail {
        ZTail::Inline(b) => Some(b.clone()),
        _ => None,
    };
    if let Some(b) = &inline {
        advise |= ADVISE_INLINE_PCLUSTER;
        h.set_h_idata_size(b.len() as u16);
    }
    if let Some(off) = frag_off {
        advise |= ADVISE_FRAGMENT_PCLUSTER;
        h.set_h_fragmentoff(off as u32);
    }
    let l = zindex::lclusters(&z.extents, size, cfg.bs, addrs, cfg.big);
    let mut idx = None;
    if lay == layout::COMPRESSED_COMPACT {
        let cl = CompactLayout::new(head + 8, l.len() as u64, true);
        idx = zindex::encode_compact_indexes(&l, &cl, cfg.big);
        if idx.is_some() {
            advise |= ADVISE_COMPACTED_2B;
        } else {
            lay = layout::COMPRESSED_FULL;
        }
    }
    let idx = match idx {
        Some(v) => v,
        None => {
            let mut v = vec![0u8; 8];
            v.extend_from_slice(&zindex::encode_full(&l));
            v
        }
    };
    h.set_h_advise(advise);
    h.set_h_algorithmtype(z.alg);
    h.set_h_clusterbits(0);
    let mut blob = h.into_inner();
    blob.extend_from_slice(&idx);
    if let Some(b) = inline {
        blob.extend_from_slice(&b);
    }
    (blob, lay)
}
