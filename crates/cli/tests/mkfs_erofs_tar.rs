//! `usfs mkfs.erofs --tar` against its oracles: tars made by GNU tar (gnu and pax
//! formats: long names and link targets, hard links, symlinks, devices, a fifo, xattrs,
//! a sparse file) and by Python's tarfile, plain, gzip- and zstd-compressed, from a file
//! and from standard input, stored plain and LZ4-compressed. The image's tree, through the kernel (`mount -t erofs`) and
//! through `usfs export`, equals GNU tar's extraction of the same tar; fsck.erofs and
//! `usfs fsck` accept it. A container layer with aufs whiteouts and an opaque directory
//! (`--aufs`, `--ovlfs-strip`) gives the tree mkfs.erofs 1.9.3 gives
//! (`MKFS_EROFS_193`, default /tmp/erofs-utils-1.9.3/mkfs/mkfs.erofs; skipped visibly
//! when absent). Bad archives fail with a message, never a panic.

mod common;

use common::erofs::{fsck_erofs_finds_damage, oracle_reads, ErofsMount};
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use usfs_testkit::{compare, CmpOptions};

/// Everything compared, times to the nanosecond (EROFS has no atime of its own).
fn cmp_opts() -> CmpOptions {
    CmpOptions {
        atime: false,
        ..CmpOptions::default()
    }
}

/// A source tree with every kind of entry tar carries.
fn make_tree(s: &Scratch) -> PathBuf {
    let src = s.path("src");
    let long = "n".repeat(120);
    sh(&format!(
        r#"set -e
cd '{src}' 2>/dev/null || mkdir -p '{src}' && cd '{src}'
mkdir -p d/sub 'd/{long}' empty
printf hello > d/a
: > d/empty-file
head -c 200000 /dev/urandom > d/big
printf deep > 'd/{long}/{long}'
ln d/a d/hard1
ln d/a 'd/{long}/hard2'
ln -s a d/sym
ln -s '{long}/{long}/../../{long}/{long}' d/longsym
mkfifo d/fifo
mknod d/cdev c 1 3
mknod d/bdev b 7 200
truncate -s 3M d/sparse
printf data1 | dd of=d/sparse bs=1 seek=1000000 conv=notrunc 2>/dev/null
printf data2 | dd of=d/sparse bs=1 seek=2500000 conv=notrunc 2>/dev/null
chmod 0750 d/sub
chmod 4755 d/big
chown 1234:5678 d/a
chown -h 42:43 d/sym
touch -h -d '2001-02-03 04:05:06.123456789' d/sym d/a d/sub
/usr/bin/python3 -c "import os; os.setxattr('d/a', 'user.k', b'v'); os.setxattr('d/sub', 'user.dirattr', b'x' * 300); os.setxattr('d', 'trusted.t', b'1')"
"#,
        src = src.display()
    ));
    src
}

/// GNU tar's extraction of `tar` (as root: owners, modes, devices, xattrs kept).
fn extract(s: &Scratch, tar: &Path, name: &str) -> PathBuf {
    let x = s.path(name);
    std::fs::create_dir_all(&x).unwrap();
    run_ok(
        Command::new("tar")
            .args(["--xattrs", "--xattrs-include=*", "--numeric-owner", "-xpf"])
            .arg(tar)
            .arg("-C")
            .arg(&x),
    );
    x
}

/// Builds `img` from `tar` with `args`, reading it from a file or from standard input.
fn mkfs_tar(img: &Path, tar: &Path, args: &[&str], stdin: bool) {
    let mut c = Command::new(usfs());
    c.args(["mkfs.erofs", "--quiet"]).args(args).arg(img);
    if stdin {
        c.arg("-").stdin(std::fs::File::open(tar).unwrap());
    } else {
        c.arg(tar);
    }
    let o = c.stderr(Stdio::piped()).output().unwrap();
    assert!(
        o.status.success(),
        "usfs mkfs.erofs {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The image's tree through the kernel and through `usfs export` equals `expected`;
/// fsck.erofs and `usfs fsck` accept it (fsck.erofs is skipped for option sets it
/// cannot read: 1.5 has no fragments).
fn check(img: &Path, expected: &Path, s: &Scratch, test: &str, args: &[&str]) {
    if oracle_reads(args) {
        assert!(
            !fsck_erofs_finds_damage(img),
            "{test}: fsck.erofs rejects the image"
        );
    } else {
        eprintln!("{test}: fsck.erofs cannot read {args:?}; the kernel and usfs check it");
    }
    let o = Command::new(usfs()).arg("fsck").arg(img).output().unwrap();
    assert!(
        o.status.success(),
        "{test}: usfs fsck: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let out = s.path("export");
    let _ = std::fs::remove_dir_all(&out);
    run_ok(Command::new(usfs()).arg("export").arg(img).arg(&out));
    {
        let m = ErofsMount::new(img, &s.path("mnt"));
        if let Err(d) = compare(expected, &m.dir, &cmp_opts()) {
            panic!("{test}: kernel mount differs from tar's extraction: {d}");
        }
    }
    match compare(expected, &out, &cmp_opts()) {
        Ok(st) => eprintln!("{test}: export vs extraction: {st}"),
        Err(d) => panic!("{test}: usfs export differs from tar's extraction: {d}"),
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// Tar `src` with GNU tar in `format`, build, compare with the extraction.
fn gnu_tar_case(test: &str, format: &str, compress: Option<&str>, stdin: bool, args: &[&str]) {
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = make_tree(&s);
    let tar = s.path("t.tar");
    sh(&format!(
        "tar --format={format} --xattrs --xattrs-include='*' --sparse -C '{}' -cf '{}' .",
        src.display(),
        tar.display()
    ));
    let x = extract(&s, &tar, "x");
    let input = match compress {
        Some(tool) => {
            let z = s.path("t.tar.z");
            sh(&format!(
                "{tool} -c '{}' > '{}'",
                tar.display(),
                z.display()
            ));
            z
        }
        None => tar,
    };
    let img = s.path("t.img");
    let args = [&["--tar=f"], args].concat();
    mkfs_tar(&img, &input, &args, stdin);
    check(&img, &x, &s, test, &args);
}

#[test]
fn gnu_format() {
    gnu_tar_case("tar-gnu", "gnu", None, false, &[]);
}

#[test]
fn pax_format() {
    gnu_tar_case(
        "tar-pax",
        "pax",
        None,
        false,
        &["-zlz4hc", "-Eztailpacking"],
    );
}

#[test]
fn gzip_from_a_file() {
    gnu_tar_case("tar-gzip", "pax", Some("gzip"), false, &[]);
}

#[test]
fn zstd_from_stdin() {
    if need_tool("tar-zstd", "zstd") {
        gnu_tar_case(
            "tar-zstd",
            "gnu",
            Some("zstd -q"),
            true,
            &["-zlz4", "-Efragments"],
        );
    }
}

#[test]
fn plain_from_stdin() {
    gnu_tar_case("tar-stdin", "pax", None, true, &[]);
}

#[test]
fn python_tarfile() {
    let test = "tar-python";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = make_tree(&s);
    for (fmt, name) in [
        ("PAX_FORMAT", "pax"),
        ("GNU_FORMAT", "gnu"),
        ("USTAR_FORMAT", "ustar"),
    ] {
        let tar = s.path(&format!("{name}.tar"));
        // ustar cannot hold the long names: that archive leaves them out.
        let o = Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(format!(
                "import tarfile,sys\n\
                 short = lambda i: i if len(i.name) < 100 and len(i.linkname) < 100 else None\n\
                 with tarfile.open(sys.argv[1], 'w', format=tarfile.{fmt}) as t:\n\
                 \x20t.add(sys.argv[2], arcname='.', filter=short if '{name}' == 'ustar' else None)"
            ))
            .arg(&tar)
            .arg(&src)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let x = extract(&s, &tar, &format!("x-{name}"));
        let img = s.path(&format!("{name}.img"));
        mkfs_tar(&img, &tar, &["--tar"], false);
        check(&img, &x, &s, &format!("{test}-{name}"), &[]);
    }
}

/// mkfs.erofs 1.9.3, if built locally.
fn mkfs_erofs_193(test: &str) -> Option<PathBuf> {
    let p = std::env::var_os("MKFS_EROFS_193")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/erofs-utils-1.9.3/mkfs/mkfs.erofs"));
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "SKIP {test}: mkfs.erofs 1.9.3 not found at {} (MKFS_EROFS_193)",
            p.display()
        );
        None
    }
}

/// A container layer: aufs whiteouts (a file, a directory), an opaque directory with
/// new contents, ordinary files.
fn make_layer(s: &Scratch) -> PathBuf {
    let l = s.path("layer");
    sh(&format!(
        r#"set -e
mkdir -p '{l}/etc/opq/sub' '{l}/usr/lib'
printf keep > '{l}/etc/keep'
: > '{l}/etc/.wh.gone'
: > '{l}/usr/.wh.bin'
: > '{l}/etc/opq/.wh..wh..opq'
printf new > '{l}/etc/opq/new'
printf lib > '{l}/usr/lib/x.so'
# Times in the past: mkfs.erofs 1.9.3 stores an inode whose mtime has the build time's
# second in the compact form, without nanoseconds.
find '{l}' -exec touch -h -d '2001-02-03 04:05:06.5' {{}} +
"#,
        l = l.display()
    ));
    let tar = s.path("layer.tar.gz");
    sh(&format!(
        "tar --format=pax -C '{}' -czf '{}' .",
        l.display(),
        tar.display()
    ));
    tar
}

#[test]
fn container_layer_whiteouts_as_mkfs_erofs_193() {
    let test = "tar-layer";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let tar = make_layer(&s);
    // (mkfs.erofs 1.9.3 reads gzip with --ungzip only; usfs finds it by its magic and
    // takes --ungzip for compatibility.)
    // Without --aufs (mkfs.erofs's default) the layer is taken as it is: `.wh.` files
    // stay files, as tar extracts them.
    let plain = s.path("plain.img");
    mkfs_tar(&plain, &tar, &["--tar=f"], false);
    let x = extract(&s, &tar, "x");
    check(&plain, &x, &s, "tar-layer-plain", &[]);
    // --aufs: overlayfs whiteouts and an opaque directory.
    let img = s.path("aufs.img");
    mkfs_tar(&img, &tar, &["--tar=f", "--aufs"], false);
    {
        let m = ErofsMount::new(&img, &s.path("mnt"));
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        for wh in ["etc/gone", "usr/bin"] {
            let md = std::fs::symlink_metadata(m.dir.join(wh)).unwrap();
            assert!(md.file_type().is_char_device() && md.rdev() == 0, "{wh}");
        }
        assert!(!m.dir.join("etc/.wh.gone").exists());
        assert!(!m.dir.join("etc/opq/.wh..wh..opq").exists());
        let opq = usfs_source::xattr::value(&m.dir.join("etc/opq"), b"trusted.overlay.opaque");
        assert_eq!(opq.unwrap(), b"y");
    }
    // A tar without directory entries (implied directories, the root made at build
    // time), with a later entry replacing an earlier one and a hard link to it.
    let l = s.path("layer");
    let implied = s.path("implied.tar");
    sh(&format!(
        "set -e; cd '{l}'; ln usr/lib/x.so usr/lib/y.so; \
         tar --no-recursion -cf '{t}' etc/keep etc/opq/.wh..wh..opq etc/opq/new usr/lib/x.so usr/lib/y.so; \
         printf replaced > etc/keep; chmod 600 etc/keep; tar --no-recursion -rf '{t}' etc/keep",
        l = l.display(),
        t = implied.display()
    ));
    let strict = CmpOptions::default();
    let roots_apart = CmpOptions {
        ignore_root_attrs: true,
        ..CmpOptions::default()
    };
    for (name, tar, args, cmp) in [
        (
            "aufs",
            &tar,
            &["--tar=f", "--ungzip", "--aufs"][..],
            &strict,
        ),
        (
            "strip",
            &tar,
            &["--tar=f", "--ungzip", "--aufs", "--ovlfs-strip=1"][..],
            &strict,
        ),
        // (-T: implied directories take the root's time, the build time, which two
        // builds may see in different seconds.)
        (
            "implied",
            &implied,
            &["--tar=f", "--aufs", "-T", "1000000000"][..],
            &roots_apart,
        ),
    ] {
        let ours = s.path(&format!("{name}.img"));
        mkfs_tar(&ours, tar, args, false);
        let o = Command::new(usfs())
            .arg("fsck")
            .arg(&ours)
            .output()
            .unwrap();
        assert!(o.status.success(), "{name}: usfs fsck");
        assert!(!fsck_erofs_finds_damage(&ours), "{name}: fsck.erofs");
        let Some(theirs_tool) = mkfs_erofs_193(test) else {
            continue;
        };
        let theirs = s.path(&format!("{name}-193.img"));
        run_ok(
            Command::new(&theirs_tool)
                .arg("--quiet")
                .args(args)
                .arg(&theirs)
                .arg(tar),
        );
        let a = ErofsMount::new(&theirs, &s.path("mnt-193"));
        let b = ErofsMount::new(&ours, &s.path("mnt-usfs"));
        match compare(&a.dir, &b.dir, cmp) {
            Ok(st) => eprintln!("{test}-{name}: usfs vs mkfs.erofs 1.9.3: {st}"),
            Err(d) => panic!("{test}-{name}: usfs's image differs from mkfs.erofs 1.9.3's: {d}"),
        }
    }
}

/// Runs `usfs mkfs.erofs ARGS IMG TAR` on bytes that are not a good tar: it must fail
/// with a message (exit 1), not panic or hang.
fn must_fail(s: &Scratch, name: &str, bytes: &[u8], args: &[&str], expect: &str) {
    let tar = s.path(&format!("{name}.tar"));
    std::fs::write(&tar, bytes).unwrap();
    let (code, _out, err) = run_limited(
        Command::new(usfs())
            .arg("mkfs.erofs")
            .args(args)
            .arg(s.path(&format!("{name}.img")))
            .arg(&tar),
        Duration::from_secs(20),
    );
    let err = String::from_utf8_lossy(&err);
    assert!(!err.contains("panicked"), "{name}: {err}");
    assert_eq!(code, Some(1), "{name}: exit {code:?}: {err}");
    assert!(
        err.contains(expect),
        "{name}: expected '{expect}' in: {err}"
    );
}

/// A one-entry ustar archive made by GNU tar (then damaged by the caller).
fn small_tar(s: &Scratch) -> Vec<u8> {
    sh(&format!(
        "mkdir -p '{d}' && printf 0123456789 > '{d}/f' && tar --format=ustar -C '{d}' -cf '{t}' f",
        d = s.path("small").display(),
        t = s.path("small.tar").display()
    ));
    std::fs::read(s.path("small.tar")).unwrap()
}

#[test]
fn bad_archives_fail_cleanly() {
    let s = Scratch::new("tar-bad");
    let good = small_tar(&s);
    must_fail(&s, "truncated", &good[..600], &["--tar"], "truncated");
    let mut sum = good.clone();
    sum[0] = b'g';
    must_fail(&s, "checksum", &sum, &["--tar"], "checksum");
    // Size 077777777777 (8 GiB) for a 10-byte file.
    let mut huge = good.clone();
    huge[124..135].copy_from_slice(b"77777777777");
    let sum: u32 = huge
        .iter()
        .take(512)
        .enumerate()
        .map(|(i, &b)| {
            if (148..156).contains(&i) {
                32
            } else {
                u32::from(b)
            }
        })
        .sum();
    huge[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    must_fail(&s, "huge", &huge, &["--tar"], "truncated");
    must_fail(&s, "garbage", &[0x55u8; 4096], &["--tar"], "tar header @ 0");
    // --tar=i refers to the tar's bytes: a compressed tar cannot be the device.
    sh(&format!(
        "gzip -c '{t}' > '{t}.gz'",
        t = s.path("small.tar").display()
    ));
    let gz = std::fs::read(s.path("small.tar.gz")).unwrap();
    must_fail(&s, "index-gzip", &gz, &["--tar=i"], "uncompressed tar file");
    // Only an opaque marker at the root: mkfs.erofs 1.9.3 refuses it too.
    sh(&format!(
        "mkdir -p '{d}' && : > '{d}/.wh..wh..opq' && tar -C '{d}' -cf '{t}' .wh..wh..opq",
        d = s.path("opq").display(),
        t = s.path("opq-src.tar").display()
    ));
    let opq = std::fs::read(s.path("opq-src.tar")).unwrap();
    must_fail(&s, "opq-root", &opq, &["--tar", "--aufs"], "opaque");
}

#[test]
fn dotdot_and_whiteout_only_archives() {
    let test = "tar-dotdot";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    // Names with `..` (GNU tar refuses to extract them; mkfs.erofs resolves them and
    // never leaves the root): written with Python's tarfile.
    let tar = s.path("dd.tar");
    let o = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(
            "import tarfile,io,sys\n\
             with tarfile.open(sys.argv[1], 'w') as t:\n\
             \x20for n, d in [('../../escape', b'e'), ('a/../b', b'b'), ('./c/./d', b'd')]:\n\
             \x20\x20i = tarfile.TarInfo(n); i.size = len(d); t.addfile(i, io.BytesIO(d))\n",
        )
        .arg(&tar)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let img = s.path("dd.img");
    mkfs_tar(&img, &tar, &["--tar"], false);
    {
        let m = ErofsMount::new(&img, &s.path("mnt"));
        assert_eq!(std::fs::read(m.dir.join("escape")).unwrap(), b"e");
        assert_eq!(std::fs::read(m.dir.join("b")).unwrap(), b"b");
        assert_eq!(std::fs::read(m.dir.join("c/d")).unwrap(), b"d");
        assert!(m.dir.join("a").is_dir());
    }
    assert!(!s.path("escape").exists() && !s.0.parent().unwrap().join("escape").exists());
    // A layer of whiteouts only.
    sh(&format!(
        "mkdir -p '{d}' && : > '{d}/.wh.x' && : > '{d}/.wh.y' && tar -C '{d}' -cf '{t}' .wh.x .wh.y",
        d = s.path("wh").display(),
        t = s.path("wh.tar").display()
    ));
    let img = s.path("wh.img");
    mkfs_tar(&img, &s.path("wh.tar"), &["--tar", "--aufs"], false);
    let m = ErofsMount::new(&img, &s.path("mnt"));
    use std::os::unix::fs::FileTypeExt;
    for n in ["x", "y"] {
        assert!(std::fs::symlink_metadata(m.dir.join(n))
            .unwrap()
            .file_type()
            .is_char_device());
    }
}

#[test]
fn pax_sparse_versions() {
    let test = "tar-sparse";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = make_tree(&s);
    for v in ["0.0", "0.1", "1.0"] {
        let tar = s.path(&format!("{v}.tar"));
        sh(&format!(
            "tar --format=pax --sparse --sparse-version={v} -C '{}' -cf '{}' ./d/sparse ./d/big",
            src.display(),
            tar.display()
        ));
        let x = extract(&s, &tar, &format!("x{v}"));
        let img = s.path(&format!("{v}.img"));
        mkfs_tar(&img, &tar, &["--tar"], false);
        let m = ErofsMount::new(&img, &s.path("mnt"));
        // No entry for the root or d: compare the files.
        if let Err(d) = compare(
            &x.join("d"),
            &m.dir.join("d"),
            &CmpOptions {
                ignore_root_attrs: true,
                ..cmp_opts()
            },
        ) {
            panic!("{test} {v}: {d}");
        }
    }
}

#[test]
fn mkfs_ext4_from_a_tar() {
    let test = "tar-ext4";
    if !need_root(test) || !need_tool(test, "e2fsck") {
        return;
    }
    let s = Scratch::new(test);
    let src = make_tree(&s);
    let tar = s.path("t.tar.gz");
    sh(&format!(
        "tar --format=pax --xattrs --xattrs-include='*' --sparse -C '{}' -czf '{}' .",
        src.display(),
        tar.display()
    ));
    let x = extract(&s, &tar, "x");
    let img = s.path("t.ext4");
    run_ok(
        Command::new(usfs())
            .args(["mkfs.ext4", "-q", "-d"])
            .arg(&tar)
            .arg(&img)
            .arg("32M"),
    );
    run_ok(Command::new("e2fsck").arg("-fn").arg(&img));
    let m = Mount::new(&img, &s.path("mnt"), "ext4", "ro");
    let opts = CmpOptions {
        ignore: vec!["lost+found".into()],
        ..cmp_opts()
    };
    match compare(&x, &m.dir, &opts) {
        Ok(st) => eprintln!("{test}: kernel ext4 mount vs extraction: {st}"),
        Err(d) => panic!("{test}: mkfs.ext4 -d TAR differs from tar's extraction: {d}"),
    }
}

#[test]
fn bsdtar_formats() {
    let test = "tar-bsdtar";
    if !need_root(test) || !need_tool(test, "bsdtar") {
        return;
    }
    let s = Scratch::new(test);
    let src = make_tree(&s);
    // pax: xattrs both as LIBARCHIVE.xattr (base64) and SCHILY.xattr records; gnutar:
    // GNU long names from libarchive.
    for fmt in ["pax", "gnutar"] {
        let tar = s.path(&format!("{fmt}.tar"));
        run_ok(
            Command::new("bsdtar")
                .args(["--format", fmt, "--xattrs", "-cf"])
                .arg(&tar)
                .arg("-C")
                .arg(&src)
                .arg("."),
        );
        let x = extract(&s, &tar, &format!("x-{fmt}"));
        let img = s.path(&format!("{fmt}.img"));
        mkfs_tar(&img, &tar, &["--tar=f"], false);
        check(&img, &x, &s, &format!("{test}-{fmt}"), &[]);
    }
}

/// A loop device over a file, detached on drop (also when the test fails).
struct Loop(String);

impl Loop {
    fn new(file: &Path) -> Loop {
        let o = run_ok(
            Command::new("losetup")
                .args(["-f", "--show", "-r"])
                .arg(file),
        );
        Loop(String::from_utf8_lossy(&o.stdout).trim().to_string())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// `usfs export [--device TAR] IMG` equals `expected` (compared with `opts`).
fn export_equals(
    img: &Path,
    device: Option<&Path>,
    (expected, opts): (&Path, &CmpOptions),
    s: &Scratch,
    what: &str,
) {
    let out = s.path("export");
    let _ = std::fs::remove_dir_all(&out);
    let mut c = Command::new(usfs());
    c.arg("export");
    if let Some(d) = device {
        c.arg("--device").arg(d);
    }
    run_ok(c.arg(img).arg(&out));
    if let Err(d) = compare(expected, &out, opts) {
        panic!("{what}: usfs export differs from tar's extraction: {d}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// `--tar=i`: a metadata-only image with 512-byte blocks whose files refer to their
/// bytes in the tar, its extra device. The kernel (`-o device=` a loop device over the
/// tar), `usfs export --device` and the image with the tar appended (read without
/// `--device`, as the kernel's flatdev) all give GNU tar's extraction; `usfs fsck`
/// accepts it with the device and says the device is missing without it; mkfs.erofs
/// 1.9.3's own --tar=i image (when there) reads the same through usfs, and both images
/// are compared in size. A sparse member is refused (its data is not whole in the tar).
#[test]
fn index_only_images_refer_to_the_tar() {
    let test = "tar-index";
    if !need_root(test) {
        return;
    }
    let s = Scratch::new(test);
    let src = make_tree(&s);
    let tar = s.path("t.tar");
    // (Without --sparse: the sparse file is stored whole.)
    sh(&format!(
        "tar --format=pax --xattrs --xattrs-include='*' -C '{}' -cf '{}' .",
        src.display(),
        tar.display()
    ));
    let x = extract(&s, &tar, "x");
    let img = s.path("i.img");
    mkfs_tar(&img, &tar, &["--tar=i"], false);
    let size = std::fs::metadata(&img).unwrap().len();
    assert_eq!(size % 512, 0);
    assert!(size < 64 << 10, "metadata only: {size} bytes");
    let fsck = |dev: bool| {
        let mut c = Command::new(usfs());
        c.arg("fsck");
        if dev {
            c.arg("--device").arg(&tar);
        }
        c.arg(&img).output().unwrap()
    };
    let o = fsck(true);
    assert!(
        o.status.success(),
        "usfs fsck --device: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = fsck(false);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not given (--device)"));
    let all = cmp_opts();
    export_equals(&img, Some(&tar), (&x, &all), &s, "--device");
    {
        let lo = Loop::new(&tar);
        let m = ErofsMount::with_options(&img, &s.path("mnt"), &format!("ro,device={}", lo.0));
        if let Err(d) = compare(&x, &m.dir, &cmp_opts()) {
            panic!("kernel mount of the --tar=i image differs from tar's extraction: {d}");
        }
    }
    let flat = s.path("flat.img");
    sh(&format!(
        "cat '{}' '{}' > '{}'",
        img.display(),
        tar.display(),
        flat.display()
    ));
    export_equals(&flat, None, (&x, &all), &s, "image and tar in one file");
    if let Some(theirs) = mkfs_erofs_193(test) {
        let t = s.path("193.img");
        run_ok(Command::new(&theirs).arg("--tar=i").arg(&t).arg(&tar));
        // (1.9.3 gives the root the build time, and drops the nanoseconds of a time
        // in the build's second: whole seconds.)
        let but_root = CmpOptions {
            ignore_root_attrs: true,
            time_granularity: usfs_testkit::TimeGranularity::Second,
            ..cmp_opts()
        };
        export_equals(
            &t,
            Some(&tar),
            (&x, &but_root),
            &s,
            "mkfs.erofs 1.9.3's --tar=i image",
        );
        let their_size = std::fs::metadata(&t).unwrap().len();
        eprintln!("{test}: usfs {size} bytes, mkfs.erofs 1.9.3 {their_size} bytes");
    }
    // A GNU sparse member: its data is not whole in the tar.
    let sparse = s.path("sparse.tar");
    sh(&format!(
        "tar --format=pax --sparse -C '{}' -cf '{}' d/sparse",
        src.display(),
        sparse.display()
    ));
    let bytes = std::fs::read(&sparse).unwrap();
    must_fail(&s, "index-sparse", &bytes, &["--tar=i"], "sparse member");
}
