//! `usfs mkfs.ext4` against its oracles. For generated trees (with POSIX ACLs and
//! SELinux-style labels added) and several option sets, the image made by usfs alone must
//!  1. pass `e2fsck -fn` with no problem,
//!  2. mount in the kernel and equal the source tree in content and every attribute
//!     (nanosecond times, owners, modes, xattrs incl. system.*, holes, links, devices),
//!  3. export with `usfs export` to a tree equal to the kernel's view, and
//!  4. take writes from the kernel (create, append, delete many files, in htree
//!     directories too) and still pass `e2fsck -fn`.
//!
//! The kernel here refuses 64 KiB-block ext4, so that set is checked with e2fsck and the
//! export only. Also: out-of-space and out-of-inodes are clean errors leaving a valid
//! image, -N sets the inode count, and a fixed UUID and time give identical images.
//! Sizes from 64 MiB to 16 TiB (in /dev/shm: the host /tmp cannot hold that file).

mod common;

use common::*;
use std::path::Path;
use std::process::Command;
use usfs_testkit::{compare, generate, CmpOptions, GenOptions, Profile};

struct Case {
    name: &'static str,
    args: &'static [&'static str],
    size: &'static str,
    block_size: usize,
    /// The kernel can mount it.
    mountable: bool,
    profile: Profile,
    seed: u64,
}

fn gen_options(case: &Case) -> GenOptions {
    let mut opts = GenOptions::new(case.profile, case.seed);
    // A symlink target must fit in one block, and the xattrs that do not fit in the
    // inode in one xattr block.
    let bs = case.block_size;
    opts.max_symlink_len = opts.max_symlink_len.min(bs - 1);
    opts.max_xattr_size = opts.max_xattr_size.min(bs / 4);
    if bs < 4096 {
        opts.max_xattrs_per_file = 16;
    }
    opts
}

/// A POSIX ACL in the xattr format (version 2): (tag, perm, id) entries.
fn acl(entries: &[(u16, u16, u32)]) -> Vec<u8> {
    let mut v = 2u32.to_le_bytes().to_vec();
    for &(tag, perm, id) in entries {
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(&perm.to_le_bytes());
        v.extend_from_slice(&id.to_le_bytes());
    }
    v
}

/// Adds what the generator does not make: files and a directory with POSIX ACLs (access
/// and default, named users and groups) and security.selinux labels.
fn add_acls_and_labels(src: &Path) {
    let d = src.join("acl");
    std::fs::create_dir(&d).unwrap();
    let access = acl(&[
        (0x01, 6, u32::MAX),
        (0x02, 4, 1000),
        (0x04, 4, u32::MAX),
        (0x08, 6, 2000),
        (0x10, 6, u32::MAX),
        (0x20, 4, u32::MAX),
    ]);
    let default = acl(&[
        (0x01, 7, u32::MAX),
        (0x04, 5, u32::MAX),
        (0x20, 5, u32::MAX),
    ]);
    usfs_testkit::xattr::set(&d, b"system.posix_acl_default", &default).unwrap();
    usfs_testkit::xattr::set(&d, b"system.posix_acl_access", &access).unwrap();
    for i in 0..5 {
        let f = d.join(format!("f{i}"));
        std::fs::write(&f, format!("acl file {i}\n")).unwrap();
        usfs_testkit::xattr::set(&f, b"system.posix_acl_access", &access).unwrap();
        usfs_testkit::xattr::set(&f, b"security.selinux", b"system_u:object_r:usr_t:s0\0").unwrap();
    }
}

fn mkfs(img: &Path, size: &str, args: &[&str], src: Option<&Path>) -> std::process::Output {
    let mut c = Command::new(usfs());
    c.arg("mkfs.ext4").args(args);
    if let Some(s) = src {
        c.arg("-d").arg(s);
    }
    c.arg(img).arg(size);
    c.output().expect("run usfs mkfs.ext4")
}

/// `e2fsck -fn` must find nothing; returns its summary line.
fn e2fsck_clean(img: &Path, test: &str) -> String {
    let o = Command::new("e2fsck").arg("-fn").arg(img).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{test}: e2fsck -fn not clean:\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.lines().last().unwrap_or("").to_string()
}

/// The kernel writes into the image: new files in a new directory and in the big htree
/// directory, appends, deletions of many files and of a whole subtree, a large file.
fn kernel_writes(img: &Path, s: &Scratch, test: &str) {
    {
        let m = Mount::new(img, &s.path("mnt-w"), "ext4", "");
        let kw = m.dir.join("kernel-wrote");
        std::fs::create_dir(&kw).unwrap();
        for i in 0..2000 {
            std::fs::write(kw.join(format!("new-{i:05}")), format!("file {i}\n")).unwrap();
        }
        let big = m.dir.join("bigdir");
        let mut names: Vec<_> = std::fs::read_dir(&big)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        let mut removed = 0;
        for p in names.iter().step_by(2) {
            if std::fs::symlink_metadata(p).unwrap().is_file() {
                std::fs::remove_file(p).unwrap();
                removed += 1;
            }
        }
        assert!(
            removed > 100,
            "{test}: only {removed} files removed from bigdir"
        );
        for i in 0..1000 {
            std::fs::write(big.join(format!("added-by-kernel-{i}")), b"k").unwrap();
        }
        let mut appended = 0;
        for e in walk_files(&m.dir.join("tree")).into_iter().take(300) {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&e).unwrap();
            f.write_all(b"appended by the kernel\n").unwrap();
            appended += 1;
        }
        assert!(appended > 10, "{test}: appended to {appended} files");
        std::fs::write(m.dir.join("large.bin"), vec![0x5Au8; 12 << 20]).unwrap();
        std::fs::remove_dir_all(m.dir.join("sizes")).unwrap();
        std::fs::remove_dir_all(m.dir.join("dirs")).unwrap();
    }
    let summary = e2fsck_clean(img, &format!("{test} after kernel writes"));
    eprintln!("{test}: after kernel writes: {summary}");
}

fn walk_files(d: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![d.to_path_buf()];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

fn run_case(case: &Case) {
    let test = case.name;
    if !need_root(test) || !need_tool(test, "e2fsck") {
        return;
    }
    let s = Scratch::new(&format!("mkfs-{test}"));
    let src = s.path("src");
    let opts = gen_options(case);
    let report = generate(&src, &opts).expect("generate tree");
    add_acls_and_labels(&src);
    eprintln!("{test}: {report}");
    let img = s.path("image");
    let o = mkfs(&img, case.size, case.args, Some(&src));
    assert!(
        o.status.success(),
        "{test}: mkfs.ext4 failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("{test}: {}", String::from_utf8_lossy(&o.stdout).trim());
    let summary = e2fsck_clean(&img, test);
    eprintln!("{test}: {summary}");

    let out = s.path("out");
    let o = run_ok(Command::new(usfs()).arg("export").arg(&img).arg(&out));
    assert!(
        o.stderr.is_empty(),
        "{test}: export warned: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let vs_src = CmpOptions {
        // Reading a source directory updates its atime after its entry was copied.
        atime: false,
        ignore: vec!["lost+found".into()],
        ignore_root_attrs: true,
        system_xattrs: true,
        ..CmpOptions::default()
    };
    if case.mountable {
        let m = Mount::new(&img, &s.path("mnt-ro"), "ext4", "ro,noatime");
        match compare(&src, &m.dir, &vs_src) {
            Ok(st) => eprintln!("{test}: kernel vs source: {st}"),
            Err(d) => panic!("{test}: the kernel's view differs from the source: {d}"),
        }
        let exact = CmpOptions {
            system_xattrs: true,
            ..CmpOptions::default()
        };
        match compare(&m.dir, &out, &exact) {
            Ok(st) => eprintln!("{test}: export vs kernel: {st}"),
            Err(d) => panic!("{test}: export differs from the kernel mount: {d}"),
        }
        // Access times too: against a fresh copy of the source (the first was read).
        let fresh = s.path("fresh");
        generate(&fresh, &opts).expect("generate fresh tree");
        add_acls_and_labels(&fresh);
        let with_atime = CmpOptions {
            atime: true,
            ignore: vec!["lost+found".into(), "acl".into()],
            ignore_root_attrs: true,
            system_xattrs: true,
            ..CmpOptions::default()
        };
        match compare(&fresh, &m.dir, &with_atime) {
            Ok(st) => eprintln!("{test}: kernel vs fresh source with atimes: {st}"),
            Err(d) => panic!("{test}: atimes differ from a fresh source: {d}"),
        }
    } else {
        match compare(&src, &out, &vs_src) {
            Ok(st) => eprintln!("{test}: export vs source: {st}"),
            Err(d) => panic!("{test}: export differs from the source: {d}"),
        }
    }
    if case.mountable {
        kernel_writes(&img, &s, test);
    }
}

macro_rules! cases {
    ($( $fn:ident: $name:literal, [$($arg:literal),*], $size:literal, $bs:literal, $mountable:expr, $profile:expr, $seed:literal; )*) => {
        $(
            #[test]
            fn $fn() {
                run_case(&Case { name: $name, args: &[$($arg),*], size: $size, block_size: $bs,
                    mountable: $mountable, profile: $profile, seed: $seed });
            }
        )*
    };
}

cases! {
    default_4k: "default-4k", [], "1G", 4096, true, Profile::Small, 41;
    blocks_1k: "1k", ["-b", "1024"], "1G", 1024, true, Profile::Small, 42;
    blocks_2k_small_image: "2k-64M", ["-b", "2048"], "64M", 2048, true, Profile::Small, 43;
    blocks_64k: "64k", ["-b", "65536"], "1G", 65536, false, Profile::Small, 44;
    no_csum_uninit_bg_32bit: "nocsum", ["-O", "^metadata_csum,uninit_bg,^64bit"], "1G", 4096, true, Profile::Small, 45;
    no_flex_no_journal: "noflex", ["-O", "^flex_bg,^has_journal"], "512M", 4096, true, Profile::Small, 46;
    csum_seed_raid: "seed-raid", ["-O", "metadata_csum_seed", "-E", "stride=16,stripe_width=64", "-L", "usfs-raid"], "1G", 4096, true, Profile::Small, 47;
    huge_image_8t: "8T", [], "8T", 4096, true, Profile::Small, 48;
    full_profile_4k: "full-4k", [], "2G", 4096, true, Profile::Full, 49;
    full_profile_1k: "full-1k", ["-b", "1024", "-N", "150000"], "2G", 1024, true, Profile::Full, 50;
}

fn small_tree(s: &Scratch) -> std::path::PathBuf {
    let src = s.path("src");
    generate(&src, &GenOptions::new(Profile::Small, 60)).expect("generate");
    src
}

/// A tree larger than the image: a clear error, exit 1, and a valid (empty) image.
#[test]
fn out_of_space_is_a_clean_error() {
    if !need_root("out_of_space") || !need_tool("out_of_space", "e2fsck") {
        return;
    }
    let s = Scratch::new("mkfs-enospc");
    let src = small_tree(&s);
    let img = s.path("img");
    // 15M: the tree's upper-bound estimate (14314 1K blocks) must exceed what is free
    // (13355); at 16M it no longer does, and the first placement error (an inode whose
    // xattrs fit no 1K block) is reported instead.
    let o = mkfs(&img, "15M", &[], Some(&src));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("needs up to") && err.contains("blocks") && err.contains("free"),
        "unclear error: {err}"
    );
    e2fsck_clean(&img, "out_of_space");
    // Too few inodes (-N) likewise.
    let o = mkfs(&img, "256M", &["-N", "1000"], Some(&src));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("inodes"), "unclear error: {err}");
    e2fsck_clean(&img, "out_of_inodes");
}

/// A source file the scan cannot read, far into the tree while placement is still busy
/// with large files before it: a clear error naming the file, exit 1, and no hang (the
/// scan used to stop without waking placement, which then waited for a directory nobody
/// would scan). Run as an unprivileged user, who cannot read a mode-000 file.
#[test]
fn unreadable_source_file_is_a_clean_error_not_a_hang() {
    if !need_root("unreadable_source") || !need_tool("unreadable_source", "setpriv") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new("mkfs-unreadable");
    let src = s.path("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    let mut data: Vec<u8> = (0..8u32 << 20)
        .map(|j| (j.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for i in 0..24u8 {
        data[0] = i;
        std::fs::write(src.join(format!("a/f{i:02}")), &data).unwrap();
    }
    for d in 0..200 {
        let dir = src.join(format!("b/d{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("x"), format!("file {d}\n")).unwrap();
    }
    let bad = src.join("b/d150/y");
    std::fs::write(&bad, b"secret").unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o000)).unwrap();
    // The image's directory and a copy of usfs that the unprivileged user can reach.
    let out = s.path("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&s.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = out.join("usfs");
    std::fs::copy(usfs(), &bin).unwrap();
    for _ in 0..3 {
        let img = out.join("img");
        let _ = std::fs::remove_file(&img);
        let (code, _, err) = run_limited(
            Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(&bin)
                .args(["mkfs.ext4", "-q", "-j", "1", "-d"])
                .arg(&src)
                .arg(&img)
                .arg("1G"),
            std::time::Duration::from_secs(120),
        );
        let err = String::from_utf8_lossy(&err);
        assert_eq!(code, Some(1), "hung or wrong exit: {err}");
        assert!(
            err.contains("d150/y") && err.contains("Permission denied"),
            "unclear error: {err}"
        );
    }
}

/// -N sets the inode count (rounded up to whole inode-table blocks per group).
#[test]
fn inode_count_option() {
    if !need_tool("inode_count_option", "e2fsck") {
        return;
    }
    let s = Scratch::new("mkfs-N");
    let img = s.path("img");
    for (n, groups) in [(5000u64, 32u64), (100_000, 32)] {
        let o = mkfs(&img, "256M", &["-N", &n.to_string()], None);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let summary = e2fsck_clean(&img, "inode_count_option");
        // "img: 11/N files (...)"
        let total: u64 = summary
            .rsplit(": ")
            .next()
            .unwrap_or("")
            .split('/')
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no inode count in {summary}"));
        assert!(total >= n, "{total} inodes for -N {n}");
        assert!(
            total < n + groups * 8,
            "{total} inodes for -N {n}: rounded too far"
        );
    }
}

/// With a fixed UUID and time, the same tree gives byte-identical images (placement is
/// deterministic even though data is copied by parallel workers).
#[test]
fn fixed_uuid_and_time_give_identical_images() {
    if !need_root("reproducible") {
        return;
    }
    let s = Scratch::new("mkfs-repro");
    let src = small_tree(&s);
    let args = [
        "-b",
        "4096",
        "-U",
        "6b1d5a53-4a0e-4b6f-9b63-2f8a0d3c7e11",
        "-T",
        "1700000000",
    ];
    let a = s.path("a");
    let b = s.path("b");
    // Reading the source would update atimes (the tree has directories with future
    // mtimes, which relatime updates on every read): read it through a noatime bind
    // mount so both runs see the same source.
    let view = s.path("view");
    std::fs::create_dir(&view).unwrap();
    sh(&format!(
        "mount --bind '{}' '{}' && mount -o remount,bind,noatime '{}'",
        src.display(),
        view.display(),
        view.display()
    ));
    let guard = Mount { dir: view.clone() };
    let src = &guard.dir;
    for (img, j) in [(&a, "1"), (&b, "2")] {
        let mut all = args.to_vec();
        all.extend(["-j", j]);
        let o = mkfs(img, "300M", &all, Some(src));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (x, y) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert!(x == y, "images differ");
}

/// Bad options are refused with a message, not a panic.
#[test]
fn bad_options_are_refused() {
    let s = Scratch::new("mkfs-bad");
    let img = s.path("img");
    for (args, want) in [
        (&["-b", "3000"][..], "block size"),
        (&["-O", "bigalloc"][..], "bigalloc"),
        (&["-O", "nosuchfeature"][..], "nosuchfeature"),
        (&["-E", "bogus=1"][..], "bogus"),
        (&["-U", "not-a-uuid"][..], "UUID"),
        (&["-N", "100000000"][..], "inodes"),
    ] {
        let o = mkfs(&img, "64M", args, None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            matches!(o.status.code(), Some(1) | Some(2)),
            "{args:?}: {:?} {err}",
            o.status
        );
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let o = mkfs(&img, "10k", &[], None);
    assert!(!o.status.success());
}

/// The largest image: 16 TiB (2^32 blocks of 4 KiB, 131072 groups). The host's /tmp
/// (ext4) cannot hold a 16 TiB file, so the sparse image lives in /dev/shm (about 260 MB
/// of it is written).
#[test]
fn huge_image_16t() {
    let test = "16T";
    if !need_root(test) || !need_tool(test, "e2fsck") {
        return;
    }
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("SKIP {test}: no /dev/shm");
        return;
    }
    struct Remove(std::path::PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let s = Scratch::new("mkfs-16t");
    let src = s.path("src");
    let opts = GenOptions::new(Profile::Small, 61);
    generate(&src, &opts).expect("generate tree");
    let img = Remove(shm.join(format!("usfs-test-16t-{}.img", std::process::id())));
    let o = mkfs(&img.0, "16T", &[], Some(&src));
    assert!(
        o.status.success(),
        "{test}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("4294967296 blocks of 4096 bytes"), "{out}");
    eprintln!("{test}: {}", e2fsck_clean(&img.0, test));
    let m = Mount::new(&img.0, &s.path("mnt"), "ext4", "ro,noatime");
    let vs_src = CmpOptions {
        atime: false,
        ignore: vec!["lost+found".into()],
        ignore_root_attrs: true,
        ..CmpOptions::default()
    };
    match compare(&src, &m.dir, &vs_src) {
        Ok(st) => eprintln!("{test}: kernel vs source: {st}"),
        Err(d) => panic!("{test}: the kernel's view differs from the source: {d}"),
    }
}

/// -E root_owner, -L, -U, -T and -O land in the superblock and the root inode, read back
/// by `usfs stat`/`usfs info` and e2fsck.
#[test]
fn options_reach_the_image() {
    if !need_tool("options_reach_the_image", "e2fsck") {
        return;
    }
    let s = Scratch::new("mkfs-opts");
    let img = s.path("img");
    let o = mkfs(
        &img,
        "64M",
        &[
            "-E",
            "root_owner=42:43,stride=8,stripe_width=32",
            "-L",
            "usfs-label",
            "-U",
            "0a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9",
            "-T",
            "1600000000",
            "-O",
            "^has_journal",
            "-m",
            "1",
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    e2fsck_clean(&img, "options_reach_the_image");
    let st = run_ok(
        Command::new(usfs())
            .args(["stat", "--json"])
            .arg(&img)
            .arg("/"),
    );
    let st: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(
        (st["uid"].as_u64(), st["gid"].as_u64()),
        (Some(42), Some(43))
    );
    assert_eq!(st["mtime"]["sec"].as_i64(), Some(1_600_000_000));
    let info = run_ok(Command::new(usfs()).args(["info", "--json"]).arg(&img));
    let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
    let text = info.to_string();
    for want in [
        "usfs-label",
        "0a1b2c3d-4e5f-4061-8293-a4b5c6d7e8f9",
        "1600000000",
    ] {
        assert!(text.contains(want), "{want} missing from {text}");
    }
    let feats = info["Filesystem features"].as_str().unwrap_or("");
    assert!(!feats.contains("has_journal"), "{feats}");
    assert!(feats.contains("metadata_csum"), "{feats}");
    let d = Command::new("dumpe2fs")
        .arg("-h")
        .arg(&img)
        .output()
        .unwrap();
    let d = String::from_utf8_lossy(&d.stdout);
    assert!(d.contains("RAID stride:              8"), "{d}");
    assert!(d.contains("RAID stripe width:        32"), "{d}");
    assert!(d.contains("Reserved block count:     655"), "{d}");
}

/// All-zero blocks of the source become holes, as with `mke2fs -d`: in small files kept
/// in memory by the scan and in large ones read twice, in the middle, at the end (a zero
/// partial last block) and for a whole file; sparse sources keep their holes too. The
/// kernel and `usfs export` read every file back identically, and the blocks allocated
/// (st_blocks on the kernel mount) are exactly the non-zero ones.
#[test]
fn zero_blocks_become_holes() {
    if !need_root("zero_blocks") || !need_tool("zero_blocks", "e2fsck") {
        return;
    }
    let s = Scratch::new("mkfs-zeros");
    let src = s.path("src");
    std::fs::create_dir(&src).unwrap();
    const B: usize = 4096;
    let block = |fill: u8| vec![fill; B];
    // (name, content, data blocks expected)
    let mut files: Vec<(&str, Vec<u8>, u64)> = vec![
        ("middle", [block(1), block(0), block(2)].concat(), 2),
        ("all-zero", vec![0u8; 2 * B], 0),
        ("zero-tail", [block(3), vec![0u8; 100]].concat(), 1),
        ("zero-head", [vec![0u8; B], vec![4u8; 10]].concat(), 1),
    ];
    // 1 MiB: beyond what the scan keeps in memory (read again by the copy phase).
    let mut big = vec![0u8; 256 * B];
    big[..10 * B].fill(5);
    big[100 * B..150 * B].fill(6);
    big[255 * B + 17] = 7;
    files.push(("big", big, 61));
    for (name, data, _) in &files {
        std::fs::write(src.join(name), data).unwrap();
    }
    // A sparse source: a hole, then a data range whose first block is zeros.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(src.join("sparse")).unwrap();
        f.write_all_at(&[block(0), block(8)].concat(), 64 * B as u64)
            .unwrap();
        f.set_len(80 * B as u64).unwrap();
    }
    let img = s.path("img");
    let o = mkfs(&img, "64M", &["-b", "4096"], Some(&src));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    e2fsck_clean(&img, "zero_blocks");
    let m = Mount::new(&img, &s.path("mnt"), "ext4", "ro,noatime");
    let vs_src = CmpOptions {
        atime: false,
        ignore: vec!["lost+found".into()],
        ignore_root_attrs: true,
        ..CmpOptions::default()
    };
    if let Err(d) = compare(&src, &m.dir, &vs_src) {
        panic!("zero_blocks: the kernel's view differs from the source: {d}");
    }
    use std::os::unix::fs::MetadataExt;
    let sectors = |name: &str| std::fs::metadata(m.dir.join(name)).unwrap().blocks();
    for (name, _, blocks) in &files {
        assert_eq!(sectors(name), blocks * 8, "zero_blocks: {name}");
    }
    assert_eq!(sectors("sparse"), 8, "zero_blocks: sparse");
    let out = s.path("out");
    run_ok(Command::new(usfs()).arg("export").arg(&img).arg(&out));
    if let Err(d) = compare(&src, &out, &vs_src) {
        panic!("zero_blocks: the export differs from the source: {d}");
    }
}
