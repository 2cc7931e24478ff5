//! Generate trees, compare them, and check that each kind of change is reported.

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use usfs_testkit::sys::{set_times, Timespec};
use usfs_testkit::{
    compare, generate, xattr, CmpOptions, DiffKind, GenOptions, Profile, TempDir, TimeGranularity,
};

/// Two trees generated with the same seed: the small profile with a smaller big
/// directory (inode churn makes the host's ext4 slow to allocate inodes).
fn pair(seed: u64) -> (TempDir, PathBuf, PathBuf) {
    let mut opts = GenOptions::new(Profile::Small, seed);
    opts.big_dir_entries = 200;
    pair_with(&opts)
}

fn pair_with(opts: &GenOptions) -> (TempDir, PathBuf, PathBuf) {
    let tmp = TempDir::new("roundtrip").unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let ra = generate(&a, opts).unwrap();
    let rb = generate(&b, opts).unwrap();
    assert_eq!(ra, rb);
    (tmp, a, b)
}

fn times_of(p: &Path) -> (Timespec, Timespec) {
    let m = fs::symlink_metadata(p).unwrap();
    (
        Timespec::new(m.atime(), m.atime_nsec() as u32),
        Timespec::new(m.mtime(), m.mtime_nsec() as u32),
    )
}

/// Runs `f`, then puts back the times of `paths` (the change itself stays).
fn keeping_times(paths: &[&Path], f: impl FnOnce()) {
    let saved: Vec<_> = paths.iter().map(|p| times_of(p)).collect();
    f();
    for (p, (at, mt)) in paths.iter().zip(saved) {
        set_times(p, at, mt).unwrap();
    }
}

/// The first name in `dir` starting with `prefix`.
fn find(dir: &Path, prefix: &str) -> PathBuf {
    // Listed without touching the directory's atime.
    let mut names = usfs_testkit::sys::read_dir_names(dir, false).unwrap();
    names.sort();
    let name = names
        .into_iter()
        .find(|n| n.starts_with(prefix.as_bytes()))
        .unwrap_or_else(|| panic!("no {prefix}* in {}", dir.display()));
    dir.join(std::ffi::OsStr::from_bytes(&name))
}

fn diff(a: &Path, b: &Path, opts: &CmpOptions) -> usfs_testkit::Difference {
    compare(a, b, opts).expect_err("trees should differ")
}

#[test]
fn same_seed_gives_equal_trees() {
    let (_tmp, a, b) = pair_with(&GenOptions::new(Profile::Small, 11));
    let stats = compare(&a, &b, &CmpOptions::default()).unwrap();
    assert!(stats.entries > 3500, "{stats}");
    assert!(
        stats.hardlinks > 20 && stats.xattrs > 50 && stats.bytes_skipped > 0,
        "{stats}"
    );
    // Comparing again gives the same answer: the first comparison did not disturb atimes.
    compare(&a, &b, &CmpOptions::default()).unwrap();
}

#[test]
fn different_seeds_differ() {
    let tmp = TempDir::new("seeds").unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut opts = GenOptions::new(Profile::Small, 1);
    opts.big_dir_entries = 10;
    generate(&a, &opts).unwrap();
    opts.seed = 2;
    generate(&b, &opts).unwrap();
    compare(&a, &b, &CmpOptions::default()).unwrap_err();
}

#[test]
fn one_byte_is_found() {
    let (_tmp, a, b) = pair(12);
    let f = find(&b.join("sizes"), "size-00065537");
    keeping_times(&[&f], || {
        let mut data = fs::read(&f).unwrap();
        data[40_000] ^= 0x55;
        fs::write(&f, &data).unwrap();
    });
    let d = diff(&a, &b, &CmpOptions::default());
    assert_eq!(d.kind, DiffKind::Content, "{d}");
    assert!(d.path.ends_with(f.file_name().unwrap()), "{d}");
    assert!(d.a.contains("offset 40000"), "{d}");
}

#[test]
fn mode_uid_and_symlink_target_are_found() {
    let (_tmp, a, b) = pair(13);
    let f = b.join("modes/file-4755");
    fs::set_permissions(&f, fs::Permissions::from_mode(0o755)).unwrap();
    let d = diff(&a, &b, &CmpOptions::default());
    assert_eq!(
        (d.kind.clone(), d.a.as_str(), d.b.as_str()),
        (DiffKind::Mode, "4755", "0755"),
        "{d}"
    );
    assert_eq!(d.path, Path::new("modes/file-4755"));
    fs::set_permissions(&f, fs::Permissions::from_mode(0o4755)).unwrap();
    compare(&a, &b, &CmpOptions::default()).unwrap();

    let o = b.join("owners/file-1000-1000");
    std::os::unix::fs::lchown(&o, Some(1001), None).unwrap();
    assert_eq!(diff(&a, &b, &CmpOptions::default()).kind, DiffKind::Uid);
    std::os::unix::fs::lchown(&o, Some(1000), None).unwrap();

    let l = b.join("links/dangling");
    let meta = fs::symlink_metadata(&l).unwrap();
    keeping_times(&[&b.join("links")], || {
        fs::remove_file(&l).unwrap();
        std::os::unix::fs::symlink("does/not/exisT", &l).unwrap();
    });
    std::os::unix::fs::lchown(&l, Some(meta.uid()), Some(meta.gid())).unwrap();
    set_times(
        &l,
        Timespec::new(meta.atime(), meta.atime_nsec() as u32),
        Timespec::new(meta.mtime(), meta.mtime_nsec() as u32),
    )
    .unwrap();
    let d = diff(&a, &b, &CmpOptions::default());
    assert_eq!(d.kind, DiffKind::SymlinkTarget, "{d}");
}

#[test]
fn xattr_changes_are_found() {
    let (_tmp, a, b) = pair(14);
    let f = b.join("xattrs/small");
    xattr::set(&f, b"user.a", b"2").unwrap();
    let d = diff(&a, &b, &CmpOptions::default());
    assert_eq!(d.kind, DiffKind::XattrValue("user.a".into()), "{d}");
    assert_eq!(d.path, Path::new("xattrs/small"));
    // With xattrs off the trees are equal.
    let no_x = CmpOptions {
        xattrs: false,
        ..CmpOptions::default()
    };
    compare(&a, &b, &no_x).unwrap();
    xattr::set(&f, b"user.a", b"1").unwrap();
    xattr::set(&f, b"trusted.extra", b"").unwrap();
    let d = diff(&a, &b, &CmpOptions::default());
    assert_eq!(d.kind, DiffKind::XattrNames, "{d}");
    assert!(d.b.contains("has trusted.extra"), "{d}");
    xattr::remove(&f, b"trusted.extra").unwrap();
    compare(&a, &b, &CmpOptions::default()).unwrap();
}

#[test]
fn one_nanosecond_of_mtime_is_found() {
    let (_tmp, a, b) = pair(15);
    let f = b.join("times/file-11");
    let (at, mt) = times_of(&f);
    assert!(mt.nsec < 999_999_999);
    set_times(&f, at, Timespec::new(mt.sec, mt.nsec + 1)).unwrap();
    let d = diff(&a, &b, &CmpOptions::default());
    assert_eq!(d.kind, DiffKind::Mtime, "{d}");
    let secs = CmpOptions {
        time_granularity: TimeGranularity::Second,
        ..CmpOptions::default()
    };
    compare(&a, &b, &secs).unwrap();

    // Before 1970 seconds are floored: -0.5 s and -1 s are the same second.
    let g = b.join("times/file-00");
    let (at, mt) = times_of(&g);
    assert_eq!(mt, Timespec::new(-1, 500_000_000));
    set_times(&g, at, Timespec::new(-1, 0)).unwrap();
    compare(&a, &b, &secs).unwrap();
    let d = diff(&a, &b, &CmpOptions::default());
    assert_eq!(
        (d.kind.clone(), d.path.as_path()),
        (DiffKind::Mtime, Path::new("times/file-00")),
        "{d}"
    );
}

#[test]
fn broken_hard_link_is_found() {
    let (_tmp, a, b) = pair(16);
    let dir = b.join("hardlinks/b");
    let f = dir.join("three-again");
    let meta = fs::symlink_metadata(&f).unwrap();
    keeping_times(&[&dir], || {
        let tmp = dir.join("copy");
        fs::copy(&f, &tmp).unwrap();
        fs::rename(&tmp, &f).unwrap();
    });
    std::os::unix::fs::lchown(&f, Some(meta.uid()), Some(meta.gid())).unwrap();
    fs::set_permissions(&f, fs::Permissions::from_mode(meta.mode() & 0o7777)).unwrap();
    set_times(
        &f,
        Timespec::new(meta.atime(), meta.atime_nsec() as u32),
        Timespec::new(meta.mtime(), meta.mtime_nsec() as u32),
    )
    .unwrap();
    let d = diff(&a, &b, &CmpOptions::default());
    assert!(
        matches!(d.kind, DiffKind::Nlink | DiffKind::HardLink),
        "{d}"
    );
    assert!(d.path.starts_with("hardlinks"), "{d}");
}

#[test]
fn hard_link_structure_with_equal_counts() {
    let tmp = TempDir::new("links").unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for (root, pairs) in [
        (&a, [("w", "x"), ("y", "z")]),
        (&b, [("w", "y"), ("x", "z")]),
    ] {
        fs::create_dir(root).unwrap();
        for (first, second) in pairs {
            fs::write(root.join(first), b"same").unwrap();
            fs::hard_link(root.join(first), root.join(second)).unwrap();
        }
        for n in ["w", "x", "y", "z"] {
            set_times(&root.join(n), Timespec::new(1, 1), Timespec::new(2, 2)).unwrap();
        }
        set_times(root, Timespec::new(1, 1), Timespec::new(2, 2)).unwrap();
    }
    let d = diff(&a, &b, &CmpOptions::default());
    assert_eq!(d.kind, DiffKind::HardLink, "{d}");
    assert_eq!(d.path, Path::new("x"));
    assert_eq!(d.a, "same inode as w");
}

#[test]
fn extra_names_and_ignores() {
    let (_tmp, a, b) = pair(17);
    keeping_times(&[&b, &b.join("dirs/empty-2")], || {
        fs::create_dir(b.join("lost+found")).unwrap();
        fs::write(b.join("dirs/empty-2/new"), b"").unwrap();
    });
    let d = diff(&a, &b, &CmpOptions::default());
    assert_eq!(
        (d.kind.clone(), d.path.as_path()),
        (DiffKind::OnlyInB, Path::new("lost+found")),
        "{d}"
    );
    let opts = CmpOptions {
        ignore: vec![OsString::from("lost+found")],
        ..CmpOptions::default()
    };
    let d = diff(&a, &b, &opts);
    assert_eq!(
        (d.kind.clone(), d.path.as_path()),
        (DiffKind::OnlyInB, Path::new("dirs/empty-2/new")),
        "{d}"
    );
    fs::remove_file(b.join("dirs/empty-2/new")).unwrap();
    // The removal changed the directory's mtime.
    let d = diff(&a, &b, &opts);
    assert_eq!(
        (d.kind.clone(), d.path.as_path()),
        (DiffKind::Mtime, Path::new("dirs/empty-2")),
        "{d}"
    );
    let opts = CmpOptions {
        ignore_dir_mtime: true,
        ..opts
    };
    compare(&a, &b, &opts).unwrap();
    // Root attributes.
    fs::set_permissions(&b, fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(diff(&a, &b, &opts).path, Path::new("."));
    compare(
        &a,
        &b,
        &CmpOptions {
            ignore_root_attrs: true,
            ..opts
        },
    )
    .unwrap();
}

#[test]
fn generator_refuses_non_empty_dir() {
    let tmp = TempDir::new("nonempty").unwrap();
    fs::write(tmp.path().join("x"), b"").unwrap();
    assert!(generate(tmp.path(), &GenOptions::default()).is_err());
}

#[test]
fn tree_has_the_promised_shapes() {
    let tmp = TempDir::new("shapes").unwrap();
    let root = tmp.path().join("t");
    let mut opts = GenOptions::new(Profile::Small, 5);
    opts.sparse_huge = true;
    opts.big_dir_entries = 3000;
    let report = generate(&root, &opts).unwrap();
    assert_eq!(report.huge_files, 1);
    assert!(report.notes.is_empty(), "{report}");

    let mut seen = [false; 256];
    let (mut max_depth, mut max_link, mut max_name) = (0, 0, 0);
    let mut stack = vec![(root.clone(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        max_depth = max_depth.max(depth);
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name();
            max_name = max_name.max(name.len());
            for &c in name.as_bytes() {
                seen[c as usize] = true;
            }
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push((e.path(), depth + 1));
            } else if t.is_symlink() {
                max_link = max_link.max(fs::read_link(e.path()).unwrap().as_os_str().len());
            }
        }
    }
    for (c, &s) in seen.iter().enumerate().skip(1) {
        assert_eq!(s, c != b'/' as usize, "byte {c:#x}");
    }
    assert!(max_depth >= 30, "depth {max_depth}");
    assert_eq!(max_name, 255);
    assert!(max_link >= 4000);
    assert_eq!(fs::read_dir(root.join("bigdir")).unwrap().count(), 3000);
    let huge = fs::metadata(root.join("huge/sparse-4.5G")).unwrap();
    assert!(huge.len() > 4 << 30 && huge.blocks() < 1000);
    // The huge file compares quickly: its holes are skipped.
    let stats = compare(&root, &root, &CmpOptions::default()).unwrap();
    assert!(stats.bytes_skipped > 4 << 30, "{stats}");
}
