//! Regular files: the size ladder, sparse layouts, the huge sparse file, and the random
//! files of `tree/`.

use std::io;
use std::path::PathBuf;

use super::attrs;
use super::builder::Builder;
use crate::content::Content;
use crate::names;
use crate::rng::Rng;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;

/// Sizes around every boundary an image format cares about: empty, inline-sized,
/// 1K/2K/4K/64K block edges, and a few multi-MiB files.
const LADDER: &[u64] = &[
    0,
    1,
    2,
    3,
    7,
    15,
    59,
    60,
    61,
    100,
    150,
    160,
    200,
    255,
    256,
    511,
    512,
    513,
    KIB - 1,
    KIB,
    KIB + 1,
    2 * KIB - 1,
    2 * KIB,
    2 * KIB + 1,
    4 * KIB - 1,
    4 * KIB,
    4 * KIB + 1,
    8 * KIB,
    12 * KIB + 5,
    64 * KIB - 1,
    64 * KIB,
    64 * KIB + 1,
    128 * KIB + 3,
    MIB - 1,
    MIB,
    MIB + 1,
    2 * MIB + 4 * KIB + 1,
    5 * MIB - 7,
];

/// `sizes/`: one file per ladder size, with a rotating content kind.
pub(super) fn sizes(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("sizes");
    let dir = PathBuf::from("sizes");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    for (i, &size) in LADDER.iter().enumerate() {
        if size > b.opts.max_file_size {
            continue;
        }
        let kind = Content::ALL[i % Content::ALL.len()];
        let name = ladder_name(size, kind);
        let a = attrs::file(&mut rng);
        b.file(&dir.join(name), kind, size, &mut rng, a)?;
    }
    Ok(())
}

fn ladder_name(size: u64, kind: Content) -> String {
    format!("size-{size:08}-{kind:?}").to_lowercase()
}

/// The path of the ladder file of `size` in `sizes/` (it exists unless `size` is over
/// the maximum file size).
pub(super) fn ladder_path(size: u64) -> Option<String> {
    let i = LADDER.iter().position(|&s| s == size)?;
    Some(format!(
        "sizes/{}",
        ladder_name(size, Content::ALL[i % Content::ALL.len()])
    ))
}

/// A sparse layout: name, data segments (offset, length), apparent size.
type Layout = (&'static str, Vec<(u64, u64)>, u64);

fn layouts(b: &Builder, rng: &mut Rng) -> Vec<Layout> {
    let mut v: Vec<Layout> = vec![
        ("hole-at-start", vec![(MIB, 4 * KIB)], MIB + 4 * KIB),
        ("hole-at-end", vec![(0, 4 * KIB)], 4 * MIB),
        (
            "holes-both-ends",
            vec![(256 * KIB, 8 * KIB), (300 * KIB + 123, 1000)],
            2 * MIB + 17,
        ),
        ("all-hole", vec![], MIB + 1),
        (
            "unaligned",
            vec![(5000, 100), (70_000, 3), (MIB - 1, 2)],
            MIB + 1,
        ),
        (
            "partial-tail",
            vec![(8 * KIB, 4 * KIB), (60 * KIB, 5)],
            100 * KIB + 5,
        ),
        ("one-byte-at-end", vec![(3 * MIB - 1, 1)], 3 * MIB),
    ];
    // Many extents: 4 KiB of data every 8 KiB (a deep extent tree), then a hole.
    let n = b.opts.sparse_extents as u64;
    let size = n.saturating_mul(8 * KIB).saturating_add(4 * KIB);
    let many = if size <= b.opts.max_file_size {
        (0..n).map(|i| (i * 8 * KIB, 4 * KIB)).collect()
    } else {
        Vec::new() // left out below, with a note
    };
    v.push(("many-extents", many, size));
    for name in ["random-1", "random-2", "random-3"] {
        let size = rng.range(MIB, 16 * MIB).min(b.opts.max_file_size);
        let mut segs = Vec::new();
        let mut pos = rng.range(1, 64 * KIB);
        while pos < size {
            let len = rng.range(1, 48 * KIB).min(size - pos);
            segs.push((pos, len));
            pos += len + rng.range(4 * KIB, 2 * MIB);
        }
        v.push((name, segs, size));
    }
    v
}

/// `sparse/`: files with holes, including holes at the start and at the end.
pub(super) fn sparse(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("sparse");
    let dir = PathBuf::from("sparse");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    for (name, segs, size) in layouts(b, &mut rng) {
        if size > b.opts.max_file_size {
            b.note(format!(
                "sparse/{name} left out: {size} bytes > max file size"
            ));
            continue;
        }
        let a = attrs::file(&mut rng);
        b.sparse(&dir.join(name), &segs, size, &mut rng, a)?;
    }
    Ok(())
}

/// `huge/sparse-4.5G`: 4.5 GiB apparent size, data near the start, across the 4 GiB
/// boundary and at the very end.
pub(super) fn huge(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("huge");
    let dir = PathBuf::from("huge");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    let size = 4 * GIB + GIB / 2;
    let segs = [
        (8 * KIB, 4 * KIB),
        (4 * GIB - 100, 200),
        (size - 4 * KIB, 4 * KIB),
    ];
    let a = attrs::file(&mut rng);
    b.sparse(&dir.join("sparse-4.5G"), &segs, size, &mut rng, a)
}

/// A random file size: 70% under 4 KiB, 25% under 64 KiB, 5% up to 256 KiB; capped.
fn random_size(rng: &mut Rng, cap: u64) -> u64 {
    let s = match rng.below(20) {
        0..=13 => rng.range(0, 4 * KIB),
        14..=18 => rng.range(4 * KIB, 64 * KIB),
        _ => rng.range(64 * KIB, 256 * KIB),
    };
    s.min(cap)
}

/// `tree/`: `files` random files spread over random nested directories (up to 6 deep),
/// some with xattrs.
pub(super) fn tree(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("tree");
    let top = PathBuf::from("tree");
    b.mkdir(&top, attrs::dir(&mut rng))?;
    let mut dirs: Vec<(PathBuf, usize)> = vec![(top, 0)];
    let ndirs = (b.opts.files / 8).max(1);
    for _ in 0..ndirs {
        let (parent, depth) = dirs[rng.index(dirs.len())].clone();
        if depth >= 6 {
            continue;
        }
        let name = names::mixed(&mut rng, 1, 40);
        let d = b.unique(&parent, &name);
        b.mkdir(&d, attrs::dir(&mut rng))?;
        dirs.push((d, depth + 1));
    }
    for _ in 0..b.opts.files {
        let parent = dirs[rng.index(dirs.len())].0.clone();
        let name = names::mixed(&mut rng, 1, 60);
        let f = b.unique(&parent, &name);
        let size = random_size(&mut rng, b.opts.max_file_size);
        let kind = Content::pick(&mut rng);
        let a = attrs::file(&mut rng);
        b.file(&f, kind, size, &mut rng, a)?;
        if b.opts.xattrs && rng.chance(1, 10) {
            let list = vec![
                (b"user.tree".to_vec(), names::plain(&mut rng, 1, 40)),
                (
                    format!("user.n{}", rng.below(5)).into_bytes(),
                    names::plain(&mut rng, 1, 8),
                ),
            ];
            b.xattrs(&f, &list)?;
        }
    }
    Ok(())
}
