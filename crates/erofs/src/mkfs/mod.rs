//! Building EROFS images from a directory tree (`usfs mkfs.erofs`).
//!
//! Layout: block 0 holds the superblock (and the compression configurations when needed);
//! then the shared xattr area; then file data in tree order (compressed in parallel, written
//! in order, so the image does not depend on the number of workers); then the metadata
//! area (inodes with xattrs, inline tails, compression indexes and inline pclusters; the
//! root first, so its nid is 0); then directory and long-symlink blocks.
//!
//! The image is written through a [`Device`] (a file that grows as it is written, up to
//! [`MAX_IMAGE_BYTES`]; a memory or crash-recording device in tests): it takes the
//! device's first [`Report::blocks`] blocks, and a caller writing a file trims it to
//! that. [`scan`] reads the source tree (`tree.rs`, over a usfs-source [`Source`]);
//! [`write`] then runs the phases of `image.rs` in order, one file each, as erofs-utils'
//! lib/ does: `xattrs.rs` (the shared xattr area), `data.rs` (file data; a compressed file's pclusters and indexes
//! in `zfile.rs`, `zinode.rs`, `zindex.rs`, `dedupe.rs`), `packed.rs` (the packed inode),
//! `place.rs` (where each inode goes in the metadata area), `dir.rs` (directory and symlink
//! blocks), `inode.rs` (inode bytes) and `superblock.rs`.

mod blob;
mod chunked;
mod data;
mod dedupe;
mod dir;
mod gaps;
mod hints;
mod image;
mod inode;
mod out;
mod packed;
mod par;
mod place;
mod superblock;
#[cfg(test)]
mod tests;
mod timing;
mod tree;
mod xattrs;
mod zfile;
mod zindex;
mod zinode;

pub use timing::Phase;

use crate::compress::Algorithm;
use usfs_dev::Device;
use usfs_fs::{Error, Result};
use usfs_source::Source;

/// What `usfs mkfs.erofs` was asked for (mkfs.erofs's options).
#[derive(Clone, Debug)]
pub struct Options {
    /// `-z`: compression, or none.
    pub compression: Option<Algorithm>,
    /// `-C`: largest physical cluster in bytes (a multiple of the block size).
    pub pcluster_bytes: u32,
    /// `-E ztailpacking`.
    pub ztailpacking: bool,
    /// `-E fragments`: file rests that compress into less than a pcluster go to the
    /// packed inode; identical pclusters are shared as with `dedupe` (as mkfs.erofs 1.9.3).
    pub fragments: bool,
    /// `-E dedupe`: byte-identical pclusters are written once and shared.
    pub dedupe: bool,
    /// `-E legacy-compress`: full indexes and no zero padding.
    pub legacy_compress: bool,
    /// `-T`: every inode's mtime and the build time.
    pub timestamp: Option<i64>,
    /// `-U`: the volume UUID (random if absent).
    pub uuid: Option<[u8; 16]>,
    /// `-L`: volume label.
    pub label: Vec<u8>,
    /// `--all-root`.
    pub all_root: bool,
    /// `--force-uid`.
    pub force_uid: Option<u32>,
    /// `--force-gid`.
    pub force_gid: Option<u32>,
    /// `-x`: xattrs used by more than this many inodes are shared; negative: no xattrs.
    pub xattr_tolerance: i32,
    /// `--workers`: compression threads.
    pub workers: usize,
    /// `--tar=i`: the files' data is not written: each refers to its bytes in the
    /// image's one extra device, the tar, of this many 512-byte blocks (the source's
    /// files must lie whole in it: [`usfs_source::Reader::contiguous_at`]). The image
    /// has 512-byte blocks then, as mkfs.erofs 1.9.3's.
    pub blob_blocks: Option<u64>,
    /// `-b`: block size in bytes (512, 1024, 2048 or 4096; compressed images 4096 only;
    /// `--tar=i` images always 512, as mkfs.erofs 1.9.3 forces).
    pub block_size: u32,
    /// `--chunksize`: regular files are chunk-based with chunks of `1 << bits` bytes
    /// (identical chunks shared, runs merged: see `chunked.rs`); uncompressed builds only.
    pub chunk_bits: Option<u32>,
    /// `-z A:B...`: the algorithms after the first (`compression`), which compression
    /// hints name by their place in the list (0 is `compression`).
    pub extra_algorithms: Vec<Algorithm>,
    /// `--compress-hints`: per file, the first hint whose expression matches its path
    /// (relative to the source root) gives its pcluster size (0: not compressed) and
    /// algorithm; files no hint matches take `-C` and the first algorithm.
    pub compress_hints: Vec<CompressHint>,
    /// `--exclude-path`: entries left out, by exact path relative to the source root.
    pub exclude_paths: Vec<String>,
    /// `--exclude-regex`: entries left out whose relative path matches (POSIX ERE).
    pub exclude_regexes: Vec<String>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            compression: None,
            pcluster_bytes: 4096,
            ztailpacking: false,
            fragments: false,
            dedupe: false,
            legacy_compress: false,
            timestamp: None,
            uuid: None,
            label: Vec::new(),
            all_root: false,
            force_uid: None,
            force_gid: None,
            xattr_tolerance: 2,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            blob_blocks: None,
            block_size: BLOCK_SIZE,
            chunk_bits: None,
            extra_algorithms: Vec::new(),
            compress_hints: Vec::new(),
            exclude_paths: Vec::new(),
            exclude_regexes: Vec::new(),
        }
    }
}

/// One line of a compression hints file (mkfs.erofs's `--compress-hints`).
#[derive(Clone, Debug)]
pub struct CompressHint {
    /// Largest pcluster in bytes (a multiple of the block size; 0: not compressed).
    pub pcluster_bytes: u32,
    /// The algorithm's place in the `-z` list.
    pub alg: usize,
    /// The POSIX extended regular expression.
    pub pattern: String,
}

impl Options {
    /// The `-z` algorithms in order (none without compression).
    pub fn algorithms(&self) -> Vec<Algorithm> {
        self.compression
            .into_iter()
            .chain(self.extra_algorithms.iter().copied())
            .collect()
    }

    /// The largest pcluster any file may take: `-C`, or a larger hint's.
    pub fn max_pcluster_bytes(&self) -> u32 {
        self.compress_hints
            .iter()
            .map(|h| h.pcluster_bytes)
            .fold(self.pcluster_bytes, u32::max)
    }
}

/// What was built.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Inodes in the image.
    pub inodes: u64,
    /// Blocks of the image (its size in blocks).
    pub blocks: u64,
    /// Its block size in bytes.
    pub block_size: u32,
    /// Regular files stored compressed.
    pub compressed_files: u64,
    /// Regular files stored uncompressed.
    pub plain_files: u64,
    /// `-E dedupe`: pclusters shared instead of written again.
    pub shared_pclusters: u64,
    /// `-E dedupe`: the blocks sharing saved.
    pub shared_blocks: u64,
    /// What the build warns about (xattrs it cannot store, skipped).
    pub warnings: Vec<String>,
    /// Wall and CPU time per phase.
    pub phases: Vec<Phase>,
}

/// Block size of images usfs builds (but `--tar=i` images: [`BLOB_BLOCK_SIZE`]).
pub const BLOCK_SIZE: u32 = 4096;

/// Block size of `--tar=i` images: a tar's data starts on a 512-byte boundary, so its
/// offset is a block address.
pub const BLOB_BLOCK_SIZE: u32 = 512;

/// The largest image: block addresses are 32 bits, so at most `u32::MAX` blocks. A device
/// of this size holds any image (ext4's largest file, `u32::MAX` 4 KiB blocks, is exactly
/// this size).
pub const MAX_IMAGE_BYTES: u64 = u32::MAX as u64 * BLOCK_SIZE as u64;

/// A scanned source tree with the options it was scanned with, ready to [`write`].
pub struct Scan<'s> {
    tree: tree::Tree<'s>,
    opts: Options,
    timer: timing::Timer,
}

/// Checks the options and scans `source` (a directory: [`usfs_source::HostDir`]).
/// Separate from [`write`] so that a caller can prepare the device meanwhile (truncating
/// an old image file frees its blocks, which takes a while).
pub fn scan<'s>(source: &'s dyn Source, opts: &Options) -> Result<Scan<'s>> {
    let bs = opts.block_size;
    if !(bs.is_power_of_two() && (512..=BLOCK_SIZE).contains(&bs)) {
        return Err(Error::incompatible(format!(
            "block size {bs} (512, 1024, 2048 or 4096: the kernel reads no blocks larger than a page)"
        )));
    }
    if bs != BLOCK_SIZE && opts.compression.is_some() {
        return Err(Error::incompatible(format!(
            "compression with {bs}-byte blocks (only 4096 yet)"
        )));
    }
    if opts.pcluster_bytes < bs
        || !opts.pcluster_bytes.is_multiple_of(bs)
        || opts.pcluster_bytes > 1 << 20
    {
        return Err(Error::incompatible(format!(
            "pcluster size {} (it must be a multiple of {bs} up to 1 MiB)",
            opts.pcluster_bytes
        )));
    }
    if opts.chunk_bits.is_some_and(|b| b < bs.trailing_zeros()) {
        return Err(Error::incompatible(format!(
            "chunk size {} (it must be at least the block size, {bs})",
            1u64 << opts.chunk_bits.unwrap_or(0)
        )));
    }
    if opts.chunk_bits.is_some() && (opts.compression.is_some() || opts.blob_blocks.is_some()) {
        return Err(Error::incompatible(
            "--chunksize with -z or --tar=i (chunk-based files are stored uncompressed, in the image)",
        ));
    }
    if opts.blob_blocks.is_some() && opts.compression.is_some() {
        return Err(Error::incompatible(
            "compression with --tar=i (the data stays in the tar, uncompressed)",
        ));
    }
    for h in &opts.compress_hints {
        if h.pcluster_bytes % bs != 0 || h.pcluster_bytes > 1 << 20 {
            return Err(Error::incompatible(format!(
                "compression hint {}: pcluster size {} (a multiple of {bs} up to 1 MiB)",
                h.pattern, h.pcluster_bytes
            )));
        }
        if h.alg >= opts.algorithms().len() {
            return Err(Error::incompatible(format!(
                "compression hint {}: algorithm {} (-z names {})",
                h.pattern,
                h.alg,
                opts.algorithms().len()
            )));
        }
    }
    if opts.legacy_compress
        && opts
            .algorithms()
            .iter()
            .any(|a| a.id() != crate::compress::ALG_LZ4)
    {
        return Err(Error::incompatible(
            "-E legacy-compress with an algorithm other than LZ4 (the others need zero padding)",
        ));
    }
    let mut timer = timing::Timer::start();
    let tree = tree::scan(source, opts)?;
    timer.phase("scan");
    Ok(Scan {
        tree,
        opts: opts.clone(),
        timer,
    })
}

/// Writes the image of a scanned tree to `dev`, from byte 0, and flushes it. Fails with
/// `StorageFull` when the image would not fit in the device.
pub fn write(dev: &dyn Device, scan: Scan<'_>) -> Result<Report> {
    let Scan {
        tree,
        opts,
        mut timer,
    } = scan;
    // Time between the scan and this call: the caller preparing the device.
    timer.phase("device");
    let mut report = image::write_image(dev, tree, &opts, &mut timer)?;
    report.phases = timer.phases;
    Ok(report)
}

/// Builds an image of `source` on `dev`: [`scan`], then [`write`].
pub fn build(dev: &dyn Device, source: &dyn Source, opts: &Options) -> Result<Report> {
    write(dev, scan(source, opts)?)
}
