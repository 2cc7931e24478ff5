//! The writer as a library, read back by the usfs reader: formatting in memory, files
//! through delayed allocation, an htree directory, symlinks, devices, shared xattrs.

use super::*;
use crate::alloc::{DelayedFile, InodeKind};
use crate::format::inode::ROOT_INO;
use crate::Ext4;
use usfs_dev::MemDevice;
use usfs_fs::FileSystem;

fn make(block_size: u32, features: &[&str]) -> Writer {
    let dev = MemDevice::new(vec![0u8; 48 << 20], true);
    let mut o = MkfsOptions::new(48 << 20);
    o.block_size = Some(block_size);
    o.features = features.iter().map(|s| s.to_string()).collect();
    o.time = Some(1_700_000_000);
    Writer::open(format(Box::new(dev), &o).expect("format")).expect("open")
}

fn build_and_read(block_size: u32, features: &[&str]) {
    let mut w = make(block_size, features);
    let mut root = vec![lost_found_entry()];
    // A file with a hole, through delayed allocation.
    let f = w.new_inode(InodeKind::File, ROOT_INO).unwrap();
    w.inode_mut(f).set_i_mode(0o100644);
    w.inode_mut(f).set_i_links_count(1);
    let mut df = DelayedFile::new(block_size);
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    df.write(0, &data);
    df.write(1 << 20, b"tail");
    w.write_file(f, df).unwrap();
    let shared = vec![(b"user.shared".to_vec(), vec![0x42u8; 300])];
    w.set_xattrs(f, &shared).unwrap();
    root.push(DirEntryIn {
        name: b"file".to_vec(),
        ino: f,
        file_type: 1,
    });
    // A big directory (htree) of empty files sharing an xattr block.
    let d = w.new_inode(InodeKind::TopDir, ROOT_INO).unwrap();
    w.inode_mut(d).set_i_mode(0o040755);
    let mut ents = Vec::new();
    for i in 0..700 {
        let e = w.new_inode(InodeKind::File, d).unwrap();
        w.inode_mut(e).set_i_mode(0o100600);
        w.inode_mut(e).set_i_links_count(1);
        w.set_extents(e, &[]).unwrap();
        if i % 100 == 0 {
            w.set_xattrs(e, &shared).unwrap();
        }
        ents.push(DirEntryIn {
            name: format!("entry-number-{i:04}").into_bytes(),
            ino: e,
            file_type: 1,
        });
    }
    w.write_dir(d, ROOT_INO, &ents, 1, true).unwrap();
    w.inode_mut(d).set_i_links_count(2);
    root.push(DirEntryIn {
        name: b"dir".to_vec(),
        ino: d,
        file_type: 2,
    });
    assert!(
        w.xattr_blocks_shared() >= 1,
        "identical xattr sets share a block"
    );
    // Symlinks and a device.
    for (name, target) in [
        (&b"fast"[..], b"file".to_vec()),
        (&b"slow"[..], vec![b'x'; 300]),
    ] {
        let l = w.new_inode(InodeKind::File, ROOT_INO).unwrap();
        w.inode_mut(l).set_i_mode(0o120777);
        w.inode_mut(l).set_i_links_count(1);
        w.write_symlink(l, &target).unwrap();
        root.push(DirEntryIn {
            name: name.to_vec(),
            ino: l,
            file_type: 7,
        });
    }
    let c = w.new_inode(InodeKind::File, ROOT_INO).unwrap();
    w.inode_mut(c).set_i_mode(0o020600);
    w.inode_mut(c).set_i_links_count(1);
    w.set_device(c, 300, 70000);
    root.push(DirEntryIn {
        name: b"chr".to_vec(),
        ino: c,
        file_type: 3,
    });
    w.drop_blocks(ROOT_INO).unwrap();
    w.write_dir(ROOT_INO, ROOT_INO, &root, 1, true).unwrap();
    w.inode_mut(ROOT_INO).set_i_links_count(4);
    w.blocks.check().unwrap();
    let dev = w.finish().unwrap();

    let fs = Ext4::open(dev).expect("the reader opens what the writer made");
    let r = fs.root();
    let fi = fs.lookup(r, b"file").unwrap();
    let mut buf = vec![0u8; 100_000];
    assert_eq!(fs.read_at(fi, 0, &mut buf).unwrap(), 100_000);
    assert_eq!(buf, data);
    let mut hole = [1u8; 16];
    fs.read_at(fi, 500_000, &mut hole).unwrap();
    assert_eq!(hole, [0u8; 16]);
    let mut tail = [0u8; 4];
    fs.read_at(fi, 1 << 20, &mut tail).unwrap();
    assert_eq!(&tail, b"tail");
    assert_eq!(fs.get_xattr(fi, b"user.shared").unwrap(), vec![0x42u8; 300]);
    let di = fs.lookup(r, b"dir").unwrap();
    for i in [0, 1, 350, 699] {
        let e = fs
            .lookup(di, format!("entry-number-{i:04}").as_bytes())
            .unwrap();
        if i % 100 == 0 {
            assert_eq!(fs.get_xattr(e, b"user.shared").unwrap(), vec![0x42u8; 300]);
        }
    }
    assert!(fs.lookup(di, b"entry-number-0700").is_err());
    let mut n = 0;
    fs.readdir(di, 0, &mut |_e, _c| {
        n += 1;
        true
    })
    .unwrap();
    assert!(n >= 700, "{n} entries listed");
    let fast = fs.lookup(r, b"fast").unwrap();
    assert_eq!(fs.readlink(fast).unwrap(), b"file");
    let slow = fs.lookup(r, b"slow").unwrap();
    assert_eq!(fs.readlink(slow).unwrap(), vec![b'x'; 300]);
    let chr = fs.lookup(r, b"chr").unwrap();
    assert_eq!(
        fs.getattr(chr).unwrap().rdev,
        crate::format::inode::makedev(300, 70000)
    );
}

#[test]
fn library_round_trip_1k() {
    build_and_read(1024, &[]);
}

#[test]
fn library_round_trip_4k_no_csum() {
    build_and_read(4096, &["^metadata_csum", "uninit_bg", "^64bit"]);
}

#[test]
fn feature_edits_are_checked() {
    assert!(apply_feature_edits(&["bigalloc".into()]).is_err());
    assert!(apply_feature_edits(&["nonsense".into()]).is_err());
    assert!(apply_feature_edits(&["^metadata_csum,metadata_csum_seed".into()]).is_err());
    assert!(apply_feature_edits(&["^resize_inode,^has_journal".into()]).is_ok());
}

/// What format leaves is a whole file system: the reader opens it and finds the root
/// holding lost+found only; opening it for writing and finishing with no change
/// rewrites the same bytes.
#[test]
fn format_alone_is_a_file_system_and_open_finish_changes_nothing() {
    for (bs, features) in [(1024, &[][..]), (4096, &["^metadata_csum"][..])] {
        let mut o = MkfsOptions::new(48 << 20);
        o.block_size = Some(bs);
        o.features = features.iter().map(|s| s.to_string()).collect();
        o.time = Some(1_700_000_000);
        o.uuid = Some([9u8; 16]);
        let dev = format(Box::new(MemDevice::new(vec![0u8; 48 << 20], true)), &o).unwrap();
        let mut formatted = vec![0u8; dev.len() as usize];
        dev.read_at(&mut formatted, 0).unwrap();
        let dev = Writer::open(dev).unwrap().finish().unwrap();
        let mut reopened = vec![0u8; dev.len() as usize];
        dev.read_at(&mut reopened, 0).unwrap();
        assert!(
            formatted == reopened,
            "open + finish changed the image ({bs})"
        );
        let fs = Ext4::open(dev).unwrap();
        let mut names = Vec::new();
        fs.readdir(fs.root(), 0, &mut |e, _| {
            names.push(e.name);
            true
        })
        .unwrap();
        assert_eq!(names, vec![b"lost+found".to_vec()]);
    }
}

/// Populates a fresh 48 MiB file system from `src` keeping at most `hold` bytes of small
/// files in memory; returns the image bytes and the report.
fn populate_image(src: &std::path::Path, hold: u64) -> (Vec<u8>, PopulateReport) {
    let dev = MemDevice::new(vec![0u8; 48 << 20], true);
    let mut o = MkfsOptions::new(48 << 20);
    o.block_size = Some(4096);
    o.time = Some(1_700_000_000);
    o.uuid = Some([7u8; 16]);
    let mut w = Writer::open(format(Box::new(dev), &o).expect("format")).expect("open");
    let opts = PopulateOptions {
        threads: 3,
        hold_bytes: hold,
        ..PopulateOptions::default()
    };
    let report = populate(&mut w, &usfs_source::HostDir::new(src), &opts).expect("populate");
    let dev = w.finish().unwrap();
    let mut img = vec![0u8; dev.len() as usize];
    dev.read_at(&mut img, 0).unwrap();
    (img, report)
}

/// Files kept in memory by the scan and files read again by the copy phase give the
/// same image, byte for byte, with all-zero blocks left as holes either way; the reader
/// sees the source's bytes.
#[test]
fn kept_and_reread_files_give_the_same_image() {
    let src = std::env::temp_dir().join(format!("usfs-populate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..40usize {
        let mut d = vec![0u8; 1 + i * 1000];
        for (j, b) in d.iter_mut().enumerate() {
            // Zeros in blocks 1 and 3, data elsewhere.
            if (j / 4096) % 2 == 0 {
                *b = (i + j % 251) as u8 | 1;
            }
        }
        files.push((format!("sub/f{i:02}"), d));
    }
    let mut big = vec![0u8; 700_000];
    big[..5000].fill(9);
    big[600_000..600_100].fill(8);
    files.push(("big".into(), big));
    files.push(("zeros".into(), vec![0u8; 9000]));
    files.push(("empty".into(), Vec::new()));
    for (name, data) in &files {
        std::fs::write(src.join(name), data).unwrap();
    }
    let (kept, rk) = populate_image(&src, 1 << 30);
    let (reread, rr) = populate_image(&src, 1);
    // Room for one 256 KiB chunk: reused many times, scan workers wait for it or give
    // up and leave files to be read again, depending on timing; same image regardless.
    let (one_chunk, _) = populate_image(&src, 256 << 10);
    assert!(one_chunk == kept, "the one-chunk image differs");
    assert_eq!(
        rk,
        PopulateReport {
            phase_ms: rk.phase_ms,
            hold_bytes: rk.hold_bytes,
            ..rr.clone()
        }
    );
    assert!(kept == reread, "the images differ");
    // Blocks: the non-zero 4 KiB blocks only, plus an extent-tree leaf for files of
    // more than four extents (runs of non-zero blocks).
    let want: u64 = files
        .iter()
        .map(|(_, d)| {
            let nz: Vec<bool> = d.chunks(4096).map(|b| b.iter().any(|&x| x != 0)).collect();
            let runs = nz
                .iter()
                .enumerate()
                .filter(|&(i, &z)| z && (i == 0 || !nz[i - 1]))
                .count();
            nz.iter().filter(|&&z| z).count() as u64 + u64::from(runs > 4)
        })
        .sum();
    let dev = MemDevice::new(kept, false);
    let fs = Ext4::open(Box::new(dev)).unwrap();
    let mut blocks = 0;
    for (name, data) in &files {
        let ino = usfs_fs::path::resolve(&fs, name.as_bytes(), true).unwrap();
        let mut buf = vec![0xAAu8; data.len()];
        assert_eq!(fs.read_at(ino, 0, &mut buf).unwrap(), data.len(), "{name}");
        assert!(&buf == data, "{name} reads back differently");
        blocks += fs.getattr(ino).unwrap().blocks / 8;
    }
    assert_eq!(blocks, want, "blocks allocated");
    let want_bytes: usize = files
        .iter()
        .flat_map(|(_, d)| d.chunks(4096).filter(|b| b.iter().any(|&x| x != 0)))
        .map(|b| b.len())
        .sum();
    assert_eq!(rk.bytes, want_bytes as u64, "bytes copied");
    std::fs::remove_dir_all(&src).unwrap();
}
