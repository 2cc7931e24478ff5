//! Path resolution across the host and a mounted image (made by `mke2fs -d`): prefixes,
//! `.` and `..`, symbolic links that try to leave the image, loops, trailing slashes, and
//! walks that start inside the image.

mod common;

use std::path::Path;
use std::sync::Arc;
use usfs_vfs::resolve::{resolve, Start};
use usfs_vfs::{Mount, MountSpec, MountTable, Resolved};

/// An image of a small tree, or None (with a SKIP line) without mke2fs.
fn image(dir: &Path) -> Option<std::path::PathBuf> {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    std::fs::write(src.join("a/b/f"), "x").unwrap();
    let link = |t: &str, l: &str| std::os::unix::fs::symlink(t, src.join(l)).unwrap();
    link("/a/b", "abs");
    link("../../../../..", "up");
    link("up/a/b/f", "via-up");
    link("loop", "loop");
    link("b/f", "a/rel");
    common::mke2fs_image(&src, dir)
}

fn names(r: &Resolved) -> String {
    match r {
        Resolved::Virtual(vp) => format!("virt:{}", String::from_utf8_lossy(&vp.inner_path())),
        Resolved::Host(h) => format!("host:{}", String::from_utf8_lossy(h)),
        Resolved::HostViaMount(h) => format!("host-via:{}", String::from_utf8_lossy(h)),
    }
}

#[test]
fn resolution_rules() {
    let dir = std::env::temp_dir().join(format!("usfs-vfs-resolve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(img) = image(&dir) else { return };
    let fs = usfs_vfs::open_image(&img).unwrap();
    let spec = MountSpec::parse(&format!("/mnt/img={}", img.display())).unwrap();
    let table = MountTable::new(vec![Mount::with_fs(spec, Arc::clone(&fs))]).unwrap();
    let r = |start: Start<'_>, p: &str, follow: bool| match resolve(
        &table,
        start,
        p.as_bytes(),
        follow,
    ) {
        Ok(r) => names(&r),
        Err(e) => format!("errno:{e}"),
    };
    let root = Start::Host(b"/");
    // Host paths and the prefix itself.
    assert_eq!(r(root, "/etc/passwd", true), "host:/etc/passwd");
    assert_eq!(r(root, "/mnt/img", true), "virt:/");
    assert_eq!(r(root, "/mnt/./img//a/./b/../b/f", true), "virt:/a/b/f");
    assert_eq!(r(root, "/mnt/x/../img/a", true), "virt:/a");
    // `..` written by the caller at the image root leaves the mount, like a kernel mount.
    assert_eq!(r(root, "/mnt/img/..", true), "host-via:/mnt");
    assert_eq!(r(root, "/mnt/img/a/../../../etc", true), "host-via:/etc");
    // Links never leave: absolute targets restart at the image root, `..` stops there.
    assert_eq!(r(root, "/mnt/img/abs/f", true), "virt:/a/b/f");
    assert_eq!(r(root, "/mnt/img/up", true), "virt:/");
    assert_eq!(r(root, "/mnt/img/via-up", true), "virt:/a/b/f");
    assert_eq!(r(root, "/mnt/img/a/rel", true), "virt:/a/b/f");
    assert_eq!(r(root, "/mnt/img/a/rel", false), "virt:/a/rel");
    // Loops, missing names, files used as directories.
    assert_eq!(
        r(root, "/mnt/img/loop", true),
        format!("errno:{}", libc::ELOOP)
    );
    assert_eq!(r(root, "/mnt/img/loop", false), "virt:/loop");
    assert_eq!(
        r(root, "/mnt/img/nope", true),
        format!("errno:{}", libc::ENOENT)
    );
    assert_eq!(
        r(root, "/mnt/img/a/b/f/", true),
        format!("errno:{}", libc::ENOTDIR)
    );
    assert_eq!(
        r(root, "/mnt/img/a/b/f/x", true),
        format!("errno:{}", libc::ENOTDIR)
    );
    assert_eq!(r(root, "", true), format!("errno:{}", libc::ENOENT));
    // Relative walks from a host directory above the prefix, and from inside the image.
    assert_eq!(r(Start::Host(b"/mnt"), "img/a", true), "virt:/a");
    assert_eq!(r(Start::Host(b"/mnt/img/a"), "b/f", true), "virt:/a/b/f");
    let Ok(Resolved::Virtual(b)) = resolve(&table, root, b"/mnt/img/a/b", true) else {
        panic!("a/b")
    };
    assert_eq!(b.host_path(&table), b"/mnt/img/a/b");
    assert_eq!(r(Start::Virtual(&b), "f", true), "virt:/a/b/f");
    assert_eq!(r(Start::Virtual(&b), "../../abs", false), "virt:/abs");
    assert_eq!(
        r(Start::Virtual(&b), "../../../tmp", true),
        "host-via:/mnt/tmp"
    );
    assert_eq!(r(Start::Virtual(&b), "/etc", true), "host:/etc");
    std::fs::remove_dir_all(&dir).unwrap();
}
