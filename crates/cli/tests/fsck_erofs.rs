//! `usfs fsck` on EROFS images, against fsck.erofs.
//!
//! 1. Clean: images of a generated tree made by `usfs mkfs.erofs` with each option set it
//!    supports and by mkfs.erofs 1.5 with each of its own; fsck.erofs 1.5 agrees (where
//!    it can read the image: not fragments), and `--extract=DIR` writes the tree back.
//! 2. Seeded damage to the superblock, inodes, directory entries, xattrs, the lcluster
//!    index and compressed data of two small images (mkfs.erofs 1.5's and usfs's): usfs
//!    finds every one (exit 1, a message naming the place, never a panic); the table of
//!    verdicts of `fsck.erofs --extract` and of the kernel (mount, read everything) is
//!    printed. Chunk indexes of a 1.5 `--chunksize` image likewise.
//! 3. Random damage (flipped bytes, truncation): never a panic or a hang, and never a
//!    miss where fsck.erofs finds something.
//! 4. `--extract` writes the tree back and follows fsck.erofs's rules for existing files
//!    (--overwrite) and its usage errors; `--json`; EROFS options on ext4 are a usage
//!    error.
//!
//! `FSCK_EROFS=/path/to/fsck.erofs` compares with another fsck.erofs (a local 1.9.3).

mod common;

use common::erofs::*;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use usfs_erofs::format::superblock::seal;

/// Runs `usfs fsck ARGS IMG`: (exit code, stdout, stderr); a panic or a hang fails.
fn usfs_fsck(img: &Path, args: &[&str]) -> (i32, String, String) {
    let (code, out, err) = run_limited(
        Command::new(usfs()).arg("fsck").args(args).arg(img),
        Duration::from_secs(60),
    );
    let (out, err) = (
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    );
    let code = code.unwrap_or_else(|| panic!("usfs fsck hung on {}", img.display()));
    assert!(!err.contains("panicked"), "usfs fsck panicked: {err}");
    (code, out, err)
}

fn assert_clean(img: &Path, what: &str) {
    let (code, out, err) = usfs_fsck(img, &[]);
    assert!(
        code == 0 && out.contains("No errors found") && err.is_empty(),
        "{what}: usfs fsck exit {code}:\n{out}{err}"
    );
    eprintln!("{what}: {}", out.trim());
}

#[test]
fn clean_on_every_usfs_option_set() {
    let s = Scratch::new("fsck-erofs-usfs");
    let src = gen_tree(&s, 31);
    let img = s.path("image");
    let fsck = need_tool("fsck-erofs-usfs", "fsck.erofs");
    for args in USFS_OPTION_SETS {
        usfs_mkfs(&img, &src, args);
        let what = format!("usfs mkfs.erofs {args:?}");
        assert_clean(&img, &what);
        if fsck && oracle_reads(args) {
            assert!(
                !fsck_erofs_finds_damage(&img),
                "{what}: fsck.erofs disagrees"
            );
        }
    }
}

#[test]
fn clean_on_every_mkfs_erofs_option_set() {
    let test = "fsck-erofs-mkfs15";
    if !need_tool(test, "mkfs.erofs") || !need_tool(test, "fsck.erofs") {
        return;
    }
    let s = Scratch::new(test);
    let src = gen_tree(&s, 41);
    // mkfs.erofs 1.5 fails on paths longer than PATH_MAX.
    std::fs::remove_dir_all(src.join("names/long")).unwrap();
    let img = s.path("image");
    for args in MKFS_EROFS_15_OPTION_SETS {
        run_ok(
            Command::new("mkfs.erofs")
                .arg("--quiet")
                .args(*args)
                .arg(&img)
                .arg(&src),
        );
        let what = format!("mkfs.erofs 1.5 {args:?}");
        assert_clean(&img, &what);
        if oracle_reads(args) {
            assert!(
                !fsck_erofs_finds_damage(&img),
                "{what}: fsck.erofs disagrees"
            );
        }
    }
}

/// Compressible text: words of a small vocabulary.
fn text(len: usize) -> Vec<u8> {
    let words: Vec<&[u8]> = b"alpha beta gamma delta epsilon zeta eta theta iota kappa lambda"
        .split(|&c| c == b' ')
        .collect();
    let mut out = Vec::with_capacity(len + 8);
    for (i, r) in noise(5, len / 4).iter().enumerate() {
        out.extend_from_slice(words[(*r as usize + i / 7) % words.len()]);
        out.push(if r % 11 == 0 { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

fn set_xattr(p: &Path, name: &str, value: &[u8]) {
    let c = |s: &[u8]| std::ffi::CString::new(s).unwrap();
    let (pc, nc) = (c(p.as_os_str().as_encoded_bytes()), c(name.as_bytes()));
    // SAFETY: valid C strings and a buffer of value.len() bytes.
    let r = unsafe {
        libc::lsetxattr(
            pc.as_ptr(),
            nc.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    assert_eq!(r, 0, "setxattr {}", p.display());
}

/// A small tree with one of everything the seeded damage needs: a compressible file, an
/// incompressible one (stored flat), a hard link, a symlink, nested directories, a shared
/// xattr (on three files) and an inline one.
fn small_tree(s: &Scratch) -> std::path::PathBuf {
    let t = s.path("small");
    std::fs::create_dir_all(t.join("sub/deeper")).unwrap();
    std::fs::write(t.join("big.txt"), text(360_000)).unwrap();
    std::fs::write(t.join("plain.bin"), noise(9, 9000)).unwrap();
    std::fs::write(t.join("sub/small"), b"a small file\n").unwrap();
    std::fs::write(t.join("sub/deeper/f"), b"deep\n").unwrap();
    std::fs::hard_link(t.join("sub/small"), t.join("hard")).unwrap();
    std::os::unix::fs::symlink("sub/small", t.join("sym")).unwrap();
    for f in ["big.txt", "plain.bin", "sub/small"] {
        set_xattr(&t.join(f), "user.shared", b"the same value");
    }
    set_xattr(&t.join("plain.bin"), "user.own", b"only on plain.bin");
    t
}

/// An image in memory, with the positions the damage needs.
struct Img {
    b: Vec<u8>,
    bs: usize,
    meta: usize,
}

/// Where an inode and its parts are.
struct Ino {
    pos: usize,
    isize: usize,
    xattr_isize: usize,
    layout: u16,
    size: u64,
    blkaddr: usize,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

impl Img {
    fn load(p: &Path) -> Img {
        let b = std::fs::read(p).unwrap();
        let bs = 1usize << b[1024 + 12];
        let meta = le32(&b, 1024 + 40) as usize;
        Img { b, bs, meta }
    }

    fn root(&self) -> u64 {
        u64::from(le16(&self.b, 1024 + 14))
    }

    fn inode(&self, nid: u64) -> Ino {
        let pos = self.meta * self.bs + nid as usize * 32;
        let fmt = le16(&self.b, pos);
        let ext = fmt & 1 != 0;
        let icount = le16(&self.b, pos + 2) as usize;
        Ino {
            pos,
            isize: if ext { 64 } else { 32 },
            xattr_isize: if icount == 0 {
                0
            } else {
                12 + (icount - 1) * 4
            },
            layout: (fmt >> 1) & 7,
            size: if ext {
                u64::from_le_bytes(self.b[pos + 8..pos + 16].try_into().unwrap())
            } else {
                u64::from(le32(&self.b, pos + 8))
            },
            blkaddr: le32(&self.b, pos + 16) as usize,
        }
    }

    /// First byte of a flat file's (or small directory's) data.
    fn data_pos(&self, nid: u64) -> usize {
        let i = self.inode(nid);
        assert!(i.layout == 0 || i.layout == 2, "nid {nid}: not flat");
        if i.layout == 2 && i.size < self.bs as u64 {
            i.pos + i.isize + i.xattr_isize
        } else {
            i.blkaddr * self.bs
        }
    }

    /// (dirent position, name) of the directory entries in the first block of `dir`.
    fn dirents(&self, dir: u64) -> Vec<(usize, Vec<u8>)> {
        let at = self.data_pos(dir);
        let len = (self.inode(dir).size as usize).min(self.bs);
        let blk = &self.b[at..at + len];
        let n = le16(blk, 8) as usize / 12;
        (0..n)
            .map(|i| {
                let s = le16(blk, i * 12 + 8) as usize;
                let e = if i + 1 < n {
                    le16(blk, i * 12 + 20) as usize
                } else {
                    blk[s..].iter().position(|&c| c == 0).map_or(len, |p| s + p)
                };
                (at + i * 12, blk[s..e].to_vec())
            })
            .collect()
    }

    fn dirent(&self, dir: u64, name: &str) -> usize {
        self.dirents(dir)
            .into_iter()
            .find(|(_, n)| n == name.as_bytes())
            .unwrap_or_else(|| panic!("no entry {name} in {dir}"))
            .0
    }

    fn put32(&mut self, at: usize, v: u32) {
        self.b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn put64(&mut self, at: usize, v: u64) {
        self.b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    fn seal(&mut self) {
        seal(&mut self.b[..4096], 4096);
    }
}

/// The nids and places the damage aims at.
struct Targets {
    root: u64,
    big: u64,
    plain: u64,
    sub: u64,
    sym: u64,
    /// Image blocks of big.txt's first two pclusters (the kernel's FIEMAP).
    pclusters: [usize; 2],
}

fn nid_of(img: &Path, path: &str) -> u64 {
    let o = run_ok(
        Command::new(usfs())
            .args(["stat", "-L", "--json"])
            .arg(img)
            .arg(path),
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["ino"].as_u64().unwrap()
}

/// Physical blocks of the first two extents of `path`, as the kernel maps them.
fn kernel_extents(img: &Path, s: &Scratch, path: &str) -> [usize; 2] {
    let m = Mount::new(img, &s.path("mnt"), "erofs", "ro");
    let o = run_ok(
        Command::new("filefrag")
            .args(["-e", "-v"])
            .arg(m.dir.join(path.trim_start_matches('/'))),
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let phys: Vec<usize> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|l| l.split(':').nth(2)?.split("..").next()?.trim().parse().ok())
        .collect();
    assert!(phys.len() >= 2, "filefrag: {text}");
    [phys[0], phys[1]]
}

/// A seeded damage: its name, a text usfs's report must contain, and the change.
type Damage = (&'static str, &'static str, fn(&mut Img, &Targets));

const DAMAGE: &[Damage] = &[
    ("superblock magic", "magic", |m, _| m.b[1024] ^= 0xff),
    ("superblock checksum", "checksum", |m, _| m.b[1028] ^= 1),
    ("superblock block size", "block size", |m, _| {
        m.b[1024 + 12] = 20
    }),
    ("superblock root nid", "root inode", |m, t| {
        m.b[1024 + 14..1024 + 16].copy_from_slice(&(t.plain as u16).to_le_bytes())
    }),
    ("superblock unknown incompat feature", "incompat", |m, _| {
        m.b[1024 + 83] |= 0x80
    }),
    ("superblock meta_blkaddr", "metadata area", |m, _| {
        m.put32(1024 + 40, 0x0fff_ffff)
    }),
    ("superblock blocks", "blocks of", |m, _| {
        m.put32(1024 + 36, 0x00ff_ffff)
    }),
    ("inode unknown format bits", "i_format", |m, t| {
        let p = m.inode(t.plain).pos;
        m.b[p + 1] |= 0x80
    }),
    ("inode data layout", "layout", |m, t| {
        let p = m.inode(t.plain).pos;
        m.b[p] = (m.b[p] & !0x0e) | (6 << 1)
    }),
    ("inode mode without a type", "mode", |m, t| {
        let p = m.inode(t.plain).pos;
        m.b[p + 4..p + 6].copy_from_slice(&0o644u16.to_le_bytes())
    }),
    ("inode size", "/plain.bin", |m, t| {
        let i = m.inode(t.plain);
        if i.isize == 64 {
            m.put64(i.pos + 8, 1 << 40)
        } else {
            m.put32(i.pos + 8, 0xffff_f000)
        }
    }),
    ("inode block address", "/plain.bin", |m, t| {
        let p = m.inode(t.plain).pos;
        m.put32(p + 16, 0x0fff_fff0)
    }),
    ("inode link count", "link count", |m, t| {
        let i = m.inode(t.plain);
        let at = if i.isize == 64 { i.pos + 44 } else { i.pos + 6 };
        m.b[at] = m.b[at].wrapping_add(1)
    }),
    ("inode xattr count", "/plain.bin", |m, t| {
        let p = m.inode(t.plain).pos;
        m.b[p + 2..p + 4].copy_from_slice(&0xfff0u16.to_le_bytes())
    }),
    (
        "xattr area of a header only",
        "header without entries",
        |m, t| {
            let p = m.inode(t.sub).pos;
            m.b[p + 2..p + 4].copy_from_slice(&1u16.to_le_bytes())
        },
    ),
    ("symlink length", "target of", |m, t| {
        let i = m.inode(t.sym);
        if i.isize == 64 {
            m.put64(i.pos + 8, 5000)
        } else {
            m.put32(i.pos + 8, 5000)
        }
    }),
    ("inline xattr name length", "xattr", |m, t| {
        let i = m.inode(t.plain);
        let shared = m.b[i.pos + i.isize + 4] as usize;
        m.b[i.pos + i.isize + 12 + shared * 4] = 255
    }),
    ("inline xattr name index", "xattr name index", |m, t| {
        let i = m.inode(t.plain);
        let shared = m.b[i.pos + i.isize + 4] as usize;
        m.b[i.pos + i.isize + 12 + shared * 4 + 1] = 42
    }),
    ("shared xattr id", "/plain.bin", |m, t| {
        let i = m.inode(t.plain);
        assert!(m.b[i.pos + i.isize + 4] > 0, "no shared xattr");
        m.put32(i.pos + i.isize + 12, 0x00ff_ffff)
    }),
    ("shared xattr count", "xattr", |m, t| {
        let i = m.inode(t.plain);
        m.b[i.pos + i.isize + 4] = 200
    }),
    (
        "compression algorithm not in the superblock",
        "not among the image's",
        |m, t| {
            let i = m.inode(t.big);
            let h = (i.pos + i.isize + i.xattr_isize + 7) & !7;
            m.b[h + 6] = 0x11
        },
    ),
    ("lcluster size", "/big.txt", |m, t| {
        let i = m.inode(t.big);
        let h = (i.pos + i.isize + i.xattr_isize + 7) & !7;
        m.b[h + 7] = (m.b[h + 7] & !7) | 5
    }),
    ("lcluster index", "/big.txt", |m, t| {
        let i = m.inode(t.big);
        let h = (i.pos + i.isize + i.xattr_isize + 7) & !7;
        m.b[h + 8..h + 40].fill(0xff)
    }),
    ("pcluster zeroed", "/big.txt", |m, t| {
        let at = t.pclusters[0] * m.bs;
        let bs = m.bs;
        m.b[at..at + bs].fill(0)
    }),
    ("pcluster bytes flipped", "/big.txt", |m, t| {
        let at = t.pclusters[1] * m.bs;
        for k in (0..m.bs).step_by(97) {
            m.b[at + k] ^= 0x5a
        }
    }),
    ("dirent name offset", "directory", |m, t| {
        let d = m.dirent(t.root, "big.txt");
        m.b[d + 8] = m.b[d + 8].wrapping_add(3)
    }),
    ("dirent name order", "sort", |m, t| {
        let d = m.dirent(t.root, "sub");
        let off = le16(&m.b, d + 8) as usize;
        let base = m.data_pos(t.root);
        m.b[base + off] = b'a'
    }),
    ("dirent `.'", "`.'", |m, t| {
        let d = m.dirent(t.root, ".");
        m.put64(d, t.sub)
    }),
    ("dirent `..'", "`..'", |m, t| {
        let d = m.dirent(t.root, "..");
        m.put64(d, t.sub)
    }),
    (
        "dirent file type out of range",
        "invalid file type",
        |m, t| {
            let d = m.dirent(t.root, "big.txt");
            m.b[d + 10] = 9
        },
    ),
    (
        "dirent file type of another kind",
        "has file type",
        |m, t| {
            let d = m.dirent(t.root, "big.txt");
            m.b[d + 10] = 2
        },
    ),
    ("dirent nid out of range", "/big.txt", |m, t| {
        let d = m.dirent(t.root, "big.txt");
        m.put64(d, 0x00ff_ffff_ffff)
    }),
    ("dirent name with a slash", "illegal name", |m, t| {
        let d = m.dirent(t.root, "sub");
        let off = le16(&m.b, d + 8) as usize;
        let base = m.data_pos(t.root);
        m.b[base + off + 1] = b'/'
    }),
    ("directory loop", "loop", |m, t| {
        let d = m.dirent(t.sub, "deeper");
        m.put64(d, t.root)
    }),
    ("image truncated", "", |m, _| {
        let n = m.b.len() / 2;
        m.b.truncate(n)
    }),
];

/// Reads a whole mounted tree: every file's contents, every symlink, every xattr;
/// exits 1 at the first error or at a directory seen twice (a loop).
const READ_TREE: &str = r#"
import os, sys
seen = set()
def xattrs(p):
    for n in os.listxattr(p, follow_symlinks=False):
        os.getxattr(p, n, follow_symlinks=False)
def walk(d):
    st = os.lstat(d)
    if (st.st_dev, st.st_ino) in seen:
        sys.exit("loop at " + d)
    seen.add((st.st_dev, st.st_ino))
    xattrs(d)
    for e in os.scandir(d):
        p = e.path
        if e.is_symlink():
            os.readlink(p)
            xattrs(p)
        elif e.is_dir(follow_symlinks=False):
            walk(p)
        else:
            xattrs(p)
            if e.is_file(follow_symlinks=False):
                with open(p, "rb") as f:
                    while f.read(1 << 20):
                        pass
try:
    walk(sys.argv[1])
except OSError as e:
    sys.exit(str(e))
"#;

/// The kernel's verdict on an image: true if it refuses to mount it or reading the whole
/// tree fails (or hangs).
fn kernel_finds_damage(img: &Path, s: &Scratch) -> bool {
    let dir = s.path("kmnt");
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "erofs", "-o", "ro"])
        .arg(img)
        .arg(&dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|st| st.success());
    if !mounted {
        return true;
    }
    let (code, _, _) = run_limited(
        Command::new("python3").args(["-c", READ_TREE]).arg(&dir),
        Duration::from_secs(30),
    );
    unmount(&dir);
    code != Some(0)
}

/// Seeds each damage into a copy of `img` and compares the verdicts; returns (cases,
/// cases where fsck.erofs also found damage).
fn seeded(img: &Path, s: &Scratch, label: &str) -> (usize, usize) {
    let t = Targets {
        root: Img::load(img).root(),
        big: nid_of(img, "/big.txt"),
        plain: nid_of(img, "/plain.bin"),
        sub: nid_of(img, "/sub"),
        sym: nid_of(img, "/sym"),
        pclusters: kernel_extents(img, s, "/big.txt"),
    };
    let oracle = need_tool(label, "fsck.erofs");
    let bad = s.path("bad");
    let (mut agree, mut kernel_agrees) = (0, 0);
    let mut table = String::new();
    for (name, expect, f) in DAMAGE {
        let mut m = Img::load(img);
        f(&mut m, &t);
        if !name.contains("checksum") && !name.contains("magic") && m.b.len() >= 4096 {
            m.seal();
        }
        std::fs::write(&bad, &m.b).unwrap();
        let (code, out, err) = usfs_fsck(&bad, &[]);
        // Without its magic the image is not recognisably EROFS: the ext4 checker
        // reports the bad magic (e2fsck's exit 8).
        let found = if *name == "superblock magic" {
            code == 8
        } else {
            // An unknown incompat feature is unsupported rather than damaged.
            let last = if name.contains("incompat") {
                "features usfs does not support"
            } else {
                "Found some filesystem corruption"
            };
            code == 1 && err.contains(last)
        };
        assert!(
            found && err.contains(expect),
            "{label}: {name}: usfs fsck exit {code}, expected a report with {expect:?}:\n{out}{err}"
        );
        let theirs = oracle && fsck_erofs_finds_damage(&bad);
        agree += usize::from(theirs);
        let kernel = kernel_finds_damage(&bad, s);
        kernel_agrees += usize::from(kernel);
        let first = err.lines().next().unwrap_or("");
        let word = |b| if b { "damage" } else { "clean" };
        table.push_str(&format!(
            "  {name:<44} usfs: damage  fsck.erofs: {:<6} kernel: {:<6} | {first}\n",
            word(theirs),
            word(kernel)
        ));
    }
    eprintln!(
        "{label}: fsck.erofs agrees on {agree} of {}, the kernel (mount, read everything) on {kernel_agrees}:\n{table}",
        DAMAGE.len()
    );
    (DAMAGE.len(), agree)
}

/// The images for seeded damage: mkfs.erofs 1.5's and usfs's, LZ4 with shared and
/// inline xattrs.
fn damage_images(s: &Scratch) -> Vec<(String, std::path::PathBuf)> {
    let src = small_tree(s);
    let mut v = Vec::new();
    if need_tool("seeded damage", "mkfs.erofs") {
        let img = s.path("mkfs15.img");
        run_ok(
            Command::new("mkfs.erofs")
                .args(["--quiet", "-zlz4hc", "-x", "1"])
                .arg(&img)
                .arg(&src),
        );
        v.push(("mkfs.erofs 1.5 -zlz4hc".to_string(), img));
    }
    let img = s.path("usfs.img");
    usfs_mkfs(&img, &src, &["-zlz4", "-Eztailpacking", "-x", "1"]);
    v.push(("usfs -zlz4 -Eztailpacking".to_string(), img));
    v
}

#[test]
fn seeded_damage_is_found() {
    let test = "fsck-erofs-seeded";
    if !need_root(test) || !need_tool(test, "filefrag") {
        return;
    }
    let s = Scratch::new(test);
    for (label, img) in damage_images(&s) {
        assert_clean(&img, &label);
        let (n, agree) = seeded(&img, &s, &label);
        eprintln!("{label}: fsck.erofs found {agree} of the {n} damages usfs found");
    }
}

/// Random damage: flipped bytes anywhere (superblock checksum kept valid so the damage
/// reaches the rest) and truncations. usfs never panics or hangs; wherever fsck.erofs
/// finds damage, usfs does too (usfs also decodes what fsck.erofs 1.5 does not check,
/// so the converse need not hold: those are counted).
#[test]
fn random_damage_never_missed() {
    let test = "fsck-erofs-random";
    let s = Scratch::new(test);
    let oracle = need_tool(test, "fsck.erofs");
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let bad = s.path("bad");
    let (mut both, mut only_usfs, mut neither, mut rounds) = (0, 0, 0, 0);
    for (label, img) in damage_images(&s) {
        let good = std::fs::read(&img).unwrap();
        for round in 0..40 {
            let mut b = good.clone();
            if round % 8 == 7 {
                b.truncate(4096 + next() as usize % (good.len() - 4096));
            } else {
                for _ in 0..1 + round % 6 {
                    let at = 1024 + next() as usize % (b.len() - 1024);
                    b[at] ^= 1 << (next() % 8);
                }
                if b[1024 + 8] & 1 != 0 {
                    seal(&mut b[..4096], 4096);
                }
            }
            std::fs::write(&bad, &b).unwrap();
            let (code, out, err) = usfs_fsck(&bad, &[]);
            assert!(
                code == 0 || code == 1,
                "{label} round {round}: exit {code}\n{out}{err}"
            );
            let ours = code == 1;
            let theirs = oracle && fsck_erofs_finds_damage(&bad);
            assert!(
                ours || !theirs,
                "{label} round {round}: fsck.erofs finds damage that usfs misses:\n{out}"
            );
            rounds += 1;
            match (ours, theirs) {
                (true, true) => both += 1,
                (true, false) => only_usfs += 1,
                _ => neither += 1,
            }
        }
    }
    eprintln!(
        "{rounds} random damages: both found {both}, only usfs {only_usfs}, neither {neither} (a flipped bit in file data that still decodes, or in unused bytes)"
    );
}

/// `--extract=DIR` writes the tree back (contents, modes, times, links, xattrs with
/// --xattrs); a second run into the same directory fails on the existing files, as
/// fsck.erofs does, unless --overwrite.
#[test]
fn extract_writes_the_tree() {
    let test = "fsck-erofs-extract";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = small_tree(&s);
    let img = s.path("image");
    usfs_mkfs(&img, &src, &["-zlz4hc", "-Eztailpacking"]);
    let out = s.path("out");
    let arg = format!("--extract={}", out.display());
    let (code, stdout, err) = usfs_fsck(&img, &[&arg, "--xattrs"]);
    assert!(
        code == 0 && stdout.contains("Extracted filesystem successfully"),
        "{stdout}{err}"
    );
    let cmp = usfs_testkit::CmpOptions {
        atime: false,
        ignore_root_attrs: true,
        ..usfs_testkit::CmpOptions::default()
    };
    if let Err(d) = usfs_testkit::compare(&src, &out, &cmp) {
        panic!("extracted tree differs from the source: {d}");
    }
    let (code, _, err) = usfs_fsck(&img, &[&arg]);
    assert!(
        code == 1 && err.contains("File exists"),
        "second extract: {code} {err}"
    );
    let (code, _, err) = usfs_fsck(&img, &[&arg, "--overwrite", "--xattrs"]);
    assert_eq!(code, 0, "--overwrite: {err}");
    if let Err(d) = usfs_testkit::compare(&src, &out, &cmp) {
        panic!("overwritten tree differs from the source: {d}");
    }
    // fsck.erofs's usage rules (it exits 1 on them).
    let (code, _, err) = usfs_fsck(&img, &["--overwrite"]);
    assert!(code == 1 && err.contains("--extract=X"), "{err}");
    let (code, _, err) = usfs_fsck(&img, &["--extract=/"]);
    assert!(code == 1 && err.contains("--force"), "{err}");
}

/// A damage to a chunk-based file: name, expected text, the change.
type ChunkDamage = (&'static str, &'static str, fn(&mut Img, &Ino));

/// Chunk-based files (mkfs.erofs 1.5 --chunksize): a size whose chunk table cannot fit
/// in the image, and a chunk address past the image end.
#[test]
fn chunk_index_damage_is_found() {
    let test = "fsck-erofs-chunks";
    if !need_tool(test, "mkfs.erofs") {
        return;
    }
    let s = Scratch::new(test);
    let src = small_tree(&s);
    let img = s.path("image");
    run_ok(
        Command::new("mkfs.erofs")
            .args(["--quiet", "--chunksize=4096"])
            .arg(&img)
            .arg(&src),
    );
    assert_clean(&img, "mkfs.erofs 1.5 --chunksize=4096");
    let nid = nid_of(&img, "/plain.bin");
    let bad = s.path("bad");
    let cases: [ChunkDamage; 2] = [
        (
            "chunk table too large",
            "chunk table does not fit",
            |m, i| {
                if i.isize == 64 {
                    m.put64(i.pos + 8, 1 << 50)
                } else {
                    m.put32(i.pos + 8, 0xffff_f000)
                }
            },
        ),
        ("chunk address", "pass the image end", |m, i| {
            let at = (i.pos + i.isize + i.xattr_isize + 3) & !3;
            m.put32(at + 4, 0x00ff_fff0)
        }),
    ];
    for (name, expect, f) in cases {
        let mut m = Img::load(&img);
        let i = m.inode(nid);
        assert_eq!(i.layout, 4, "plain.bin is chunk-based");
        f(&mut m, &i);
        m.seal();
        std::fs::write(&bad, &m.b).unwrap();
        let (code, out, err) = usfs_fsck(&bad, &[]);
        assert!(
            code == 1 && err.contains(expect),
            "{name}: {code}\n{out}{err}"
        );
        let theirs = need_tool(test, "fsck.erofs") && fsck_erofs_finds_damage(&bad);
        eprintln!(
            "{name}: usfs: damage, fsck.erofs: {}",
            if theirs { "damage" } else { "clean" }
        );
    }
    // The last damage as data (`--json`).
    let (code, out, _) = usfs_fsck(&bad, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (code, &v["clean"], &v["exit"]),
        (1, &false.into(), &1.into())
    );
    assert_eq!(v["problems"][0]["path"], "/plain.bin", "{v}");
    assert_eq!(v["problems"][0]["nid"], nid, "{v}");
}

/// fsck.erofs's options on an ext4 image are a usage error (e2fsck's exit 16); the ext4
/// checker still takes the image without them.
#[test]
fn erofs_options_on_ext4_are_a_usage_error() {
    let test = "fsck-erofs-on-ext4";
    if !need_tool(test, "mke2fs") {
        return;
    }
    let s = Scratch::new(test);
    let img = s.path("ext4.img");
    mke2fs(&img, "4M", &[], None);
    let (code, _, err) = usfs_fsck(&img, &["--extract"]);
    assert!(code == 16 && err.contains("EROFS"), "{code} {err}");
    let (code, out, err) = usfs_fsck(&img, &[]);
    assert_eq!(code, 0, "{out}{err}");
}
