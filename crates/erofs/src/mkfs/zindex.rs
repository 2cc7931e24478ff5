//! Lcluster indexes of a compressed file: from its extents to full (8-byte) or compact
//! (2/4-byte packs) indexes, the way the kernel's decoder reads them back.

use super::zfile::ZExtent;
use crate::format::lcluster::{encode_compact, pack_entries, ty, CompactLayout, D0_CBLKCNT};

/// One lcluster's index, before encoding.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Lcl {
    pub ty: u8,
    pub clusterofs: u16,
    /// Heads: block address.
    pub blkaddr: u32,
    /// Heads: whether the block address is read (not an inline, fragment or dummy head).
    pub relevant: bool,
    pub delta0: u16,
    pub delta1: u16,
    /// First nonhead of a big pcluster: its block count.
    pub cblks: Option<u16>,
}

/// Builds the lcluster list: `addrs[i]` = the first block of extent `i`'s pcluster (ignored
/// for extents without blocks); `big` = big pcluster mode (block counts in the first nonhead).
pub(super) fn lclusters(
    extents: &[ZExtent],
    size: u64,
    bs: u64,
    addrs: &[u32],
    big: bool,
) -> Vec<Lcl> {
    let total = size.div_ceil(bs) as usize;
    let mut l = vec![Lcl::default(); total];
    let mut head_at = vec![false; total];
    for (e, &addr) in extents.iter().zip(addrs) {
        let lcn = (e.la / bs) as usize;
        head_at[lcn] = true;
        l[lcn] = Lcl {
            ty: if e.raw { ty::PLAIN } else { ty::HEAD1 },
            clusterofs: (e.la % bs) as u16,
            blkaddr: addr,
            relevant: e.blocks > 0,
            ..Lcl::default()
        };
    }
    // The last lcluster holds only the end of the previous extent: a dummy plain head whose
    // offset is the end of the file (what mkfs.erofs writes).
    if total > 0 && !head_at[total - 1] && !size.is_multiple_of(bs) {
        head_at[total - 1] = true;
        l[total - 1] = Lcl {
            ty: ty::PLAIN,
            clusterofs: (size % bs) as u16,
            ..Lcl::default()
        };
    }
    // Nonheads: distance back to their head and on to the next head.
    let mut next_head = total;
    for lcn in (0..total).rev() {
        if head_at[lcn] {
            next_head = lcn;
        } else {
            l[lcn].ty = ty::NONHEAD;
            l[lcn].delta1 = (next_head - lcn).min(u16::MAX as usize) as u16;
        }
    }
    let mut head = 0usize;
    let mut head_blocks = 0u32;
    let by_lcn: std::collections::HashMap<usize, u32> = extents
        .iter()
        .map(|e| ((e.la / bs) as usize, e.blocks))
        .collect();
    for lcn in 0..total {
        if head_at[lcn] {
            head = lcn;
            head_blocks = by_lcn.get(&lcn).copied().unwrap_or(1);
            continue;
        }
        let d0 = lcn - head;
        if big && d0 == 1 {
            l[lcn].cblks = Some(head_blocks.max(1) as u16);
        }
        l[lcn].delta0 = d0.min(D0_CBLKCNT as usize - 1) as u16;
    }
    l
}

/// Full indexes (without the map header and its padding).
pub(super) fn encode_full(l: &[Lcl]) -> Vec<u8> {
    let mut out = Vec::with_capacity(l.len() * 8);
    for x in l {
        out.extend_from_slice(&u16::from(x.ty).to_le_bytes());
        if x.ty == ty::NONHEAD {
            out.extend_from_slice(&0u16.to_le_bytes());
            let d0 = match x.cblks {
                Some(n) => D0_CBLKCNT | n,
                None => x.delta0,
            };
            out.extend_from_slice(&d0.to_le_bytes());
            out.extend_from_slice(&x.delta1.to_le_bytes());
        } else {
            out.extend_from_slice(&x.clusterofs.to_le_bytes());
            out.extend_from_slice(&x.blkaddr.to_le_bytes());
        }
    }
    out
}

/// Compact indexes for the layout `cl` (from `cl.ebase` to `cl.end()`), or `None` when the
/// block addresses cannot be expressed (pclusters not in block order).
pub(super) fn encode_compact_indexes(l: &[Lcl], cl: &CompactLayout, big: bool) -> Option<Vec<u8>> {
    let total = l.len() as u64;
    let end = cl.end();
    let mut out = vec![0u8; (end - cl.ebase) as usize];
    let mut lcn = 0u64;
    while lcn < total {
        let (pos, unit) = cl.entry(lcn);
        let vcnt = pack_entries(unit);
        let packsize = vcnt as u64 * unit;
        let base = pos - pos % packsize;
        debug_assert_eq!(base, pos, "packs start at their first entry");
        let first = lcn;
        let n = (vcnt as u64).min(total - first) as usize;
        let off = (base - cl.ebase) as usize;
        let pack = &mut out[off..off + packsize as usize];
        for i in 0..n {
            let x = &l[(first + i as u64) as usize];
            let v = if x.ty == ty::NONHEAD {
                match x.cblks {
                    Some(c) => D0_CBLKCNT | c,
                    None if i + 1 == vcnt => x.delta1.min(D0_CBLKCNT - 1),
                    None => x.delta0,
                }
            } else {
                x.clusterofs
            };
            encode_compact(pack, unit, i, x.ty, v);
        }
        // Base address: make the decoder's block count land on each relevant head.
        let mut base_addr: Option<u32> = None;
        for i in 0..n {
            let x = &l[(first + i as u64) as usize];
            if x.ty == ty::NONHEAD || !x.relevant {
                continue;
            }
            let nblk = decoded_nblk(pack, unit, i, big)?;
            let b = x.blkaddr.wrapping_sub(nblk);
            match base_addr {
                None => base_addr = Some(b),
                Some(prev) if prev == b => {}
                Some(_) => return None,
            }
        }
        let b = base_addr.unwrap_or(0);
        let plen = pack.len();
        pack[plen - 4..].copy_from_slice(&b.to_le_bytes());
        lcn += n as u64;
    }
    Some(out)
}

/// The block count the kernel adds to a pack's base for the head at entry `i`.
fn decoded_nblk(pack: &[u8], unit: u64, i: usize, big: bool) -> Option<u32> {
    use crate::format::lcluster::decode_compact;
    let mut j = i as i64;
    let mut nblk: i64 = if big { 0 } else { 1 };
    while j > 0 {
        j -= 1;
        let (t, lo) = decode_compact(pack, unit, j as usize);
        if !big {
            if t == ty::NONHEAD {
                j -= i64::from(lo);
            }
            if j >= 0 {
                nblk += 1;
            }
        } else if t == ty::NONHEAD {
            if lo & D0_CBLKCNT != 0 {
                j -= 1;
                nblk += i64::from(lo & !D0_CBLKCNT);
                continue;
            }
            if lo <= 1 {
                return None;
            }
            j -= i64::from(lo) - 2;
        } else {
            nblk += 1;
        }
    }
    Some(nblk as u32)
}
