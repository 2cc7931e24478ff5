//! readdir order against the kernel. On a kernel mount, ext4 lists a directory in hash
//! order when the file system has `dir_index` and the directory is an htree, one block
//! long, or inline; in on-disk order otherwise. For images made by mke2fs (default
//! half_md4, tea, legacy, unsigned hashes, 1 KiB blocks, `^dir_index`, `inline_data`) and
//! filled by the kernel, by `mke2fs -d` (multi-block linear directories) and by
//! `usfs mkfs.ext4 -d` (htrees), every directory must list in exactly the kernel's order
//! (`ls -f`, `.` and `..` included) through `usfs ls -Ua`, `usfs run` (ls, python3),
//! and `usfs mount`; also after usfs's editing commands changed it. Names whose hashes
//! collide (equal major hashes; legacy triples, chained by the kernel) are included.
//! A listing resumed at every entry's position, also while the read-write volume adds
//! and removes entries, lists each entry once.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use usfs_ext4::format::dx_hash::{dx_hash, HashVersion};
use usfs_fs::{FileSystem, FileSystemWrite, FileType, NewNode};

/// The hash seed every image gets, so that the colliding names below collide.
const SEED: &str = "01234567-89ab-cdef-0123-456789abcdef";

/// Names with one major hash: legacy triples (the legacy hash has no minor hash, so the
/// kernel chains them), and half_md4 and tea pairs under [`SEED`] (ordered by minor).
const LEGACY: &[&str] = &[
    "c1439785", "c4360242", "c4364682", "c3531041", "c4812676", "c4812776",
];
const HALF_MD4: &[&str] = &["c124492", "c134273", "c67133", "c194027"];
const TEA: &[&str] = &["c199170", "c271694", "c58831", "c106187"];

/// Directories the kernel fills in every image (plus `lin`, from `mke2fs -d`).
const DIRS: &[&str] = &["/", "/one", "/big", "/inl", "/shrunk", "/empty", "/lin"];

/// An image layout: mke2fs arguments, then tune2fs's hash_alg and debugfs's s_flags.
struct Layout {
    name: &'static str,
    args: &'static [&'static str],
    hash_alg: Option<&'static str>,
    /// s_flags to set (2: unsigned hash).
    flags: Option<u32>,
    /// Names that collide under this layout's hash.
    colliding: &'static [&'static str],
}

const LAYOUTS: &[Layout] = &[
    Layout {
        name: "default",
        args: &["-t", "ext4"],
        hash_alg: None,
        flags: None,
        colliding: HALF_MD4,
    },
    Layout {
        name: "nodirindex",
        args: &["-t", "ext4", "-O", "^dir_index"],
        hash_alg: None,
        flags: None,
        colliding: HALF_MD4,
    },
    Layout {
        name: "1k",
        args: &["-t", "ext4", "-b", "1024"],
        hash_alg: None,
        flags: None,
        colliding: HALF_MD4,
    },
    Layout {
        name: "tea",
        args: &["-t", "ext4"],
        hash_alg: Some("tea"),
        flags: None,
        colliding: TEA,
    },
    Layout {
        name: "legacy",
        args: &["-t", "ext4"],
        hash_alg: Some("legacy"),
        flags: None,
        colliding: LEGACY,
    },
    Layout {
        name: "unsigned",
        args: &["-t", "ext4"],
        hash_alg: None,
        flags: Some(2),
        colliding: HALF_MD4,
    },
    Layout {
        name: "inline",
        args: &["-t", "ext4", "-O", "inline_data"],
        hash_alg: None,
        flags: None,
        colliding: HALF_MD4,
    },
];

/// The seed as the superblock stores it (four little-endian words).
fn seed_words() -> [u32; 4] {
    let hex: String = SEED.chars().filter(|c| *c != '-').collect();
    let b: Vec<u8> = (0..16)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    std::array::from_fn(|i| u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap()))
}

#[test]
fn colliding_names_collide() {
    let check = |names: &[&str], v: HashVersion, group: usize| {
        for g in names.chunks(group) {
            let h: Vec<u32> = g
                .iter()
                .map(|n| dx_hash(n.as_bytes(), v, &seed_words()).unwrap().0)
                .collect();
            assert!(h.iter().all(|&x| x == h[0]), "{g:?} under {v:?}: {h:x?}");
        }
    };
    check(LEGACY, HashVersion::Legacy, 3);
    check(HALF_MD4, HashVersion::HalfMd4, 2);
    check(TEA, HashVersion::Tea, 2);
}

/// `ls -f DIR`: readdir order, `.` and `..` included, one raw name per line.
fn ls_f(cmd: &mut Command) -> Vec<String> {
    let out = run_ok(cmd);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn assert_same(what: &str, want: &[String], got: &[String]) {
    if want != got {
        let i = want.iter().zip(got).take_while(|(a, b)| a == b).count();
        panic!(
            "{what}: differs from the kernel at entry {i} of {} / {}:\nkernel: {:?}\nusfs:   {:?}",
            want.len(),
            got.len(),
            &want[i..(i + 8).min(want.len())],
            &got[i..(i + 8).min(got.len())]
        );
    }
}

/// Lists `dirs` on a read-only kernel mount of `img`.
fn kernel_lists(s: &Scratch, img: &Path, dirs: &[&str]) -> Vec<Vec<String>> {
    let mnt = s.path("kmnt");
    let m = Mount::new(img, &mnt, "ext4", "ro,noatime");
    let lists = dirs
        .iter()
        .map(|d| ls_f(Command::new("ls").arg("-f").arg(mnt.join(&d[1..]))))
        .collect();
    drop(m);
    lists
}

/// Every way usfs lists `dirs` of `img` must give `want` (the kernel's lists).
fn usfs_agrees(s: &Scratch, what: &str, img: &Path, dirs: &[&str], want: &[Vec<String>]) {
    let prefix = s.path("v");
    for (d, want) in dirs.iter().zip(want) {
        let cli = ls_f(Command::new(usfs()).args(["ls", "-Ua"]).arg(img).arg(d));
        assert_same(&format!("{what} {d}: usfs ls -Ua"), want, &cli);
        let run = ls_f(
            Command::new(usfs())
                .arg("run")
                .arg("-m")
                .arg(format!("{}={}", prefix.display(), img.display()))
                .args(["--", "ls", "-f"])
                .arg(prefix.join(&d[1..])),
        );
        assert_same(&format!("{what} {d}: usfs run -- ls -f"), want, &run);
    }
    // python3's os.listdir (readdir without the dots) on the largest directory.
    let py = "import os,sys\nfor n in os.listdir(sys.argv[1]): print(n)";
    let got = ls_f(
        Command::new(usfs())
            .arg("run")
            .arg("-m")
            .arg(format!("{}={}", prefix.display(), img.display()))
            .args(["--", "python3", "-c", py])
            .arg(prefix.join("big")),
    );
    let big = dirs.iter().position(|d| *d == "/big").unwrap();
    let want: Vec<String> = want[big]
        .iter()
        .filter(|n| *n != "." && *n != "..")
        .cloned()
        .collect();
    assert_same(&format!("{what} /big: usfs run -- python3"), &want, &got);
}

/// Fills the kernel-made directories of a mounted image.
fn kernel_fill(mnt: &Path, colliding: &[&str], long: bool) {
    let coll = colliding.join(" ");
    let pad = if long {
        "-with-a-longer-name-for-more-leaves"
    } else {
        ""
    };
    sh(&format!(
        "cd '{}' && mkdir one big inl shrunk empty && \
         for n in -dash +plus a b c {coll} été-1 été-2 Ünï-3 $(seq 1 25); do : > one/$n; done && \
         for i in $(seq 1 3000); do : > big/entry{pad}-$i; done && \
         for n in {coll} été-1 été-2; do : > big/$n; done && \
         mkdir big/sub && : > inl/x && mkdir inl/y && \
         for i in $(seq 1 400); do : > shrunk/file-$i; done && \
         for i in $(seq 1 400); do [ $((i % 7)) = 0 ] || rm shrunk/file-$i; done",
        mnt.display()
    ));
}

/// mke2fs (with `lin`, a multi-block linear directory, from `-d`), the seed, the hash
/// and flags, then the kernel fills the rest.
fn make_image(s: &Scratch, l: &Layout) -> PathBuf {
    let src = s.path("src");
    let lin = src.join("lin");
    std::fs::create_dir_all(&lin).unwrap();
    for i in 0..300 {
        std::fs::write(lin.join(format!("linear-entry-{i}")), b"").unwrap();
    }
    let img = s.path(&format!("{}.img", l.name));
    mke2fs(&img, "64M", l.args, Some(&src));
    if let Some(alg) = l.hash_alg {
        run_ok(
            Command::new("tune2fs")
                .arg("-E")
                .arg(format!("hash_alg={alg}"))
                .arg(&img),
        );
    }
    let debugfs = |req: String| run_ok(Command::new("debugfs").args(["-w", "-R", &req]).arg(&img));
    debugfs(format!("ssv hash_seed {SEED}"));
    if let Some(f) = l.flags {
        debugfs(format!("ssv flags {f}"));
    }
    let mnt = s.path("fill");
    let m = Mount::new(&img, &mnt, "ext4", "");
    kernel_fill(&mnt, l.colliding, l.args.contains(&"1024"));
    drop(m);
    img
}

fn write_tmp(s: &Scratch, name: &str, text: &str) -> PathBuf {
    let p = s.path(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn layout_agrees(name: &str) {
    let test = format!("dir_order_{name}");
    if !need_root(&test) || !need_tool(&test, "python3") {
        return;
    }
    let l = LAYOUTS.iter().find(|l| l.name == name).unwrap();
    let s = Scratch::new(&test);
    let img = make_image(&s, l);
    let want = kernel_lists(&s, &img, DIRS);
    usfs_agrees(&s, name, &img, DIRS, &want);
    if name == "default" {
        fuse_agrees(&s, &img, &want);
    }
}

/// `usfs mount` (FUSE) lists as the kernel's ext4 does.
fn fuse_agrees(s: &Scratch, img: &Path, want: &[Vec<String>]) {
    let mnt = s.path("fuse");
    std::fs::create_dir_all(&mnt).unwrap();
    let (code, _, err) = run_limited(
        Command::new(usfs()).arg("mount").arg(img).arg(&mnt),
        Duration::from_secs(60),
    );
    assert_eq!(
        code,
        Some(0),
        "usfs mount: {}",
        String::from_utf8_lossy(&err)
    );
    let _m = Mount { dir: mnt.clone() };
    for (d, want) in DIRS.iter().zip(want) {
        let got = ls_f(Command::new("ls").arg("-f").arg(mnt.join(&d[1..])));
        assert_same(&format!("usfs mount {d}"), want, &got);
    }
}

#[test]
fn default_layout_lists_like_the_kernel() {
    layout_agrees("default");
}

#[test]
fn no_dir_index_lists_like_the_kernel() {
    layout_agrees("nodirindex");
}

#[test]
fn one_k_blocks_list_like_the_kernel() {
    layout_agrees("1k");
}

#[test]
fn tea_hash_lists_like_the_kernel() {
    layout_agrees("tea");
}

#[test]
fn legacy_hash_collisions_list_like_the_kernel() {
    layout_agrees("legacy");
}

#[test]
fn unsigned_hash_lists_like_the_kernel() {
    layout_agrees("unsigned");
}

#[test]
fn inline_dirs_list_like_the_kernel() {
    layout_agrees("inline");
}

/// A source tree for `usfs mkfs.ext4 -d`: a large directory (an htree), a one-block one
/// with colliding names and an empty one.
fn mkfs_source(src: &Path, colliding: &[&str]) {
    for (d, n) in [("big", 2500), ("one", 20), ("empty", 0)] {
        let dir = src.join(d);
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..n {
            std::fs::write(dir.join(format!("{d}-member-{i}")), b"x").unwrap();
        }
        for c in colliding {
            if d != "empty" {
                std::fs::write(dir.join(c), b"").unwrap();
            }
        }
    }
}

#[test]
fn usfs_mkfs_htree_dirs_list_like_the_kernel() {
    let test = "dir_order_usfs_mkfs";
    if !need_root(test) || !need_tool(test, "python3") {
        return;
    }
    let s = Scratch::new(test);
    let src = s.path("src");
    mkfs_source(&src, HALF_MD4);
    let img = s.path("u.img");
    run_ok(
        Command::new(usfs())
            .args(["mkfs.ext4", "-q", "-U", SEED, "-d"])
            .arg(&src)
            .arg(&img)
            .arg("64M"),
    );
    let dirs = ["/", "/big", "/one", "/empty"];
    let want = kernel_lists(&s, &img, &dirs);
    usfs_agrees(&s, "usfs mkfs.ext4", &img, &dirs, &want);
}

#[test]
fn directories_usfs_edited_list_like_the_kernel() {
    let test = "dir_order_edited";
    if !need_root(test) || !need_tool(test, "python3") {
        return;
    }
    let s = Scratch::new(test);
    let img = make_image(&s, &LAYOUTS[0]);
    let host = write_tmp(&s, "host-file", "data");
    let at = |p: &str| format!("{}:{p}", img.display());
    let usfs_ok = |args: &[String]| run_ok(Command::new(usfs()).args(args));
    // Remove some entries and add others: in the htree, in the one-block directory
    // (until it becomes an htree), and in the empty one.
    let mut rm = vec!["rm".to_string()];
    rm.extend(
        (1..3000)
            .filter(|i| i % 15 == 1)
            .map(|i| at(&format!("/big/entry-{i}"))),
    );
    rm.extend([at("/one/-dash"), at("/one/c")]);
    usfs_ok(&rm);
    let mut mkdir = vec!["mkdir".to_string()];
    mkdir.extend((0..100).map(|i| at(&format!("/one/added-with-a-longer-name-{i}"))));
    mkdir.extend((0..3).map(|i| at(&format!("/empty/d{i}"))));
    usfs_ok(&mkdir);
    for i in 0..3 {
        usfs_ok(&[
            "cp".into(),
            host.display().to_string(),
            at(&format!("/big/new-{i}")),
        ]);
    }
    let dirs = ["/", "/big", "/one", "/empty", "/shrunk"];
    let want = kernel_lists(&s, &img, &dirs);
    usfs_agrees(&s, "after usfs edits", &img, &dirs, &want);
}

/// Lists `dir` through `readdir_with_dots`, taking one entry per call and resuming at
/// the position it gave; `between` runs before each resumption.
fn list_one_by_one(fs: &dyn FileSystem, dir: u64, between: &mut dyn FnMut(usize)) -> Vec<Vec<u8>> {
    let mut names = Vec::new();
    let mut pos = 0;
    loop {
        let mut got = None;
        fs.readdir_with_dots(dir, pos, &mut |e, next| {
            got = Some((e.name, next));
            false
        })
        .unwrap();
        let Some((name, next)) = got else { break };
        assert!(next > pos, "position {next} after {pos}: no progress");
        names.push(name);
        pos = next;
        between(names.len());
        assert!(names.len() < 100_000, "listing does not end");
    }
    names
}

fn list_all(fs: &dyn FileSystem, dir: u64) -> Vec<Vec<u8>> {
    let mut names = Vec::new();
    fs.readdir_with_dots(dir, 0, &mut |e, _| {
        names.push(e.name);
        true
    })
    .unwrap();
    names
}

/// An image with an htree and a one-block directory whose names chain (legacy hash),
/// made without root: `usfs mkfs.ext4 -d`, then tune2fs sets the legacy hash (which
/// one-block directories are listed by).
fn resumable_image(s: &Scratch) -> PathBuf {
    let src = s.path("src");
    mkfs_source(&src, LEGACY);
    let img = s.path("r.img");
    run_ok(
        Command::new(usfs())
            .args(["mkfs.ext4", "-q", "-U", SEED, "-d"])
            .arg(&src)
            .arg(&img)
            .arg("64M"),
    );
    run_ok(
        Command::new("tune2fs")
            .args(["-E", "hash_alg=legacy"])
            .arg(&img),
    );
    img
}

#[test]
fn listings_resume_at_every_position() {
    if !need_tool("listings_resume_at_every_position", "tune2fs") {
        return;
    }
    let s = Scratch::new("dir_order_resume");
    let img = resumable_image(&s);
    let dev = usfs_dev::open(&img, usfs_dev::OpenMode::File, false).unwrap();
    let fs = usfs_ext4::Ext4::open(dev).unwrap();
    for d in ["big", "one", "empty"] {
        let ino = fs.lookup(fs.root(), d.as_bytes()).unwrap();
        let all = list_all(&fs, ino);
        assert_eq!(list_one_by_one(&fs, ino, &mut |_| {}), all, "/{d}");
    }
    // The legacy triples chain in /one, so those resumptions fell inside chains.
    let one = fs.lookup(fs.root(), b"one").unwrap();
    let all = list_all(&fs, one);
    for triple in LEGACY.chunks(3) {
        let mut at: Vec<usize> = triple
            .iter()
            .map(|n| all.iter().position(|x| x == n.as_bytes()).unwrap())
            .collect();
        at.sort();
        assert_eq!(at[2] - at[0], 2, "{triple:?} not listed together: {all:?}");
    }
}

#[test]
fn listings_resume_while_entries_come_and_go() {
    if !need_tool("listings_resume_while_entries_come_and_go", "tune2fs") {
        return;
    }
    let s = Scratch::new("dir_order_changes");
    let img = resumable_image(&s);
    let dev = usfs_dev::open(&img, usfs_dev::OpenMode::File, true).unwrap();
    let fs = usfs_ext4::rw::Ext4Rw::open(dev).unwrap();
    let node = NewNode {
        file_type: FileType::Regular,
        perm: 0o644,
        uid: 0,
        gid: 0,
        rdev: 0,
    };
    for d in ["big", "one"] {
        let ino = fs.lookup(fs.root(), d.as_bytes()).unwrap();
        let before = list_all(&fs, ino);
        let victims: Vec<Vec<u8>> = before
            .iter()
            .filter(|n| *n != b"." && *n != b"..")
            .step_by(4)
            .cloned()
            .collect();
        let mut removed = Vec::new();
        let listed = list_one_by_one(&fs, ino, &mut |n| {
            // Every few entries: remove one (listed or not yet) and add one.
            if n % 3 == 0 && n / 3 < victims.len() {
                let v = &victims[n / 3];
                fs.unlink(ino, v).unwrap();
                removed.push(v.clone());
                fs.create(ino, format!("added-{n}").as_bytes(), node)
                    .unwrap();
            }
        });
        let mut seen = std::collections::HashSet::new();
        for n in &listed {
            assert!(
                seen.insert(n),
                "/{d}: {} listed twice",
                String::from_utf8_lossy(n)
            );
        }
        for n in before.iter().filter(|n| !removed.contains(n)) {
            assert!(
                seen.contains(n),
                "/{d}: {} never listed",
                String::from_utf8_lossy(n)
            );
        }
    }
    fs.shutdown().unwrap();
}
