//! The packed inode (`-E fragments`): the fragment tails of compressed files, concatenated
//! in file order, stored after the file data. Compressed like a file (in segments, in
//! parallel: it can be large) but without tail packing or fragments of its own, and stored
//! plain when compressing it does not save a block. It has no node in the tree: root-owned,
//! mode 0600, the build time.

use super::data::flat_data;
use super::image::Cfg;
use super::inode::{Data, Ino};
use super::out::Out;
use super::{par, zfile, zinode};
use crate::compress::Compressor;
use usfs_fs::Result;

/// Writes the packed inode's data; returns the inode (extended, not yet placed).
pub(super) fn write(cfg: &Cfg<'_>, out: &mut Out<'_>, packed: &[u8]) -> Result<Ino> {
    let size = packed.len() as u64;
    let mut ino = Ino {
        node: usize::MAX,
        size,
        ibody: Vec::new(),
        icount: 0,
        extended: true,
        data: Data::None,
        pos: 0,
    };
    let z = cfg.opts.compression.and_then(|alg| {
        let mut p = zinode::zparams(cfg, &ino, size);
        p.fragments = false;
        p.inline_room = 0;
        let segs = zfile::segments(size);
        let parts = par::map(
            &segs,
            cfg.opts.workers,
            || Compressor::new(alg, cfg.opts.pcluster_bytes),
            |c, r| {
                let src = &packed[r.start as usize..r.end as usize];
                zfile::compress_part(c, src, r.start, size, r.end == size, &p)
            },
        );
        zfile::finish(parts, size, &p)
    });
    ino.data = match z {
        Some(z) => zinode::store(cfg, out, &z, size, &ino, None)?,
        None => flat_data(out, packed, &ino)?,
    };
    Ok(ino)
}
