//! Names and directory shapes: `names/`, `deep/`, `dirs/` and `bigdir/`.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::attrs::{self, Attrs};
use super::builder::Builder;
use crate::content::Content;
use crate::names;
use crate::rng::Rng;

fn small_file(b: &mut Builder, rel: &Path, rng: &mut Rng, max: u64) -> io::Result<()> {
    let len = rng.range(0, max).min(b.opts.max_file_size);
    let a = attrs::file(rng);
    b.file(rel, Content::Text, len, rng, a)
}

/// `names/`: odd names (`odd/`), names covering every byte 1..=255 but `/` (`cover/`),
/// and 255-byte names (`long/`), as files and directories.
pub(super) fn names(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("names");
    let top = PathBuf::from("names");
    b.mkdir(&top, attrs::dir(&mut rng))?;
    let groups = [
        ("odd", names::odd()),
        ("cover", names::byte_cover(&mut rng)),
        ("long", names::long(&mut rng)),
    ];
    for (sub, list) in groups {
        let dir = top.join(sub);
        b.mkdir(&dir, attrs::dir(&mut rng))?;
        for (i, name) in list.iter().enumerate() {
            let path = b.unique(&dir, name);
            if i % 5 == 4 {
                b.mkdir(&path, attrs::dir(&mut rng))?;
                small_file(b, &path.join("inside"), &mut rng, 100)?;
            } else {
                small_file(b, &path, &mut rng, 300)?;
            }
        }
    }
    // A 255-byte directory holding a 255-byte file, and a 255-byte symlink to it.
    let long = names::long(&mut rng);
    let dir = top.join("long").join(OsStr::from_bytes(&long[0]));
    let dir = b.unique(dir.parent().unwrap_or(Path::new("")), &long[0]);
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    let file = dir.join(OsStr::from_bytes(&long[1]));
    small_file(b, &file, &mut rng, 50)?;
    let link = dir.join(OsStr::from_bytes(&long[2]));
    b.symlink(&link, &long[1], attrs::symlink(&mut rng))?;
    Ok(())
}

/// `deep/`: a chain of 30 nested directories (path well under PATH_MAX), files on the
/// way, and at the bottom a file and a symlink back up to `sizes/`.
pub(super) fn deep(b: &mut Builder) -> io::Result<()> {
    const DEPTH: usize = 30;
    let mut rng = b.rng("deep");
    let mut dir = PathBuf::from("deep");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    for level in 1..=DEPTH {
        let name = names::plain(&mut rng, 5, 40);
        dir = dir.join(OsStr::from_bytes(&name));
        b.mkdir(&dir, attrs::dir(&mut rng))?;
        if level % 10 == 0 {
            small_file(b, &dir.join(format!("at-level-{level}")), &mut rng, 5000)?;
        }
    }
    small_file(b, &dir.join("bottom"), &mut rng, 200)?;
    let up = format!("{}sizes", "../".repeat(DEPTH + 1));
    b.symlink(&dir.join("up"), up.as_bytes(), attrs::symlink(&mut rng))?;
    Ok(())
}

fn with_perm(mut a: Attrs, perm: u32) -> Attrs {
    a.perm = perm;
    a
}

/// `dirs/`: empty directories (with assorted modes), a chain ending in an empty one, small
/// directories of 1 to 10 entries, and `medium/` with a few hundred small files.
pub(super) fn shapes(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("dirs");
    let top = PathBuf::from("dirs");
    b.mkdir(&top, attrs::dir(&mut rng))?;
    for (i, perm) in [0o755, 0o700, 0o1777, 0o000, 0o2775]
        .into_iter()
        .enumerate()
    {
        let a = with_perm(attrs::dir(&mut rng), perm);
        b.mkdir(&top.join(format!("empty-{i}")), a)?;
    }
    let mut chain = top.join("nested-empty");
    b.mkdir(&chain, attrs::dir(&mut rng))?;
    for part in ["a", "b", "c"] {
        chain = chain.join(part);
        b.mkdir(&chain, attrs::dir(&mut rng))?;
    }
    for i in 0..10 {
        let dir = top.join(format!("small-{i}"));
        b.mkdir(&dir, attrs::dir(&mut rng))?;
        for _ in 0..=i {
            let name = names::mixed(&mut rng, 1, 30);
            let path = b.unique(&dir, &name);
            if rng.chance(1, 5) {
                b.mkdir(&path, attrs::dir(&mut rng))?;
            } else {
                small_file(b, &path, &mut rng, 2000)?;
            }
        }
    }
    let medium = top.join("medium");
    b.mkdir(&medium, attrs::dir(&mut rng))?;
    for _ in 0..b.opts.medium_dir_entries {
        let name = names::mixed(&mut rng, 1, 30);
        let path = b.unique(&medium, &name);
        small_file(b, &path, &mut rng, 160)?;
    }
    Ok(())
}

/// `bigdir/`: `big_dir_entries` entries, mostly empty files, some tiny files,
/// subdirectories and symlinks; names of varied length so the directory spans many blocks.
pub(super) fn big(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("bigdir");
    let top = PathBuf::from("bigdir");
    b.mkdir(&top, attrs::dir(&mut rng))?;
    for i in 0..b.opts.big_dir_entries {
        let mut name = format!("{i:06}-").into_bytes();
        name.extend(names::plain(&mut rng, 1, 24));
        let path = top.join(OsStr::from_bytes(&name));
        if i % 97 == 1 {
            b.mkdir(&path, attrs::dir(&mut rng))?;
        } else if i % 101 == 2 {
            b.symlink(&path, b"../sizes", attrs::symlink(&mut rng))?;
        } else if i % 50 == 3 {
            small_file(b, &path, &mut rng, 100)?;
        } else {
            let a = attrs::file(&mut rng);
            b.file(&path, Content::Zeros, 0, &mut rng, a)?;
        }
    }
    Ok(())
}
