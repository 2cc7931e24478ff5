//! Building EROFS images from a directory tree (`usfs mkfs.erofs`).
//!
//! Layout: block 0 holds the superblock (and the LZ4 configuration with big pclusters);
//! then the shared xattr area; then file data in tree order (compressed in parallel, written
//! in order, so the image does not depend on the number of workers); then the metadata
//! area (inodes with xattrs, inline tails, compression indexes and inline pclusters; the
//! root first, so its nid is 0); then directory and long-symlink blocks.

mod dedupe;
mod dir;
mod gaps;
mod meta;
mod par;
mod timing;
mod tree;
mod xattrs;
mod zfile;
mod zindex;

pub use timing::Phase;

use crate::compress::Algorithm;
use std::io;
use std::path::Path;

/// What `usfs mkfs.erofs` was asked for (mkfs.erofs's options).
#[derive(Clone, Debug)]
pub struct Options {
    /// `-z`: compression, or none.
    pub compression: Option<Algorithm>,
    /// `-C`: largest physical cluster in bytes (a multiple of the block size).
    pub pcluster_bytes: u32,
    /// `-E ztailpacking`.
    pub ztailpacking: bool,
    /// `-E fragments`.
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
        }
    }
}

/// What was built.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub inodes: u64,
    pub blocks: u64,
    pub compressed_files: u64,
    pub plain_files: u64,
    /// `-E dedupe`: pclusters shared instead of written again, and the blocks that saved.
    pub shared_pclusters: u64,
    pub shared_blocks: u64,
    pub warnings: Vec<String>,
    /// Wall and CPU time per phase.
    pub phases: Vec<Phase>,
}

/// Block size of images usfs builds.
pub const BLOCK_SIZE: u32 = 4096;

/// Builds an image of `source` at `image`.
pub fn build(image: &Path, source: &Path, opts: &Options) -> io::Result<Report> {
    let bs = BLOCK_SIZE;
    if opts.pcluster_bytes < bs
        || !opts.pcluster_bytes.is_multiple_of(bs)
        || opts.pcluster_bytes > 1 << 20
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "pcluster size {} must be a multiple of {bs} up to 1 MiB",
                opts.pcluster_bytes
            ),
        ));
    }
    let mut timer = timing::Timer::start();
    // Truncating an old image frees its blocks, which takes a while: scan meanwhile (as
    // mkfs.erofs, the image is created or truncated before the source is read).
    let (f, tree) = std::thread::scope(|s| {
        let open = s.spawn(|| open_image(image));
        let tree = tree::scan(source, opts);
        let f = open
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("opening the image panicked")));
        (f, tree)
    });
    let (f, tree) = (f?, tree?);
    timer.phase("scan");
    let mut report = meta::write_image(f, tree, opts, &mut timer)?;
    report.phases = timer.phases;
    Ok(report)
}

/// Creates or truncates the image; readable too (`-E dedupe` compares candidate pclusters
/// with what was written).
fn open_image(image: &Path) -> io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(image)
}
