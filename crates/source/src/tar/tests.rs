//! Archives written byte by byte here, read back through the source: the formats'
//! corners (pax, GNU long names, base-256, sparse maps, compression) and bad input.

use super::*;
use crate::{Hold, ScanOptions};
use std::io::Write;

/// A header block for `name` of type `tf` with `size` bytes of data.
fn header(name: &[u8], tf: u8, size: u64, gnu: bool) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len().min(100)].copy_from_slice(&name[..name.len().min(100)]);
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0001750\0");
    h[116..124].copy_from_slice(b"0001750\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"14000000000\0");
    h[156] = tf;
    h[257..265].copy_from_slice(if gnu { b"ustar  \0" } else { b"ustar\x0000" });
    seal(&mut h);
    h
}

/// Sets the checksum.
fn seal(h: &mut [u8; 512]) {
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// An archive being written.
#[derive(Default)]
struct Tar(Vec<u8>);

impl Tar {
    fn block(&mut self, b: &[u8]) -> &mut Tar {
        self.0.extend_from_slice(b);
        let pad = (512 - self.0.len() % 512) % 512;
        self.0.resize(self.0.len() + pad, 0);
        self
    }
    fn entry(&mut self, name: &str, tf: u8, data: &[u8]) -> &mut Tar {
        self.block(&header(name.as_bytes(), tf, data.len() as u64, false))
            .block(data)
    }
    fn pax(&mut self, records: &[(&str, &[u8])]) -> &mut Tar {
        let mut data = Vec::new();
        for (k, v) in records {
            let body = [k.as_bytes(), b"=", v, b"\n"].concat();
            let mut n = body.len() + 2;
            while format!("{n} ").len() + body.len() != n {
                n = format!("{n} ").len() + body.len();
            }
            data.extend_from_slice(format!("{n} ").as_bytes());
            data.extend_from_slice(&body);
        }
        self.entry("././@PaxHeader", b'x', &data)
    }
    fn end(&mut self) -> Vec<u8> {
        self.0.extend_from_slice(&[0u8; 1024]);
        std::mem::take(&mut self.0)
    }
}

/// A scratch file holding `bytes`, removed on drop.
struct TmpTar(PathBuf);

impl TmpTar {
    fn new(tag: &str, bytes: &[u8]) -> TmpTar {
        let p = std::env::temp_dir().join(format!("usfs-tar-{tag}-{}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        TmpTar(p)
    }
}

impl Drop for TmpTar {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn open(tag: &str, bytes: &[u8], opts: &TarOptions) -> Result<TarSource> {
    let t = TmpTar::new(tag, bytes);
    TarSource::open(&t.0, opts)
}

fn scanned(src: &TarSource) -> Tree {
    let tree = Tree::new(ScanOptions {
        block_size: None,
        hold: Hold::new(0, 0),
        background: false,
    });
    src.scan(&tree, 2).unwrap();
    tree
}

/// The node at `path` ("" the root).
fn find(tree: &Tree, path: &str) -> usize {
    let mut n = 0;
    for c in path.split('/').filter(|c| !c.is_empty()) {
        let kids = &tree.dir(n).unwrap().kids;
        n = *kids
            .iter()
            .find(|&&k| tree.node(k).name == c.as_bytes())
            .unwrap_or_else(|| panic!("{path}: no {c}"));
    }
    n
}

fn read_all(src: &TarSource, tree: &Tree, n: usize) -> Vec<u8> {
    let mut r = src.reader(tree);
    let size = r.size(n).unwrap();
    let mut buf = vec![0xaau8; size as usize];
    assert_eq!(r.read_at(n, &mut buf, 0).unwrap(), size as usize);
    buf
}

fn sample() -> Vec<u8> {
    let long = "l".repeat(150);
    let mut t = Tar::default();
    t.entry("dir/", b'5', b"")
        .entry("dir/a", b'0', b"hello")
        .pax(&[
            ("path", format!("dir/{long}").as_bytes()),
            ("mtime", b"1700000000.25"),
            ("SCHILY.xattr.user.k", b"v"),
        ])
        .entry("ignored", b'0', b"pax named")
        .block(&header(b"././@LongLink", b'L', 155, true))
        .block(format!("gnu/{long}\0").as_bytes())
        .block(&header(b"gnu/short", b'0', 3, true))
        .block(b"gnu");
    // A hard link to dir/a, and a replacement of dir/a's path by a later entry: the
    // link keeps the old inode.
    let mut h = header(b"dir/hard", b'1', 0, false);
    h[157..162].copy_from_slice(b"dir/a");
    seal(&mut h);
    t.block(&h);
    // A size and a uid in base-256.
    let mut h = header(b"dir/b256", b'0', 0, false);
    h[124..136].fill(0);
    h[124] = 0x80;
    h[135] = 4;
    h[108..116].fill(0);
    h[108] = 0x80;
    h[113] = 0x01; // 1 << 16
    seal(&mut h);
    t.block(&h).block(b"b256");
    t.entry("dir/a", b'0', b"new a");
    t.end()
}

#[test]
fn formats_read_back() {
    let src = open("formats", &sample(), &TarOptions::default()).unwrap();
    assert!(src.data_in_place());
    let tree = scanned(&src);
    let long = "l".repeat(150);
    let pax = find(&tree, &format!("dir/{long}"));
    assert_eq!(read_all(&src, &tree, pax), b"pax named");
    let m = &tree.node(pax).meta;
    assert_eq!((m.mtime.sec, m.mtime.nsec), (1_700_000_000, 250_000_000));
    assert_eq!(tree.node(pax).xattrs, [(b"user.k".to_vec(), b"v".to_vec())]);
    let gnu = find(&tree, &format!("gnu/{long}"));
    assert_eq!(read_all(&src, &tree, gnu), b"gnu");
    // The long name replaced the header's own.
    assert_eq!(tree.dir(find(&tree, "gnu")).unwrap().kids.len(), 1);
    let (a, hard) = (find(&tree, "dir/a"), find(&tree, "dir/hard"));
    assert_eq!(read_all(&src, &tree, a), b"new a");
    assert_eq!(read_all(&src, &tree, hard), b"hello");
    assert_eq!(tree.node(hard).meta.nlink, 1);
    assert_ne!(tree.node(a).meta.ino, tree.node(hard).meta.ino);
    let b = find(&tree, "dir/b256");
    assert_eq!(read_all(&src, &tree, b), b"b256");
    assert_eq!(tree.node(b).meta.uid, 1 << 16);
    // The implied directory "gnu": 0755 plus the root's group/other write bits.
    let g = tree.dir(find(&tree, "gnu")).unwrap();
    assert_eq!(g.meta.mode, libc::S_IFDIR | 0o777);
}

#[test]
fn hard_links_share_an_inode() {
    let mut t = Tar::default();
    t.entry("f", b'0', b"data");
    for name in [&b"l1"[..], b"d/l2"] {
        let mut h = header(name, b'1', 0, false);
        h[157] = b'f';
        seal(&mut h);
        t.block(&h);
    }
    let src = open("links", &t.end(), &TarOptions::default()).unwrap();
    let tree = scanned(&src);
    let (f, l1, l2) = (find(&tree, "f"), find(&tree, "l1"), find(&tree, "d/l2"));
    let m = |n: usize| (tree.node(n).meta.ino, tree.node(n).meta.nlink);
    assert_eq!(m(f), m(l1));
    assert_eq!(m(f), m(l2));
    assert_eq!(m(f).1, 3);
    assert_eq!(read_all(&src, &tree, l2), b"data");
}

#[test]
fn compressed_streams_are_spooled() {
    let raw = sample();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    let gz = gz.finish().unwrap();
    let zst = zstd::stream::encode_all(&raw[..], 3).unwrap();
    for (tag, bytes, layer) in [("gz", gz, "gzip"), ("zst", zst, "zstd")] {
        let src = open(tag, &bytes, &TarOptions::default()).unwrap();
        assert_eq!(src.compression(), Some(layer));
        assert!(!src.data_in_place());
        let tree = scanned(&src);
        assert_eq!(read_all(&src, &tree, find(&tree, "dir/a")), b"new a");
        assert_eq!(read_all(&src, &tree, find(&tree, "dir/hard")), b"hello");
    }
}

#[test]
fn sparse_maps() {
    // Old GNU 'S': the map in the header (4 entries) and one extension block.
    let mut h = header(b"old", b'S', 6 * 2, true);
    let mut put = |at: usize, v: u64| {
        h[at..at + 12].copy_from_slice(format!("{v:011o}\0").as_bytes());
    };
    for i in 0..4 {
        put(386 + 24 * i, 1000 * i as u64);
        put(386 + 24 * i + 12, 2);
    }
    put(483, 10_000);
    h[482] = 1;
    seal(&mut h);
    let mut ext = [0u8; 512];
    ext[..12].copy_from_slice(format!("{:011o}\0", 9000).as_bytes());
    ext[12..24].copy_from_slice(format!("{:011o}\0", 2).as_bytes());
    ext[24..36].copy_from_slice(format!("{:011o}\0", 9998).as_bytes());
    ext[36..48].copy_from_slice(format!("{:011o}\0", 2).as_bytes());
    let mut t = Tar::default();
    t.block(&h).block(&ext).block(b"aabbccddeeff");
    // pax 1.0: the map at the start of the data.
    t.pax(&[
        ("GNU.sparse.major", b"1"),
        ("GNU.sparse.minor", b"0"),
        ("GNU.sparse.name", b"new"),
        ("GNU.sparse.realsize", b"5000"),
    ]);
    let mut data = b"1\n4096\n3\n".to_vec();
    data.resize(512, 0);
    data.extend_from_slice(b"xyz");
    t.entry("GNUSparseFile.1/new", b'0', &data);
    let src = open("sparse", &t.end(), &TarOptions::default()).unwrap();
    let tree = scanned(&src);
    let old = read_all(&src, &tree, find(&tree, "old"));
    assert_eq!(old.len(), 10_000);
    for (i, pair) in [b"aa", b"bb", b"cc", b"dd"].iter().enumerate() {
        assert_eq!(&old[1000 * i..1000 * i + 2], *pair);
        assert_eq!(old[1000 * i + 2], 0);
    }
    assert_eq!(&old[9000..9002], b"ee");
    assert_eq!(&old[9998..], b"ff");
    assert_eq!(old.iter().filter(|&&b| b != 0).count(), 12);
    let new = read_all(&src, &tree, find(&tree, "new"));
    assert_eq!(new.len(), 5000);
    assert_eq!(&new[4096..4099], b"xyz");
    assert_eq!(new.iter().filter(|&&b| b != 0).count(), 3);
    // A read in the middle, across a hole and data.
    let mut r = src.reader(&tree);
    let mut buf = [9u8; 6];
    assert_eq!(r.read_at(find(&tree, "new"), &mut buf, 4094).unwrap(), 6);
    assert_eq!(&buf, b"\0\0xyz\0");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let opts = TarOptions::default();
    let err = |tag: &str, b: &[u8]| match open(tag, b, &opts) {
        Ok(_) => panic!("{tag}: accepted"),
        Err(e) => e.to_string(),
    };
    let good = sample();
    let mut bad_sum = good.clone();
    bad_sum[0] ^= 1;
    assert!(
        err("sum", &bad_sum).contains("checksum"),
        "{}",
        err("sum", &bad_sum)
    );
    let cut = &good[..512 + 3];
    assert!(err("cut", cut).contains("truncated"));
    let cut_hdr = &good[..700];
    assert!(err("cuthdr", cut_hdr).contains("truncated"));
    // A size of 2^62 in base-256: the data would lie far past the end.
    let mut h = header(b"huge", b'0', 0, false);
    h[124..136].fill(0);
    h[124] = 0x80;
    h[128] = 0x40;
    seal(&mut h);
    let huge = Tar::default().block(&h).end();
    assert!(err("huge", &huge).contains("truncated"));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&huge).unwrap();
    assert!(err("hugegz", &gz.finish().unwrap()).contains("truncated"));
    // A pax header claiming 4 GiB.
    let mut h = header(b"pax", b'x', 0, false);
    h[124..136].copy_from_slice(b"40000000000\0");
    seal(&mut h);
    assert!(err("pax", &Tar::default().block(&h).end()).contains("pax header"));
    let mut magic = header(b"m", b'0', 0, false);
    magic[257..263].copy_from_slice(b"nope\0\0");
    seal(&mut magic);
    assert!(err("magic", &Tar::default().block(&magic).end()).contains("magic"));
    let bad_pax = Tar::default()
        .pax(&[("mtime", b"x")])
        .entry("f", b'0', b"")
        .end();
    assert!(err("badpax", &bad_pax).contains("mtime"));
    // A file where a directory is needed.
    let notdir = Tar::default()
        .entry("f", b'0', b"")
        .entry("f/g", b'0', b"")
        .end();
    assert!(err("notdir", &notdir).contains("not a directory"));
    // Random bytes never panic.
    let mut x = 0x1234_5678u32;
    for round in 0..200 {
        let mut b = good.clone();
        for _ in 0..8 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let i = x as usize % b.len();
            b[i] = (x >> 8) as u8;
        }
        let _ = open(&format!("rand{round}"), &b, &opts);
    }
}

#[test]
fn dotdot_stays_inside_and_no_end_marker_warns() {
    let mut t = Tar::default();
    t.entry("../../etc/x", b'0', b"x")
        .entry("a/../b", b'0', b"b");
    let bytes = t.0.clone();
    let src = open("dotdot", &bytes, &TarOptions::default()).unwrap();
    assert_eq!(src.warnings().len(), 1, "{:?}", src.warnings());
    let tree = scanned(&src);
    assert_eq!(read_all(&src, &tree, find(&tree, "etc/x")), b"x");
    assert_eq!(read_all(&src, &tree, find(&tree, "b")), b"b");
}

#[test]
fn global_pax_headers_apply_to_what_follows() {
    let mut t = Tar::default();
    t.entry("before", b'0', b"");
    // A global header: every later entry gets its uid and xattr unless its own says
    // otherwise.
    let mut g = Tar::default();
    g.pax(&[("uid", b"77"), ("LIBARCHIVE.xattr.user.g", b"Zw==")]);
    let mut gh = g.0.clone();
    gh[156] = b'g';
    let mut h: [u8; 512] = gh[..512].try_into().unwrap();
    seal(&mut h);
    gh[..512].copy_from_slice(&h);
    t.block(&gh);
    t.entry("after", b'0', b"");
    t.pax(&[("uid", b"5"), ("SCHILY.xattr.user.g", b"local")]);
    t.entry("own", b'0', b"");
    let src = open("global", &t.end(), &TarOptions::default()).unwrap();
    let tree = scanned(&src);
    let node = |p: &str| tree.node(find(&tree, p));
    assert_eq!(node("before").meta.uid, 0o1750);
    assert!(node("before").xattrs.is_empty());
    assert_eq!(node("after").meta.uid, 77);
    assert_eq!(node("after").xattrs, [(b"user.g".to_vec(), b"g".to_vec())]);
    assert_eq!(node("own").meta.uid, 5);
    assert_eq!(
        node("own").xattrs,
        [(b"user.g".to_vec(), b"local".to_vec())]
    );
}
