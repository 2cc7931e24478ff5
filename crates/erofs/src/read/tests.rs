//! Reader I/O accounting: a strided reader of a compressed file reads its pclusters and,
//! beyond them, only a few whole metadata blocks (inode, map header, indexes), not the
//! same index bytes again on every request.

use super::zmap::Stored;
use super::Erofs;
use crate::compress::{Algorithm, LZ4HC_DEFAULT_LEVEL};
use crate::mkfs::{build, Options, BLOCK_SIZE};
use usfs_dev::MemDevice;
use usfs_fs::FileSystem;

/// Text-like bytes that compress about 2:1 with LZ4HC.
fn text(len: usize) -> Vec<u8> {
    let words = [
        "alpha ", "beta ", "gamma ", "delta\n", "epsilon ", "zeta ", "eta, ", "theta. ",
    ];
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let mut v = Vec::with_capacity(len + 16);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if x.is_multiple_of(5) {
            v.extend_from_slice(format!("{:x} ", x >> 40).as_bytes());
        } else {
            v.extend_from_slice(words[(x >> 20) as usize % words.len()].as_bytes());
        }
    }
    v.truncate(len);
    v
}

fn image_of(name: &str, content: &[u8]) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("usfs-erofs-{name}-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("f"), content).unwrap();
    let opts = Options {
        compression: Some(Algorithm::Lz4Hc(LZ4HC_DEFAULT_LEVEL)),
        timestamp: Some(0),
        uuid: Some([1; 16]),
        workers: 1,
        ..Options::default()
    };
    // Room for the content stored plain, and the metadata.
    let dev = MemDevice::new(vec![0; content.len() + (1 << 20)], true);
    let blocks = build(&dev, &usfs_source::HostDir::new(&src), &opts)
        .unwrap()
        .blocks;
    std::fs::remove_dir_all(&dir).unwrap();
    let mut bytes = dev.into_inner();
    bytes.truncate((blocks * u64::from(BLOCK_SIZE)) as usize);
    bytes
}

#[test]
fn strided_reads_read_pclusters_and_few_metadata_blocks() {
    let content = text(8 << 20);
    let img = image_of("strided", &content);
    let fs = Erofs::open(Box::new(MemDevice::new(img.clone(), false))).unwrap();
    // A second instance computes which pclusters each request needs (its own reads are
    // not counted in the first one's statistics).
    let map = Erofs::open(Box::new(MemDevice::new(img, false))).unwrap();
    let ino = usfs_fs::path::resolve(&fs, b"/f", true).unwrap();
    let inode = map.inode(ino).unwrap();
    assert!(inode.compressed());
    let zi = map.zinfo(&inode).unwrap();
    let before = fs.io_stats();
    let mut need = 0u64;
    let mut buf = vec![0u8; 4096];
    let mut requests = 0u64;
    for off in (0..content.len() as u64).step_by(128 << 10) {
        let n = fs.read_at(ino, off, &mut buf).unwrap();
        assert_eq!(&buf[..n], &content[off as usize..off as usize + n]);
        requests += 1;
        let mut pos = off;
        while pos < off + n as u64 {
            let e = map.map_extent(&inode, &zi, pos).unwrap();
            need += match e.stored {
                Stored::Compressed { plen, .. } => plen,
                Stored::Plain { .. } => (e.la + e.llen).min(off + n as u64) - pos,
                Stored::Fragment { .. } => 0,
            };
            pos = e.la + e.llen;
        }
    }
    let read = fs.io_stats().since(&before).bytes_read;
    // 8 MiB of 4 KiB lclusters: 2048 two-byte index entries, 4 KiB of indexes at most,
    // so the inode's block and at most two index blocks.
    assert!(read >= need, "read {read} < pcluster bytes {need}");
    assert!(
        read - need <= 3 * 4096,
        "{requests} requests: {} bytes beyond the pclusters",
        read - need
    );
}

/// Metadata reads at the far end of the address space (a nid from a corrupt directory
/// entry) are a Corrupt error, not an overflow (found by the erofs_image fuzz target).
#[test]
fn metadata_ranges_past_the_address_space_are_corrupt() {
    let img = image_of("overflow", b"x");
    let fs = Erofs::open(Box::new(MemDevice::new(img, false))).unwrap();
    for off in [u64::MAX, u64::MAX - 1, u64::MAX - 31] {
        assert!(matches!(
            fs.meta_cached(off, 2),
            Err(usfs_fs::Error::Corrupt(_))
        ));
    }
    let e = fs.inode(u64::MAX / 32).unwrap_err();
    let c = e.corruption().expect("a corrupt image");
    assert_eq!(c.structure, usfs_fs::Structure::ErofsInode);
    assert_eq!(c.ino, Some(u64::MAX / 32));
}
