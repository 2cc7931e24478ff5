//! Compressing one file with fixed-size output: each pcluster is filled by the compressor from as much
//! input as fits; a pcluster that does not save a block is stored as one plain block; the
//! tail goes inline (ztailpacking), into the packed inode (fragments) or into a block.
//! Large files are cut into fixed segments ([`SEGMENT`]) compressed independently. A pure
//! function of the bytes and the options, so files and segments compress in parallel and the
//! image is the same whatever the number of workers.

use crate::compress::Compressor;

/// Compression settings for one file.
#[derive(Clone, Copy, Debug)]
pub(super) struct ZParams {
    pub bs: usize,
    /// Largest pcluster in bytes (a multiple of `bs`).
    pub pcluster: usize,
    /// Leading zero padding (LZ4_0PADDING); otherwise data is at the pcluster start.
    pub zero_padding: bool,
    /// Room for an inline tail pcluster (ztailpacking), 0 = none.
    pub inline_room: usize,
    /// Send the tail (or the whole file, when small) to the packed inode.
    pub fragments: bool,
    /// The algorithm's place in the `-z` list (the worker's compressor).
    pub alg: usize,
}

/// One extent of the file.
#[derive(Clone, Debug)]
pub(super) struct ZExtent {
    /// First file byte.
    pub la: u64,
    /// Stored plain (uncompressed).
    pub raw: bool,
    /// Blocks of its pcluster (0 for an inline or fragment tail).
    pub blocks: u32,
    /// Where its blocks start, counting blocks from the file's first one.
    pub rel_blk: u32,
}

/// The tail of a compressed file, when it is not in blocks.
#[derive(Clone, Debug)]
pub(super) enum ZTail {
    None,
    /// Inline after the indexes (plain or compressed, as its extent says).
    Inline(Vec<u8>),
    /// Appended to the packed inode: the plain bytes.
    Fragment(Vec<u8>),
}

/// A compressed file.
#[derive(Clone, Debug)]
pub(super) struct ZFile {
    pub extents: Vec<ZExtent>,
    /// The pcluster blocks, concatenated.
    pub data: Vec<u8>,
    pub tail: ZTail,
    /// The whole file is one fragment.
    pub whole_fragment: bool,
    /// The algorithm of its compressed pclusters (`h_algorithmtype` of HEAD1 lclusters):
    /// per file, so files of one image may use different algorithms.
    pub alg: u8,
}

impl ZFile {
    /// Ends the file with a tail that takes no blocks (inline or fragment), starting at
    /// file byte `la`; `raw` when its bytes are stored uncompressed.
    fn end_with(&mut self, tail: ZTail, la: u64, raw: bool, rel_blk: u32) {
        self.tail = tail;
        self.extents.push(ZExtent {
            la,
            raw,
            blocks: 0,
            rel_blk,
        });
    }
}

/// Files larger than this are compressed in independent segments of this many bytes (a
/// multiple of any pcluster size), so one large file keeps every worker busy. Each segment
/// boundary costs at most the unfilled part of one pcluster. A pure function of the size.
pub(super) const SEGMENT: u64 = 16 << 20;

/// The byte ranges of a `size`-byte file that compress independently.
pub(super) fn segments(size: u64) -> Vec<std::ops::Range<u64>> {
    (0..size.div_ceil(SEGMENT).max(1))
        .map(|k| k * SEGMENT..((k + 1) * SEGMENT).min(size))
        .collect()
}

/// Joins the segments of a file (in order); `None` when they do not save a block.
pub(super) fn finish(parts: Vec<ZFile>, size: u64, p: &ZParams) -> Option<ZFile> {
    let mut out = ZFile {
        extents: Vec::new(),
        data: Vec::new(),
        tail: ZTail::None,
        whole_fragment: false,
        alg: 0,
    };
    if size == 0 {
        return None;
    }
    for part in parts {
        let base = (out.data.len() / p.bs) as u32;
        out.extents.extend(part.extents.into_iter().map(|mut e| {
            e.rel_blk += base;
            e
        }));
        out.data.extend_from_slice(&part.data);
        out.tail = part.tail;
        out.whole_fragment = part.whole_fragment;
        out.alg = part.alg;
    }
    // Keep it only if it saves at least one block.
    if (out.data.len() / p.bs) as u64 >= size.div_ceil(p.bs as u64) {
        return None;
    }
    Some(out)
}

/// Compresses one segment `src` of a `file_size`-byte file, starting at file byte `base`;
/// only the `last` segment gets the tail treatment (inline or fragment). Extents carry
/// file offsets and blocks counted from the segment's first block.
pub(super) fn compress_part(
    c: &mut Compressor,
    src: &[u8],
    base: u64,
    file_size: u64,
    last: bool,
    p: &ZParams,
) -> ZFile {
    let bs = p.bs;
    let size = src.len();
    let mut out = ZFile {
        extents: Vec::new(),
        data: Vec::new(),
        tail: ZTail::None,
        whole_fragment: false,
        alg: c.algorithm().id(),
    };
    let p = &ZParams {
        inline_room: if last { p.inline_room } else { 0 },
        fragments: last && p.fragments,
        ..*p
    };
    if p.fragments && base == 0 && file_size <= p.pcluster as u64 {
        out.whole_fragment = true;
        out.end_with(ZTail::Fragment(src.to_vec()), 0, false, 0);
        return out;
    }
    let mut dst = vec![0u8; p.pcluster];
    let mut pos = 0usize;
    let mut rel_blk = 0u32;
    while pos < size {
        let len = size - pos;
        let may_inline = p.inline_room > 0;
        if len <= p.pcluster && p.fragments {
            out.end_with(
                ZTail::Fragment(src[pos..].to_vec()),
                base + pos as u64,
                false,
                rel_blk,
            );
            break;
        }
        let mut stored: Option<(usize, usize)> = None; // (consumed, compressed bytes)
                                                       // Plain blocks to write when compression does not pay: one; with big pclusters and
                                                       // an algorithm other than LZ4, as many as the failed attempt took input for (up to
                                                       // a pcluster), as mkfs.erofs 1.9.3 does, so incompressible data costs one attempt
                                                       // per pcluster and not one per block (LZ4 keeps 1.5's one block at a time).
        let mut plain_blocks = 1;
        if !(len <= p.pcluster && !may_inline && len <= bs) {
            if let Some((used, n)) = c.compress_dest_size(&src[pos..], &mut dst) {
                if c.algorithm().id() != crate::compress::ALG_LZ4 {
                    plain_blocks = (used.min(p.pcluster) / bs).max(1);
                }
                let whole = used == len;
                let csize = if !whole || n >= bs {
                    n.div_ceil(bs) * bs
                } else {
                    n
                };
                if used > csize {
                    stored = Some((used, n));
                }
            }
        }
        match stored {
            None => {
                if may_inline && len < bs && len <= p.inline_room {
                    out.end_with(
                        ZTail::Inline(src[pos..].to_vec()),
                        base + pos as u64,
                        true,
                        rel_blk,
                    );
                    break;
                }
                for _ in 0..plain_blocks {
                    if pos >= size {
                        break;
                    }
                    let count = bs.min(size - pos);
                    let start = out.data.len();
                    out.data.resize(start + bs, 0);
                    out.data[start..start + count].copy_from_slice(&src[pos..pos + count]);
                    out.extents.push(ZExtent {
                        la: base + pos as u64,
                        raw: true,
                        blocks: 1,
                        rel_blk,
                    });
                    rel_blk += 1;
                    pos += count;
                }
            }
            Some((mut used, mut n)) => {
                if p.fragments && used == len && n < p.pcluster {
                    // The rest compresses into less than a pcluster: it goes to the packed
                    // inode whole, where it compresses with its neighbours (mkfs.erofs
                    // 1.9.3's rule; from the first byte, the whole file is a fragment).
                    out.whole_fragment = base == 0 && pos == 0;
                    out.end_with(
                        ZTail::Fragment(src[pos..].to_vec()),
                        base + pos as u64,
                        false,
                        rel_blk,
                    );
                    break;
                }
                if may_inline && used == len && n < bs && n <= p.inline_room {
                    out.end_with(
                        ZTail::Inline(dst[..n].to_vec()),
                        base + pos as u64,
                        false,
                        rel_blk,
                    );
                    break;
                }
                if may_inline && used == len && n % bs != 0 {
                    // Try to fit the trailing pcluster in fewer blocks, leaving the rest
                    // of the input for the inline tail.
                    let mut tmp = vec![0u8; n / bs * bs];
                    if !tmp.is_empty() {
                        if let Some((u2, n2)) =
                            c.compress_dest_size(&src[pos..pos + used], &mut tmp)
                        {
                            if n2 + (used - u2) < n.div_ceil(bs) * bs && u2 > n2.div_ceil(bs) * bs {
                                dst[..n2].copy_from_slice(&tmp[..n2]);
                                used = u2;
                                n = n2;
                            }
                        }
                    }
                }
                let blocks = n.div_ceil(bs);
                let start = out.data.len();
                out.data.resize(start + blocks * bs, 0);
                let at = if p.zero_padding {
                    start + blocks * bs - n
                } else {
                    start
                };
                out.data[at..at + n].copy_from_slice(&dst[..n]);
                out.extents.push(ZExtent {
                    la: base + pos as u64,
                    raw: false,
                    blocks: blocks as u32,
                    rel_blk,
                });
                rel_blk += blocks as u32;
                pos += used;
            }
        }
    }
    out
}
