//! The checker on images built in memory: a clean image is clean whatever its options,
//! and flipped or truncated images give a report, never a panic (the fuzz target's body,
//! deterministic). The CLI tests (crates/cli/tests/fsck_erofs.rs) seed each kind of
//! damage and compare with fsck.erofs.

use super::check;
use crate::compress::{Algorithm, LZ4HC_DEFAULT_LEVEL};
use crate::format::superblock::seal;
use crate::mkfs::{build, Options, BLOCK_SIZE};
use usfs_dev::MemDevice;

/// A small tree: compressible text, incompressible bytes, a subdirectory, a hard link
/// and a symlink.
fn image(name: &str, opts: &Options) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("usfs-erofs-check-{name}-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let text: Vec<u8> = (0..40_000u32)
        .flat_map(|i| format!("line {} of {}\n", i % 397, i % 11).into_bytes())
        .collect();
    std::fs::write(src.join("text"), &text).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let noise: Vec<u8> = (0..10_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(src.join("sub/noise"), &noise).unwrap();
    std::fs::hard_link(src.join("sub/noise"), src.join("link")).unwrap();
    std::os::unix::fs::symlink("sub/noise", src.join("sym")).unwrap();
    let dev = MemDevice::new(vec![0; 4 << 20], true);
    let blocks = build(&dev, &usfs_source::HostDir::new(&src), opts)
        .unwrap()
        .blocks;
    std::fs::remove_dir_all(&dir).unwrap();
    let mut bytes = dev.into_inner();
    bytes.truncate((blocks * u64::from(BLOCK_SIZE)) as usize);
    bytes
}

fn options(ztailpacking: bool, fragments: bool) -> Options {
    Options {
        compression: Some(Algorithm::Lz4Hc(LZ4HC_DEFAULT_LEVEL)),
        ztailpacking,
        fragments,
        timestamp: Some(0),
        uuid: Some([1; 16]),
        workers: 1,
        ..Options::default()
    }
}

#[test]
fn built_images_are_clean() {
    for (i, (zt, fr)) in [(false, false), (true, false), (true, true)]
        .into_iter()
        .enumerate()
    {
        let img = image(&format!("clean{i}"), &options(zt, fr));
        let r = check(Box::new(MemDevice::new(img, false))).unwrap();
        assert!(r.clean(), "options {i}: {:?}", r.problems);
        // Root, sub, text, noise (linked twice), sym; the packed inode with fragments.
        assert_eq!(r.inodes, 5 + u64::from(fr), "options {i}");
        assert!(r.extents > 0 && r.bytes > 500_000, "options {i}: {r:?}");
    }
}

#[test]
fn damaged_images_give_reports_not_panics() {
    let good = image("damage", &options(true, true));
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as usize
    };
    let mut found = 0;
    for round in 0..300 {
        let mut b = good.clone();
        if round % 10 == 9 {
            b.truncate(next() % good.len());
        } else {
            for _ in 0..1 + round % 4 {
                let at = 1024 + next() % (b.len() - 1024);
                b[at] ^= 1 << (next() % 8);
            }
            if b.len() >= 4096 {
                seal(&mut b[..4096], 4096);
            }
        }
        let r = check(Box::new(MemDevice::new(b, false))).unwrap();
        for p in &r.problems {
            assert!(!p.to_string().is_empty());
        }
        found += usize::from(!r.clean());
    }
    assert!(
        found > 100,
        "only {found} of 300 damaged images have problems"
    );
}

/// A pcluster whose stream decodes to more than its extent (the partial decoding the
/// kernel does for a trimmed tail would accept it): found by decoding in full.
#[test]
fn a_pcluster_longer_than_its_extent_is_found() {
    use crate::compress::Compressor;
    use crate::read::Stored;
    use usfs_fs::FileSystem;
    let mut img = image("long", &options(false, false));
    let fs = crate::Erofs::open(Box::new(MemDevice::new(img.clone(), false))).unwrap();
    let nid = fs.lookup(fs.root(), b"text").unwrap();
    let ino = fs.inode(nid).unwrap();
    let zi = fs.zinfo(&ino).unwrap();
    let ext = fs.map_extent(&ino, &zi, 0).unwrap();
    let Stored::Compressed {
        pa, plen, padded, ..
    } = ext.stored
    else {
        panic!("first extent not LZ4: {ext:?}");
    };
    assert!(ext.full && padded, "{ext:?}");
    let mut data = vec![0u8; ext.llen as usize];
    assert_eq!(fs.read_at(nid, 0, &mut data).unwrap(), data.len());
    let more = data[..64].to_vec();
    data.extend_from_slice(&more);
    let mut out = vec![0u8; plen as usize];
    let (used, n) = Compressor::new(Algorithm::Lz4Hc(12), 4096)
        .compress_dest_size(&data, &mut out)
        .unwrap();
    assert_eq!(
        used,
        data.len(),
        "the longer extent does not fit its pcluster"
    );
    let (pa, plen) = (pa as usize, plen as usize);
    img[pa..pa + plen].fill(0);
    img[pa + plen - n..pa + plen].copy_from_slice(&out[..n]);
    let r = check(Box::new(MemDevice::new(img, false))).unwrap();
    assert!(
        r.problems.iter().any(|p| p.to_string().contains("exactly")),
        "{:?}",
        r.problems
    );
}

/// Every lcluster index is decoded, also the nonheads that mapping the extents jumps
/// over (the lookahead distance skips them): a block count in one of them, in an image
/// without big pclusters, is found.
#[test]
fn a_damaged_index_the_extents_skip_is_found() {
    use crate::format::lcluster::{full_index_pos, ty, D0_CBLKCNT};
    use usfs_fs::FileSystem;
    let opts = Options {
        legacy_compress: true,
        ..options(false, false)
    };
    let mut img = image("skipped", &opts);
    let fs = crate::Erofs::open(Box::new(MemDevice::new(img.clone(), false))).unwrap();
    let nid = fs.lookup(fs.root(), b"text").unwrap();
    let ino = fs.inode(nid).unwrap();
    let zi = fs.zinfo(&ino).unwrap();
    assert!(zi.compact.is_none(), "legacy images have full indexes");
    // A nonhead that follows another nonhead: mapping jumps from the first to the head.
    let lcn = (2..zi.total)
        .find(|&l| {
            let t = |l| fs.lcluster(&ino, &zi, l, false).unwrap().ty;
            t(l) == ty::NONHEAD && t(l - 1) == ty::NONHEAD
        })
        .expect("an extent of three lclusters");
    let at = full_index_pos(zi.hpos, lcn) as usize + 4;
    let d0 = u16::from_le_bytes([img[at], img[at + 1]]) | D0_CBLKCNT;
    img[at..at + 2].copy_from_slice(&d0.to_le_bytes());
    let r = check(Box::new(MemDevice::new(img, false))).unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.to_string().contains("block count without big pclusters")),
        "lcluster {lcn}: {:?}",
        r.problems
    );
}

/// MicroLZMA, DEFLATE and Zstandard images (4 KiB and 64 KiB pclusters, with
/// ztailpacking and fragments): clean when built; flipped or truncated, the checker
/// gives a report and the reader (the fuzz targets' bodies) an error, never a panic.
#[test]
fn codec_images_are_clean_and_damage_gives_reports() {
    for (k, alg) in [
        Algorithm::Lzma(6),
        Algorithm::Deflate(6),
        Algorithm::Zstd(3),
    ]
    .into_iter()
    .enumerate()
    {
        for (j, pcluster) in [4096u32, 65536].into_iter().enumerate() {
            let opts = Options {
                compression: Some(alg),
                pcluster_bytes: pcluster,
                ..options(j == 1, j == 1)
            };
            let good = image(&format!("codec{k}-{j}"), &opts);
            let r = check(Box::new(MemDevice::new(good.clone(), false))).unwrap();
            assert!(r.clean(), "{alg:?} {pcluster}: {:?}", r.problems);
            assert!(r.extents > 0, "{alg:?} {pcluster}: nothing compressed");
            let mut x = 0x9e37_79b9_7f4a_7c15_u64 ^ (k as u64 * 7 + j as u64);
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as usize
            };
            for round in 0..60 {
                let mut b = good.clone();
                if round % 10 == 9 {
                    b.truncate(next() % good.len());
                } else {
                    // Past block 0: the data and metadata.
                    for _ in 0..1 + round % 4 {
                        let at = 4096 + next() % (b.len() - 4096);
                        b[at] ^= 1 << (next() % 8);
                    }
                }
                let r = check(Box::new(MemDevice::new(b.clone(), false))).unwrap();
                for p in &r.problems {
                    assert!(!p.to_string().is_empty());
                }
                if let Ok(fs) = crate::Erofs::open(Box::new(MemDevice::new(b, false))) {
                    usfs_fs::exercise(&fs);
                }
            }
        }
    }
}
