//! File data, in tree order right after the shared xattr area: large files are cut into
//! segments, read and compressed in parallel, and written in order as results arrive
//! (workers stay a bounded window ahead of the writer), so the image is the same for any
//! number of workers. Each file is stored compressed only when that takes fewer bytes than
//! the plain file; fragment tails are collected for the packed inode.

use super::image::Cfg;
use super::inode::{fits_inline, Data, Ino};
use super::out::{pad_to, Out};
use super::tree::Tree;
use super::zfile::{self, ZFile, ZParams, ZTail};
use super::{par, zinode};
use crate::compress::Compressor;
use std::io;
use std::ops::Range;
use usfs_fs::{FileType, Result};
use usfs_source::Reader;

/// One compression job: (node, byte range, last segment of its file, the file has one
/// segment).
type Job = (usize, Range<u64>, bool, bool);

/// What a worker hands the writer for one job: the plain bytes when the writer may need
/// them (not compressed, or a one-segment file), and the compressed segment.
type Piece = (Option<Vec<u8>>, Option<ZFile>);

/// A batch ends after this many input bytes or jobs.
const BATCH_BYTES: u64 = 1 << 20;
const BATCH_JOBS: usize = 256;

/// The jobs of the data phase and each node's compression settings.
pub(super) struct Plan {
    /// Per node: compression settings (`None`: not compressed).
    params: Vec<Option<ZParams>>,
    jobs: Vec<Job>,
}

/// What the data phase leaves for the later ones.
#[derive(Default)]
pub(super) struct Written {
    /// The packed inode's content: the fragment tails, in order.
    pub(super) packed: Vec<u8>,
    /// Fragments already in `packed`, by content hash: (offset, length) of each, so an
    /// identical fragment is stored once (as mkfs.erofs 1.9.3 does).
    pub(super) fragments: std::collections::HashMap<u64, Vec<(u64, usize)>>,
    pub(super) used_fragments: bool,
    pub(super) used_tailpacking: bool,
    pub(super) compressed_files: u64,
    pub(super) plain_files: u64,
}

impl Written {
    /// Where fragment `t` is in the packed inode: an identical earlier fragment's offset,
    /// or the end, where it is appended.
    fn fragment(&mut self, t: &[u8]) -> u64 {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let h = BuildHasherDefault::<DefaultHasher>::default().hash_one(t);
        let same = self.fragments.get(&h).and_then(|v| {
            v.iter().find(|&&(off, len)| {
                len == t.len() && &self.packed[off as usize..off as usize + len] == t
            })
        });
        if let Some(&(off, _)) = same {
            return off;
        }
        let off = self.packed.len() as u64;
        self.packed.extend_from_slice(t);
        self.fragments.entry(h).or_default().push((off, t.len()));
        off
    }
}

/// Cuts every non-empty regular file into jobs; gives each its compression settings
/// (`--compress-hints` may take a file's pcluster size and algorithm, or leave it plain).
pub(super) fn plan(cfg: &Cfg<'_>, tree: &Tree<'_>, inos: &[Ino]) -> Result<Plan> {
    let hints = super::hints::Hints::new(cfg.opts, tree)?;
    let params: Vec<Option<ZParams>> = (0..tree.nodes.len())
        .map(|i| {
            cfg.opts.compression?;
            let (pcluster, alg) = hints.of(i, cfg.opts)?;
            let mut p = zinode::zparams(cfg, &inos[i], tree.nodes[i].size);
            p.pcluster = pcluster as usize;
            p.alg = alg;
            Some(p)
        })
        .collect();
    let jobs: Vec<Job> = (0..tree.nodes.len())
        .filter(|&i| tree.nodes[i].file_type == FileType::Regular && tree.nodes[i].size > 0)
        .flat_map(|i| {
            let size = tree.nodes[i].size;
            let segs = zfile::segments(size);
            let single = segs.len() == 1;
            segs.into_iter().map(move |r| {
                let last = r.end == size;
                (i, r, last, single)
            })
        })
        .collect();
    Ok(Plan { params, jobs })
}

/// Reads, compresses and writes every file's data; sets each file inode's [`Data`].
pub(super) fn write(
    cfg: &Cfg<'_>,
    tree: &Tree<'_>,
    out: &mut Out<'_>,
    inos: &mut [Ino],
    plan: &Plan,
) -> Result<Written> {
    let mut sink = Sink {
        cfg,
        tree,
        out,
        inos,
        plan,
        reader: tree.reader(),
        parts: Vec::new(),
        raw: Vec::new(),
        written: Written::default(),
    };
    // Small files go to the workers in batches of consecutive jobs, so the shared queue
    // is touched once per batch, not once per file.
    let batches = batch_jobs(&plan.jobs);
    par::stream(
        &batches,
        cfg.opts.workers,
        4 * zfile::SEGMENT,
        |b| b.1,
        || {
            let max = cfg.opts.max_pcluster_bytes();
            let algs = cfg.opts.algorithms();
            let cs: Vec<Compressor> = algs.into_iter().map(|a| Compressor::new(a, max)).collect();
            (cs, tree.reader())
        },
        |(c, r), b| {
            b.0.clone()
                .map(|k| read_job(c, r.as_mut(), tree, plan, &plan.jobs[k]))
                .collect::<Vec<_>>()
        },
        |bi, results| -> Result<()> {
            for (k, res) in batches[bi].0.clone().zip(results) {
                sink.take(k, res?)?;
            }
            Ok(())
        },
    )?;
    Ok(sink.written)
}

/// Consecutive jobs grouped into batches: (job indexes, input bytes).
fn batch_jobs(jobs: &[Job]) -> Vec<(Range<usize>, u64)> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (k, j) in jobs.iter().enumerate() {
        bytes += j.1.end - j.1.start;
        if bytes >= BATCH_BYTES || k + 1 - start >= BATCH_JOBS || k + 1 == jobs.len() {
            out.push((start..k + 1, bytes));
            start = k + 1;
            bytes = 0;
        }
    }
    out
}

/// A worker's part of a job: reads the range and compresses it.
fn read_job(
    c: &mut [Compressor],
    r: &mut dyn Reader,
    tree: &Tree<'_>,
    plan: &Plan,
    job: &Job,
) -> Result<Piece> {
    let (i, range, last, single) = job;
    let n = &tree.nodes[*i];
    if r.size(n.src)? != n.size {
        return Err(changed_size(tree, *i));
    }
    let buf = read_range(r, tree, *i, range)?;
    match &plan.params[*i] {
        Some(p) => {
            let z = zfile::compress_part(&mut c[p.alg], &buf, range.start, n.size, *last, p);
            Ok((single.then_some(buf), Some(z)))
        }
        _ => Ok((Some(buf), None)),
    }
}

/// Reads bytes `range` of node `i`'s file, into fresh capacity that is not zeroed first.
fn read_range(
    r: &mut dyn Reader,
    tree: &Tree<'_>,
    i: usize,
    range: &Range<u64>,
) -> Result<Vec<u8>> {
    let len = range.end - range.start;
    let mut buf = Vec::with_capacity(len as usize);
    if r.read_vec(tree.nodes[i].src, range.start, len, &mut buf)? as u64 != len {
        return Err(changed_size(tree, i));
    }
    Ok(buf)
}

fn changed_size(tree: &Tree<'_>, i: usize) -> usfs_fs::Error {
    io::Error::other(format!(
        "{}: changed size while reading",
        tree.path(i).display()
    ))
    .into()
}

/// The writer's side: collects a file's pieces in order and stores the file after its
/// last one.
struct Sink<'c, 'd, 'o> {
    cfg: &'c Cfg<'c>,
    tree: &'c Tree<'c>,
    /// Reads files whose bytes the workers did not keep.
    reader: Box<dyn Reader + 'c>,
    out: &'o mut Out<'d>,
    inos: &'o mut [Ino],
    plan: &'c Plan,
    /// The compressed segments of the current file so far.
    parts: Vec<ZFile>,
    /// Its plain bytes so far (those the workers kept).
    raw: Vec<u8>,
    written: Written,
}

impl Sink<'_, '_, '_> {
    /// Takes job `k`'s piece.
    fn take(&mut self, k: usize, (content, z): Piece) -> Result<()> {
        let (i, _, last, _) = self.plan.jobs[k];
        if let Some(z) = z {
            self.parts.push(z);
        }
        if let Some(content) = content {
            if self.raw.is_empty() {
                self.raw = content;
            } else {
                self.raw.extend_from_slice(&content);
            }
        }
        if last {
            self.finish_file(i)?;
        }
        Ok(())
    }

    /// Stores node `i`, whose last piece came: compressed when that is smaller.
    fn finish_file(&mut self, i: usize) -> Result<()> {
        let (cfg, bs) = (self.cfg, self.cfg.bs);
        let size = self.tree.nodes[i].size;
        let z = self.plan.params[i]
            .as_ref()
            .and_then(|p| zfile::finish(std::mem::take(&mut self.parts), size, p));
        self.parts.clear();
        let content = std::mem::take(&mut self.raw);
        let ino = &self.inos[i];
        // Compressed only when it takes fewer bytes than the plain file would.
        match z.filter(|z| zinode::z_cost(cfg, z, ino, size) < zinode::flat_cost(ino, size, bs)) {
            Some(z) => self.store_compressed(i, &z),
            None => self.store_plain(i, content),
        }
    }

    fn store_compressed(&mut self, i: usize, z: &ZFile) -> Result<()> {
        let w = &mut self.written;
        w.compressed_files += 1;
        let mut frag_off = None;
        if let ZTail::Fragment(t) = &z.tail {
            frag_off = Some(w.fragment(t));
            w.used_fragments = true;
        }
        if matches!(z.tail, ZTail::Inline(..)) {
            w.used_tailpacking = true;
        }
        let size = self.tree.nodes[i].size;
        let data = zinode::store(self.cfg, self.out, z, size, &self.inos[i], frag_off)?;
        self.inos[i].data = data;
        Ok(())
    }

    fn store_plain(&mut self, i: usize, content: Vec<u8>) -> Result<()> {
        self.written.plain_files += 1;
        let size = self.tree.nodes[i].size;
        // A segmented file's bytes were not kept: read them again.
        let content = if content.len() as u64 == size {
            content
        } else {
            if self.reader.size(self.tree.nodes[i].src)? != size {
                return Err(changed_size(self.tree, i));
            }
            read_range(self.reader.as_mut(), self.tree, i, &(0..size))?
        };
        self.inos[i].data = flat_data(self.out, &content, &self.inos[i])?;
        Ok(())
    }
}

/// Writes an uncompressed file's full blocks; the tail goes inline when it fits.
pub(super) fn flat_data(out: &mut Out<'_>, content: &[u8], ino: &Ino) -> Result<Data> {
    let bs = out.bs;
    if content.is_empty() {
        return Ok(Data::None);
    }
    let tail = content.len() as u64 % bs;
    let inline = tail > 0 && fits_inline(ino, tail, bs);
    let full = if inline {
        content.len() as u64 - tail
    } else {
        content.len() as u64
    } as usize;
    let blkaddr = if full > 0 {
        out.put_blocks(&pad_to(&content[..full], bs))?
    } else {
        0
    };
    Ok(Data::Flat {
        blkaddr,
        tail: if inline {
            content[full..].to_vec()
        } else {
            Vec::new()
        },
        inline,
    })
}
