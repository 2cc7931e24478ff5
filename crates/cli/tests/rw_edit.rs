//! Changing ext4 images against the kernel: the editing commands (`usfs cp/mkdir/rm/mv/
//! ln/chmod/chown`) and `usfs mount -o rw` do to one copy of an image what the kernel does
//! to another through a loop mount; the trees must then be equal (the project's
//! comparator, times set alike at the end), `e2fsck -fn` clean, and the kernel must mount
//! the usfs-written image and keep writing with e2fsck clean after.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use usfs_testkit::{compare, CmpOptions};

/// mke2fs layouts every test runs on.
/// `usfs` as the first argument: made by `usfs mkfs.ext4 -d` instead; `kernel`: made by
/// mke2fs and filled by the kernel (cp -a on a loop mount).
const LAYOUTS: &[(&str, &[&str])] = &[
    ("ext4", &["-t", "ext4", "-b", "4096"]),
    ("2k", &["-t", "ext4", "-b", "2048"]),
    ("usfs-mkfs", &["usfs"]),
    ("kernel-made", &["kernel"]),
    ("nocsum", &["-t", "ext4", "-O", "^metadata_csum"]),
    ("1k", &["-t", "ext4", "-b", "1024"]),
    ("nojournal", &["-t", "ext4", "-O", "^has_journal"]),
    (
        "no64bit",
        &[
            "-t",
            "ext4",
            "-O",
            "^64bit,^metadata_csum",
            "-E",
            "lazy_itable_init=1",
        ],
    ),
    ("ext3", &["-t", "ext3"]),
    ("ext2", &["-t", "ext2"]),
];

/// A source tree with files of many sizes, holes, links and subdirectories.
fn make_tree(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    sh(&format!(
        "cd '{}' && mkdir -p a/b/c d e && echo hello > a/hello && : > empty && \
         head -c 4095 /dev/urandom > a/b/odd && head -c 4096 /dev/urandom > a/b/even && \
         head -c 300000 /dev/urandom > a/b/c/big && truncate -s 5M sparse && \
         printf tail >> sparse && ln -s hello a/short && \
         ln -s $(printf 'x%.0s' $(seq 1 100)) a/long && ln a/hello d/hard && \
         for i in $(seq 1 300); do echo $i > e/f$i; done && chmod 0751 a && chmod 4755 a/hello",
        dir.display()
    ));
}

/// Both sides of one comparison: the usfs-written image and the kernel-written one.
struct Pair {
    usfs: PathBuf,
    kernel: PathBuf,
}

fn make_pair(s: &Scratch, name: &str, args: &[&str], src: &Path) -> Pair {
    let usfs_img = s.path(&format!("{name}-usfs.img"));
    match args.first() {
        Some(&"usfs") => usfs_ok(&[
            "mkfs.ext4",
            "-q",
            "-d",
            src.to_str().unwrap(),
            usfs_img.to_str().unwrap(),
            "64M",
        ]),
        Some(&"kernel") => {
            mke2fs(&usfs_img, "64M", &["-t", "ext4", "-b", "4096"], None);
            let m = Mount::new(&usfs_img, &s.path("fill"), "ext4", "");
            sh(&format!(
                "cp -a '{}'/. '{}'/ && sync",
                src.display(),
                m.dir.display()
            ));
        }
        _ => mke2fs(&usfs_img, "64M", args, Some(src)),
    }
    let kernel = s.path(&format!("{name}-kernel.img"));
    std::fs::copy(&usfs_img, &kernel).unwrap();
    Pair {
        usfs: usfs_img,
        kernel,
    }
}

/// The editing commands every layout gets (`extra`: a tree to copy in).
fn usfs_edits(img: &Path, extra: &Path) {
    let u = |rel: &str| format!("{}:{rel}", img.display());
    usfs_ok(&["mkdir", "-p", &u("/x/y/z")]);
    usfs_ok(&["mkdir", "-m", "0700", &u("/priv")]);
    usfs_ok(&["cp", "-r", extra.to_str().unwrap(), &u("/x/y")]);
    usfs_ok(&[
        "cp",
        extra.join("a/b/c/big").to_str().unwrap(),
        &u("/priv/big2"),
    ]);
    usfs_ok(&["rm", "-r", &u("/e")]);
    usfs_ok(&["rm", &u("/a/b/odd")]);
    usfs_ok(&["mv", &u("/a/hello"), &u("/d/renamed")]);
    usfs_ok(&["mv", &u("/x/y/extra/e"), &u("/priv")]);
    usfs_ok(&["ln", "-s", "../d/renamed", &u("/a/link2")]);
    usfs_ok(&["ln", &u("/d/renamed"), &u("/x/hard2")]);
    usfs_ok(&["chmod", "0640", &u("/a/b/even")]);
    usfs_ok(&["chmod", "g+w,o-r", &u("/a/b")]);
    usfs_ok(&["chown", "1234:5678", &u("/a/b/c/big")]);
    // A setgid directory: what is made in it takes its group, directories its bit too.
    usfs_ok(&["chown", "0:4321", &u("/d")]);
    usfs_ok(&["chmod", "2775", &u("/d")]);
    usfs_ok(&["mkdir", &u("/d/sub")]);
    usfs_ok(&["cp", "-r", extra.join("a").to_str().unwrap(), &u("/d/sub")]);
}

fn usfs_ok(args: &[&str]) {
    run_ok(Command::new(usfs()).args(args));
}

fn fsck_clean(img: &Path, what: &str) {
    let o = Command::new("e2fsck").arg("-fn").arg(img).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{what}: e2fsck -fn {}:\n{}{}",
        img.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Sets every time in the tree under `dir` to one value, so trees written at different
/// moments compare equal.
fn same_times(dir: &Path) {
    sh(&format!(
        "cd '{}' && find . -mindepth 1 -exec touch -h -d @1000000000 {{}} + && touch -d @1000000000 .",
        dir.display()
    ));
}

/// Mounts both images read-write, levels the times, then compares them read-only.
fn compare_images(s: &Scratch, p: &Pair, what: &str) {
    for img in [&p.usfs, &p.kernel] {
        let m = Mount::new(img, &s.path("lvl"), "ext4", "");
        same_times(&m.dir);
    }
    let a = Mount::new(&p.usfs, &s.path("cmp-usfs"), "ext4", "ro");
    let b = Mount::new(&p.kernel, &s.path("cmp-kernel"), "ext4", "ro");
    let opts = CmpOptions {
        atime: false,
        ..Default::default()
    };
    if let Err(d) = compare(&a.dir, &b.dir, &opts) {
        panic!("{what}: usfs and kernel trees differ: {d}");
    }
}

/// After usfs wrote an image, the kernel mounts it and keeps writing; e2fsck stays clean.
fn kernel_keeps_writing(s: &Scratch, img: &Path, what: &str) {
    {
        let m = Mount::new(img, &s.path("after"), "ext4", "");
        sh(&format!(
            "cd '{}' && mkdir -p kernel-after && cp -r /usr/share/doc/e2fsprogs kernel-after/ 2>/dev/null; \
             for i in $(seq 1 50); do echo $i > kernel-after/n$i; done; rm -f kernel-after/n1*; sync",
            m.dir.display()
        ));
    }
    fsck_clean(img, &format!("{what}: after the kernel wrote more"));
}

#[test]
fn editing_commands_match_the_kernel() {
    if !need_root("editing_commands_match_the_kernel") || !need_tool("editing", "mke2fs") {
        return;
    }
    let s = Scratch::new("rw-edit");
    let src = s.path("src");
    make_tree(&src);
    let extra = s.path("extra");
    make_tree(&extra);
    for (name, args) in LAYOUTS {
        let p = make_pair(&s, name, args, &src);
        usfs_edits(&p.usfs, &extra);
        fsck_clean(&p.usfs, &format!("{name}: usfs editing commands"));
        // The kernel side, the same steps.
        {
            let m = Mount::new(&p.kernel, &s.path("k"), "ext4", "");
            let d = m.dir.display();
            sh(&format!(
                "cd '{d}' && umask 022 && mkdir -p x/y/z && mkdir -m 0700 priv && cp -r '{e}' x/y && \
                 cp '{e}/a/b/c/big' priv/big2 && rm -r e && rm a/b/odd && mv a/hello d/renamed && \
                 mv x/y/extra/e priv && ln -s ../d/renamed a/link2 && ln d/renamed x/hard2 && \
                 chmod 0640 a/b/even && chmod g+w,o-r a/b && chown 1234:5678 a/b/c/big && \
                 chown 0:4321 d && chmod 2775 d && mkdir d/sub && cp -r '{e}/a' d/sub",
                e = extra.display()
            ));
        }
        compare_images(&s, &p, name);
        kernel_keeps_writing(&s, &p.usfs, name);
    }
}

#[test]
fn copy_out_and_image_to_image_preserve_everything() {
    if !need_root("copy_out") || !need_tool("copy_out", "mke2fs") {
        return;
    }
    let s = Scratch::new("rw-cpout");
    let src = s.path("src");
    make_tree(&src);
    let img = s.path("a.img");
    mke2fs(&img, "64M", &["-t", "ext4"], Some(&src));
    let out = s.path("out");
    usfs_ok(&[
        "cp",
        "-a",
        &format!("{}:/", img.display()),
        out.to_str().unwrap(),
    ]);
    // mke2fs -d keeps whole seconds only (the copies keep what the image holds).
    let opts = CmpOptions {
        atime: false,
        time_granularity: usfs_testkit::TimeGranularity::Second,
        ignore: vec!["lost+found".into()],
        ignore_root_attrs: true,
        ..Default::default()
    };
    // The whole tree (a copy of /a alone would rightly give a/hello one link: its other
    // name, d/hard, stays behind).
    compare(&src, &out, &opts).unwrap_or_else(|d| panic!("copy out: {d}"));
    // Image to image with -a: same tree (times kept by -p).
    let img2 = s.path("b.img");
    mke2fs(&img2, "64M", &["-t", "ext4", "-b", "1024"], None);
    usfs_ok(&[
        "cp",
        "-a",
        &format!("{}:/", img.display()),
        &format!("{}:/copy", img2.display()),
    ]);
    fsck_clean(&img2, "image to image");
    let m = Mount::new(&img2, &s.path("m2"), "ext4", "ro");
    compare(&src, &m.dir.join("copy"), &opts).unwrap_or_else(|d| panic!("image to image: {d}"));
}

#[test]
fn a_second_writer_and_a_kernel_mount_are_refused() {
    if !need_root("second_writer") || !need_tool("second_writer", "mke2fs") {
        return;
    }
    let s = Scratch::new("rw-lock");
    let img = s.path("a.img");
    mke2fs(&img, "32M", &["-t", "ext4"], None);
    let _m = Mount::new(&img, &s.path("m"), "ext4", "");
    let o = Command::new(usfs())
        .args(["mkdir", &format!("{}:/x", img.display())])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("attached to /dev/loop"), "{err}");
}

#[test]
fn full_disk_gives_enospc_and_a_clean_image() {
    if !need_tool("full_disk", "mke2fs") {
        return;
    }
    let s = Scratch::new("rw-full");
    let img = s.path("a.img");
    mke2fs(&img, "8M", &["-t", "ext4", "-O", "^has_journal"], None);
    let big = s.path("big");
    sh(&format!(
        "head -c 20000000 /dev/urandom > '{}'",
        big.display()
    ));
    let (code, _, err) = run_limited(
        Command::new(usfs()).args([
            "cp",
            big.to_str().unwrap(),
            &format!("{}:/big", img.display()),
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(1), "a copy larger than the image must fail");
    let err = String::from_utf8_lossy(&err);
    assert!(
        err.contains("No space left") || err.contains("no space"),
        "{err}"
    );
    fsck_clean(&img, "after ENOSPC");
    // Freeing it makes room again.
    usfs_ok(&["rm", &format!("{}:/big", img.display())]);
    fsck_clean(&img, "after removing the partial file");
}

/// 64 KiB blocks (which this kernel cannot mount): the same edits as on a 4 KiB image,
/// e2fsck clean, and both exports equal once their times are levelled.
#[test]
fn editing_commands_on_64k_blocks() {
    if !need_tool("editing_64k", "mke2fs") {
        return;
    }
    let s = Scratch::new("rw-edit-64k");
    let src = s.path("src");
    make_tree(&src);
    let extra = s.path("extra");
    make_tree(&extra);
    let mut outs = Vec::new();
    for bs in ["65536", "4096"] {
        let img = s.path(&format!("{bs}.img"));
        mke2fs(&img, "256M", &["-t", "ext4", "-b", bs], Some(&src));
        usfs_edits(&img, &extra);
        fsck_clean(&img, &format!("{bs}-byte blocks: usfs editing commands"));
        let out = s.path(&format!("{bs}.out"));
        usfs_ok(&["export", img.to_str().unwrap(), out.to_str().unwrap()]);
        same_times(&out);
        outs.push(out);
    }
    let opts = CmpOptions {
        atime: false,
        ..Default::default()
    };
    if let Err(d) = compare(&outs[0], &outs[1], &opts) {
        panic!("64 KiB and 4 KiB blocks differ after the same edits: {d}");
    }
}

/// A directory of 100,000 entries copied in (the htree grows to two index levels), part
/// of it removed, against the kernel doing the same.
#[test]
fn a_hundred_thousand_entries_match_the_kernel() {
    if !need_root("100k_entries") || !need_tool("100k_entries", "mke2fs") {
        return;
    }
    let s = Scratch::new("rw-100k");
    let d = s.path("src/d");
    std::fs::create_dir_all(&d).unwrap();
    for i in 0..100_000 {
        std::fs::File::create(d.join(format!("entry-with-a-longer-name-{i}"))).unwrap();
    }
    let a = s.path("usfs.img");
    mke2fs(
        &a,
        "512M",
        &["-t", "ext4", "-b", "4096", "-N", "120000"],
        None,
    );
    let b = s.path("kernel.img");
    std::fs::copy(&a, &b).unwrap();
    let u = |rel: &str| format!("{}:{rel}", a.display());
    usfs_ok(&["cp", "-r", d.to_str().unwrap(), &u("/d")]);
    let gone: Vec<String> = (0..100_000)
        .step_by(97)
        .map(|i| u(&format!("/d/entry-with-a-longer-name-{i}")))
        .collect();
    let mut args = vec!["rm"];
    args.extend(gone.iter().map(String::as_str));
    usfs_ok(&args);
    fsck_clean(&a, "100k entries");
    {
        let m = Mount::new(&b, &s.path("k"), "ext4", "");
        sh(&format!(
            "cp -r '{}' '{d}/d' && cd '{d}/d' && for i in $(seq 0 97 99999); do rm entry-with-a-longer-name-$i; done",
            d.display(),
            d = m.dir.display()
        ));
    }
    compare_images(&s, &Pair { usfs: a, kernel: b }, "100k entries");
}

/// inline_data layouts: 4 KiB blocks, 1 KiB blocks with large inodes (a long
/// `system.data`), no metadata_csum, and block maps instead of extents (the last two at
/// mke2fs's 1 KiB default for 64M).
const INLINE_LAYOUTS: &[(&str, &[&str])] = &[
    (
        "inline-4k",
        &["-t", "ext4", "-O", "inline_data", "-b", "4096"],
    ),
    (
        "inline-1k-i1024",
        &[
            "-t",
            "ext4",
            "-O",
            "inline_data",
            "-b",
            "1024",
            "-I",
            "1024",
        ],
    ),
    (
        "inline-nocsum",
        &["-t", "ext4", "-O", "inline_data,^metadata_csum"],
    ),
    (
        "inline-noextent",
        &["-t", "ext4", "-O", "inline_data,^extent,^64bit"],
    ),
];

/// A tree mke2fs -d stores inline: files under 60 bytes (i_block only), files of 60-150
/// bytes (the rest in `system.data`), small directories (mke2fs keeps their entries in
/// i_block; the edits add more in `system.data`, or overflow and convert), and a few
/// files to copy over them.
fn make_inline_tree(dir: &Path, extra: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::create_dir_all(extra).unwrap();
    sh(&format!(
        "cd '{}' && mkdir -p d1 d2 d3 d4 d5/s d6 d8 && \
         for f in t1 t2 t3 t4 t5; do printf 'tiny %s\\n' $f > $f; done && \
         for f in m1 m2 m3 m4; do head -c 75 /dev/urandom | base64 -w0 | head -c 100 > $f; done && \
         echo a > d1/a && echo b > d1/bb && echo c > d2/c && \
         for i in 1 2 3; do echo $i > d3/entry_$i; done && \
         echo s > d5/s/x && echo y > d5/y && echo z > d6/z && echo p > d8/p && echo q > d8/q && \
         cd '{}' && printf 'forty bytes of text, give or take a few\\n' > small && \
         head -c 90 /dev/urandom | base64 -w0 | head -c 120 > mid && \
         head -c 5000 /dev/urandom > big && printf 'short\\n' > short",
        dir.display(),
        extra.display()
    ));
}

/// The inline data size debugfs reports for `path` in `img` (None: not inline).
fn inline_size(img: &Path, path: &str) -> Option<u64> {
    let o = Command::new("debugfs")
        .args(["-R", &format!("stat {path}")])
        .arg(img)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    let v = text.split("Size of inline data: ").nth(1)?;
    v.split_whitespace().next()?.parse().ok()
}

#[test]
fn inline_data_images_are_edited_like_the_kernel() {
    if !need_root("inline_data_images") || !need_tool("inline_data_images", "mke2fs") {
        return;
    }
    let s = Scratch::new("rw-inline");
    let (src, extra) = (s.path("src"), s.path("extra"));
    make_inline_tree(&src, &extra);
    let x = |f: &str| extra.join(f).to_str().unwrap().to_string();
    for (name, args) in INLINE_LAYOUTS {
        let p = make_pair(&s, name, args, &src);
        let u = |rel: &str| format!("{}:{rel}", p.usfs.display());
        // usfs side.
        usfs_ok(&["cp", &x("small"), &u("/t1")]); // stays in i_block
        usfs_ok(&["cp", &x("mid"), &u("/t2")]); // grows into system.data
        usfs_ok(&["cp", &x("big"), &u("/t3")]); // converts to a block
        usfs_ok(&["cp", "/etc/services", &u("/m1")]);
        usfs_ok(&["cp", &x("short"), &u("/m2")]); // shrinks system.data
        usfs_ok(&["cp", &x("big"), &u("/d2/new")]);
        usfs_ok(&["rm", &u("/t4")]);
        usfs_ok(&["rm", &u("/d3/entry_2")]);
        usfs_ok(&["mv", &u("/d1/a"), &u("/d2/a")]);
        usfs_ok(&["mv", &u("/m3"), &u("/d1/m3")]);
        usfs_ok(&["mv", &u("/d3/entry_3"), &u("/d3/renamed_3")]);
        usfs_ok(&["mv", &u("/d6"), &u("/d1/d6")]);
        usfs_ok(&["mkdir", &u("/d2/sub")]);
        for i in 1..=36 {
            usfs_ok(&["mkdir", &u(&format!("/d4/dir_with_a_long_name_{i}"))]);
        }
        usfs_ok(&["rm", "-r", &u("/d5")]);
        usfs_ok(&["ln", &u("/t5"), &u("/d1/hard")]);
        usfs_ok(&["ln", "-s", "../t5", &u("/d3/sym")]);
        // d8 fills i_block, then its entries go on in system.data.
        for n in ["name_one", "name_two", "name_three", "name_four"] {
            usfs_ok(&["cp", &x("small"), &u(&format!("/d8/{n}"))]);
        }
        usfs_ok(&["rm", &u("/d8/name_three")]);
        usfs_ok(&["mv", &u("/d8/name_four"), &u("/d1/name_four")]);
        usfs_ok(&["mv", &u("/d8/q"), &u("/d8/q_renamed")]);
        fsck_clean(&p.usfs, &format!("{name}: usfs editing commands"));
        // Small changes stayed inline (system.data grew where needed), larger ones
        // converted.
        let inl = |path: &str| inline_size(&p.usfs, path);
        assert_eq!(inl("/t1"), Some(60), "{name}: /t1");
        assert!(inl("/t2") > Some(60), "{name}: /t2 {:?}", inl("/t2"));
        assert_eq!(inl("/m2"), Some(60), "{name}: /m2");
        assert!(inl("/d8") > Some(60), "{name}: /d8 {:?}", inl("/d8"));
        for path in ["/t3", "/m1", "/d4"] {
            assert_eq!(inl(path), None, "{name}: {path} should be block-mapped");
        }
        // The kernel side, the same steps.
        {
            let m = Mount::new(&p.kernel, &s.path("k"), "ext4", "");
            sh(&format!(
                "cd '{d}' && umask 022 && cp '{e}/small' t1 && cp '{e}/mid' t2 && \
                 cp '{e}/big' t3 && cp /etc/services m1 && cp '{e}/short' m2 && \
                 cp '{e}/big' d2/new && rm t4 && rm d3/entry_2 && mv d1/a d2/a && \
                 mv m3 d1/m3 && mv d3/entry_3 d3/renamed_3 && mv d6 d1/d6 && mkdir d2/sub && \
                 for i in $(seq 1 36); do mkdir d4/dir_with_a_long_name_$i; done && \
                 rm -r d5 && ln t5 d1/hard && ln -s ../t5 d3/sym && \
                 for n in name_one name_two name_three name_four; do cp '{e}/small' d8/$n; done && \
                 rm d8/name_three && mv d8/name_four d1/name_four && mv d8/q d8/q_renamed",
                d = m.dir.display(),
                e = extra.display()
            ));
        }
        compare_images(&s, &p, name);
        kernel_keeps_writing(&s, &p.usfs, name);
    }
}
