//! Shared EROFS test support: a generated source tree, `usfs mkfs.erofs`, the option
//! sets usfs and mkfs.erofs 1.5 build with, and fsck.erofs's verdict.

use super::{run_limited, run_ok, usfs, Scratch};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use usfs_testkit::{generate, GenOptions, Profile};

/// Option sets `usfs mkfs.erofs` supports (erofs_images.rs builds each as a test).
pub(crate) const USFS_OPTION_SETS: &[&[&str]] = &[
    &[],
    &["-T", "1700000000", "-x", "0"],
    &["--all-root", "-x", "-1"],
    &["-zlz4"],
    &["-zlz4hc"],
    &["-zlz4hc,12"],
    &["-zlz4", "-Eztailpacking"],
    &["-zlz4", "-C65536"],
    &["-zlz4hc", "-C16384", "-Eztailpacking"],
    &["-zlz4", "-Elegacy-compress"],
    &["-zlz4hc", "-Elegacy-compress", "-C32768"],
    &["-zlz4", "-Efragments"],
    &["-zlz4hc", "-Efragments,ztailpacking", "-C65536"],
    &["-zlz4hc", "-Ededupe,ztailpacking"],
    &[
        "-zlz4",
        "--force-uid",
        "1234",
        "--force-gid",
        "70000",
        "-T",
        "0",
    ],
];

/// Option sets of mkfs.erofs 1.5 (Debian's).
pub(crate) const MKFS_EROFS_15_OPTION_SETS: &[&[&str]] = &[
    &[],
    &["-zlz4"],
    &["-zlz4hc"],
    &["-zlz4", "-Eztailpacking"],
    &["-zlz4hc", "-C65536"],
    &["-zlz4", "-Elegacy-compress"],
    &[
        "-zlz4hc",
        "-C16384",
        "-Eztailpacking",
        "-T",
        "1000",
        "-x",
        "1",
    ],
    &["-Enoinline_data"],
    &["-zlz4", "-Eforce-inode-extended"],
    &["--chunksize=8192"],
    &["--chunksize=65536", "-Eforce-chunk-indexes"],
    // (-Eforce-inode-compact refuses the generated tree: a directory too large.)
];

/// Does an option set need fragments (which fsck.erofs 1.5 cannot read)?
pub(crate) fn uses_fragments(args: &[&str]) -> bool {
    args.iter().any(|a| a.contains("fragments"))
}

/// Can the fsck.erofs in use judge images of this option set? 1.5 cannot read
/// fragments; 1.9.3 (`FSCK_EROFS`) decodes legacy (unpadded) LZ4 pclusters in full and
/// so rejects every `-Elegacy-compress` image, its own mkfs's included.
pub(crate) fn oracle_reads(args: &[&str]) -> bool {
    let newer = std::env::var_os("FSCK_EROFS").is_some();
    if newer {
        !args.iter().any(|a| a.contains("legacy-compress"))
    } else {
        !uses_fragments(args)
    }
}

/// A generated tree (files of every kind, hard links, xattrs, long names) in `s`/src.
pub(crate) fn gen_tree(s: &Scratch, seed: u64) -> PathBuf {
    let src = s.path("src");
    let opts = GenOptions::new(Profile::Small, seed);
    let report = generate(&src, &opts).expect("generate tree");
    eprintln!("tree: {report}");
    src
}

/// `usfs mkfs.erofs --quiet ARGS IMG SRC`.
pub(crate) fn usfs_mkfs(img: &Path, src: &Path, args: &[&str]) {
    run_ok(
        Command::new(usfs())
            .arg("mkfs.erofs")
            .arg("--quiet")
            .args(args)
            .arg(img)
            .arg(src),
    );
}

/// fsck.erofs's verdict on an image: true when it finds a problem. Run with
/// `--extract` (no directory) so that it decompresses every file; 1.5 exits 0 on some
/// errors (a bad superblock checksum), so `<E>` in its output counts too. `FSCK_EROFS`
/// names another binary (a local build of a newer version).
pub(crate) fn fsck_erofs_finds_damage(img: &Path) -> bool {
    let tool = std::env::var("FSCK_EROFS").unwrap_or_else(|_| "fsck.erofs".into());
    let (code, out, err) = run_limited(
        Command::new(tool).arg("--extract").arg(img),
        Duration::from_secs(60),
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&err)
    );
    code != Some(0) || text.contains("<E>")
}

/// Deterministic pseudo-random bytes (xorshift64*), incompressible.
pub(crate) fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}

/// A file-backed kernel mount of an EROFS image (`mount -t erofs -o ro IMAGE DIR`),
/// unmounted on drop (also when the test fails).
pub(crate) struct ErofsMount {
    /// The mount point.
    pub dir: PathBuf,
}

impl ErofsMount {
    pub(crate) fn new(image: &Path, dir: &Path) -> ErofsMount {
        ErofsMount::with_options(image, dir, "ro")
    }

    /// A mount with options `opts` (`ro,device=/dev/loop5`).
    pub(crate) fn with_options(image: &Path, dir: &Path, opts: &str) -> ErofsMount {
        std::fs::create_dir_all(dir).unwrap();
        run_ok(
            Command::new("mount")
                .args(["-t", "erofs", "-o", opts])
                .arg(image)
                .arg(dir),
        );
        ErofsMount {
            dir: dir.to_path_buf(),
        }
    }
}

impl Drop for ErofsMount {
    fn drop(&mut self) {
        super::unmount(&self.dir);
    }
}

/// Comparison of an image's tree with its source: EROFS keeps one time per inode (atime
/// reads as mtime), and the root's attributes are the builder's.
pub(crate) fn vs_source() -> usfs_testkit::CmpOptions {
    usfs_testkit::CmpOptions {
        atime: false,
        ignore_root_attrs: true,
        ..usfs_testkit::CmpOptions::default()
    }
}
