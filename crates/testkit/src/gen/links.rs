//! Symbolic links (`links/`) and hard links (`hardlinks/`).

use std::io;
use std::path::{Path, PathBuf};

use super::attrs;
use super::builder::Builder;
use super::files::ladder_path;
use crate::content::Content;
use crate::names;
use crate::rng::Rng;

/// A dangling path-like target of exactly `len` bytes.
fn target_of_len(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut t = Vec::with_capacity(len + 64);
    while t.len() < len {
        t.extend(names::plain(rng, 1, 30));
        t.push(b'/');
    }
    t.truncate(len);
    if t.last() == Some(&b'/') {
        if let Some(last) = t.last_mut() {
            *last = b'x';
        }
    }
    t
}

/// `links/`: fast (<60 bytes) and slow symlinks around the 60-byte edge, long targets up
/// to `max_symlink_len`, dangling, absolute, to a directory, to a file, a loop, a chain,
/// and targets with odd bytes.
pub(super) fn symlinks(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("links");
    let dir = PathBuf::from("links");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    let fixed: &[(&str, &[u8])] = &[
        ("short", b"target"),
        ("dangling", b"does/not/exist"),
        ("to-dir", b"../sizes"),
        ("to-dir-slash", b"../dirs/small-3/"),
        ("absolute", b"/usr/bin"),
        ("dot", b"."),
        ("dotdot", b".."),
        ("loop", b"loop"),
        ("chain-a", b"chain-b"),
        ("chain-b", b"chain-c"),
        ("chain-c", b"to-file"),
        ("odd-bytes", b"\xff\xfe non utf8\nnewline"),
        ("spaces", b" a b "),
        ("slashes", b"//a//b//"),
    ];
    for (name, target) in fixed {
        b.symlink(&dir.join(name), target, attrs::symlink(&mut rng))?;
    }
    let to_file = format!("../{}", ladder_path(4096).unwrap_or_default());
    b.symlink(
        &dir.join("to-file"),
        to_file.as_bytes(),
        attrs::symlink(&mut rng),
    )?;
    let max = b.opts.max_symlink_len;
    for len in [
        1usize, 58, 59, 60, 61, 62, 100, 255, 256, 500, 1000, 1023, 1024, 2000, 4000, 4095,
    ] {
        if len > max {
            continue;
        }
        let target = target_of_len(&mut rng, len);
        b.symlink(
            &dir.join(format!("len-{len:04}")),
            &target,
            attrs::symlink(&mut rng),
        )?;
    }
    if max > 0 && max < 4000 {
        let target = target_of_len(&mut rng, max);
        b.symlink(
            &dir.join(format!("len-max-{max}")),
            &target,
            attrs::symlink(&mut rng),
        )?;
    }
    if b.opts.xattrs {
        let path = dir.join("with-xattr");
        b.symlink(&path, b"short", attrs::symlink(&mut rng))?;
        b.xattrs(
            &path,
            &[(b"trusted.symlink".to_vec(), b"on a link".to_vec())],
        )?;
    }
    Ok(())
}

fn file(b: &mut Builder, rng: &mut Rng, rel: &Path, len: u64) -> io::Result<()> {
    let a = attrs::file(rng);
    let len = len.min(b.opts.max_file_size);
    b.file(rel, Content::Random, len, rng, a)
}

/// `hardlinks/`: one inode under three names in three directories, two names in one
/// directory, twenty names, an empty file, a file with xattrs, a symlink, a fifo and a
/// device linked, and links reaching into other top-level directories.
pub(super) fn hardlinks(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("hardlinks");
    let top = PathBuf::from("hardlinks");
    b.mkdir(&top, attrs::dir(&mut rng))?;
    for d in ["a", "b", "c"] {
        b.mkdir(&top.join(d), attrs::dir(&mut rng))?;
    }
    let three = top.join("a/three");
    file(b, &mut rng, &three, 5000)?;
    b.hardlink(&three, &top.join("b/three-again"))?;
    b.hardlink(&three, &top.join("c/three-third"))?;

    let pair = top.join("a/pair-1");
    file(b, &mut rng, &pair, 70_000)?;
    b.hardlink(&pair, &top.join("a/pair-2"))?;

    let many = top.join("many-00");
    file(b, &mut rng, &many, 100)?;
    for i in 1..20 {
        let d = ["a", "b", "c", ""][i % 4];
        b.hardlink(&many, &top.join(d).join(format!("many-{i:02}")))?;
    }

    let empty = top.join("b/empty");
    file(b, &mut rng, &empty, 0)?;
    b.hardlink(&empty, &top.join("c/empty-too"))?;

    let sym = top.join("symlink");
    b.symlink(&sym, b"a/three", attrs::symlink(&mut rng))?;
    if b.opts.hardlinked_symlinks {
        b.hardlink(&sym, &top.join("symlink-linked"))?;
    }

    // Into other sections, when they exist.
    let ladder_64k = ladder_path(65536).unwrap_or_default();
    for (src, dst) in [
        ("special/fifo-0", "fifo-linked"),
        ("special/char-1-3", "char-linked"),
        ("xattrs/shared-0", "shared-xattrs-linked"),
        (ladder_64k.as_str(), "c/size-64k-linked"),
    ] {
        let src = Path::new(src);
        if !src.as_os_str().is_empty() && std::fs::symlink_metadata(b.abs(src)).is_ok() {
            b.hardlink(src, &top.join(dst))?;
        }
    }
    // A file here with a second name in dirs/.
    let cross = top.join("a/cross");
    file(b, &mut rng, &cross, 4096)?;
    b.hardlink(&cross, Path::new("dirs/small-0/hardlink-from-hardlinks"))?;
    Ok(())
}
