//! A seeded corruption corpus for `usfs fsck`, with `e2fsck -fn` as the oracle.
//!
//! Base images (1 KiB blocks, 4096 blocks per group: 6 groups) are made once per run
//! from a small generated tree: with `mke2fs -d` and by the kernel (loop mount +
//! `cp -a`, which makes htree directories), with and without `metadata_csum`, and as
//! ext2 (block maps, no journal). Each must be clean for both checkers.
//!
//! Every corruption kind (see [`KINDS`]) is applied to fresh copies of every base image it
//! fits, [`INSTANCES`] times each, on targets a seeded RNG picks from the image's
//! inventory (debugfs `ls -p` and `stat`, dumpe2fs). Corruptions are made with debugfs
//! (clri, freeb/setb, freei/seti, sif, set_bg, ssv, link, unlink, rmdir, zap_block) and
//! with raw byte writes where debugfs would keep checksums right or has no command.
//!
//! For every case:
//! - both checkers must agree on clean (exit 0) versus not (non-zero), and usfs must give
//!   a verdict (exit 0 or 4: never 8, a panic or a hang);
//! - every pass e2fsck prints a problem in must be covered by a usfs problem (any
//!   severity) in a pass that [`PASS_MAP`] allows for it, and every pass usfs reports an
//!   error in must be one that [`PASS_MAP`] allows for some pass e2fsck reported in.
//!
//! A disagreement fails the test unless [`KNOWN_DISAGREEMENTS`] documents it with the
//! reason (an e2fsck quirk or a deliberate limitation of usfs).
//!
//! Then every case usfs finds damaged is repaired with `usfs fsck -fy`: no hang, panic or
//! unexplained exit 8; a repair it reports (exit 1) must leave an image `e2fsck -fn` finds
//! clean (unless the check already disagreed with e2fsck on the case), in which every
//! regular file the corruption did not touch ([`touched`]: the inodes it names, owns the
//! blocks of, or overwrites) has its contents, at its path or in lost+found; a stop
//! without a repair (exit 4) must leave the image unchanged. The counts are printed.
//!
//! Reading e2fsck's output ([`e2fsck_passes`]): a problem belongs to the pass whose
//! heading ("Pass N: ...") it follows; lines before "Pass 1", and what opening the file
//! system printed on stderr (bad superblock or descriptors, "trying backup blocks"), are
//! pass 0. Indented details, questions on a line of their own ("Clear? no"), the
//! summary and extent-tree optimisation hints ("could be more shallow/narrower/shorter",
//! which do not change the exit status) are not problems. When e2fsck -n aborts ("e2fsck:
//! aborted", e.g. when it may not salvage a corrupted directory block) it still says "not
//! clean", but the passes after the one it aborted in never ran: usfs problems there are
//! not compared.
//!
//! The kernel places inodes with some randomness (Orlov), so the targets on the
//! kernel-populated images differ from run to run; `USFS_CORPUS_KEEP` keeps what failed.
//!
//! Environment: `USFS_CORPUS_SEED` (another seed), `USFS_CORPUS_ONLY` (run only the kinds
//! whose name contains this string), `USFS_CORPUS_VERBOSE=1` (print every case),
//! `USFS_CORPUS_KEEP=DIR` (keep the image of every failing case in DIR, and of every
//! failing repair as it was before the repair).

mod common;

use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use usfs_testkit::rng::Rng;
use usfs_testkit::{generate, GenOptions, Profile};

/// The default seed of the corpus (targets, values, patterns).
const SEED: u64 = 0x00C0_FFEE_F5C4;
/// Cases per kind and base image.
const INSTANCES: usize = 3;
/// Time limit of every tool run.
const LIMIT: Duration = Duration::from_secs(20);
/// Image size and block size of the base images.
const SIZE: &str = "24M";
const BS: u64 = 1024;

// ---------------------------------------------------------------------------------------
// The pass mapping and the documented disagreements.

/// e2fsck pass (as parsed from its output; problems printed before "Pass 1" are pass 0,
/// passes 1B-1D are "1B") -> the usfs passes that may report the same fault, and why.
const PASS_MAP: &[(&str, &[&str], &str)] = &[
    (
        "0",
        &["0"],
        "superblock, group descriptors, journal: checked before pass 1 by both",
    ),
    (
        "1",
        &["1"],
        "inodes, blocks, sizes, extent trees, xattr blocks",
    ),
    (
        "1-htree",
        &["1", "2"],
        "(e2fsck pass-1 lines about an HTREE directory) e2fsck's pass 1 reads a directory's \
         dx root (handle_htree); usfs reads directory blocks only in pass 2 (pass 1 hands them \
         to pass 2 as it finds them, pFSCK's pipeline) and reports a bad dx root there",
    ),
    (
        "1B",
        &["1B"],
        "blocks claimed twice (e2fsck's passes 1B, 1C and 1D)",
    ),
    (
        "2",
        &["2", "1"],
        "directory structure; and e2fsck reports some inodes pass 1 found bad (bad mode, \
         invalid symlink, bad i_file_acl, ...) only when pass 2 meets an entry naming them \
         (process_bad_inode), where usfs reports them in pass 1",
    ),
    ("3", &["3"], "directory connectivity, '..', lost+found"),
    ("4", &["4"], "reference counts and unattached inodes"),
    ("5", &["5"], "bitmaps and group summary counts"),
];

/// A disagreement that is not a usfs bug, with the reason.
struct Known {
    kind: &'static str,
    /// A base image name, or "*" for all.
    base: &'static str,
    /// Which cases of the kind it is about.
    when: fn(&Outcome) -> bool,
    reason: &'static str,
}

/// Disagreements explained as e2fsck quirks or deliberate usfs limitations. Everything
/// else is a bug.
const KNOWN_DISAGREEMENTS: &[Known] = &[
    Known {
        kind: "flags_clear_extents",
        base: "*",
        when: |o| {
            o.u_problems.iter().any(|p| p.contains(" BadFlags]"))
                && o.e_out
                    .contains("missing EXTENT_FL, but is in extents format")
        },
        reason: "e2fsck -n, answering no to \"missing EXTENT_FL\", goes on reading the extent \
                 tree in i_block as a block map and reports what that finds (illegal blocks, \
                 blocks claimed twice); usfs reports the missing flag and checks the inode as \
                 the fix leaves it, as e2fsck -y does",
    },
    Known {
        kind: "raw_block_bitmap",
        base: "*",
        when: |o| o.e_exit == Some(0) && o.desc.contains("metadata of BLOCK_UNINIT group"),
        reason: "libext2fs marks the inode table and bitmaps of every BLOCK_UNINIT group in \
                 use when it reads the block bitmaps (rw_bitmaps.c, \
                 mark_uninit_bg_group_blocks), whatever the on-disk bitmap says; with flex_bg \
                 they lie in group 0, so e2fsck cannot see their bit cleared there. The kernel \
                 reads group 0's bitmap as it is on disk (and may allocate those blocks); usfs \
                 reports the difference",
    },
    Known {
        kind: "raw_map_block",
        base: "*",
        when: |o| {
            (o.desc.contains(": byte 6 ") || o.desc.contains(": byte 7 "))
                && o.u_problems.iter().any(|p| p.contains(" ExtentHeader]"))
        },
        reason: "e2fsck 1.47.0 does not check that an extent tree block's eh_depth matches its \
                 level (ext2fs_extent_header_verify checks magic, entries and max; the walk \
                 goes by the root's depth), while the kernel's ext4_ext_check rejects such a \
                 block (\"unexpected eh_depth\"); usfs reports it (and no longer counts the blocks \
                 under it). Without metadata_csum nothing else changes, so e2fsck finds the \
                 image clean; with it, e2fsck reports only the block's checksum",
    },
    Known {
        kind: "bg_metadata_location",
        base: "*",
        when: |o| {
            o.e_exit == Some(0)
                && o.e_out.contains("trying backup blocks")
                && o.u_problems
                    .iter()
                    .any(|p| p.contains(" GroupMetadataLocation]"))
        },
        reason: "e2fsck -n, finding the primary group descriptors invalid (ext2fs_check_desc), \
                 checks the file system through the backup descriptors instead and judges only \
                 those: when they are consistent it exits 0, although the primary descriptors, \
                 the ones the kernel reads (and refuses to mount with), are corrupt. usfs \
                 checks the primary descriptors, reports the bad location and what reading \
                 them gives",
    },
    Known {
        kind: "bg_metadata_location",
        base: "*",
        when: |o| {
            o.verdict_ok
                && o.e_out.contains("trying backup blocks")
                && o.u_problems.iter().any(|p| p.contains(" GroupDescBackup]"))
        },
        reason: "the same fallback on an image the kernel wrote: the backup descriptors still \
                 hold mke2fs's counts, so e2fsck -n, judging the file system by them, reports \
                 pass-5 counts that only the backup gets wrong; usfs reports the fallback \
                 (its repair writes the backup over the primary, and the next round judges \
                 those counts) and checks the primary. Same verdict",
    },
    // Gaps of the checker not closed yet (check mode, first version): listed so the suite
    // stays a regression test; each is work to do, not an e2fsck quirk.
    Known {
        kind: "raw_xattr_block",
        base: "*",
        when: |o| {
            o.e_out.contains("illegal extended attribute value inode")
                || o.e_passes.iter().any(|p| p == "5")
        },
        reason: "usfs rejects a bad entry in an xattr block (pass 1) but still counts the block \
                 as used; e2fsck -n, not clearing it, stops counting it and so also reports \
                 pass-5 bitmap differences. Not yet modelled",
    },
    Known {
        kind: "raw_map_block",
        base: "*",
        when: |o| o.verdict_ok,
        reason: "after an extent e2fsck would clear (\"Clear? no\"), e2fsck stops counting \
                 its blocks and reports them again in passes 2-5; usfs reports the extent in \
                 pass 1 only. Same verdict; the later passes are not yet modelled",
    },
];

// ---------------------------------------------------------------------------------------
// Base images.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Populate {
    /// `mke2fs -d SRC`.
    Mke2fs,
    /// mke2fs, then a kernel loop mount and `cp -a SRC/. MNT/`.
    Kernel,
}

struct BaseSpec {
    name: &'static str,
    args: &'static [&'static str],
    populate: Populate,
}

const EXT4: &[&str] = &["-t", "ext4", "-b", "1024", "-g", "4096"];
const EXT4_NOCSUM: &[&str] = &[
    "-t",
    "ext4",
    "-O",
    "^metadata_csum,uninit_bg",
    "-b",
    "1024",
    "-g",
    "4096",
];
const EXT2: &[&str] = &["-t", "ext2", "-b", "1024", "-g", "4096"];
/// Clusters of 4 blocks (`-g`: clusters per group), written by the kernel (the repair
/// refuses bigalloc by name: its cases count for the check).
const BIGALLOC: &[&str] = &[
    "-t", "ext4", "-O", "bigalloc", "-C", "4096", "-b", "1024", "-g", "1024",
];

const BASES: &[BaseSpec] = &[
    BaseSpec {
        name: "ext4",
        args: EXT4,
        populate: Populate::Mke2fs,
    },
    BaseSpec {
        name: "ext4-kernel",
        args: EXT4,
        populate: Populate::Kernel,
    },
    BaseSpec {
        name: "nocsum",
        args: EXT4_NOCSUM,
        populate: Populate::Mke2fs,
    },
    BaseSpec {
        name: "nocsum-kernel",
        args: EXT4_NOCSUM,
        populate: Populate::Kernel,
    },
    BaseSpec {
        name: "ext2",
        args: EXT2,
        populate: Populate::Mke2fs,
    },
    BaseSpec {
        name: "bigalloc-kernel",
        args: BIGALLOC,
        populate: Populate::Kernel,
    },
];

/// A base image: its bytes (copied sparsely into every case) and its inventory.
struct Base {
    name: &'static str,
    /// Regular file inode -> a hash of its contents (`usfs export` of the clean image).
    files: BTreeMap<u32, u64>,
    bytes: Vec<u8>,
    /// Indexes of the 64 KiB chunks that are not all zeros.
    chunks: Vec<usize>,
    inv: Inv,
}

const CHUNK: usize = 64 << 10;

impl Base {
    fn write_copy(&self, path: &Path) {
        let f = File::create(path).unwrap();
        f.set_len(self.bytes.len() as u64).unwrap();
        for &i in &self.chunks {
            let end = ((i + 1) * CHUNK).min(self.bytes.len());
            f.write_all_at(&self.bytes[i * CHUNK..end], (i * CHUNK) as u64)
                .unwrap();
        }
    }

    fn u16_at(&self, off: u64) -> u16 {
        let o = off as usize;
        u16::from_le_bytes([self.bytes[o], self.bytes[o + 1]])
    }

    fn u32_at(&self, off: u64) -> u32 {
        let o = off as usize;
        u32::from_le_bytes(self.bytes[o..o + 4].try_into().unwrap())
    }
}

// ---------------------------------------------------------------------------------------
// Inventory: what is where in a base image (from debugfs and dumpe2fs).

const EXTENTS_FL: u32 = 0x80000;
const INDEX_FL: u32 = 0x1000;

#[derive(Clone, Debug, Default)]
struct Ino {
    ino: u32,
    /// 'f' regular, 'd' directory, 'l' symlink, 'o' other.
    kind: char,
    flags: u32,
    links: u32,
    size: u64,
    /// i_blocks in 512-byte units.
    blockcount: u64,
    file_acl: u64,
    /// Data runs (logical, physical, length), in the order debugfs lists them.
    data: Vec<(u64, u64, u64)>,
    /// Extent tree blocks or indirect blocks.
    tree: Vec<u64>,
    fast_link: bool,
    /// One name made only of plain characters: (directory, name).
    name: Option<(u32, String)>,
}

impl Ino {
    fn extents(&self) -> bool {
        self.flags & EXTENTS_FL != 0
    }
    fn nblocks(&self) -> u64 {
        self.data.iter().map(|r| r.2).sum()
    }
    /// The physical block of logical block `l`.
    fn phys(&self, l: u64) -> Option<u64> {
        self.data
            .iter()
            .find(|r| l >= r.0 && l < r.0 + r.2)
            .map(|r| r.1 + (l - r.0))
    }
    /// The first data run starts at logical block 0.
    fn starts_at_zero(&self) -> bool {
        self.data.first().is_some_and(|r| r.0 == 0)
    }
}

#[derive(Clone, Debug, Default)]
struct Group {
    block_uninit: bool,
    inode_uninit: bool,
    block_bitmap: u64,
    inode_bitmap: u64,
    itable: u64,
    free_blocks: u64,
    free_inodes: u64,
    dirs: u64,
    free_block_runs: Vec<(u64, u64)>,
    free_inode_runs: Vec<(u64, u64)>,
}

#[derive(Debug, Default)]
struct Inv {
    blocks: u64,
    first_data_block: u64,
    inode_size: u64,
    ipg: u64,
    bpg: u64,
    desc_size: u64,
    free_blocks: u64,
    free_inodes: u64,
    features: Vec<String>,
    groups: Vec<Group>,
    inos: BTreeMap<u32, Ino>,
    /// Directory -> its '..'.
    parent: HashMap<u32, u32>,
}

impl Inv {
    fn has(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f == feature)
    }
    fn csum(&self) -> bool {
        self.has("metadata_csum")
    }
    fn gdt_csum(&self) -> bool {
        self.csum() || self.has("uninit_bg")
    }
    fn extent_fs(&self) -> bool {
        self.has("extent")
    }
    /// A random named inode (not reserved, not lost+found) matching `f`.
    fn pick<'a>(&'a self, r: &mut Rng, f: impl Fn(&Ino) -> bool) -> Option<&'a Ino> {
        let c: Vec<&Ino> = self
            .inos
            .values()
            .filter(|i| i.ino > 11 && i.name.is_some() && f(i))
            .collect();
        r.pick(&c).copied()
    }
    fn file<'a>(&'a self, r: &mut Rng) -> Option<&'a Ino> {
        self.pick(r, |i| i.kind == 'f' && !i.data.is_empty())
    }
    fn dir<'a>(&'a self, r: &mut Rng) -> Option<&'a Ino> {
        self.pick(r, |i| i.kind == 'd' && !i.data.is_empty())
    }
    fn any<'a>(&'a self, r: &mut Rng) -> Option<&'a Ino> {
        self.pick(r, |i| matches!(i.kind, 'f' | 'd' | 'l'))
    }
    /// Byte offset of an inode in the image.
    fn inode_off(&self, ino: u32) -> u64 {
        let i = u64::from(ino - 1);
        self.groups[(i / self.ipg) as usize].itable * BS + (i % self.ipg) * self.inode_size
    }
    /// Byte offset of group `g`'s descriptor (primary table).
    fn gd_off(&self, g: usize) -> u64 {
        (self.first_data_block + 1) * BS + g as u64 * self.desc_size
    }
    /// The group whose inode table or bitmap block `blk` is, if that group is BLOCK_UNINIT.
    fn metadata_of_block_uninit_group(&self, blk: u64) -> Option<usize> {
        let itable_blocks = self.ipg * self.inode_size / BS;
        self.groups.iter().position(|g| {
            g.block_uninit
                && (blk == g.block_bitmap
                    || blk == g.inode_bitmap
                    || (g.itable..g.itable + itable_blocks).contains(&blk))
        })
    }
    /// Used inodes in group `g`.
    fn used_inodes(&self, g: usize) -> u64 {
        self.ipg - self.groups[g].free_inodes
    }
}

/// Runs debugfs with a command file; (exit code, stdout, stderr).
fn debugfs(img: &Path, write: bool, cmds: &[String]) -> (Option<i32>, String, String) {
    let script = img.with_extension(if write { "w.cmds" } else { "r.cmds" });
    std::fs::write(&script, cmds.join("\n") + "\n").unwrap();
    let mut c = Command::new("debugfs");
    if write {
        c.arg("-w");
    }
    c.arg("-f")
        .arg(&script)
        .arg(img)
        .env("DEBUGFS_PAGER", "__none__")
        .env("PAGER", "__none__");
    let (code, out, err) = run_limited(&mut c, LIMIT);
    let _ = std::fs::remove_file(&script);
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

/// Splits `debugfs -f` output into (command, body lines).
fn sections(out: &str) -> Vec<(String, Vec<&str>)> {
    let mut v: Vec<(String, Vec<&str>)> = Vec::new();
    for line in out.lines() {
        if let Some(cmd) = line.strip_prefix("debugfs: ") {
            v.push((cmd.to_string(), Vec::new()));
        } else if let Some(last) = v.last_mut() {
            last.1.push(line);
        }
    }
    v
}

/// The inode number in a command like `ls -p <12>`.
fn arg_ino(cmd: &str) -> u32 {
    let a = cmd.find('<').unwrap();
    let b = cmd.find('>').unwrap();
    cmd[a + 1..b].parse().unwrap()
}

/// The first whitespace-separated word after `pat` in `line`.
fn word_after<'a>(line: &'a str, pat: &str) -> Option<&'a str> {
    let p = line.find(pat)?;
    line[p + pat.len()..].split_whitespace().next()
}

/// Names debugfs commands can take without quoting.
fn plain_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 64
        && n != "."
        && n != ".."
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
}

/// "a-b, c, d-e" -> [(a, b), (c, c), (d, e)].
fn parse_runs(s: &str) -> Vec<(u64, u64)> {
    s.split(',')
        .filter_map(|p| {
            let p = p.trim();
            if p.is_empty() {
                return None;
            }
            let (a, b) = p.split_once('-').unwrap_or((p, p));
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        })
        .collect()
}

fn parse_stat(ino: u32, body: &[&str]) -> Ino {
    let mut i = Ino {
        ino,
        kind: 'o',
        ..Ino::default()
    };
    let mut in_map = false;
    for line in body {
        let l = line.trim();
        if let Some(t) = word_after(l, "Type: ") {
            i.kind = match t {
                "regular" => 'f',
                "directory" => 'd',
                "symlink" => 'l',
                _ => 'o',
            };
        }
        if let Some(f) = word_after(l, "Flags: 0x") {
            i.flags = u32::from_str_radix(f, 16).unwrap_or(0);
        }
        if let Some(n) = word_after(l, "Links: ") {
            i.links = n.parse().unwrap_or(0);
        }
        if let Some(n) = word_after(l, "Blockcount: ") {
            i.blockcount = n.parse().unwrap_or(0);
        }
        if l.starts_with("User:") {
            if let Some(n) = word_after(l, "Size: ") {
                i.size = n.parse().unwrap_or(0);
            }
        }
        if let Some(n) = word_after(l, "File ACL: ") {
            i.file_acl = n.parse().unwrap_or(0);
        }
        if l.starts_with("Fast link dest:") {
            i.fast_link = true;
        }
        if l == "EXTENTS:" || l == "BLOCKS:" {
            in_map = true;
            continue;
        }
        if in_map {
            if l.is_empty() || l.starts_with("TOTAL") {
                in_map = false;
                continue;
            }
            for item in l.split(", ") {
                let Some((lhs, rhs)) = item.split_once("):") else {
                    continue;
                };
                let lhs = lhs.trim_start_matches('(');
                let nums = |s: &str| -> Option<(u64, u64)> {
                    let s: String = s
                        .chars()
                        .filter(|c| c.is_ascii_digit() || *c == '-')
                        .collect();
                    let (a, b) = s.split_once('-').unwrap_or((&s, &s));
                    Some((a.parse().ok()?, b.parse().ok()?))
                };
                if lhs.starts_with("ETB") || lhs.ends_with("IND") {
                    if let Some((p, _)) = nums(rhs) {
                        i.tree.push(p);
                    }
                } else if let (Some((l0, l1)), Some((p0, _))) = (nums(lhs), nums(rhs)) {
                    i.data.push((l0, p0, l1 - l0 + 1));
                }
            }
        }
    }
    i
}

fn inventory(img: &Path) -> Inv {
    let mut v = Inv::default();
    let dump = run_ok(Command::new("dumpe2fs").arg(img));
    let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
    for line in dump.lines() {
        let l = line.trim();
        let num = |l: &str| -> u64 { l.split_whitespace().last().unwrap().parse().unwrap() };
        if l.starts_with("Group ") && l.contains("(Blocks") {
            v.groups.push(Group {
                block_uninit: l.contains("BLOCK_UNINIT"),
                inode_uninit: l.contains("INODE_UNINIT"),
                ..Group::default()
            });
            continue;
        }
        if let Some(g) = v.groups.last_mut() {
            if let Some(n) = word_after(l, "Block bitmap at ") {
                g.block_bitmap = n.trim_end_matches(',').parse().unwrap();
            } else if let Some(n) = word_after(l, "Inode bitmap at ") {
                g.inode_bitmap = n.trim_end_matches(',').parse().unwrap();
            } else if let Some(n) = word_after(l, "Inode table at ") {
                g.itable = n.split('-').next().unwrap().parse().unwrap();
            } else if l.contains(" free blocks, ") {
                let w: Vec<&str> = l.split_whitespace().collect();
                g.free_blocks = w[0].parse().unwrap();
                g.free_inodes = w[3].parse().unwrap();
                g.dirs = w[6].parse().unwrap();
            } else if let Some(s) = l.strip_prefix("Free blocks:") {
                g.free_block_runs = parse_runs(s);
            } else if let Some(s) = l.strip_prefix("Free inodes:") {
                g.free_inode_runs = parse_runs(s);
            }
            continue;
        }
        if l.starts_with("Block count:") {
            v.blocks = num(l);
        } else if l.starts_with("First block:") {
            v.first_data_block = num(l);
        } else if l.starts_with("Inode size:") {
            v.inode_size = num(l);
        } else if l.starts_with("Inodes per group:") {
            v.ipg = num(l);
        } else if l.starts_with("Blocks per group:") {
            v.bpg = num(l);
        } else if l.starts_with("Group descriptor size:") {
            v.desc_size = num(l);
        } else if l.starts_with("Free blocks:") {
            v.free_blocks = num(l);
        } else if l.starts_with("Free inodes:") {
            v.free_inodes = num(l);
        } else if let Some(f) = l.strip_prefix("Filesystem features:") {
            v.features = f.split_whitespace().map(str::to_string).collect();
        }
    }
    if v.desc_size == 0 {
        v.desc_size = 32;
    }
    assert!(
        v.groups.len() >= 2 && v.ipg > 0 && v.inode_size > 0,
        "{dump}"
    );

    // The name graph, breadth first from the root.
    let mut names: HashMap<u32, (u32, String)> = HashMap::new();
    let mut all = BTreeSet::from([2u32]);
    let mut seen_dirs = BTreeSet::from([2u32]);
    let mut frontier = vec![2u32];
    while !frontier.is_empty() {
        let cmds: Vec<String> = frontier.iter().map(|d| format!("ls -p <{d}>")).collect();
        let (_, out, _) = debugfs(img, false, &cmds);
        let mut next = Vec::new();
        for (cmd, body) in sections(&out) {
            let dir = arg_ino(&cmd);
            for line in body {
                let p: Vec<&str> = line.split('/').collect();
                if p.len() != 8 || !p[0].is_empty() {
                    continue;
                }
                let (Ok(ino), Ok(mode)) = (p[1].parse::<u32>(), u32::from_str_radix(p[2], 8))
                else {
                    continue;
                };
                match p[5] {
                    "." => continue,
                    ".." => {
                        v.parent.insert(dir, ino);
                        continue;
                    }
                    _ => {}
                }
                if ino == 0 {
                    continue;
                }
                all.insert(ino);
                if plain_name(p[5]) {
                    names.entry(ino).or_insert((dir, p[5].to_string()));
                }
                if mode & 0o170000 == 0o040000 && seen_dirs.insert(ino) {
                    next.push(ino);
                }
            }
        }
        frontier = next;
    }
    let cmds: Vec<String> = all.iter().map(|i| format!("stat <{i}>")).collect();
    let (_, out, _) = debugfs(img, false, &cmds);
    for (cmd, body) in sections(&out) {
        let ino = arg_ino(&cmd);
        let mut i = parse_stat(ino, &body);
        i.name = names.get(&ino).cloned();
        v.inos.insert(ino, i);
    }
    v
}

// ---------------------------------------------------------------------------------------
// Corruption kinds.

/// One corruption step.
#[derive(Clone, Debug)]
enum Step {
    /// A `debugfs -w` command (all of a case's commands run in one debugfs session).
    Debugfs(String),
    /// Bytes written at an offset of the image after debugfs closed it.
    Raw(u64, Vec<u8>),
}

/// A corruption made for one image: what it hits, and how.
struct Made {
    desc: String,
    steps: Vec<Step>,
}

struct Kind {
    name: &'static str,
    /// Returns `None` when the image has nothing this kind can hit.
    make: fn(&Base, &mut Rng) -> Option<Made>,
}

fn dfs(s: String) -> Step {
    Step::Debugfs(s)
}

fn made(desc: String, steps: Vec<Step>) -> Option<Made> {
    Some(Made { desc, steps })
}

fn sif(i: &Ino, field: &str, value: impl std::fmt::Display) -> Option<Made> {
    made(
        format!("inode {} ({}) {field} = {value}", i.ino, i.kind),
        vec![dfs(format!("sif <{}> {field} {value}", i.ino))],
    )
}

/// Sets the first block pointer of `i` (the first extent's start for an inode with its
/// extents in the inode, i_block[0] for a block map) to `to`.
fn set_first_block(i: &Ino, to: u64, what: &str) -> Option<Made> {
    let field = if i.extents() { "block[5]" } else { "block[0]" };
    made(
        format!(
            "inode {} first block {} -> {to} ({what})",
            i.ino, i.data[0].1
        ),
        vec![dfs(format!("sif <{}> {field} {to}", i.ino))],
    )
}

/// Files whose first block pointer [`set_first_block`] can change.
fn first_block_target<'a>(v: &'a Inv, r: &mut Rng) -> Option<&'a Ino> {
    v.pick(r, |i| {
        i.kind == 'f' && i.starts_at_zero() && (i.tree.is_empty() || !i.extents())
    })
}

/// Set a group descriptor field, keeping its checksum right.
fn set_bg(v: &Inv, g: usize, field: &str, value: impl std::fmt::Display) -> Option<Made> {
    let mut steps = vec![dfs(format!("set_bg {g} {field} {value}"))];
    if v.gdt_csum() {
        steps.push(dfs(format!("set_bg {g} checksum calc")));
    }
    made(format!("group {g} {field} = {value}"), steps)
}

/// A physical block of directory `d` and its logical number.
fn dir_block(d: &Ino, r: &mut Rng) -> (u64, u64) {
    let run = *r.pick(&d.data).unwrap();
    let l = run.0 + r.below(run.2);
    (l, run.1 + (l - run.0))
}

/// Swaps one field (`at` 0: hash, 4: block) of two neighbouring entries of a random htree
/// root with at least 3 entries.
fn swap_root_entries(b: &Base, r: &mut Rng, at: u64, what: &str) -> Option<Made> {
    let (ino, p) = htree_root(b, r, 3)?;
    let count = u64::from(b.u16_at(p * BS + 0x22));
    let k = r.range(1, count - 2);
    let (o1, o2) = (p * BS + 0x20 + 8 * k + at, p * BS + 0x28 + 8 * k + at);
    let (v1, v2) = (b.u32_at(o1), b.u32_at(o2));
    made(
        format!(
            "htree dir {ino} root ({p}) {what} of entries {k} and {} swapped",
            k + 1
        ),
        vec![
            Step::Raw(o1, v2.to_le_bytes().to_vec()),
            Step::Raw(o2, v1.to_le_bytes().to_vec()),
        ],
    )
}

/// The dx root block of a random htree directory with at least `min_count` entries.
fn htree_root(b: &Base, r: &mut Rng, min_count: u16) -> Option<(u32, u64)> {
    let i = b.inv.pick(r, |i| {
        i.kind == 'd'
            && i.flags & INDEX_FL != 0
            && i.phys(0)
                .is_some_and(|p| b.u16_at(p * BS + 0x22) >= min_count)
    })?;
    Some((i.ino, i.phys(0)?))
}

const KINDS: &[Kind] = &[
    Kind {
        name: "clri_file",
        make: |b, r| {
            let i = b.inv.file(r)?;
            made(
                format!("file {}", i.ino),
                vec![dfs(format!("clri <{}>", i.ino))],
            )
        },
    },
    Kind {
        name: "clri_dir",
        make: |b, r| {
            let i = b.inv.dir(r)?;
            made(
                format!("dir {}", i.ino),
                vec![dfs(format!("clri <{}>", i.ino))],
            )
        },
    },
    Kind {
        name: "clri_symlink",
        make: |b, r| {
            let i = b.inv.pick(r, |i| i.kind == 'l')?;
            made(
                format!("symlink {} (fast: {})", i.ino, i.fast_link),
                vec![dfs(format!("clri <{}>", i.ino))],
            )
        },
    },
    Kind {
        name: "freeb_used",
        make: |b, r| {
            let i = b.inv.file(r)?;
            let run = *r.pick(&i.data)?;
            let blk = run.1 + r.below(run.2);
            made(
                format!("block {blk} of inode {}", i.ino),
                vec![dfs(format!("freeb {blk}"))],
            )
        },
    },
    Kind {
        name: "setb_free",
        make: |b, r| {
            // Mostly in initialised groups: libext2fs neither reads nor writes the block
            // bitmap of a BLOCK_UNINIT group, so debugfs's setb does not stick there.
            let any = r.chance(1, 3);
            let gs: Vec<&Group> = b
                .inv
                .groups
                .iter()
                .filter(|g| !g.free_block_runs.is_empty() && (any || !g.block_uninit))
                .collect();
            let g = *r.pick(&gs)?;
            let run = *r.pick(&g.free_block_runs)?;
            let blk = r.range(run.0, run.1);
            made(
                format!("free block {blk}"),
                vec![dfs(format!("setb {blk}"))],
            )
        },
    },
    Kind {
        name: "freei_used",
        make: |b, r| {
            let i = b.inv.any(r)?;
            made(
                format!("inode {} ({})", i.ino, i.kind),
                vec![dfs(format!("freei <{}>", i.ino))],
            )
        },
    },
    Kind {
        name: "seti_free",
        make: |b, r| {
            // Mostly in initialised groups (as for setb_free).
            let any = r.chance(1, 3);
            let gs: Vec<&Group> = b
                .inv
                .groups
                .iter()
                .filter(|g| !g.free_inode_runs.is_empty() && (any || !g.inode_uninit))
                .collect();
            let g = *r.pick(&gs)?;
            let run = *r.pick(&g.free_inode_runs)?;
            let ino = r.range(run.0, run.1);
            made(
                format!("free inode {ino}"),
                vec![dfs(format!("seti <{ino}>"))],
            )
        },
    },
    Kind {
        name: "links_inc",
        make: |b, r| {
            let i = b.inv.any(r)?;
            sif(i, "links_count", i.links + 1)
        },
    },
    Kind {
        name: "links_dec",
        make: |b, r| {
            let i = b
                .inv
                .pick(r, |i| matches!(i.kind, 'f' | 'd') && i.links >= 2)?;
            sif(i, "links_count", i.links - 1)
        },
    },
    Kind {
        name: "links_zero",
        make: |b, r| sif(b.inv.file(r)?, "links_count", 0),
    },
    Kind {
        name: "size_grow_file",
        make: |b, r| {
            let i = b.inv.file(r)?;
            let s = i.size + 64 * BS + r.below(BS);
            sif(i, "size", s)
        },
    },
    Kind {
        name: "size_shrink_file",
        make: |b, r| {
            let i = b.inv.pick(r, |i| i.kind == 'f' && i.nblocks() >= 2)?;
            let s = r.range(1, BS - 1);
            sif(i, "size", s)
        },
    },
    Kind {
        name: "size_dir",
        make: |b, r| {
            let i = b.inv.dir(r)?;
            let s = if r.chance(1, 2) { 0 } else { i.size + BS };
            sif(i, "size", s)
        },
    },
    Kind {
        name: "dtime_live",
        make: |b, r| sif(b.inv.any(r)?, "dtime", 1_700_000_000),
    },
    Kind {
        name: "mode_zero",
        make: |b, r| sif(b.inv.file(r)?, "mode", 0),
    },
    Kind {
        name: "mode_badtype",
        make: |b, r| sif(b.inv.file(r)?, "mode", "0170644"),
    },
    Kind {
        name: "mode_file_to_dir",
        make: |b, r| sif(b.inv.file(r)?, "mode", "040755"),
    },
    Kind {
        name: "mode_dir_to_file",
        make: |b, r| sif(b.inv.dir(r)?, "mode", "0100644"),
    },
    Kind {
        name: "mode_symlink_to_file",
        make: |b, r| sif(b.inv.pick(r, |i| i.kind == 'l')?, "mode", "0100777"),
    },
    Kind {
        name: "inode_checksum",
        make: |b, r| {
            if !b.inv.csum() {
                return None;
            }
            let i = b.inv.any(r)?;
            let off = b.inv.inode_off(i.ino);
            let stored = u32::from(b.u16_at(off + 0x7C)) | u32::from(b.u16_at(off + 0x82)) << 16;
            let mut c = r.below(1 << 32) as u32;
            if c == stored {
                c ^= 1;
            }
            sif(i, "checksum", format!("{c:#x}"))
        },
    },
    Kind {
        name: "i_blocks",
        make: |b, r| {
            let i = b.inv.file(r)?;
            sif(i, "blocks", i.blockcount + 2 * r.range(1, 8))
        },
    },
    Kind {
        name: "block_out_of_range",
        make: |b, r| {
            let i = first_block_target(&b.inv, r)?;
            let to = b.inv.blocks + r.range(1, 1 << 20);
            set_first_block(i, to, "past the end")
        },
    },
    Kind {
        name: "block_shared",
        make: |b, r| {
            let i = first_block_target(&b.inv, r)?;
            let o = b
                .inv
                .pick(r, |o| o.ino != i.ino && o.kind == 'f' && !o.data.is_empty())?;
            set_first_block(i, o.data[0].1, &format!("inode {}'s first block", o.ino))
        },
    },
    Kind {
        name: "block_in_inode_table",
        make: |b, r| {
            let i = first_block_target(&b.inv, r)?;
            let g = r.index(b.inv.groups.len());
            let to = b.inv.groups[g].itable + r.below(b.inv.ipg * b.inv.inode_size / BS);
            set_first_block(i, to, &format!("inode table of group {g}"))
        },
    },
    Kind {
        name: "extent_magic",
        make: |b, r| {
            let i = b
                .inv
                .pick(r, |i| matches!(i.kind, 'f' | 'd') && i.extents())?;
            sif(i, "block[0]", 0)
        },
    },
    Kind {
        name: "extent_header_fields",
        make: |b, r| {
            let i = b
                .inv
                .pick(r, |i| matches!(i.kind, 'f' | 'd') && i.extents())?;
            let depth = u32::from(b.u16_at(b.inv.inode_off(i.ino) + 0x28 + 6));
            match r.below(3) {
                0 => sif(i, "block[0]", format!("{:#x}", (5 << 16) | 0xF30A)), // entries > max
                1 => sif(i, "block[1]", format!("{:#x}", (depth << 16) | 1)),  // max too small
                _ => sif(i, "block[1]", format!("{:#x}", (9 << 16) | 4)),      // depth 9
            }
        },
    },
    Kind {
        name: "flags_index_on_file",
        make: |b, r| {
            let i = b.inv.file(r)?;
            sif(i, "flags", format!("{:#x}", i.flags | INDEX_FL))
        },
    },
    Kind {
        name: "flags_clear_extents",
        make: |b, r| {
            let i = b.inv.pick(r, |i| i.kind == 'f' && i.extents())?;
            sif(i, "flags", format!("{:#x}", i.flags & !EXTENTS_FL))
        },
    },
    Kind {
        name: "flags_index_on_linear_dir",
        make: |b, r| {
            let i = b.inv.pick(r, |i| {
                i.kind == 'd' && i.flags & INDEX_FL == 0 && !i.data.is_empty()
            })?;
            sif(i, "flags", format!("{:#x}", i.flags | INDEX_FL))
        },
    },
    Kind {
        name: "flags_clear_index",
        make: |b, r| {
            let i = b
                .inv
                .pick(r, |i| i.kind == 'd' && i.flags & INDEX_FL != 0)?;
            sif(i, "flags", format!("{:#x}", i.flags & !INDEX_FL))
        },
    },
    Kind {
        name: "flags_extents_bogus",
        make: |b, r| {
            // ext2: an extents flag without the feature; ext4: on a fast symlink.
            let i = if b.inv.extent_fs() {
                b.inv.pick(r, |i| i.kind == 'l' && i.fast_link)?
            } else {
                b.inv.file(r)?
            };
            sif(i, "flags", format!("{:#x}", i.flags | EXTENTS_FL))
        },
    },
    Kind {
        name: "file_acl_bogus",
        make: |b, r| {
            let i = b.inv.any(r)?;
            let o = b.inv.file(r)?;
            let to = if o.ino != i.ino && r.chance(1, 2) {
                o.data[0].1
            } else {
                b.inv.blocks + r.range(1, 1000)
            };
            sif(i, "file_acl", to)
        },
    },
    Kind {
        name: "file_acl_shared",
        make: |b, r| {
            let o = b.inv.pick(r, |i| i.file_acl != 0)?;
            let i = b.inv.pick(r, |i| i.file_acl == 0 && i.kind == 'f')?;
            sif(i, "file_acl", o.file_acl)
        },
    },
    Kind {
        name: "unlink_file",
        make: |b, r| {
            let i = b.inv.pick(r, |i| i.kind == 'f' && i.links == 1)?;
            let (d, n) = i.name.clone()?;
            made(
                format!("entry {d}/{n} -> {}", i.ino),
                vec![dfs(format!("unlink <{d}>/{n}"))],
            )
        },
    },
    Kind {
        name: "unlink_dir",
        make: |b, r| {
            let i = b.inv.dir(r)?;
            let (d, n) = i.name.clone()?;
            made(
                format!("entry {d}/{n} -> dir {}", i.ino),
                vec![dfs(format!("unlink <{d}>/{n}"))],
            )
        },
    },
    Kind {
        name: "link_file_extra",
        make: |b, r| {
            let i = b.inv.pick(r, |i| matches!(i.kind, 'f' | 'l'))?;
            let d = b.inv.dir(r)?;
            made(
                format!("new entry {}/corpus-link -> {}", d.ino, i.ino),
                vec![dfs(format!("link <{}> <{}>/corpus-link", i.ino, d.ino))],
            )
        },
    },
    Kind {
        name: "link_dir_extra",
        make: |b, r| {
            let i = b.inv.dir(r)?;
            let d = b.inv.dir(r)?;
            made(
                format!("new entry {}/corpus-dirlink -> dir {}", d.ino, i.ino),
                vec![dfs(format!("link <{}> <{}>/corpus-dirlink", i.ino, d.ino))],
            )
        },
    },
    Kind {
        name: "dir_loop",
        make: |b, r| {
            let i = b.inv.pick(r, |i| {
                i.kind == 'd' && b.inv.parent.get(&i.ino).is_some_and(|&p| p > 11)
            })?;
            let p = b.inv.parent[&i.ino];
            made(
                format!("parent {p} linked into its child {}", i.ino),
                vec![dfs(format!("link <{p}> <{}>/corpus-loop", i.ino))],
            )
        },
    },
    Kind {
        name: "dotdot_wrong",
        make: |b, r| {
            let i = b.inv.pick(r, |i| i.kind == 'd' && i.phys(0).is_some())?;
            let p = b.inv.parent.get(&i.ino).copied().unwrap_or(0);
            let o = b
                .inv
                .pick(r, |o| o.kind == 'd' && o.ino != i.ino && o.ino != p)?;
            made(
                format!("'..' of dir {} -> {} (was {p})", i.ino, o.ino),
                vec![Step::Raw(
                    i.phys(0)? * BS + 12,
                    o.ino.to_le_bytes().to_vec(),
                )],
            )
        },
    },
    Kind {
        name: "zap_dir_block",
        make: |b, r| {
            let i = b.inv.dir(r)?;
            let (l, p) = dir_block(i, r);
            let pat = r.range(1, 255);
            made(
                format!("dir {} block {l} ({p}) filled with {pat:#x}", i.ino),
                vec![dfs(format!("zap_block -f <{}> -p {pat} {l}", i.ino))],
            )
        },
    },
    Kind {
        name: "zap_dir_tail",
        make: |b, r| {
            let i = b.inv.dir(r)?;
            let (l, p) = dir_block(i, r);
            let pat = if r.chance(1, 2) { 0 } else { r.range(1, 255) };
            made(
                format!("dir {} block {l} ({p}): last 12 bytes = {pat:#x}", i.ino),
                vec![dfs(format!(
                    "zap_block -f <{}> -o {} -l 12 -p {pat} {l}",
                    i.ino,
                    BS - 12
                ))],
            )
        },
    },
    Kind {
        name: "raw_dirent_rec_len",
        make: |b, r| {
            let i = b.inv.dir(r)?;
            let (l, p) = dir_block(i, r);
            let off = if l == 0 && r.chance(1, 2) { 16 } else { 4 };
            let val = *r.pick(&[0u16, 6, 13, (BS + 12) as u16, 0xFFFF])?;
            made(
                format!("dir {} block {l} ({p}): rec_len at {off} = {val}", i.ino),
                vec![Step::Raw(p * BS + off, val.to_le_bytes().to_vec())],
            )
        },
    },
    Kind {
        name: "raw_dirent_name_len",
        make: |b, r| {
            let i = b.inv.dir(r)?;
            let (l, p) = dir_block(i, r);
            made(
                format!("dir {} block {l} ({p}): first name_len = 255", i.ino),
                vec![Step::Raw(p * BS + 6, vec![255])],
            )
        },
    },
    Kind {
        name: "raw_map_block",
        make: |b, r| {
            let i = b.inv.pick(r, |i| !i.tree.is_empty())?;
            let t = *r.pick(&i.tree)?;
            if i.extents() {
                // A byte of the header or of the first entries of an extent tree block.
                let entries = u64::from(b.u16_at(t * BS + 2)).clamp(1, 4);
                let off = r.below(12 + 12 * entries);
                let old = b.bytes[(t * BS + off) as usize];
                let new = old ^ (r.range(1, 255) as u8);
                made(
                    format!(
                        "extent block {t} of inode {}: byte {off} {old:#x} -> {new:#x}",
                        i.ino
                    ),
                    vec![Step::Raw(t * BS + off, vec![new])],
                )
            } else {
                // An indirect block pointer past the end of the file system.
                let used = (0..BS / 4)
                    .filter(|k| b.u32_at(t * BS + 4 * k) != 0)
                    .count() as u64;
                let k = r.below(used.max(1));
                let to = (b.inv.blocks + r.range(1, 1 << 20)) as u32;
                made(
                    format!("indirect block {t} of inode {}: entry {k} = {to}", i.ino),
                    vec![Step::Raw(t * BS + 4 * k, to.to_le_bytes().to_vec())],
                )
            }
        },
    },
    Kind {
        name: "raw_xattr_block",
        make: |b, r| {
            let i = b.inv.pick(r, |i| i.file_acl != 0)?;
            let blk = i.file_acl;
            let off = if r.chance(1, 2) {
                r.below(12)
            } else {
                32 + r.below(16)
            };
            let old = b.bytes[(blk * BS + off) as usize];
            let new = old ^ (r.range(1, 255) as u8);
            made(
                format!(
                    "xattr block {blk} of inode {}: byte {off} {old:#x} -> {new:#x}",
                    i.ino
                ),
                vec![Step::Raw(blk * BS + off, vec![new])],
            )
        },
    },
    Kind {
        name: "raw_block_bitmap",
        make: |b, r| {
            let g = r.index(b.inv.groups.len());
            let bm = b.inv.groups[g].block_bitmap;
            let off = r.below(b.inv.bpg / 8);
            let bit = r.below(8);
            let new = b.bytes[(bm * BS + off) as usize] ^ (1 << bit);
            let blk = b.inv.first_data_block + g as u64 * b.inv.bpg + off * 8 + bit;
            let note = b
                .inv
                .metadata_of_block_uninit_group(blk)
                .map_or(String::new(), |u| {
                    format!(" (metadata of BLOCK_UNINIT group {u})")
                });
            made(
                format!(
                    "group {g} block bitmap ({bm}) byte {off} bit {bit} flipped: block {blk}{note}"
                ),
                vec![Step::Raw(bm * BS + off, vec![new])],
            )
        },
    },
    Kind {
        name: "raw_inode_bitmap",
        make: |b, r| {
            let g = r.index(b.inv.groups.len());
            let bm = b.inv.groups[g].inode_bitmap;
            let off = r.below(b.inv.ipg / 8);
            let bit = r.below(8);
            let new = b.bytes[(bm * BS + off) as usize] ^ (1 << bit);
            made(
                format!("group {g} inode bitmap ({bm}) byte {off} bit {bit} flipped"),
                vec![Step::Raw(bm * BS + off, vec![new])],
            )
        },
    },
    Kind {
        name: "raw_inode_atime",
        make: |b, r| {
            let i = b.inv.any(r)?;
            let t = r.range(1, u64::from(u32::MAX)) as u32;
            made(
                format!("inode {} atime = {t} (raw: no checksum update)", i.ino),
                vec![Step::Raw(
                    b.inv.inode_off(i.ino) + 8,
                    t.to_le_bytes().to_vec(),
                )],
            )
        },
    },
    Kind {
        name: "bg_free_blocks",
        make: |b, r| {
            let g = r.index(b.inv.groups.len());
            let v = b.inv.groups[g].free_blocks;
            let n = if v > 50 && r.chance(1, 2) {
                v - r.range(1, 50)
            } else {
                v + r.range(1, 50)
            };
            set_bg(&b.inv, g, "free_blocks_count", n)
        },
    },
    Kind {
        name: "bg_free_inodes",
        make: |b, r| {
            let g = r.index(b.inv.groups.len());
            let v = b.inv.groups[g].free_inodes;
            let n = if v > 5 && r.chance(1, 2) {
                v - r.range(1, 5)
            } else {
                v + r.range(1, 5)
            };
            set_bg(&b.inv, g, "free_inodes_count", n)
        },
    },
    Kind {
        name: "bg_used_dirs",
        make: |b, r| {
            let g = r.index(b.inv.groups.len());
            let v = b.inv.groups[g].dirs;
            let n = if v > 0 && r.chance(1, 2) {
                v - 1
            } else {
                v + 1
            };
            set_bg(&b.inv, g, "used_dirs_count", n)
        },
    },
    Kind {
        name: "bg_itable_unused",
        make: |b, r| {
            if !b.inv.gdt_csum() {
                return None;
            }
            let gs: Vec<usize> = (0..b.inv.groups.len())
                .filter(|&g| b.inv.used_inodes(g) > 0)
                .collect();
            let g = *r.pick(&gs)?;
            let n = b.inv.ipg - r.below(b.inv.used_inodes(g).min(3));
            set_bg(&b.inv, g, "itable_unused", n)
        },
    },
    Kind {
        name: "bg_checksum",
        make: |b, r| {
            if !b.inv.gdt_csum() {
                return None;
            }
            let g = r.index(b.inv.groups.len());
            let old = b.u16_at(b.inv.gd_off(g) + 0x1E);
            let new = old ^ (r.range(1, 0xFFFF) as u16);
            made(
                format!("group {g} checksum {old:#x} -> {new:#x}"),
                vec![dfs(format!("set_bg {g} checksum {new:#x}"))],
            )
        },
    },
    Kind {
        name: "bg_flags_uninit",
        make: |b, r| {
            if !b.inv.gdt_csum() {
                return None;
            }
            let gs: Vec<usize> = (0..b.inv.groups.len())
                .filter(|&g| b.inv.used_inodes(g) > 0)
                .collect();
            let g = *r.pick(&gs)?;
            let old = b.u16_at(b.inv.gd_off(g) + 0x12);
            // INODE_UNINIT on a group with inodes in use, or BLOCK_UNINIT.
            let set = if r.chance(1, 2) { 1 } else { 2 };
            set_bg(&b.inv, g, "flags", old | set)
        },
    },
    Kind {
        name: "bg_metadata_location",
        make: |b, r| {
            let g = r.index(b.inv.groups.len());
            let field = *r.pick(&["block_bitmap", "inode_bitmap", "inode_table"])?;
            let to = if r.chance(1, 2) {
                b.inv.blocks + r.range(1, 1000)
            } else {
                // Onto the superblock / descriptor area of group 0.
                b.inv.first_data_block + r.below(2)
            };
            set_bg(&b.inv, g, field, to)
        },
    },
    Kind {
        name: "ssv_free_blocks",
        make: |b, r| {
            let n = b.inv.free_blocks + r.range(1, 500);
            made(
                format!("superblock free_blocks_count = {n}"),
                vec![dfs(format!("ssv free_blocks_count {n}"))],
            )
        },
    },
    Kind {
        name: "ssv_free_inodes",
        make: |b, r| {
            let n = b.inv.free_inodes - r.range(1, 50);
            made(
                format!("superblock free_inodes_count = {n}"),
                vec![dfs(format!("ssv free_inodes_count {n}"))],
            )
        },
    },
    Kind {
        name: "raw_sb_free_blocks",
        make: |b, r| {
            let n = (b.inv.free_blocks + r.range(1, 500)) as u32;
            made(
                format!("superblock free blocks (raw, no checksum update) = {n}"),
                vec![Step::Raw(1024 + 0x0C, n.to_le_bytes().to_vec())],
            )
        },
    },
    Kind {
        name: "raw_gd_free_blocks",
        make: |b, r| {
            let g = r.index(b.inv.groups.len());
            let n = (b.inv.groups[g].free_blocks + r.range(1, 50)) as u16;
            made(
                format!("group {g} free blocks (raw, no checksum update) = {n}"),
                vec![Step::Raw(b.inv.gd_off(g) + 0x0C, n.to_le_bytes().to_vec())],
            )
        },
    },
    Kind {
        name: "htree_limit",
        make: |b, r| {
            let (ino, p) = htree_root(b, r, 1)?;
            let limit = b.u16_at(p * BS + 0x20);
            let to = *r.pick(&[0, limit - 1, limit + 1, 0xFFFF])?;
            made(
                format!("htree dir {ino} root ({p}) limit {limit} -> {to}"),
                vec![Step::Raw(p * BS + 0x20, to.to_le_bytes().to_vec())],
            )
        },
    },
    Kind {
        name: "htree_count",
        make: |b, r| {
            let (ino, p) = htree_root(b, r, 1)?;
            let limit = b.u16_at(p * BS + 0x20);
            let count = b.u16_at(p * BS + 0x22);
            let to = *r.pick(&[0, limit + 1, count + 1])?;
            made(
                format!("htree dir {ino} root ({p}) count {count} -> {to}"),
                vec![Step::Raw(p * BS + 0x22, to.to_le_bytes().to_vec())],
            )
        },
    },
    Kind {
        name: "htree_hash_order",
        make: |b, r| swap_root_entries(b, r, 0, "hashes"),
    },
    Kind {
        name: "htree_leaf_swap",
        // Hash order stays intact; the two leaves now sit under each other's hash
        // ranges (the htree certification after pass 2 must notice).
        make: |b, r| swap_root_entries(b, r, 4, "leaves"),
    },
    Kind {
        name: "htree_root_info",
        make: |b, r| {
            let (ino, p) = htree_root(b, r, 1)?;
            let (off, val, what) = *r.pick(&[
                (0x1C, 9u8, "hash_version 9"),
                (0x1D, 0u8, "info_length 0"),
                (0x1E, 4u8, "indirect_levels 4"),
                (0x18, 1u8, "reserved_zero 1"),
            ])?;
            made(
                format!("htree dir {ino} root ({p}) {what}"),
                vec![Step::Raw(p * BS + off, vec![val])],
            )
        },
    },
    Kind {
        name: "rmdir_lost_found",
        make: |_, _| {
            made(
                "rmdir /lost+found".into(),
                vec![dfs("rmdir /lost+found".into())],
            )
        },
    },
    Kind {
        name: "orphan_list_head",
        make: |b, r| {
            let i = b.inv.file(r)?;
            made(
                format!("superblock last_orphan = {}", i.ino),
                vec![dfs(format!("ssv last_orphan {}", i.ino))],
            )
        },
    },
];

// ---------------------------------------------------------------------------------------
// Running the checkers.

/// What e2fsck printed: the passes it reported problems in, and the pass it aborted in
/// (e2fsck -n aborts when it may not salvage a corrupted directory block, for example).
struct E2fsckPasses {
    passes: BTreeSet<String>,
    aborted_in: Option<String>,
}

/// The order of the passes.
const PASS_ORDER: &[&str] = &["0", "1", "1-htree", "1B", "2", "3", "4", "5"];

fn pass_rank(p: &str) -> usize {
    PASS_ORDER.iter().position(|x| *x == p).unwrap_or(0)
}

fn e2fsck_passes(stdout: &str, stderr: &str) -> E2fsckPasses {
    let mut v = BTreeSet::new();
    let mut cur = "0".to_string();
    for line in stdout.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("Pass ") {
            if let Some((p, _)) = rest.split_once(':') {
                cur = match p {
                    "1B" | "1C" | "1D" => "1B".to_string(),
                    "3A" => "3".to_string(),
                    p => p.to_string(),
                };
                continue;
            }
        }
        // Not problems: blank lines, headings, the summary, and lines that only go with
        // the problem before them (indented details, a question on a line of its own).
        // (A problem line ends its sentence before an inline prompt: "... not set. Fix?
        // no", "...  Fix? no"; a prompt on its own line has no sentence before it.)
        let prompt_only = (l.ends_with("? no") || l.ends_with("? yes")) && !l.contains(". ");
        if l.is_empty()
            || line.starts_with([' ', '\t'])
            || prompt_only
            || l == "IGNORED."
            || l.contains("**********")
            || (l.contains(" files (") && l.ends_with(" blocks"))
            || l.starts_with("Running additional passes")
            || l.starts_with("Restarting e2fsck")
            || l.starts_with("e2fsck 1.")
        {
            continue;
        }
        // Optimisation hints, not inconsistencies (they do not change the exit status).
        if l.contains("could be more shallow")
            || l.contains("could be shorter")
            || l.contains("could be narrower")
        {
            continue;
        }
        let low = l.to_ascii_lowercase();
        if cur == "1" && (low.contains("htree") || l.contains("LARGE_DIR")) {
            v.insert("1-htree".to_string());
        } else {
            v.insert(cur.clone());
        }
    }
    let mut aborted_in = None;
    for l in stderr.lines() {
        let l = l.trim();
        if l == "e2fsck: aborted" {
            aborted_in = Some(cur.clone());
        } else if l.starts_with("ext2fs_open")
            || l.starts_with("ext2fs_check_desc")
            || l.starts_with("e2fsck: Superblock")
            || l.starts_with("e2fsck: Group descriptors")
            || (l.starts_with("e2fsck: ") && l.contains("while trying to open"))
        {
            // What opening the file system found (superblock, descriptors). Other lines
            // on stderr are library warnings that go with problems printed on stdout, or
            // the reason for an abort.
            v.insert("0".to_string());
        }
    }
    E2fsckPasses {
        passes: v,
        aborted_in,
    }
}

fn mapped(e: &str) -> &'static [&'static str] {
    PASS_MAP.iter().find(|m| m.0 == e).map_or(&[][..], |m| m.1)
}

/// What one case found.
struct Outcome {
    kind: &'static str,
    id: String,
    desc: String,
    e_exit: Option<i32>,
    e_passes: BTreeSet<String>,
    e_aborted: Option<String>,
    e_out: String,
    u_exit: Option<i32>,
    /// Passes of usfs problems: all, and error severity only.
    u_all: BTreeSet<String>,
    u_err: BTreeSet<String>,
    u_problems: Vec<String>,
    u_raw: String,
    verdict_ok: bool,
    passes_ok: bool,
    /// Why the comparison failed (empty when it agrees).
    issue: String,
    known: Option<&'static str>,
    /// `usfs fsck -fy` on a case usfs found damaged: its exit, and what went wrong.
    r_exit: Option<i32>,
    r_issue: String,
}

struct CaseSpec {
    kind: usize,
    base: usize,
    inst: usize,
    seed: u64,
}

fn case_seed(seed: u64, kind: usize, base: usize, inst: usize) -> u64 {
    let mut r = Rng::new(seed ^ ((kind as u64) << 32) ^ ((base as u64) << 16) ^ inst as u64);
    r.next_u64()
}

fn run_case(s: &Scratch, bases: &[Base], c: &CaseSpec, n: usize) -> Option<Outcome> {
    let base = &bases[c.base];
    let kind = &KINDS[c.kind];
    let img = s.path(&format!("case-{n}.img"));
    let mut rng = Rng::new(c.seed);
    let mut setup_err = String::new();
    let mut desc = None;
    let mut steps = Vec::new();
    for _attempt in 0..5 {
        let m = (kind.make)(base, &mut rng)?;
        base.write_copy(&img);
        let cmds: Vec<String> = m
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Debugfs(c) => Some(c.clone()),
                Step::Raw(..) => None,
            })
            .collect();
        if !cmds.is_empty() {
            let (code, _, err) = debugfs(&img, true, &cmds);
            let bad: Vec<&str> = err
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.starts_with("debugfs 1."))
                .collect();
            if code != Some(0) || !bad.is_empty() {
                setup_err = format!("{} -> {code:?} {}", cmds.join("; "), bad.join(" | "));
                continue; // another target
            }
        }
        let f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
        for st in &m.steps {
            if let Step::Raw(off, bytes) = st {
                f.write_all_at(bytes, *off).unwrap();
            }
        }
        desc = Some(m.desc);
        steps = m.steps;
        break;
    }
    let desc =
        desc.unwrap_or_else(|| panic!("{}: cannot set up the corruption: {setup_err}", kind.name));

    let mut e = Command::new("e2fsck");
    e.arg("-fn").arg(&img).env("E2FSCK_CONFIG", "/dev/null");
    let (e_exit, e_stdout, e_stderr) = run_limited(&mut e, LIMIT);
    let e_stdout = String::from_utf8_lossy(&e_stdout).into_owned();
    let e_stderr = String::from_utf8_lossy(&e_stderr).into_owned();
    let E2fsckPasses {
        passes: e_passes,
        aborted_in,
    } = e2fsck_passes(&e_stdout, &e_stderr);

    let threads = if c.inst.is_multiple_of(2) { "2" } else { "1" };
    let mut u = Command::new(usfs());
    u.args(["fsck", "-n", "-j", threads, "--json"]).arg(&img);
    let (u_exit, u_stdout, u_stderr) = run_limited(&mut u, LIMIT);
    let u_raw = String::from_utf8_lossy(&u_stdout).into_owned();

    let mut issue = String::new();
    let mut u_all = BTreeSet::new();
    let mut u_err = BTreeSet::new();
    let mut u_problems = Vec::new();
    match serde_json::from_str::<Value>(u_raw.trim()) {
        Ok(j) => {
            for p in j["problems"].as_array().cloned().unwrap_or_default() {
                let pass = p["pass"].as_str().unwrap_or("?").to_string();
                let sev = p["severity"].as_str().unwrap_or("?");
                u_problems.push(format!(
                    "[{pass} {sev} {} {}] {}",
                    p["code"].as_str().unwrap_or("?"),
                    p["name"].as_str().unwrap_or("?"),
                    p["message"].as_str().unwrap_or("?")
                ));
                if sev == "error" {
                    u_err.insert(pass.clone());
                }
                u_all.insert(pass);
            }
            if j["exit"].as_i64().map(|x| x as i32) != u_exit {
                issue += &format!("usfs JSON exit {} but process exit {u_exit:?}; ", j["exit"]);
            }
        }
        Err(err) => {
            issue += &format!(
                "usfs output is not JSON ({err}); stderr: {}; ",
                String::from_utf8_lossy(&u_stderr).trim()
            );
        }
    }
    let mut fatal = !issue.is_empty();
    match u_exit {
        None => {
            issue += "usfs hung (killed after the time limit); ";
            fatal = true;
        }
        Some(0) | Some(4) => {}
        // e2fsck -n gives up too (e.g. a superblock whose checksum fails): same verdict.
        Some(8) if e_exit == Some(8) => {}
        Some(x) => {
            issue += &format!(
                "usfs exit {x} (no verdict){}; ",
                if x == 101 { ": panic" } else { "" }
            );
            fatal = true;
        }
    }
    if e_exit.is_none() {
        issue += "e2fsck hung; ";
    }
    let verdict_ok = !fatal && (e_exit == Some(0)) == (u_exit == Some(0));
    if !verdict_ok && !fatal {
        issue += &format!("verdicts differ (e2fsck {e_exit:?}, usfs {u_exit:?}); ");
    }
    let uncovered: Vec<&String> = e_passes
        .iter()
        .filter(|p| !u_all.iter().any(|u| mapped(p).contains(&u.as_str())))
        .collect();
    // Passes after the one e2fsck aborted in never ran: nothing to compare there.
    let unjustified: Vec<&String> = u_err
        .iter()
        .filter(|u| {
            aborted_in
                .as_deref()
                .is_none_or(|a| pass_rank(u) <= pass_rank(a))
        })
        .filter(|u| !e_passes.iter().any(|p| mapped(p).contains(&u.as_str())))
        .collect();
    // Both gave up (exit 8): there are no passes to compare.
    let both_gave_up = e_exit == Some(8) && u_exit == Some(8);
    let (uncovered, unjustified) = if both_gave_up {
        (Vec::new(), Vec::new())
    } else {
        (uncovered, unjustified)
    };
    let passes_ok = !fatal && uncovered.is_empty() && unjustified.is_empty();
    if !uncovered.is_empty() {
        issue += &format!("e2fsck pass(es) {uncovered:?} not covered by usfs; ");
    }
    if !unjustified.is_empty() {
        issue += &format!("usfs error pass(es) {unjustified:?} not reported by e2fsck; ");
    }
    let mut o = Outcome {
        kind: kind.name,
        id: format!("{}/{}/{}", kind.name, base.name, c.inst),
        desc,
        e_exit,
        e_passes,
        e_aborted: aborted_in,
        e_out: format!("{e_stdout}{e_stderr}"),
        u_exit,
        u_all,
        u_err,
        u_problems,
        u_raw,
        verdict_ok,
        passes_ok,
        issue,
        known: None,
        r_exit: None,
        r_issue: String::new(),
    };
    if u_exit == Some(4) {
        repair_case(&img, &mut o, base, &steps);
    }
    if !(fatal || verdict_ok && passes_ok) {
        o.known = KNOWN_DISAGREEMENTS
            .iter()
            .find(|k| k.kind == kind.name && (k.base == "*" || k.base == base.name) && (k.when)(&o))
            .map(|k| k.reason);
    }
    match std::env::var_os("USFS_CORPUS_KEEP") {
        Some(dir) if !o.issue.is_empty() && o.known.is_none() => {
            let to = Path::new(&dir).join(format!("{}.img", o.id.replace('/', "-")));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::rename(&img, &to)
                .or_else(|_| std::fs::copy(&img, &to).map(|_| ()))
                .unwrap();
            let _ = std::fs::remove_file(&img);
        }
        _ => {
            let _ = std::fs::remove_file(&img);
        }
    }
    Some(o)
}

/// `usfs fsck -fy` on a case usfs found damaged: never a hang, a panic or an exit 8
/// without a message; a repair it reports (exit 1, or 0 where, as e2fsck, it fixed only
/// what does not mark the file system changed: descriptor checksums of groups without
/// uninit flags) leaves an image e2fsck -fn finds clean
/// in which every regular file the corruption did not touch (see [`touched`]) holds its
/// contents (at its path or in lost+found); a stop without a repair (exit 4, nothing
/// modified) leaves the image byte for byte.
fn repair_case(img: &Path, o: &mut Outcome, base: &Base, steps: &[Step]) {
    let before = std::fs::read(img).unwrap();
    let (code, out, err) = run_limited(
        Command::new(usfs())
            .args(["fsck", "-fy", "-j", "2"])
            .arg(img),
        LIMIT,
    );
    let out = String::from_utf8_lossy(&out);
    o.r_exit = code;
    o.r_issue = match code {
        None => "usfs fsck -fy hung".into(),
        Some(0 | 1) => {
            let (e, eout, _) = run_limited(Command::new("e2fsck").arg("-fn").arg(img), LIMIT);
            match e {
                Some(0) => untouched_files_kept(img, base, steps)
                    .err()
                    .unwrap_or_default(),
                _ => format!(
                    "usfs fsck -fy repaired (exit 1) but e2fsck -fn exit {e:?}: {}",
                    e2fsck_excerpt(&String::from_utf8_lossy(&eout))
                ),
            }
        }
        Some(4) => {
            let touched = out.contains("WAS MODIFIED") || out.contains("recovering journal");
            if !touched && std::fs::read(img).unwrap() != before {
                "usfs fsck -fy changed nothing it reports, but the image changed".into()
            } else {
                String::new()
            }
        }
        Some(8) if !err.is_empty() => String::new(),
        Some(c) => format!("usfs fsck -fy exit {c}"),
    };
    if let Some(dir) = std::env::var_os("USFS_CORPUS_KEEP").filter(|_| !o.r_issue.is_empty()) {
        std::fs::create_dir_all(&dir).unwrap();
        let name = format!("{}.before-repair.img", o.id.replace('/', "-"));
        std::fs::write(Path::new(&dir).join(name), &before).unwrap();
    }
}

/// A scratch directory for an exported tree named `name`: in /dev/shm when there is one
/// (creating a few hundred files there costs nothing; on a busy disk, seconds).
fn tree_dir(name: &str) -> PathBuf {
    let shm = Path::new("/dev/shm");
    let root = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    root.join(format!("usfs-corpus-{}-{name}", std::process::id()))
}

/// Regular file inode -> a hash of its contents, for the image at `img` (exported into
/// `tree`, a scratch directory, and listed with `usfs ls -R -i`).
fn file_hashes(img: &Path, tree: &Path) -> Result<BTreeMap<u32, u64>, String> {
    let _ = std::fs::remove_dir_all(tree);
    let (code, _, err) = run_limited(Command::new(usfs()).arg("export").arg(img).arg(tree), LIMIT);
    if code != Some(0) {
        return Err(format!(
            "usfs export exit {code:?}: {}",
            String::from_utf8_lossy(&err)
        ));
    }
    let (code, out, err) = run_limited(
        Command::new(usfs()).args(["ls", "-R", "-i"]).arg(img),
        LIMIT,
    );
    if code != Some(0) {
        return Err(format!(
            "usfs ls -R -i exit {code:?}: {}",
            String::from_utf8_lossy(&err)
        ));
    }
    let mut out_map = BTreeMap::new();
    let mut dir = String::new();
    for line in String::from_utf8_lossy(&out).lines() {
        if let Some(d) = line.strip_suffix(':').filter(|d| d.starts_with('/')) {
            dir = d.trim_end_matches('/').to_string();
            continue;
        }
        let Some((ino, name)) = line.trim_start().split_once(' ') else {
            continue;
        };
        let Ok(ino) = ino.parse::<u32>() else {
            continue;
        };
        let path = tree.join(format!("{dir}/{name}").trim_start_matches('/'));
        let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
        if regular && !out_map.contains_key(&ino) {
            let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut h = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&bytes, &mut h);
            out_map.insert(ino, std::hash::Hasher::finish(&h));
        }
    }
    let _ = std::fs::remove_dir_all(tree);
    Ok(out_map)
}

/// The inodes a corruption touched: those its debugfs commands name (`<N>`), the owners
/// of blocks it frees, marks or overwrites, the inodes whose table slots it overwrites,
/// every inode of a group whose descriptor it changes, and the files named in a touched
/// directory; `None` when it changes the
/// superblock's geometry or orphan list (anything may follow).
fn touched(inv: &Inv, steps: &[Step]) -> Option<BTreeSet<u32>> {
    let mut out = BTreeSet::new();
    let owners = |blk: u64, out: &mut BTreeSet<u32>| {
        for (ino, i) in &inv.inos {
            let holds = i.data.iter().any(|r| blk >= r.1 && blk < r.1 + r.2)
                || i.tree.contains(&blk)
                || i.file_acl == blk;
            if holds {
                out.insert(*ino);
            }
        }
    };
    let itable_blocks = inv.ipg * inv.inode_size / BS;
    for st in steps {
        match st {
            Step::Debugfs(c) => {
                for part in c.split('<').skip(1) {
                    if let Some(n) = part.split('>').next().and_then(|n| n.parse().ok()) {
                        out.insert(n);
                    }
                }
                let words: Vec<&str> = c.split_whitespace().collect();
                match words.as_slice() {
                    ["freeb" | "setb", blk, ..] => owners(blk.parse().ok()?, &mut out),
                    ["set_bg", g, ..] => {
                        let g: u64 = g.parse().ok()?;
                        out.extend((g * inv.ipg + 1..=(g + 1) * inv.ipg).map(|i| i as u32));
                    }
                    ["ssv", f, ..] if !f.contains("free_") => return None,
                    // The file whose entry goes (its directory is named above).
                    ["unlink", at] => {
                        let (dir, name) = at.split_once('/')?;
                        let dir: u32 = dir.trim_matches(|c| c == '<' || c == '>').parse().ok()?;
                        out.extend(inv.inos.iter().filter_map(|(ino, i)| {
                            (i.name.as_ref() == Some(&(dir, name.to_string()))).then_some(*ino)
                        }));
                    }
                    _ => {}
                }
            }
            Step::Raw(off, bytes) => {
                let (first, last) = (off / BS, (off + bytes.len().max(1) as u64 - 1) / BS);
                for blk in first..=last {
                    owners(blk, &mut out);
                    for (g, grp) in inv.groups.iter().enumerate() {
                        if blk >= grp.itable && blk < grp.itable + itable_blocks {
                            let lo = (blk - grp.itable) * BS / inv.inode_size;
                            let hi = lo + BS / inv.inode_size;
                            let base = g as u64 * inv.ipg + 1;
                            out.extend((base + lo..base + hi).map(|i| i as u32));
                        }
                    }
                }
            }
        }
    }
    // A damaged directory may lose entries: the files it names are touched too (an
    // empty file whose entry goes is cleared, by e2fsck as by usfs).
    let dirs: Vec<u32> = out
        .iter()
        .copied()
        .filter(|d| inv.inos.get(d).is_some_and(|i| i.kind == 'd'))
        .collect();
    for (ino, i) in &inv.inos {
        if i.name.as_ref().is_some_and(|(d, _)| dirs.contains(d)) {
            out.insert(*ino);
        }
    }
    Some(out)
}

/// After a repair: every regular file of `base` whose inode the corruption did not touch
/// is in the repaired image `img` with the same contents.
fn untouched_files_kept(img: &Path, base: &Base, steps: &[Step]) -> Result<(), String> {
    let Some(touched) = touched(&base.inv, steps) else {
        return Ok(());
    };
    let tree = tree_dir(&img.file_name().unwrap_or_default().to_string_lossy());
    let now = file_hashes(img, &tree).map_err(|e| format!("after the repair: {e}"))?;
    let lost: Vec<String> = base
        .files
        .iter()
        .filter(|(ino, h)| !touched.contains(ino) && now.get(ino) != Some(h))
        .map(|(ino, _)| match now.get(ino) {
            None => format!("inode {ino} gone"),
            Some(_) => format!("inode {ino} changed"),
        })
        .collect();
    match lost.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "usfs fsck -fy lost files the corruption did not touch: {}",
            lost.join(", ")
        )),
    }
}

fn passes(s: &BTreeSet<String>) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s.iter().cloned().collect::<Vec<_>>().join(",")
    }
}

/// The e2fsck output without pass headings and the summary, shortened.
fn e2fsck_excerpt(out: &str) -> String {
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| {
            !l.trim().is_empty()
                && !l.starts_with("Pass ")
                && !l.starts_with("e2fsck 1.")
                && !l.contains("**********")
        })
        .collect();
    let mut s = lines
        .iter()
        .take(24)
        .map(|l| format!("      {l}\n"))
        .collect::<String>();
    if lines.len() > 24 {
        let _ = writeln!(s, "      ... ({} more lines)", lines.len() - 24);
    }
    s
}

// ---------------------------------------------------------------------------------------
// The test.

fn build_base(s: &Scratch, src: &Path, spec: &BaseSpec) -> Base {
    let img = s.path(&format!("base-{}.img", spec.name));
    match spec.populate {
        Populate::Mke2fs => mke2fs(&img, SIZE, spec.args, Some(src)),
        Populate::Kernel => {
            mke2fs(&img, SIZE, spec.args, None);
            let m = Mount::new(&img, &s.path(&format!("mnt-{}", spec.name)), "ext4", "");
            sh(&format!(
                "cp -a '{}'/. '{}'/",
                src.display(),
                m.dir.display()
            ));
        }
    }
    // Both checkers must find the base image clean.
    let mut e = Command::new("e2fsck");
    e.arg("-fn").arg(&img).env("E2FSCK_CONFIG", "/dev/null");
    let (code, out, err) = run_limited(&mut e, LIMIT);
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    assert!(
        code == Some(0) && e2fsck_passes(&out, &err).passes.is_empty(),
        "base image {} is not clean for e2fsck:\n{out}{err}",
        spec.name
    );
    let (code, out, _) = run_limited(
        Command::new(usfs())
            .args(["fsck", "-n", "--json"])
            .arg(&img),
        LIMIT,
    );
    assert_eq!(
        code,
        Some(0),
        "base image {} is not clean for usfs fsck: {}",
        spec.name,
        String::from_utf8_lossy(&out)
    );
    let inv = inventory(&img);
    assert!(inv.groups.len() >= 2, "{}: fewer than 2 groups", spec.name);
    let files = file_hashes(&img, &tree_dir(&format!("base-{}", spec.name)))
        .unwrap_or_else(|e| panic!("base image {}: {e}", spec.name));
    let bytes = std::fs::read(&img).unwrap();
    let chunks = (0..bytes.len().div_ceil(CHUNK))
        .filter(|&i| {
            bytes[i * CHUNK..((i + 1) * CHUNK).min(bytes.len())]
                .iter()
                .any(|&b| b != 0)
        })
        .collect();
    let _ = std::fs::remove_file(&img);
    Base {
        name: spec.name,
        files,
        bytes,
        chunks,
        inv,
    }
}

#[test]
fn fsck_corruption_corpus_agrees_with_e2fsck() {
    let test = "fsck_corpus";
    if !need_root(test) {
        return;
    }
    for tool in ["mke2fs", "e2fsck", "debugfs", "dumpe2fs"] {
        if !need_tool(test, tool) {
            return;
        }
    }
    let started = Instant::now();
    let seed = std::env::var("USFS_CORPUS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(SEED);
    let only = std::env::var("USFS_CORPUS_ONLY").ok();
    let verbose = std::env::var("USFS_CORPUS_VERBOSE").is_ok_and(|v| v == "1");
    let s = Scratch::new(test);

    // A small tree: ~1000 entries, a 400-entry directory (an htree when the kernel
    // writes it), files up to 1 MiB, a 100-extent sparse file (an extent tree block),
    // symlinks, hard links, devices, xattrs (some in xattr blocks).
    let src = s.path("src");
    let mut opts = GenOptions::new(Profile::Small, seed);
    opts.files = 40;
    opts.big_dir_entries = 400;
    opts.medium_dir_entries = 60;
    opts.sparse_extents = 100;
    opts.max_file_size = 1 << 20;
    opts.max_symlink_len = 1000;
    opts.max_xattr_size = 250;
    opts.max_xattrs_per_file = 16;
    opts.times_32bit = true;
    opts.hardlinked_symlinks = false;
    generate(&src, &opts).expect("generate tree");

    let bases: Vec<Base> = BASES.iter().map(|b| build_base(&s, &src, b)).collect();
    for b in &bases {
        let n = |k: char| b.inv.inos.values().filter(|i| i.kind == k).count();
        eprintln!(
            "base {:14} {} groups, {} files, {} dirs ({} htree), {} symlinks, {} xattr blocks, {} with tree blocks; features: {}",
            b.name,
            b.inv.groups.len(),
            n('f'),
            n('d'),
            b.inv.inos.values().filter(|i| i.flags & INDEX_FL != 0).count(),
            n('l'),
            b.inv.inos.values().filter(|i| i.file_acl != 0).count(),
            b.inv.inos.values().filter(|i| !i.tree.is_empty()).count(),
            b.inv.features.join(" ")
        );
    }
    eprintln!("base images ready after {:.1?}", started.elapsed());

    // The cases: every kind on every base image it fits, INSTANCES times.
    let mut cases = Vec::new();
    for (k, kind) in KINDS.iter().enumerate() {
        if only.as_deref().is_some_and(|o| !kind.name.contains(o)) {
            continue;
        }
        for (bi, b) in bases.iter().enumerate() {
            for inst in 0..INSTANCES {
                let cs = case_seed(seed, k, bi, inst);
                if (kind.make)(b, &mut Rng::new(cs)).is_some() {
                    cases.push(CaseSpec {
                        kind: k,
                        base: bi,
                        inst,
                        seed: cs,
                    });
                }
            }
        }
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Outcome)>> = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Some(c) = cases.get(n) else { break };
                if let Some(o) = run_case(&s, &bases, c, n) {
                    results.lock().unwrap().push((n, o));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    let results: Vec<Outcome> = results.into_iter().map(|r| r.1).collect();

    // Report.
    let mut table: BTreeMap<usize, (usize, usize, usize, usize, usize)> = BTreeMap::new();
    let kind_index = |name: &str| KINDS.iter().position(|k| k.name == name).unwrap();
    let mut failures = Vec::new();
    let mut known_hits: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut damaged, mut repaired, mut repair_failures) = (0, 0, Vec::new());
    for o in &results {
        if o.r_exit.is_some() || !o.r_issue.is_empty() {
            damaged += 1;
            repaired += usize::from(matches!(o.r_exit, Some(0 | 1)) && o.r_issue.is_empty());
        }
        // A repair that leaves what e2fsck finds is expected where the check already
        // disagrees with e2fsck (the checker does not see it: nothing fixes it).
        if !o.r_issue.is_empty() && o.issue.is_empty() {
            repair_failures.push(format!("{}: {}", o.id, o.r_issue));
        }
        let t = table.entry(kind_index(o.kind)).or_default();
        t.0 += 1;
        t.1 += usize::from(o.verdict_ok);
        t.2 += usize::from(o.verdict_ok && o.passes_ok);
        if !o.issue.is_empty() {
            if let Some(reason) = o.known {
                t.3 += 1;
                *known_hits.entry(reason).or_default() += 1;
            } else {
                t.4 += 1;
                failures.push(o);
            }
        }
        if verbose {
            eprintln!(
                "{:42} e2fsck {:?} [{}]  usfs {:?} [{}] err [{}] -fy {:?}  {}  {}  {}",
                o.id,
                o.e_exit,
                passes(&o.e_passes),
                o.u_exit,
                passes(&o.u_all),
                passes(&o.u_err),
                o.r_exit,
                o.desc,
                o.issue,
                o.r_issue
            );
        }
    }
    let mut report = String::new();
    let _ = writeln!(
        report,
        "\n{:26} {:>5} {:>8} {:>8} {:>6} {:>5}",
        "kind", "cases", "verdict", "passes", "known", "FAIL"
    );
    let mut tot = (0, 0, 0, 0, 0);
    for (k, t) in &table {
        let _ = writeln!(
            report,
            "{:26} {:>5} {:>8} {:>8} {:>6} {:>5}",
            KINDS[*k].name, t.0, t.1, t.2, t.3, t.4
        );
        tot = (
            tot.0 + t.0,
            tot.1 + t.1,
            tot.2 + t.2,
            tot.3 + t.3,
            tot.4 + t.4,
        );
    }
    let _ = writeln!(
        report,
        "{:26} {:>5} {:>8} {:>8} {:>6} {:>5}",
        "total", tot.0, tot.1, tot.2, tot.3, tot.4
    );
    let _ = writeln!(
        report,
        "{} kinds, {} cases; verdicts agree in {:.1}%, verdicts and passes in {:.1}%; {} documented, {} failing; seed {seed:#x}; {:.1?}",
        table.len(),
        tot.0,
        100.0 * tot.1 as f64 / tot.0.max(1) as f64,
        100.0 * tot.2 as f64 / tot.0.max(1) as f64,
        tot.3,
        tot.4,
        started.elapsed()
    );
    for k in KNOWN_DISAGREEMENTS {
        if !known_hits.contains_key(k.reason) && only.is_none() {
            let _ = writeln!(
                report,
                "note: documented disagreement {}/{} did not occur",
                k.kind, k.base
            );
        }
    }
    for o in &failures {
        let _ = writeln!(report, "\nFAIL {}: {}", o.id, o.desc);
        let _ = writeln!(report, "    {}", o.issue);
        let _ = writeln!(
            report,
            "    e2fsck -fn: exit {:?}, passes [{}]{}",
            o.e_exit,
            passes(&o.e_passes),
            o.e_aborted
                .as_ref()
                .map_or(String::new(), |a| format!(", aborted in pass {a}"))
        );
        report += &e2fsck_excerpt(&o.e_out);
        let _ = writeln!(
            report,
            "    usfs fsck -n: exit {:?}, passes [{}], error passes [{}]",
            o.u_exit,
            passes(&o.u_all),
            passes(&o.u_err)
        );
        for p in &o.u_problems {
            let _ = writeln!(report, "      {p}");
        }
        if o.u_problems.is_empty() && !o.u_raw.trim_start().starts_with('{') {
            let _ = writeln!(report, "      output: {}", o.u_raw.trim());
        }
    }
    eprintln!("{report}");
    eprintln!(
        "repair (usfs fsck -fy): {damaged} damaged cases, {repaired} repaired to what e2fsck -fn finds clean, {} failures",
        repair_failures.len()
    );
    for f in &repair_failures {
        eprintln!("  REPAIR FAIL {f}");
    }

    if only.is_none() {
        assert!(
            table.len() >= 30,
            "only {} corruption kinds ran",
            table.len()
        );
        for (k, t) in &table {
            assert!(t.0 >= 2, "kind {} has only {} case(s)", KINDS[*k].name, t.0);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases: usfs fsck disagrees with e2fsck -fn (see the list above)",
        failures.len(),
        tot.0
    );
    assert!(
        repair_failures.is_empty(),
        "{} repairs went wrong (see REPAIR FAIL above)",
        repair_failures.len()
    );
    // A floor, so a repair that stops fixing (it still stops cleanly, exit 4) is seen:
    // 386 of 775 at the default seed when this was written.
    if only.is_none() {
        assert!(
            repaired * 5 >= damaged * 2,
            "only {repaired} of {damaged} damaged cases repaired"
        );
    }
}
