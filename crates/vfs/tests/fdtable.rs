//! The descriptor table's per-thread lookup cache never answers with a description a
//! descriptor no longer names: after close, dup2 onto it, close_range, and across tables.

mod common;

use std::path::Path;
use std::sync::Arc;
use usfs_vfs::{FdTable, OpenFile, PathTable, VPath};

/// An image with two files, or None (with a SKIP line) without mke2fs.
fn image(dir: &Path) -> Option<std::path::PathBuf> {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a"), "aaaa").unwrap();
    std::fs::write(src.join("b"), "bb").unwrap();
    common::mke2fs_image(&src, dir)
}

#[test]
fn cached_lookups_follow_every_change() {
    let dir = std::env::temp_dir().join(format!("usfs-vfs-fdtable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(img) = image(&dir) else { return };
    let fs = usfs_vfs::open_image(&img).unwrap();
    let paths = PathTable::default();
    let open = |name: &str| {
        let root = fs.root();
        let ino = fs.lookup(root, name.as_bytes()).unwrap();
        let meta = fs.getattr(ino).unwrap();
        let node = paths.get_or_insert(0, ino, &fs, meta, None, None);
        let mut vp = VPath::root(0, root);
        vp.stack.push((ino, name.as_bytes().to_vec()));
        Arc::new(OpenFile::new(node, vp, libc::O_RDONLY))
    };
    let (a, b) = (open("a"), open("b"));
    let size = |f: &Arc<OpenFile>| f.node.meta.size;
    let t = FdTable::default();
    t.insert(5, Arc::clone(&a));
    // Twice: the second answer comes from the cache.
    assert!(Arc::ptr_eq(&t.get(5).unwrap(), &a));
    assert!(Arc::ptr_eq(&t.get(5).unwrap(), &a));
    // dup2 of b onto 5.
    t.insert(5, Arc::clone(&b));
    assert!(Arc::ptr_eq(&t.get(5).unwrap(), &b));
    // close.
    t.remove(5);
    assert!(t.get(5).is_none());
    t.insert(5, Arc::clone(&a));
    assert_eq!(size(&t.get(5).unwrap()), 4);
    // close_range over it.
    t.remove_range(3, 9);
    assert!(t.get(5).is_none());
    // Another table with the same descriptor number.
    t.insert(5, Arc::clone(&a));
    let u = FdTable::default();
    u.insert(5, Arc::clone(&b));
    for _ in 0..3 {
        assert!(Arc::ptr_eq(&t.get(5).unwrap(), &a));
        assert!(Arc::ptr_eq(&u.get(5).unwrap(), &b));
    }
    // A change made by another thread is seen by this one's next lookup.
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(Arc::ptr_eq(&t.get(5).unwrap(), &a));
            t.insert(5, Arc::clone(&b));
        });
    });
    assert!(Arc::ptr_eq(&t.get(5).unwrap(), &b));
    let _ = std::fs::remove_dir_all(&dir);
}
