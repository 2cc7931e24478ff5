//! Mapping compressed files: decoding lcluster indexes (full and compact) and turning a
//! file offset into its extent: where the decompressed run starts and ends, where its
//! pcluster is and how it is stored.

use super::{Erofs, Inode};
use crate::format::inode::layout;
use crate::format::lcluster::{
    decode_compact, full_index_pos, ty, CompactLayout, FullIndex, D0_CBLKCNT, PARTIAL_REF,
};
use crate::format::map_header::*;
use crate::format::superblock::incompat;
use usfs_fs::{Error, Result, Structure};

/// Per-inode compression parameters from the map header.
#[derive(Clone, Debug)]
pub(crate) struct ZInfo {
    pub advise: u16,
    /// Algorithms of HEAD1 / HEAD2 lclusters.
    pub alg: [u8; 2],
    /// log2 of the logical cluster size.
    pub lbits: u32,
    /// Map header position.
    pub hpos: u64,
    /// Whole file in the packed inode at this offset.
    pub whole_fragment: Option<u64>,
    /// Tail fragment offset in the packed inode (FRAGMENT_PCLUSTER).
    pub fragment_off: Option<u64>,
    /// Bytes of the inline tail pcluster (ztailpacking).
    pub idata_size: u16,
    /// Number of lclusters.
    pub total: u64,
    /// Compact layout, for COMPRESSED_COMPACT.
    pub compact: Option<CompactLayout>,
}

/// One decoded lcluster index.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lcluster {
    pub ty: u8,
    pub clusterofs: u32,
    pub pblk: u64,
    pub delta0: u64,
    pub delta1: u64,
    /// Block count of the pcluster (first nonhead of a big pcluster).
    pub cblks: Option<u32>,
    /// Where the next index pack starts (for the ztailpacking inline data).
    pub nextpackoff: u64,
    /// A head whose pcluster decodes to more than its extent (dedupe; full indexes).
    pub partial_ref: bool,
}

/// How an extent's bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stored {
    /// Uncompressed at this byte; `interlaced` = rotated by `la % bs` in its block.
    Plain {
        pa: u64,
        plen: u64,
        interlaced: bool,
    },
    /// Compressed with algorithm `alg` (`h_algorithmtype`: 0 LZ4, 1 MicroLZMA, 2 DEFLATE,
    /// 3 Zstandard) in `plen` bytes at `pa` (with leading zero padding when `padded`).
    Compressed {
        alg: u8,
        pa: u64,
        plen: u64,
        padded: bool,
    },
    /// In the packed inode at this offset (the byte of `la`).
    Fragment { off: u64 },
}

/// A decompressed run of a file and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Extent {
    /// First file byte.
    pub la: u64,
    /// Decompressed length.
    pub llen: u64,
    pub stored: Stored,
    /// The pcluster decodes to exactly `llen` bytes: neither the file's last extent
    /// (which may be trimmed) nor a partial reference (fsck.erofs decodes these "full").
    pub full: bool,
}

impl Erofs {
    /// Reads the map header of a compressed inode.
    pub(crate) fn zinfo(&self, ino: &Inode) -> Result<ZInfo> {
        let nid = ino.nid;
        let hpos = map_header_pos(ino.meta_end());
        let raw = self.meta_cached(hpos, 8)?;
        let h = MapHeader::new(&raw[..]).expect("8 bytes");
        let corrupt = |m: &str| {
            Error::corrupt(Structure::CompressedIndex, format!("inode {nid}: {m}")).with_ino(nid)
        };
        if h.h_clusterbits() & FRAGMENT_INODE_BIT != 0 {
            let off = u64::from_le_bytes(raw[..8].try_into().unwrap()) & !(1u64 << 63);
            if !self.has_incompat(incompat::FRAGMENTS) {
                return Err(corrupt("fragment without the fragments feature"));
            }
            return Ok(ZInfo {
                advise: ADVISE_FRAGMENT_PCLUSTER,
                alg: [0, 0],
                lbits: self.blkbits,
                hpos,
                whole_fragment: Some(off),
                fragment_off: None,
                idata_size: 0,
                total: 0,
                compact: None,
            });
        }
        let advise = h.h_advise();
        let alg = [h.h_algorithmtype() & 15, h.h_algorithmtype() >> 4];
        let lbits = self.blkbits + u32::from(h.h_clusterbits() & 7);
        if lbits > 14 && ino.layout == layout::COMPRESSED_COMPACT {
            return Err(corrupt("compact indexes with logical clusters over 16 KiB"));
        }
        if advise & (ADVISE_BIG_PCLUSTER_1 | ADVISE_BIG_PCLUSTER_2) != 0
            && !self.has_incompat(incompat::BIG_PCLUSTER)
        {
            return Err(corrupt("big pcluster without the big_pcluster feature"));
        }
        if ino.layout == layout::COMPRESSED_COMPACT
            && ((advise & ADVISE_BIG_PCLUSTER_1 == 0) != (advise & ADVISE_BIG_PCLUSTER_2 == 0))
        {
            return Err(corrupt(
                "big pcluster HEAD1/HEAD2 of compact indexes differ",
            ));
        }
        if advise & ADVISE_INLINE_PCLUSTER != 0 && !self.has_incompat(incompat::ZTAILPACKING) {
            return Err(corrupt("inline pcluster without the ztailpacking feature"));
        }
        if advise & ADVISE_FRAGMENT_PCLUSTER != 0 && !self.has_incompat(incompat::FRAGMENTS) {
            return Err(corrupt("fragment pcluster without the fragments feature"));
        }
        let total = ino.size.div_ceil(1 << lbits);
        let compact = (ino.layout == layout::COMPRESSED_COMPACT)
            .then(|| CompactLayout::new(hpos + 8, total, advise & ADVISE_COMPACTED_2B != 0));
        let mut zi = ZInfo {
            advise,
            alg,
            lbits,
            hpos,
            whole_fragment: None,
            fragment_off: None,
            idata_size: 0,
            total,
            compact,
        };
        if advise & ADVISE_INLINE_PCLUSTER != 0 {
            zi.idata_size = h.h_idata_size();
        }
        if advise & ADVISE_FRAGMENT_PCLUSTER != 0 {
            zi.fragment_off = Some(u64::from(h.h_fragmentoff()));
        }
        Ok(zi)
    }

    /// Decodes the index of lcluster `lcn`.
    pub(crate) fn lcluster(
        &self,
        ino: &Inode,
        zi: &ZInfo,
        lcn: u64,
        lookahead: bool,
    ) -> Result<Lcluster> {
        if lcn >= zi.total {
            return Err(Error::corrupt(
                Structure::CompressedIndex,
                format!(
                    "inode {}: lcluster {lcn} beyond the {} of the file",
                    ino.nid, zi.total
                ),
            )
            .with_ino(ino.nid));
        }
        match &zi.compact {
            None => self.full_lcluster(ino, zi, lcn),
            Some(cl) => self.compact_lcluster(ino, zi, cl, lcn, lookahead),
        }
    }

    fn full_lcluster(&self, ino: &Inode, zi: &ZInfo, lcn: u64) -> Result<Lcluster> {
        let pos = full_index_pos(zi.hpos, lcn);
        let raw = self.meta_cached(pos, 8)?;
        let di = FullIndex::new(&raw[..]).expect("8 bytes");
        let t = (di.di_advise() & 3) as u8;
        let mut m = Lcluster {
            ty: t,
            nextpackoff: pos + 8,
            ..Lcluster::default()
        };
        if t == ty::NONHEAD {
            m.clusterofs = 1 << zi.lbits;
            let d0 = di.di_delta0();
            if d0 & D0_CBLKCNT != 0 {
                if zi.advise & (ADVISE_BIG_PCLUSTER_1 | ADVISE_BIG_PCLUSTER_2) == 0 {
                    return Err(Error::corrupt(
                        Structure::CompressedIndex,
                        format!(
                            "inode {}: lcluster {lcn}: block count without big pclusters",
                            ino.nid
                        ),
                    )
                    .with_ino(ino.nid));
                }
                m.cblks = Some(u32::from(d0 & !D0_CBLKCNT));
                m.delta0 = 1;
            } else {
                m.delta0 = u64::from(d0);
            }
            m.delta1 = u64::from(di.di_delta1());
        } else {
            m.clusterofs = u32::from(di.di_clusterofs());
            if m.clusterofs >= 1 << zi.lbits {
                return Err(Error::corrupt(
                    Structure::CompressedIndex,
                    format!(
                        "inode {}: lcluster {lcn}: offset {} past the cluster",
                        ino.nid, m.clusterofs
                    ),
                )
                .with_ino(ino.nid));
            }
            m.pblk = u64::from(di.di_blkaddr());
            m.partial_ref = di.di_advise() & PARTIAL_REF != 0;
        }
        Ok(m)
    }

    fn compact_lcluster(
        &self,
        ino: &Inode,
        zi: &ZInfo,
        cl: &CompactLayout,
        lcn: u64,
        lookahead: bool,
    ) -> Result<Lcluster> {
        let (pos, unit) = cl.entry(lcn);
        if zi.lbits > 12 && unit == 2 {
            return Err(Error::incompatible(format!(
                "inode {}: 2-byte compact indexes with clusters over 4 KiB",
                ino.nid
            )));
        }
        let vcnt = crate::format::lcluster::pack_entries(unit);
        let packsize = vcnt as u64 * unit;
        let base = pos - pos % packsize;
        let pack = self.meta_cached(base, packsize)?;
        let i = ((pos - base) / unit) as usize;
        let big = zi.advise & ADVISE_BIG_PCLUSTER_1 != 0;
        let corrupt = |m: &str| {
            Error::corrupt(
                Structure::CompressedIndex,
                format!("inode {}: lcluster {lcn}: {m}", ino.nid),
            )
            .with_ino(ino.nid)
        };
        let (t, lo) = decode_compact(&pack, unit, i);
        let mut m = Lcluster {
            ty: t,
            nextpackoff: base + packsize,
            ..Lcluster::default()
        };
        if t == ty::NONHEAD {
            m.clusterofs = 1 << zi.lbits;
            if lookahead {
                m.delta1 = la_distance(&pack, unit, vcnt, i);
            }
            if lo & D0_CBLKCNT != 0 {
                if !big {
                    return Err(corrupt("block count without big pclusters"));
                }
                m.cblks = Some(u32::from(lo & !D0_CBLKCNT));
                m.delta0 = 1;
                return Ok(m);
            } else if i + 1 != vcnt {
                m.delta0 = u64::from(lo);
                return Ok(m);
            }
            // The last entry of a pack stores delta[1]; delta[0] comes from the one before.
            let (pt, plo) = decode_compact(&pack, unit, i - 1);
            let d = if pt != ty::NONHEAD {
                0
            } else if plo & D0_CBLKCNT != 0 {
                1
            } else {
                u64::from(plo)
            };
            m.delta0 = d + 1;
            return Ok(m);
        }
        m.clusterofs = u32::from(lo);
        let mut nblk: i64;
        let mut j = i as i64;
        if !big {
            nblk = 1;
            while j > 0 {
                j -= 1;
                let (tt, l) = decode_compact(&pack, unit, j as usize);
                if tt == ty::NONHEAD {
                    j -= i64::from(l);
                }
                if j >= 0 {
                    nblk += 1;
                }
            }
        } else {
            nblk = 0;
            while j > 0 {
                j -= 1;
                let (tt, l) = decode_compact(&pack, unit, j as usize);
                if tt == ty::NONHEAD {
                    if l & D0_CBLKCNT != 0 {
                        j -= 1;
                        nblk += i64::from(l & !D0_CBLKCNT);
                        continue;
                    }
                    if l <= 1 {
                        return Err(corrupt("big pcluster nonhead with delta 1"));
                    }
                    j -= i64::from(l) - 2;
                    continue;
                }
                nblk += 1;
            }
        }
        let b = u32::from_le_bytes(pack[pack.len() - 4..].try_into().unwrap());
        m.pblk = u64::from(b.wrapping_add(nblk as u32));
        Ok(m)
    }

    /// Finds the head lcluster from `lcn` going back by `delta`.
    fn lookback(
        &self,
        ino: &Inode,
        zi: &ZInfo,
        mut lcn: u64,
        mut delta: u64,
    ) -> Result<(u64, Lcluster)> {
        loop {
            lcn = lcn.checked_sub(delta).ok_or_else(|| {
                Error::corrupt(
                    Structure::CompressedIndex,
                    format!("inode {}: lcluster delta points before the file", ino.nid),
                )
                .with_ino(ino.nid)
            })?;
            let m = self.lcluster(ino, zi, lcn, false)?;
            if m.ty != ty::NONHEAD {
                return Ok((lcn, m));
            }
            if m.delta0 == 0 {
                return Err(Error::corrupt(
                    Structure::CompressedIndex,
                    format!("inode {}: lcluster {lcn}: zero delta", ino.nid),
                )
                .with_ino(ino.nid));
            }
            delta = m.delta0;
        }
    }

    /// The extent holding file byte `ofs` (< size) of a compressed inode.
    pub(crate) fn map_extent(&self, ino: &Inode, zi: &ZInfo, ofs: u64) -> Result<Extent> {
        if let Some(off) = zi.whole_fragment {
            return Ok(Extent {
                la: 0,
                llen: ino.size,
                stored: Stored::Fragment { off },
                full: false,
            });
        }
        let lbits = zi.lbits;
        let lcn = ofs >> lbits;
        let endoff = (ofs & ((1 << lbits) - 1)) as u32;
        let m = self.lcluster(ino, zi, lcn, false)?;
        let (hlcn, head) = if m.ty != ty::NONHEAD {
            if endoff >= m.clusterofs {
                (lcn, m)
            } else {
                self.lookback(ino, zi, lcn, 1)?
            }
        } else {
            self.lookback(ino, zi, lcn, m.delta0.max(1))?
        };
        let la = (hlcn << lbits) | u64::from(head.clusterofs);
        let llen = self.extent_llen(ino, zi, hlcn, la)?;
        // The tail extent: inline (ztailpacking) or a fragment.
        let is_tail = la + llen >= ino.size;
        let full = !is_tail && !head.partial_ref;
        if is_tail && zi.advise & ADVISE_INLINE_PCLUSTER != 0 {
            let last = self.lcluster(ino, zi, zi.total - 1, false)?;
            let pa = last.nextpackoff;
            let plen = u64::from(zi.idata_size);
            let stored = self.stored(ino, zi, head.ty, pa, plen)?;
            return Ok(Extent {
                la,
                llen,
                stored,
                full,
            });
        }
        if is_tail {
            if let Some(mut off) = zi.fragment_off {
                if zi.compact.is_none() {
                    off |= head.pblk << 32;
                }
                return Ok(Extent {
                    la,
                    llen,
                    stored: Stored::Fragment { off },
                    full,
                });
            }
        }
        let blocks = self.extent_blocks(ino, zi, hlcn, head.ty)?;
        let pa = head.pblk << self.blkbits;
        let plen = u64::from(blocks) << self.blkbits;
        let stored = self.stored(ino, zi, head.ty, pa, plen)?;
        Ok(Extent {
            la,
            llen,
            stored,
            full,
        })
    }

    fn stored(&self, ino: &Inode, zi: &ZInfo, t: u8, pa: u64, plen: u64) -> Result<Stored> {
        if t == ty::PLAIN {
            return Ok(Stored::Plain {
                pa,
                plen,
                interlaced: zi.advise & ADVISE_INTERLACED_PCLUSTER != 0,
            });
        }
        let alg = if t == ty::HEAD1 { zi.alg[0] } else { zi.alg[1] };
        // An algorithm the superblock does not list (without compression configurations
        // only LZ4 exists) is damage, as erofs-utils' "inconsistent algorithmtype".
        let listed = if self.has_incompat(incompat::COMPR_CFGS) {
            u32::from(self.sb.u1())
        } else {
            1
        };
        if alg >= 16 || listed & (1 << alg) == 0 {
            return Err(Error::corrupt(
                Structure::CompressedIndex,
                format!(
                    "inode {}: compression algorithm {} ({alg}) is not among the image's",
                    ino.nid,
                    crate::format::compr_cfgs::alg_name(alg)
                ),
            )
            .with_ino(ino.nid));
        }
        if alg > crate::compress::ALG_ZSTD {
            return Err(Error::incompatible(format!(
                "inode {}: compression algorithm {alg} (usfs knows lz4, lzma, deflate, zstd)",
                ino.nid
            )));
        }
        Ok(Stored::Compressed {
            alg,
            pa,
            plen,
            // Every algorithm but LZ4 is always zero padded (mkfs.erofs sets the bit).
            padded: alg != 0 || self.has_incompat(incompat::ZERO_PADDING),
        })
    }

    /// Decompressed length of the extent whose head is lcluster `hlcn` (starting at `la`).
    fn extent_llen(&self, ino: &Inode, zi: &ZInfo, hlcn: u64, la: u64) -> Result<u64> {
        let mut lcn = hlcn;
        loop {
            if lcn << zi.lbits >= ino.size {
                return Ok(ino.size - la);
            }
            let m = self.lcluster(ino, zi, lcn, true)?;
            let step = if m.ty == ty::NONHEAD {
                m.delta1.max(1)
            } else if lcn != hlcn {
                let end = (lcn << zi.lbits) + u64::from(m.clusterofs);
                if end <= la {
                    return Err(Error::corrupt(
                        Structure::CompressedIndex,
                        format!("inode {}: empty extent at {la}", ino.nid),
                    )
                    .with_ino(ino.nid));
                }
                return Ok(end.min(ino.size) - la);
            } else {
                1
            };
            lcn += step;
        }
    }

    /// Blocks of the pcluster whose head is `hlcn`.
    fn extent_blocks(&self, ino: &Inode, zi: &ZInfo, hlcn: u64, t: u8) -> Result<u32> {
        let one = 1u32 << (zi.lbits - self.blkbits);
        let big1 = zi.advise & ADVISE_BIG_PCLUSTER_1 != 0;
        let big2 = zi.advise & ADVISE_BIG_PCLUSTER_2 != 0;
        if (t == ty::HEAD1 && !big1) || ((t == ty::PLAIN || t == ty::HEAD2) && !big2) {
            return Ok(one);
        }
        let next = hlcn + 1;
        if next << zi.lbits >= ino.size {
            return Ok(one);
        }
        let m = self.lcluster(ino, zi, next, false)?;
        if m.ty != ty::NONHEAD {
            return Ok(one);
        }
        match m.cblks {
            Some(n) if n >= 1 && n <= self.max_pclusterblks.max(1) * one => Ok(n),
            Some(n) => Err(Error::corrupt(
                Structure::CompressedIndex,
                format!(
                    "inode {}: pcluster of {n} blocks (limit {})",
                    ino.nid, self.max_pclusterblks
                ),
            )
            .with_ino(ino.nid)),
            None => Err(Error::corrupt(
                Structure::CompressedIndex,
                format!(
                    "inode {}: big pcluster at lcluster {hlcn} without a block count",
                    ino.nid
                ),
            )
            .with_ino(ino.nid)),
        }
    }
}

/// Distance from entry `i` (a nonhead) to the next head, from a compact pack.
fn la_distance(pack: &[u8], unit: u64, vcnt: usize, mut i: usize) -> u64 {
    let mut d1 = 0u64;
    let mut lo = 0u16;
    while i < vcnt {
        let (t, l) = decode_compact(pack, unit, i);
        lo = l;
        if t != ty::NONHEAD {
            return d1;
        }
        d1 += 1;
        i += 1;
    }
    if lo & D0_CBLKCNT == 0 {
        d1 += u64::from(lo).saturating_sub(1);
    }
    d1
}
