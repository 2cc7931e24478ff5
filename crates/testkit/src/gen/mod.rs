//! The seeded tree generator: [`generate`] fills a directory with a tree that exercises
//! what file-system images must preserve (sizes, holes, odd and long names, deep paths,
//! big directories, links, special files, xattrs, modes, owners, nanosecond times).
//!
//! The same [`GenOptions`] always give the same tree (names, contents, attributes),
//! wherever it is made. Reading a tree changes access times (mke2fs -d reads its source
//! without `O_NOATIME`), so to compare an image against its source, generate the source a
//! second time with the same seed and compare against that fresh copy.
//!
//! Top-level layout: `sizes/` (the size ladder), `sparse/` (holes), `huge/` (a >4 GiB
//! sparse file, when asked for), `names/` (odd, byte-covering and 255-byte names),
//! `deep/` (a ~30-level path), `dirs/` (empty, small and medium directories), `bigdir/`
//! (one big directory), `tree/` (random files in random directories), `xattrs/`,
//! `special/` (fifos, devices, sockets), `links/` (symlinks), `hardlinks/`, `modes/`,
//! `owners/`, `times/`.

mod attrs;
mod builder;
mod dirs;
mod files;
mod links;
mod meta;
mod report;
mod special;

use std::io;
use std::path::Path;

pub use report::GenReport;

use builder::Builder;

/// Size presets for the generated tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// About 800 entries (120 random files; the rest are the fixed showcases) plus a
    /// 3000-entry directory (more than one 4 KiB block, so the kernel makes it an htree);
    /// about 15 MB of data written (60 MB apparent). Fast; for most tests.
    Small,
    /// About 5000 entries (3500 random files) plus a 10 000-entry directory; ~80 MB of data.
    Medium,
    /// Medium plus a 100 000-entry directory and a 4.5 GiB sparse file.
    Full,
}

impl Profile {
    /// Parses `small`, `medium` or `full`.
    pub fn parse(s: &str) -> Option<Profile> {
        match s {
            "small" => Some(Profile::Small),
            "medium" => Some(Profile::Medium),
            "full" => Some(Profile::Full),
            _ => None,
        }
    }
}

/// What to generate. Start from [`GenOptions::new`] (the profile's defaults), then
/// change fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenOptions {
    /// Seed: the same options with the same seed give the same tree.
    pub seed: u64,
    /// The preset the other fields were taken from.
    pub profile: Profile,
    /// Number of random regular files under `tree/`.
    pub files: usize,
    /// Number of entries in `bigdir/`.
    pub big_dir_entries: usize,
    /// Entries in the medium-sized directory `dirs/medium/`.
    pub medium_dir_entries: usize,
    /// Extents of the many-extent sparse file (more than 1360 needs a depth-2 ext4
    /// extent tree on 4 KiB blocks).
    pub sparse_extents: usize,
    /// Whether to make `huge/sparse-4.5G` (4.5 GiB apparent size, a few KiB of data).
    pub sparse_huge: bool,
    /// Whether to make character and block device nodes (mknod needs root; without it
    /// they are skipped with a note anyway).
    pub devices: bool,
    /// Whether to set extended attributes.
    pub xattrs: bool,
    /// Largest apparent size of a regular file (the huge sparse file excepted); larger
    /// sizes of the ladder and larger sparse layouts are left out.
    pub max_file_size: u64,
    /// Longest symlink target (4000 by default; a 1 KiB-block ext4 allows only 1023).
    pub max_symlink_len: usize,
    /// Largest xattr value (3000 by default: too big for the inode, fits a 4 KiB block).
    pub max_xattr_size: usize,
    /// Most xattrs on one file (40 by default; a 1 KiB xattr block holds fewer).
    pub max_xattrs_per_file: usize,
    /// Keep every timestamp inside the signed 32-bit range of seconds (1901..2038):
    /// `mke2fs -d` stores only the low 32 bits of times.
    pub times_32bit: bool,
    /// Give one symlink a second hard link (`mke2fs -d` does not keep such links).
    pub hardlinked_symlinks: bool,
}

impl GenOptions {
    /// The defaults of `profile` with `seed`.
    pub fn new(profile: Profile, seed: u64) -> GenOptions {
        let (files, big, medium, extents) = match profile {
            Profile::Small => (120, 3000, 120, 400),
            Profile::Medium => (3500, 10_000, 500, 1500),
            Profile::Full => (3500, 100_000, 500, 1500),
        };
        GenOptions {
            seed,
            profile,
            files,
            big_dir_entries: big,
            medium_dir_entries: medium,
            sparse_extents: extents,
            sparse_huge: profile == Profile::Full,
            devices: true,
            xattrs: true,
            max_file_size: 64 << 20,
            max_symlink_len: 4000,
            max_xattr_size: 3000,
            max_xattrs_per_file: 40,
            times_32bit: false,
            hardlinked_symlinks: true,
        }
    }
}

impl Default for GenOptions {
    /// The small profile with seed 0.
    fn default() -> GenOptions {
        GenOptions::new(Profile::Small, 0)
    }
}

/// Generates the tree described by `opts` in `root`, which must be an empty directory or
/// not exist yet (its parent must). Attributes and times are set last, children before
/// parents, so every time in the tree is as generated. Things this process may not do
/// (mknod or chown without root, a namespace of xattrs the file system refuses) are
/// skipped and named in [`GenReport::notes`].
pub fn generate(root: &Path, opts: &GenOptions) -> io::Result<GenReport> {
    prepare_root(root)?;
    let mut b = Builder::new(root, opts);
    let mut rng = b.rng("root");
    // The root stays 0755 root:root so the tree is easy to enter and to copy.
    b.root(attrs::Attrs {
        perm: 0o755,
        uid: 0,
        gid: 0,
        ..attrs::dir(&mut rng)
    });
    files::sizes(&mut b)?;
    files::sparse(&mut b)?;
    if opts.sparse_huge {
        files::huge(&mut b)?;
    }
    dirs::names(&mut b)?;
    dirs::deep(&mut b)?;
    dirs::shapes(&mut b)?;
    dirs::big(&mut b)?;
    files::tree(&mut b)?;
    meta::xattrs(&mut b)?;
    special::all(&mut b)?;
    links::symlinks(&mut b)?;
    links::hardlinks(&mut b)?;
    meta::modes(&mut b)?;
    meta::owners(&mut b)?;
    meta::times(&mut b)?;
    b.finish()
}

fn prepare_root(root: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(root) {
        Ok(m) if m.is_dir() => {
            if std::fs::read_dir(root)?.next().is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{}: directory is not empty", root.display()),
                ));
            }
            Ok(())
        }
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{}: exists and is not a directory", root.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::create_dir(root)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", root.display()))),
        Err(e) => Err(e),
    }
}
