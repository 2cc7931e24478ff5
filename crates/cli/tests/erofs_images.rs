//! EROFS against its oracles.
//!
//! 1. `usfs mkfs.erofs` with every option combination, on generated trees and on a copy of
//!    part of /usr/share: `fsck.erofs --extract` accepts the image (stderr checked too:
//!    1.5 exits 0 on some errors; 1.5 does not know fragments, so those images are checked
//!    by the kernel and usfs only), the kernel mounts it (`mount -t erofs IMAGE DIR`,
//!    no loop device) with a tree equal to the source, and `usfs export` equals both the
//!    source and the kernel's view exactly.
//! 2. usfs reads images made by mkfs.erofs 1.5 with each of its options exactly as the
//!    kernel does.
//! 3. The image does not depend on the number of compression workers.
//! 4. `-E dedupe` shares identical pclusters: smaller images that every oracle reads back.

mod common;

use common::erofs::{gen_tree, noise, usfs_mkfs, vs_source, ErofsMount};
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use usfs_testkit::{compare, CmpOptions};

fn exact() -> CmpOptions {
    CmpOptions {
        system_xattrs: true,
        ..CmpOptions::default()
    }
}

/// `fsck.erofs --extract` must succeed without printing an error.
fn fsck_extract(img: &Path, dir: &Path, test: &str) {
    let o = Command::new("fsck.erofs")
        .arg(format!("--extract={}", dir.display()))
        .arg(img)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && !err.contains("<E>") && !out.contains("<E>"),
        "{test}: fsck.erofs --extract failed ({}):\n{out}\n{err}",
        o.status
    );
}

/// What the image should hold for these mkfs options: `src` itself, or a copy with the
/// owners and times the options force; and how to compare (no xattrs with `-x -1`).
fn expected_source(src: &Path, s: &Scratch, args: &[&str]) -> (PathBuf, CmpOptions) {
    let mut cmp = vs_source();
    let val = |flag: &str| {
        args.windows(2)
            .find(|w| w[0] == flag)
            .map(|w| w[1].to_string())
    };
    if val("-x").as_deref() == Some("-1") {
        cmp.xattrs = false;
    }
    let all_root = args.contains(&"--all-root");
    let (uid, gid, t) = (val("--force-uid"), val("--force-gid"), val("-T"));
    if !all_root && uid.is_none() && gid.is_none() && t.is_none() {
        return (src.to_path_buf(), cmp);
    }
    let exp = s.path("expected");
    let _ = std::fs::remove_dir_all(&exp);
    sh(&format!("cp -a '{}' '{}'", src.display(), exp.display()));
    let e = exp.display();
    if all_root {
        sh(&format!("chown -R -h 0:0 '{e}'"));
    }
    if let Some(u) = uid {
        sh(&format!("chown -R -h {u} '{e}'"));
    }
    if let Some(g) = gid {
        sh(&format!("chgrp -R -h {g} '{e}'"));
    }
    if let Some(t) = t {
        // chown clears set-id bits: the copy got them back from cp -a before, so redo the
        // modes from the source after the owner change.
        sh(&format!("find '{e}' -exec touch -h -d @{t} {{}} +"));
    }
    if all_root || args.contains(&"--force-uid") || args.contains(&"--force-gid") {
        sh(&format!(
            "cd '{}' && find . ! -type l -exec sh -c 'for f; do chmod --reference=\"$f\" \"{e}/$f\"; done' _ {{}} +",
            src.display()
        ));
        if let Some(t) = val("-T") {
            sh(&format!("find '{e}' -exec touch -h -d @{t} {{}} +"));
        } else {
            sh(&format!(
                "cd '{}' && find . -exec sh -c 'for f; do touch -h -m --reference=\"$f\" \"{e}/$f\"; done' _ {{}} +",
                src.display()
            ));
        }
    }
    (exp, cmp)
}

/// Checks an image of `src` against every oracle.
fn check_image(img: &Path, src: &Path, s: &Scratch, test: &str, fsck_ok: bool) {
    check_image_as(img, src, vs_source(), s, test, fsck_ok)
}

fn check_image_as(
    img: &Path,
    src: &Path,
    cmp_src: CmpOptions,
    s: &Scratch,
    test: &str,
    fsck_ok: bool,
) {
    if fsck_ok {
        fsck_extract(img, &s.path("fsck-out"), test);
        // The extracted tree has the contents (fsck.erofs 1.5 does not restore every
        // attribute, so content is what is compared here).
        let o = Command::new("diff")
            .arg("-r")
            .arg("--no-dereference")
            .arg(src)
            .arg(s.path("fsck-out"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let real: Vec<&str> = text
            .lines()
            .filter(|l| {
                !l.contains(" is a fifo")
                    && !l.contains("special file")
                    && !l.contains(" is a socket")
            })
            .collect();
        assert!(
            real.is_empty(),
            "{test}: fsck.erofs extracted other contents:\n{}",
            real.join("\n")
        );
        let _ = std::fs::remove_dir_all(s.path("fsck-out"));
    } else {
        eprintln!("{test}: fsck.erofs 1.5 cannot read fragments; kernel and usfs check it");
    }
    let out = s.path("export");
    let _ = std::fs::remove_dir_all(&out);
    let o = run_ok(Command::new(usfs()).arg("export").arg(img).arg(&out));
    assert!(
        o.stderr.is_empty(),
        "{test}: export warned: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    {
        let m = ErofsMount::new(img, &s.path("mnt"));
        match compare(&m.dir, &out, &exact()) {
            Ok(st) => eprintln!("{test}: export vs kernel: {st}"),
            Err(d) => panic!("{test}: export differs from the kernel mount: {d}"),
        }
        if let Err(d) = compare(src, &m.dir, &cmp_src) {
            panic!("{test}: kernel mount differs from the source: {d}");
        }
    }
    match compare(src, &out, &cmp_src) {
        Ok(st) => eprintln!("{test}: export vs source: {st}"),
        Err(d) => panic!("{test}: export differs from the source: {d}"),
    }
    let _ = std::fs::remove_dir_all(&out);
}

fn run_build_case(name: &str, args: &[&str], seed: u64) {
    let test = format!("usfs-mkfs{name}");
    if !need_root(&test) || !need_tool(&test, "fsck.erofs") {
        return;
    }
    let s = Scratch::new(&test);
    let src = gen_tree(&s, seed);
    let img = s.path("image");
    usfs_mkfs(&img, &src, args);
    let fsck_ok = !args.iter().any(|a| a.contains("fragments"));
    let (expected, cmp) = expected_source(&src, &s, args);
    check_image_as(&img, &expected, cmp, &s, &test, fsck_ok);
}

macro_rules! build_cases {
    ($($f:ident: [$($a:literal),*];)*) => {
        $(
            #[test]
            fn $f() {
                run_build_case(stringify!($f), &[$($a),*], 31);
            }
        )*
    };
}

build_cases! {
    build_plain: [];
    build_plain_fixed_time_shared_xattrs: ["-T", "1700000000", "-x", "0"];
    build_plain_all_root_no_xattrs: ["--all-root", "-x", "-1"];
    build_lz4: ["-zlz4"];
    build_lz4hc: ["-zlz4hc"];
    build_lz4hc_level12: ["-zlz4hc,12"];
    build_lz4_ztailpacking: ["-zlz4", "-Eztailpacking"];
    build_lz4_big_pcluster: ["-zlz4", "-C65536"];
    build_lz4hc_big_ztailpacking: ["-zlz4hc", "-C16384", "-Eztailpacking"];
    build_lz4_legacy: ["-zlz4", "-Elegacy-compress"];
    build_lz4_legacy_big: ["-zlz4hc", "-Elegacy-compress", "-C32768"];
    build_lz4_fragments: ["-zlz4", "-Efragments"];
    build_lz4_fragments_ztailpacking_big: ["-zlz4hc", "-Efragments,ztailpacking", "-C65536"];
    build_lz4_force_ids: ["-zlz4", "--force-uid", "1234", "--force-gid", "70000", "-T", "0"];
}

/// usfs reads what mkfs.erofs 1.5 writes, with each of its options, exactly as the
/// kernel does (and the source tree agrees).
fn run_read_case(name: &str, args: &[&str]) {
    let test = format!("read-mkfs.erofs{name}");
    if !need_root(&test) || !need_tool(&test, "mkfs.erofs") {
        return;
    }
    let s = Scratch::new(&test);
    let src = gen_tree(&s, 41);
    // mkfs.erofs 1.5 fails on paths longer than PATH_MAX ("Could not format the device").
    std::fs::remove_dir_all(src.join("names/long")).unwrap();
    let img = s.path("image");
    run_ok(Command::new("mkfs.erofs").args(args).arg(&img).arg(&src));
    let (expected, cmp) = expected_source(&src, &s, args);
    check_image_as(&img, &expected, cmp, &s, &test, true);
}

macro_rules! read_cases {
    ($($f:ident: [$($a:literal),*];)*) => {
        $(
            #[test]
            fn $f() {
                run_read_case(stringify!($f), &[$($a),*]);
            }
        )*
    };
}

read_cases! {
    read_uncompressed: [];
    read_lz4: ["-zlz4"];
    read_lz4hc: ["-zlz4hc"];
    read_ztailpacking: ["-zlz4", "-Eztailpacking"];
    read_big_pcluster: ["-zlz4hc", "-C65536"];
    read_legacy_compress: ["-zlz4", "-Elegacy-compress"];
    read_all: ["-zlz4hc", "-C16384", "-Eztailpacking", "-T", "1000", "-x", "1"];
}

/// The image is the same byte for byte whatever the number of workers.
#[test]
fn workers_do_not_change_the_image() {
    let s = Scratch::new("erofs-workers");
    let src = gen_tree(&s, 51);
    for args in [
        &["-zlz4hc", "-Eztailpacking"][..],
        &["-zlz4", "-C65536", "-Efragments"][..],
        &["-zlz4hc", "-Ededupe,ztailpacking"][..],
    ] {
        let mut images = Vec::new();
        for w in ["1", "2", "5"] {
            let img = s.path(&format!("img-{w}"));
            let mut a = vec![
                "-T",
                "12345",
                "-U",
                "0123456789abcdef0123456789abcdef",
                "--workers",
                w,
            ];
            a.extend_from_slice(args);
            usfs_mkfs(&img, &src, &a);
            images.push(std::fs::read(&img).unwrap());
        }
        assert!(
            images.windows(2).all(|w| w[0] == w[1]),
            "{args:?}: images differ by worker count"
        );
    }
}

/// usfs's image is no larger than mkfs.erofs 1.5's with the same options, on two
/// generated trees.
#[test]
fn image_size_not_larger_than_mkfs_erofs() {
    if !need_tool("image_size", "mkfs.erofs") {
        return;
    }
    for seed in [61, 62] {
        let s = Scratch::new(&format!("erofs-size-{seed}"));
        let src = gen_tree(&s, seed);
        std::fs::remove_dir_all(src.join("names/long")).unwrap();
        sizes_not_larger(&s, &src);
    }
}

fn sizes_not_larger(s: &Scratch, src: &Path) {
    for args in [
        &[][..],
        &["-zlz4"][..],
        &["-zlz4hc"][..],
        &["-zlz4hc", "-C65536"][..],
        &["-zlz4", "-Eztailpacking"][..],
        &["-zlz4hc", "-Eztailpacking"][..],
        &["-zlz4", "-Elegacy-compress"][..],
    ] {
        let (a, b) = (s.path("a"), s.path("b"));
        usfs_mkfs(&a, src, args);
        run_ok(Command::new("mkfs.erofs").args(args).arg(&b).arg(src));
        let (la, lb) = (
            std::fs::metadata(&a).unwrap().len(),
            std::fs::metadata(&b).unwrap().len(),
        );
        eprintln!("{args:?}: usfs {la} bytes, mkfs.erofs {lb} bytes");
        assert!(la <= lb, "{args:?}: usfs image {la} > mkfs.erofs {lb}");
    }
}

/// A real corpus: part of /usr/share (the first top-level directories, about 60 MB).
#[test]
fn usr_share_corpus() {
    let test = "usr-share";
    if !need_root(test) || !need_tool(test, "fsck.erofs") {
        return;
    }
    let s = Scratch::new(test);
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    let mut names: Vec<_> = std::fs::read_dir("/usr/share")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    let mut total = 0u64;
    for p in names {
        if total > 60 << 20 {
            break;
        }
        let du = Command::new("du").args(["-sb"]).arg(&p).output().unwrap();
        let n: u64 = String::from_utf8_lossy(&du.stdout)
            .split_whitespace()
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        if n > 40 << 20 {
            continue;
        }
        sh(&format!("cp -a '{}' '{}'/", p.display(), src.display()));
        total += n;
    }
    eprintln!("{test}: {total} bytes copied");
    for args in [
        &[][..],
        &["-zlz4hc", "-Eztailpacking"][..],
        &["-zlz4", "-C65536", "-Efragments,ztailpacking"][..],
    ] {
        let img = s.path("image");
        usfs_mkfs(&img, &src, args);
        let fsck_ok = !args.iter().any(|a| a.contains("fragments"));
        check_image(&img, &src, &s, &format!("{test} {args:?}"), fsck_ok);
    }
}

/// Corrupt images give errors, never panics (the fuzz target goes further).
#[test]
fn truncated_and_flipped_images_fail_cleanly() {
    let s = Scratch::new("erofs-bad");
    let src = gen_tree(&s, 71);
    let img = s.path("image");
    usfs_mkfs(&img, &src, &["-zlz4", "-Eztailpacking"]);
    let good = std::fs::read(&img).unwrap();
    let bad = s.path("bad");
    let mut rng = 0x1234_5678_u64;
    for round in 0..40 {
        let mut b = good.clone();
        if round % 4 == 0 {
            b.truncate(good.len() / (round + 2));
        } else {
            for _ in 0..64 {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let at = (rng >> 17) as usize % b.len();
                b[at] ^= (rng >> 8) as u8 | 1;
            }
            // Keep the superblock checksum valid so the damage reaches the inodes.
            let mut block0 = b[..4096].to_vec();
            usfs_erofs::format::superblock::seal(&mut block0, 4096);
            b[..4096].copy_from_slice(&block0);
        }
        std::fs::write(&bad, &b).unwrap();
        let out = s.path("bad-out");
        let _ = std::fs::remove_dir_all(&out);
        let (code, _, err) = run_limited(
            Command::new(usfs()).arg("export").arg(&bad).arg(&out),
            std::time::Duration::from_secs(60),
        );
        let err = String::from_utf8_lossy(&err);
        assert!(code.is_some(), "round {round}: export hung");
        assert!(
            !err.contains("panicked"),
            "round {round}: export panicked: {err}"
        );
    }
}

/// Compressible text from a small vocabulary.
fn text(seed: u64, len: usize) -> Vec<u8> {
    let words: Vec<Vec<u8>> = noise(seed, 4000)
        .chunks(8)
        .map(|c| {
            c[..(c[0] % 7 + 2) as usize]
                .iter()
                .map(|b| b'a' + b % 26)
                .collect()
        })
        .collect();
    let mut out = Vec::with_capacity(len + 16);
    let mut i = 0usize;
    for b in noise(seed + 1, len) {
        if out.len() >= len {
            break;
        }
        i = (i * 31 + b as usize) % words.len();
        out.extend_from_slice(&words[i]);
        out.push(if b % 13 == 0 { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

/// `-E dedupe`: a generated tree plus duplicated files (text and binary) and a file that
/// repeats a 16 KiB chunk at cluster-aligned offsets. With dedupe the image is smaller
/// (with `-E fragments`, which shares pclusters by itself as 1.9.3 does, the same),
/// and fsck.erofs 1.5 (where it can read the options), the kernel and usfs export all
/// reproduce the source.
#[test]
fn dedupe_shares_identical_pclusters() {
    let test = "erofs-dedupe";
    if !need_root(test) || !need_tool(test, "fsck.erofs") {
        return;
    }
    let s = Scratch::new(test);
    let src = gen_tree(&s, 61);
    let extra = src.join("dedupe-extra");
    std::fs::create_dir_all(extra.join("copy")).unwrap();
    let t = text(7, 300_000);
    let b = noise(9, 40_000);
    let chunk = noise(11, 16 << 10);
    for dir in [extra.clone(), extra.join("copy")] {
        std::fs::write(dir.join("text"), &t).unwrap();
        std::fs::write(dir.join("bin"), &b).unwrap();
    }
    std::fs::write(extra.join("repeats"), chunk.repeat(8)).unwrap();
    for args in [
        &["-zlz4hc"][..],
        &["-zlz4hc", "-C65536", "-Eztailpacking"][..],
        &["-zlz4", "-Elegacy-compress"][..],
        &["-zlz4hc", "-Efragments,ztailpacking"][..],
    ] {
        let name = format!("{test} {args:?}");
        let plain = s.path("no-dedupe");
        usfs_mkfs(&plain, &src, args);
        let img = s.path("dedupe");
        let mut a = args.to_vec();
        a.push("-Ededupe");
        usfs_mkfs(&img, &src, &a);
        let (with, without) = (
            std::fs::metadata(&img).unwrap().len(),
            std::fs::metadata(&plain).unwrap().len(),
        );
        eprintln!("{name}: {with} bytes with dedupe, {without} without");
        let fragments = args.iter().any(|a| a.contains("fragments"));
        if fragments {
            // -E fragments shares identical pclusters already (as mkfs.erofs 1.9.3).
            assert_eq!(with, without, "{name}: fragments without dedupe share less");
        } else {
            // At least the copies of text and bin and 7 of the 8 chunk repeats (28 blocks).
            assert!(
                with + (28 << 12) <= without,
                "{name}: dedupe saved too little ({with} vs {without} bytes)"
            );
        }
        let fsck_ok = !fragments;
        check_image(&img, &src, &s, &name, fsck_ok);
    }
}

/// Files larger than a compression segment (16 MiB) are compressed in independent
/// segments by several workers: with each option set the image is the same for 1 and 2
/// workers, and fsck.erofs (where it can read the options), the kernel and usfs export
/// reproduce the source. The text file ends mid-block; the mixed file alternates
/// compressible and incompressible stretches across segment boundaries.
#[test]
fn large_files_compress_in_segments() {
    let test = "erofs-segments";
    if !need_root(test) || !need_tool(test, "fsck.erofs") {
        return;
    }
    let s = Scratch::new(test);
    let src = s.path("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("text"), text(21, (40 << 20) + 1234)).unwrap();
    let mixed: Vec<u8> = (0..9u64)
        .flat_map(|k| {
            if k % 2 == 0 {
                text(30 + k, 3 << 20)
            } else {
                noise(40 + k, (2 << 20) + 777)
            }
        })
        .collect();
    std::fs::write(src.join("mixed"), &mixed).unwrap();
    std::fs::write(src.join("noise"), noise(50, (17 << 20) + 5)).unwrap();
    std::fs::write(src.join("small"), text(60, 5000)).unwrap();
    // `-T 5` below sets every mtime to 5: make the source agree.
    let t5 = std::time::UNIX_EPOCH + std::time::Duration::from_secs(5);
    for name in ["text", "mixed", "noise", "small", ""] {
        std::fs::File::open(src.join(name))
            .unwrap()
            .set_modified(t5)
            .unwrap();
    }
    for args in [
        &["-zlz4hc", "-Eztailpacking"][..],
        &["-zlz4", "-C65536", "-Efragments"][..],
        &["-zlz4hc", "-Elegacy-compress"][..],
        &["-zlz4", "-Ededupe,ztailpacking"][..],
    ] {
        let name = format!("{test} {args:?}");
        let mut images = Vec::new();
        for w in ["1", "2"] {
            let img = s.path(&format!("img-{w}"));
            let mut a = vec!["-T", "5", "-U", "0123456789abcdef0123456789abcdef"];
            a.extend_from_slice(&["--workers", w]);
            a.extend_from_slice(args);
            usfs_mkfs(&img, &src, &a);
            images.push(std::fs::read(&img).unwrap());
        }
        assert!(
            images[0] == images[1],
            "{name}: images differ by worker count"
        );
        let fsck_ok = !args.iter().any(|a| a.contains("fragments"));
        check_image(&s.path("img-1"), &src, &s, &name, fsck_ok);
    }
}

/// `--exclude-path` (exact relative paths; `/top` names nothing, as in mkfs.erofs) and
/// `--exclude-regex` (POSIX ERE on the relative path): the image holds the source less
/// what they name (a directory with everything under it), through the kernel, fsck.erofs
/// and `usfs export`; a bad expression is an error.
#[test]
fn excluded_paths_are_left_out() {
    let test = "mkfs-erofs-exclude";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = s.path("src");
    sh(&format!(
        "set -e; mkdir -p '{s}/keep' '{s}/skipdir/deep' '{s}/objs' '{s}/keep/skipdir'
         echo 1 > '{s}/keep/a'; echo 2 > '{s}/skipdir/deep/b'; echo 3 > '{s}/objs/x.o'
         echo 4 > '{s}/objs/x.c'; echo 5 > '{s}/top'; echo 6 > '{s}/keep/skipdir/c'",
        s = src.display()
    ));
    let img = s.path("e.img");
    usfs_mkfs(
        &img,
        &src,
        &[
            "--exclude-path=skipdir",
            "--exclude-path=/top",
            "--exclude-regex=\\.o$",
        ],
    );
    let exp = s.path("expected");
    sh(&format!(
        "cp -a '{s}' '{e}' && rm -r '{e}/skipdir' '{e}/objs/x.o'",
        s = src.display(),
        e = exp.display()
    ));
    let cmp = CmpOptions {
        // (Removing entries from the copy changed its directories' times.)
        ignore_dir_mtime: true,
        ..vs_source()
    };
    check_image_as(&img, &exp, cmp, &s, test, true);
    let o = Command::new(usfs())
        .args(["mkfs.erofs", "--exclude-regex=("])
        .arg(s.path("bad.img"))
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid regex"));
}

/// `--chunksize`: chunk-based files, identical chunks stored once, all-zero chunks as
/// holes, runs merged. The kernel and `usfs export` read the source back (fsck.erofs 1.5
/// is not asked: it misreads hole chunks, mkfs.erofs 1.9.3's own images too); the copy
/// of a file costs no data blocks; with `MKFS_EROFS_193` (a local mkfs.erofs 1.9.3) the
/// image is no larger than 1.9.3's with the same chunk size.
#[test]
fn chunked_files_share_chunks() {
    let test = "mkfs-erofs-chunks";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = s.path("src");
    sh(&format!(
        "set -e; mkdir -p '{s}/d'; head -c 300000 /dev/urandom > '{s}/d/big'
         cp '{s}/d/big' '{s}/d/copy'; head -c 4096 '{s}/d/big' > '{s}/d/prefix'
         (head -c 8192 /dev/urandom; head -c 20000 /dev/zero; head -c 5000 /dev/urandom) > '{s}/mixed'
         truncate -s 1M '{s}/sparse'; echo small > '{s}/small'",
        s = src.display()
    ));
    for cs in ["4096", "65536"] {
        let img = s.path(&format!("c{cs}.img"));
        usfs_mkfs(&img, &src, &[&format!("--chunksize={cs}")]);
        check_image_as(&img, &src, vs_source(), &s, test, false);
        let size = std::fs::metadata(&img).unwrap().len();
        // (big once, mixed's data, small: well under big twice.)
        assert!(
            size < 2 * 300_000,
            "{cs}: {size} bytes: the copy was stored again"
        );
        if let Some(theirs) = std::env::var_os("MKFS_EROFS_193").filter(|p| Path::new(p).exists()) {
            let t = s.path(&format!("t{cs}.img"));
            run_ok(
                Command::new(&theirs)
                    .arg(format!("--chunksize={cs}"))
                    .arg(&t)
                    .arg(&src),
            );
            let their = std::fs::metadata(&t).unwrap().len();
            eprintln!("{test}: chunksize {cs}: usfs {size} bytes, mkfs.erofs 1.9.3 {their}");
            assert!(size <= their, "{cs}: {size} > 1.9.3's {their}");
        }
    }
    let bad = Command::new(usfs())
        .args(["mkfs.erofs", "--chunksize=5000"])
        .arg(s.path("bad.img"))
        .arg(&src)
        .output()
        .unwrap();
    assert_ne!(bad.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("power of two"));
}

/// `-b 512|1024|2048`: uncompressed images with blocks smaller than a page (directory
/// blocks, inline tails and the superblock's checksum span follow the block size) read
/// back as the source through the kernel and `usfs export` (fsck.erofs 1.5 reads 4 KiB
/// blocks only); compression with them and blocks larger than a page are refused.
#[test]
fn small_block_sizes() {
    let test = "mkfs-erofs-small-blocks";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = gen_tree(&s, 77);
    for b in ["512", "1024", "2048"] {
        let img = s.path(&format!("b{b}.img"));
        usfs_mkfs(&img, &src, &["-b", b]);
        let len = std::fs::metadata(&img).unwrap().len();
        assert_eq!(len % b.parse::<u64>().unwrap(), 0);
        check_image_as(&img, &src, vs_source(), &s, test, false);
    }
    for (args, says) in [
        (
            &["-b", "1024", "-zlz4"][..],
            "compression with 1024-byte blocks",
        ),
        (&["-b", "8192"][..], "block size 8192"),
    ] {
        let o = Command::new(usfs())
            .arg("mkfs.erofs")
            .args(args)
            .arg(s.path("bad.img"))
            .arg(&src)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(says),
            "{args:?}"
        );
    }
}
