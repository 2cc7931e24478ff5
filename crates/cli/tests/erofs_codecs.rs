//! EROFS with MicroLZMA, DEFLATE and Zstandard against their oracles.
//!
//! 1. `usfs mkfs.erofs -z lzma|deflate|zstd` with 4 KiB and 64 KiB pclusters, plain and
//!    with ztailpacking and fragments, on a small tree (compressible text, random data,
//!    tiny files, multi-MiB text and zeros): the kernel's mount equals the source, `usfs
//!    export` equals it too, `usfs fsck` finds it clean, and (when the local erofs-utils
//!    1.9.3 build is there) `fsck.erofs --extract` of 1.9.3 extracts the source.
//!    fsck.erofs 1.5 knows only LZ4, so it is not asked.
//! 2. usfs reads images mkfs.erofs 1.9.3 makes with each algorithm it was built with.
//! 3. A damaged pcluster of each algorithm is a clear error (exit 1 from `usfs cat` and
//!    `usfs fsck`, `<E>` and the pcluster named), never a panic; the kernel agrees (EIO or
//!    EFSCORRUPTED).
//!
//! The erofs-utils 1.9.3 build is looked for in `$EROFS_UTILS_193` (default
//! /tmp/erofs-utils-1.9.3): its `mkfs/mkfs.erofs` and `fsck/fsck.erofs`.

mod common;

use common::erofs::{noise, vs_source, ErofsMount};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use usfs_testkit::{compare, CmpOptions, TimeGranularity};

/// The local erofs-utils 1.9.3 tool `rel` (`mkfs/mkfs.erofs`, `fsck/fsck.erofs`), when
/// built; a visible SKIP line otherwise.
fn erofs_utils_193(test: &str, rel: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("EROFS_UTILS_193")
        .map_or_else(|| PathBuf::from("/tmp/erofs-utils-1.9.3"), PathBuf::from);
    let p = dir.join(rel);
    if p.is_file() {
        Some(p)
    } else {
        eprintln!(
            "SKIP {test} (1.9.3 part): no {} (set EROFS_UTILS_193)",
            p.display()
        );
        None
    }
}

/// Does the 1.9.3 mkfs.erofs know algorithm `alg` (its --help lists it)?
fn mkfs_193_knows(mkfs: &Path, alg: &str) -> bool {
    mkfs_193_help(mkfs).lines().any(|l| l.trim() == alg)
}

/// mkfs.erofs 1.9.3's --help text (standard output and error).
fn mkfs_193_help(mkfs: &Path) -> String {
    let o = Command::new(mkfs).arg("--help").output().unwrap();
    String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
}

/// Text that compresses (lines with counters and a few words).
fn text(seed: u64, len: usize) -> Vec<u8> {
    let words = [
        "erofs", "pcluster", "lzma", "deflate", "zstd", "kernel", "image", "tree",
    ];
    let mut v = Vec::with_capacity(len + 64);
    let mut i = seed;
    while v.len() < len {
        i = i
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let w = words[(i >> 60) as usize % words.len()];
        v.extend_from_slice(format!("{w} {} line {}\n", (i >> 40) % 1000, v.len() / 7).as_bytes());
    }
    v.truncate(len);
    v
}

/// The source tree: compressible text of many sizes, random data, tiny files, a 3 MiB
/// text file, 5 MiB of zeros, a file half text half noise, a symlink, empty file and dir.
fn make_tree(s: &Scratch) -> PathBuf {
    let src = s.path("src");
    let w = |rel: &str, data: &[u8]| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    };
    for (k, len) in [
        100, 1000, 4095, 4096, 4097, 9000, 20_000, 65_536, 70_000, 300_000,
    ]
    .iter()
    .enumerate()
    {
        w(&format!("text/t{k}.txt"), &text(k as u64, *len));
    }
    for k in 0..40 {
        w(
            &format!("tiny/f{k}"),
            &text(100 + k, 1 + (k as usize * 37) % 300),
        );
    }
    w("rand.bin", &noise(7, 300_000));
    w("big.log", &text(9, 3 << 20));
    w("zeros", &vec![0u8; 5 << 20]);
    let mut mixed = text(11, 200_000);
    mixed.extend_from_slice(&noise(12, 100_000));
    mixed.extend_from_slice(&text(13, 50_000));
    w("mixed", &mixed);
    w("empty", b"");
    std::fs::create_dir_all(src.join("emptydir")).unwrap();
    std::os::unix::fs::symlink("text/t1.txt", src.join("link")).unwrap();
    src
}

/// `usfs fsck IMG` is clean.
fn usfs_fsck_clean(img: &Path, test: &str) {
    let o = Command::new(usfs()).arg("fsck").arg(img).output().unwrap();
    assert!(
        o.status.success(),
        "{test}: usfs fsck: {}\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `usfs export` of the image equals `src` (compared as `cmp` says).
fn usfs_reads_source(img: &Path, src: &Path, cmp: &CmpOptions, s: &Scratch, test: &str) {
    let out = s.path("export");
    let _ = std::fs::remove_dir_all(&out);
    let o = run_ok(Command::new(usfs()).arg("export").arg(img).arg(&out));
    assert!(
        o.stderr.is_empty(),
        "{test}: export warned: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    if let Err(d) = compare(src, &out, cmp) {
        panic!("{test}: usfs export differs from the source: {d}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// fsck.erofs 1.9.3 `--extract=DIR` accepts the image and extracts the source's contents.
/// With fragments, 1.9.3's `--extract=DIR` fails on its own images too ("failed to
/// verify packed file": it opens the packed inode's path in DIR), so there only
/// `--extract` (decode every file, write nothing) is asked.
fn fsck_193_extracts(fsck: &Path, img: &Path, src: &Path, s: &Scratch, test: &str, to_dir: bool) {
    let dir = s.path("fsck-out");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let o = Command::new(fsck)
        .arg(if to_dir {
            format!("--extract={}", dir.display())
        } else {
            "--extract".to_string()
        })
        .arg(img)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && !text.contains("<E>"),
        "{test}: fsck.erofs 1.9.3 --extract: {}\n{text}",
        o.status
    );
    if !to_dir {
        eprintln!("{test}: fsck.erofs 1.9.3 --extract (no DIR: fragments) accepts it");
        return;
    }
    let d = Command::new("diff")
        .args(["-r", "--no-dereference"])
        .arg(src)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        d.status.success(),
        "{test}: fsck.erofs 1.9.3 extracted other contents:\n{}",
        String::from_utf8_lossy(&d.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn run_usfs_case(name: &str, args: &[&str]) {
    let test = format!("codecs-usfs-{name}");
    if !need_root(&test) {
        return;
    }
    let s = Scratch::new(&test);
    let src = make_tree(&s);
    let img = s.path("image");
    run_ok(
        Command::new(usfs())
            .args(["mkfs.erofs", "--quiet", "--workers", "2"])
            .args(args)
            .arg(&img)
            .arg(&src),
    );
    eprintln!("{test}: {} bytes", std::fs::metadata(&img).unwrap().len());
    {
        let m = ErofsMount::new(&img, &s.path("mnt"));
        if let Err(d) = compare(&src, &m.dir, &vs_source()) {
            panic!("{test}: kernel mount differs from the source: {d}");
        }
    }
    usfs_reads_source(&img, &src, &vs_source(), &s, &test);
    usfs_fsck_clean(&img, &test);
    let (Some(fsck), Some(mkfs)) = (
        erofs_utils_193(&test, "fsck/fsck.erofs"),
        erofs_utils_193(&test, "mkfs/mkfs.erofs"),
    ) else {
        return;
    };
    // The same build's mkfs lists the algorithms its fsck decodes.
    let alg = args[0].trim_start_matches("-z").split(',').next().unwrap();
    if mkfs_193_knows(&mkfs, alg) {
        let to_dir = !args.iter().any(|a| a.contains("fragments"));
        fsck_193_extracts(&fsck, &img, &src, &s, &test, to_dir);
    } else {
        eprintln!("SKIP {test} (fsck.erofs 1.9.3): the local build has no {alg}");
    }
}

macro_rules! usfs_cases {
    ($($f:ident: [$($a:literal),*];)*) => {
        $(
            #[test]
            fn $f() {
                run_usfs_case(stringify!($f), &[$($a),*]);
            }
        )*
    };
}

usfs_cases! {
    lzma: ["-zlzma"];
    lzma_big: ["-zlzma", "-C65536"];
    lzma_ztailpacking: ["-zlzma,level=9", "-Eztailpacking"];
    lzma_fragments: ["-zlzma", "-Efragments"];
    lzma_big_ztailpacking_fragments: ["-zlzma,109", "-C65536", "-Eztailpacking,fragments"];
    deflate: ["-zdeflate"];
    deflate_big: ["-zdeflate", "-C65536"];
    deflate_ztailpacking: ["-zdeflate,level=1", "-Eztailpacking"];
    deflate_fragments: ["-zdeflate,9", "-Efragments"];
    deflate_big_ztailpacking_fragments: ["-zdeflate", "-C65536", "-Eztailpacking,fragments"];
    zstd: ["-zzstd"];
    zstd_big: ["-zzstd", "-C65536"];
    zstd_ztailpacking: ["-zzstd,level=19", "-Eztailpacking"];
    zstd_fragments: ["-zzstd", "-Efragments"];
    zstd_big_ztailpacking_fragments: ["-zzstd,12", "-C65536", "-Eztailpacking,fragments"];
}

/// usfs reads (export, fsck) what mkfs.erofs 1.9.3 writes with algorithm `alg`.
fn run_193_case(name: &str, alg: &str, args: &[&str]) {
    let test = format!("codecs-193-{name}");
    let Some(mkfs) = erofs_utils_193(&test, "mkfs/mkfs.erofs") else {
        return;
    };
    if !mkfs_193_knows(&mkfs, alg) {
        eprintln!("SKIP {test}: the local mkfs.erofs 1.9.3 was built without {alg}");
        return;
    }
    let s = Scratch::new(&test);
    let src = make_tree(&s);
    let img = s.path("image");
    // (A build without multithreading has no --workers.)
    let workers = mkfs_193_help(&mkfs).contains("--workers");
    run_ok(
        Command::new(&mkfs)
            .arg("--quiet")
            .args(workers.then_some("--workers=2"))
            .arg(format!("-z{alg}"))
            .args(args)
            .arg(&img)
            .arg(&src),
    );
    // mkfs.erofs 1.9.3 keeps whole seconds (compact inodes with a build time of the
    // newest mtime).
    let cmp = CmpOptions {
        time_granularity: TimeGranularity::Second,
        ..vs_source()
    };
    usfs_reads_source(&img, &src, &cmp, &s, &test);
    usfs_fsck_clean(&img, &test);
}

macro_rules! cases_193 {
    ($($f:ident: $alg:literal [$($a:literal),*];)*) => {
        $(
            #[test]
            fn $f() {
                run_193_case(stringify!($f), $alg, &[$($a),*]);
            }
        )*
    };
}

cases_193! {
    read_193_lzma: "lzma" [];
    read_193_lzma_big_packed: "lzma" ["-C65536", "-Eztailpacking,fragments"];
    read_193_deflate: "deflate" [];
    read_193_deflate_big_packed: "deflate" ["-C65536", "-Eztailpacking,fragments"];
    read_193_zstd: "zstd" [];
    read_193_zstd_big_packed: "zstd" ["-C65536", "-Eztailpacking,fragments"];
}

/// A damaged pcluster of each algorithm: `usfs cat` and `usfs fsck` fail with a clear
/// message naming the damage, never a panic; the kernel returns EIO or EFSCORRUPTED.
#[test]
fn damaged_pcluster_is_a_clear_error() {
    let test = "codecs-damage";
    let s = Scratch::new(test);
    // One file and nothing else: its first pcluster is block 1 (after block 0 with the
    // superblock; no shared xattrs).
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("big.txt"), text(5, 1 << 20)).unwrap();
    for alg in ["lz4hc", "lzma", "deflate", "zstd"] {
        let img = s.path(&format!("{alg}.img"));
        run_ok(
            Command::new(usfs())
                .args(["mkfs.erofs", "--quiet", "-x", "-1"])
                .arg(format!("-z{alg}"))
                .arg(&img)
                .arg(&src),
        );
        // Keep only the last two bytes of the pcluster's stream: the rest reads as zero
        // padding, and two bytes cannot decode to 4 KiB or more in any of the formats.
        let mut b = std::fs::read(&img).unwrap();
        assert!(
            b[4096..8190].iter().any(|&x| x != 0),
            "{alg}: block 1 is not data"
        );
        b[4096..8190].fill(0);
        std::fs::write(&img, &b).unwrap();
        let cat = Command::new(usfs())
            .arg("cat")
            .arg(&img)
            .arg("/big.txt")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&cat.stderr);
        assert_eq!(cat.status.code(), Some(1), "{alg}: usfs cat: {err}");
        assert!(!err.contains("panicked"), "{alg}: {err}");
        assert!(err.contains("pcluster at byte 4096"), "{alg}: {err}");
        let fsck = Command::new(usfs()).arg("fsck").arg(&img).output().unwrap();
        let ferr = String::from_utf8_lossy(&fsck.stderr);
        assert_eq!(fsck.status.code(), Some(1), "{alg}: usfs fsck: {ferr}");
        assert!(
            !ferr.contains("panicked") && ferr.contains("<E>"),
            "{alg}: {ferr}"
        );
        eprintln!("{alg}: usfs cat: {}", err.trim());
        if need_root(test) {
            let m = ErofsMount::new(&img, &s.path("mnt"));
            let r = std::fs::read(m.dir.join("big.txt"));
            let e = r.expect_err("the kernel read a damaged pcluster");
            // EIO, or EFSCORRUPTED (EUCLEAN) where the kernel's decoder says corrupt.
            assert!(
                [Some(libc::EIO), Some(libc::EUCLEAN)].contains(&e.raw_os_error()),
                "{alg}: kernel: {e}"
            );
            eprintln!("{alg}: kernel: {e}");
        }
    }
}

/// `-z` spellings and ranges as mkfs.erofs 1.9.3's.
#[test]
fn compressor_options() {
    let s = Scratch::new("codecs-options");
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a"), text(1, 50_000)).unwrap();
    let img = s.path("img");
    let run = |z: &str| {
        Command::new(usfs())
            .args(["mkfs.erofs", "--quiet"])
            .arg(z)
            .arg(&img)
            .arg(&src)
            .output()
            .unwrap()
    };
    for ok in [
        "-zlzma",
        "-zlzma,0",
        "-zlzma,level=109",
        "-zdeflate,level=0",
        "-zdeflate,12",
        "-zzstd,0",
        "-zzstd,level=22",
    ] {
        let o = run(ok);
        assert!(
            o.status.success(),
            "{ok}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    for bad in [
        "-zlzma,10",
        "-zlzma,110",
        "-zdeflate,13",
        "-zzstd,23",
        "-zzstd,x",
        "-zxz",
    ] {
        let o = run(bad);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{bad}: {err}");
        assert!(err.contains("mkfs.erofs: "), "{bad}: {err}");
    }
}

/// `-z lz4hc:lzma --compress-hints`: the first rule a file's relative path matches
/// gives its pcluster size and algorithm (`text/`: MicroLZMA with 64 KiB pclusters),
/// size 0 leaves it uncompressed (`big.log`), the rest take `-C` and the first
/// algorithm. The kernel and usfs read the source back, dump.erofs 1.5 sees each
/// file's layout, and the image differs from one built without the hints.
#[test]
fn compression_hints_choose_the_algorithm_per_file() {
    let test = "codecs-hints";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = make_tree(&s);
    let hints = s.path("hints");
    std::fs::write(
        &hints,
        "# pcluster [algorithm] expression\n65536 1 ^text/\n0 ^big\\.log$\n",
    )
    .unwrap();
    let build = |img: &Path, extra: &[&str]| {
        run_ok(
            Command::new(usfs())
                .args(["mkfs.erofs", "--quiet", "-zlz4hc:lzma"])
                .args(extra)
                .arg(img)
                .arg(&src),
        );
    };
    let img = s.path("hinted");
    build(&img, &[&format!("--compress-hints={}", hints.display())]);
    {
        let m = ErofsMount::new(&img, &s.path("mnt"));
        if let Err(d) = compare(&src, &m.dir, &vs_source()) {
            panic!("{test}: kernel mount differs from the source: {d}");
        }
    }
    usfs_reads_source(&img, &src, &vs_source(), &s, test);
    usfs_fsck_clean(&img, test);
    let layout = |path: &str| {
        let o = Command::new("dump.erofs")
            .arg(format!("--path={path}"))
            .arg(&img)
            .output()
            .unwrap();
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        t.split("Layout: ").nth(1).and_then(|r| r.chars().next())
    };
    if need_tool(test, "dump.erofs") {
        // (0/2: flat; 1/3: compressed.)
        assert!(
            matches!(layout("/big.log"), Some('0' | '2')),
            "big.log stays plain"
        );
        assert!(matches!(layout("/text/t9.txt"), Some('1' | '3')));
        assert!(matches!(layout("/mixed"), Some('1' | '3')));
    }
    let plain = s.path("plain");
    build(&plain, &[]);
    assert_ne!(
        std::fs::read(&img).unwrap(),
        std::fs::read(&plain).unwrap(),
        "the hints changed nothing"
    );
    let bad = s.path("bad-hints");
    std::fs::write(&bad, "65536 5 x\n").unwrap();
    let o = Command::new(usfs())
        .args(["mkfs.erofs", "-zlz4hc"])
        .arg(format!("--compress-hints={}", bad.display()))
        .arg(s.path("bad.img"))
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("algorithm 5"));
}
