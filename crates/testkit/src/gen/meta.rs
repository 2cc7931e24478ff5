//! Metadata showcases: `xattrs/`, `modes/`, `owners/` and `times/`.

use std::io;
use std::path::{Path, PathBuf};

use super::attrs::{self, Attrs, DIR_MODES, EDGE_TIMES, FILE_MODES, OWNERS};
use super::builder::Builder;
use crate::content::{self, Content};
use crate::names;
use crate::rng::Rng;

type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// The largest xattr value Linux accepts.
const XATTR_SIZE_MAX: usize = 65536;

fn small_file(b: &mut Builder, rel: &Path, rng: &mut Rng, a: Attrs) -> io::Result<()> {
    let len = rng.range(0, 64);
    b.file(rel, Content::Text, len, rng, a)
}

fn x(name: &str, value: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (name.as_bytes().to_vec(), value.to_vec())
}

/// `xattrs/`: small values in the user., trusted. and security. namespaces, an empty and a
/// binary value, one value of `max_xattr_size` bytes (too big for the inode), forty names
/// on one file, a 255-byte name, five files with the identical set (ext4 shares the
/// block), and a directory with xattrs.
pub(super) fn xattrs(b: &mut Builder) -> io::Result<()> {
    if !b.opts.xattrs {
        return Ok(());
    }
    let mut rng = b.rng("xattrs");
    let dir = PathBuf::from("xattrs");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    b.xattrs(&dir, &[x("user.dir", b"on a directory")])?;
    let max = b.opts.max_xattr_size.min(XATTR_SIZE_MAX);
    let big = content::random_bytes(&mut rng, max);
    let shared_big = content::random_bytes(&mut rng, max.min(1500));
    let mut long_name = b"user.".to_vec();
    long_name.resize(255, b'n');
    let many: Xattrs = (0..40)
        .map(|i| {
            (
                format!("user.many-{i:02}").into_bytes(),
                names::plain(&mut rng, 8, 20),
            )
        })
        .collect();
    let shared: Xattrs = vec![
        x("user.shared", b"same for all"),
        x("trusted.shared", &[0x5a; 32]),
        x("security.shared", b"sec"),
        x("user.shared-big", &shared_big),
    ];
    let mut files: Vec<(String, Xattrs)> = vec![
        (
            "small".into(),
            vec![
                x("user.a", b"1"),
                x("user.empty", b""),
                x("trusted.t", b"trusted value"),
                x("security.s", b"security value"),
                x("user.bin", &[0, 1, 2, 0, 255]),
            ],
        ),
        (
            "big".into(),
            vec![x("user.big", &big), x("user.after-big", b"x")],
        ),
        ("many".into(), many),
        ("long-name".into(), vec![(long_name, b"v".to_vec())]),
        ("only-trusted".into(), vec![x("trusted.only", b"t")]),
        ("only-security".into(), vec![x("security.only", b"s")]),
    ];
    for i in 0..5 {
        files.push((format!("shared-{i}"), shared.clone()));
    }
    for (name, list) in files {
        let path = dir.join(name);
        let a = attrs::file(&mut rng);
        small_file(b, &path, &mut rng, a)?;
        b.xattrs(&path, &list)?;
    }
    let sub = dir.join("dir-with-xattrs");
    b.mkdir(&sub, attrs::dir(&mut rng))?;
    b.xattrs(
        &sub,
        &[
            x("user.d", b"dir"),
            x("trusted.d", &big[..big.len().min(200)]),
        ],
    )?;
    Ok(())
}

fn fixed(rng: &mut Rng, perm: u32, uid: u32, gid: u32) -> Attrs {
    Attrs {
        perm,
        uid,
        gid,
        atime: attrs::time(rng),
        mtime: attrs::time(rng),
    }
}

/// `modes/`: a file for every mode of the file pool (setuid, setgid, sticky included) and
/// a directory, holding one file, for every directory mode.
pub(super) fn modes(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("modes");
    let dir = PathBuf::from("modes");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    for &perm in FILE_MODES {
        let a = fixed(&mut rng, perm, 0, 0);
        small_file(b, &dir.join(format!("file-{perm:04o}")), &mut rng, a)?;
    }
    for &perm in DIR_MODES {
        let sub = dir.join(format!("dir-{perm:04o}"));
        b.mkdir(&sub, fixed(&mut rng, perm, 0, 0))?;
        let a = attrs::file(&mut rng);
        small_file(b, &sub.join("inside"), &mut rng, a)?;
    }
    Ok(())
}

/// `owners/`: a file, a directory and a symlink for every owner of the pool (0, 16-bit
/// edges, 65534, 100000, 4000000000).
pub(super) fn owners(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("owners");
    let dir = PathBuf::from("owners");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    for &(uid, gid) in OWNERS {
        let a = fixed(&mut rng, 0o640, uid, gid);
        small_file(b, &dir.join(format!("file-{uid}-{gid}")), &mut rng, a)?;
        b.mkdir(
            &dir.join(format!("dir-{uid}-{gid}")),
            fixed(&mut rng, 0o750, uid, gid),
        )?;
        let target = format!("file-{uid}-{gid}");
        b.symlink(
            &dir.join(format!("link-{uid}-{gid}")),
            target.as_bytes(),
            fixed(&mut rng, 0o777, uid, gid),
        )?;
    }
    Ok(())
}

/// `times/`: files, directories and symlinks with every edge timestamp (before 1970, the
/// epoch, 2038, 2040, 2106, 2446) as atime and mtime.
pub(super) fn times(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("times");
    let dir = PathBuf::from("times");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    let n = EDGE_TIMES.len();
    for i in 0..n {
        let (t, other) = (EDGE_TIMES[i], EDGE_TIMES[(i + 5) % n]);
        let a = Attrs {
            atime: other,
            mtime: t,
            ..attrs::file(&mut rng)
        };
        small_file(b, &dir.join(format!("file-{i:02}")), &mut rng, a)?;
        let a = Attrs {
            atime: t,
            mtime: t,
            ..attrs::file(&mut rng)
        };
        small_file(b, &dir.join(format!("same-{i:02}")), &mut rng, a)?;
        let sub = dir.join(format!("dir-{i:02}"));
        b.mkdir(
            &sub,
            Attrs {
                atime: other,
                mtime: t,
                ..attrs::dir(&mut rng)
            },
        )?;
        let a = attrs::file(&mut rng);
        small_file(b, &sub.join("inside"), &mut rng, a)?;
        let a = Attrs {
            atime: t,
            mtime: other,
            ..attrs::symlink(&mut rng)
        };
        b.symlink(&dir.join(format!("link-{i:02}")), b"inside", a)?;
    }
    Ok(())
}
