//! Oracle tests of the directory mutator on real images: mke2fs makes the image; debugfs
//! makes a regular file of pre-allocated, initialized blocks and turns it into an empty
//! directory inode (no block of it is a directory block yet); the mutator runs on the
//! image file through a [`Meta`] that reads and writes blocks in place and a [`DirFile`]
//! that hands out that inode's blocks in order (so the test needs no allocator: e2fsprogs
//! allocated them); then debugfs sets the directory's size and INDEX flag and punches the
//! blocks it did not use, and e2fsck -fn must find the image clean, and the kernel (loop
//! mount, when root) must list and look up exactly the expected names.

use super::dir_edit::{DirEdit, HashParams};
use super::dir_tests::{legacy_collision, neighbours};
use super::meta::{DirFile, Freed, Meta};
use crate::format::dx::{self, ROOT_COUNT_OFFSET};
use crate::format::dx_hash::{dx_hash, HashVersion};
use crate::format::geometry::Geometry;
use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use usfs_fs::{Error, FileType, Result, Structure};

/// Blocks read and written in place in the image file.
struct FileMeta {
    f: File,
    geo: Geometry,
    seed: Option<u32>,
}

impl Meta for FileMeta {
    fn geo(&self) -> &Geometry {
        &self.geo
    }
    fn csum_seed(&self) -> Option<u32> {
        self.seed
    }
    fn read_meta(&self, blk: u64) -> Result<Vec<u8>> {
        let mut b = vec![0u8; self.geo.block_size as usize];
        self.f
            .read_exact_at(&mut b, blk * self.geo.block_size as u64)?;
        Ok(b)
    }
    fn write_meta(&mut self, blk: u64, data: Vec<u8>) -> Result<()> {
        self.f
            .write_all_at(&data, blk * self.geo.block_size as u64)?;
        Ok(())
    }
    fn alloc_blocks(&mut self, _: u32, _: u64, _: u32) -> Result<(u64, u32)> {
        Err(Error::corrupt(
            Structure::Bitmap,
            "the oracle volume does not allocate",
        ))
    }
    fn free_blocks(&mut self, _: u32, _: u64, _: u64, _: Freed) -> Result<()> {
        Err(Error::corrupt(
            Structure::Bitmap,
            "the oracle volume does not free",
        ))
    }
}

/// The directory: the first `n` blocks of a pool debugfs allocated to its inode.
struct PoolDir {
    ino: u32,
    gen: u32,
    pool: Vec<u64>,
    n: u64,
    indexed: bool,
}

impl DirFile for PoolDir {
    fn ino(&self) -> u32 {
        self.ino
    }
    fn generation(&self) -> u32 {
        self.gen
    }
    fn nblocks(&self) -> u64 {
        self.n
    }
    fn pblk(&mut self, _: &mut dyn Meta, lblk: u64) -> Result<u64> {
        Ok(self.pool[lblk as usize])
    }
    fn append_block(&mut self, _: &mut dyn Meta) -> Result<u64> {
        let b = *self
            .pool
            .get(self.n as usize)
            .ok_or_else(|| crate::write::no_space("test pool", "all pre-allocated blocks used"))?;
        self.n += 1;
        Ok(b)
    }
    fn truncate_blocks(&mut self, _: &mut dyn Meta, from: u64) -> Result<()> {
        self.n = from;
        Ok(())
    }
    fn is_indexed(&self) -> bool {
        self.indexed
    }
    fn set_indexed(&mut self, on: bool) {
        self.indexed = on;
    }
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loop mount undone on drop.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn have_tools() -> bool {
    ["mke2fs", "debugfs", "e2fsck"].iter().all(|t| {
        Command::new(t)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().expect("run");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn debugfs(img: &Path, script: &str) -> String {
    let dir = img.parent().unwrap();
    let f = dir.join("script");
    std::fs::write(&f, script).unwrap();
    run(Command::new("debugfs").arg("-w").arg("-f").arg(&f).arg(img))
}

/// An image with a hard-link target `t` and an empty directory inode `d` holding
/// `pool` pre-allocated blocks (generation set, so checksums cover it).
struct Image {
    _scratch: Scratch,
    img: PathBuf,
    target: u32,
    meta: FileMeta,
    dir: PoolDir,
    hp: HashParams,
}

fn image(tag: &str, bs: u32, mkfs_opts: &[&str], hash: &str, pool: usize) -> Image {
    let dir = std::env::temp_dir().join(format!("usfs-diredit-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = Scratch(dir.clone());
    let img = dir.join("img");
    let size_k = (pool as u64 * bs as u64 / 1024 + 16384).to_string();
    run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-b", &bs.to_string()])
        .args(mkfs_opts)
        .arg(&img)
        .arg(format!("{size_k}k")));
    let data = dir.join("pool.bin");
    std::fs::write(&data, vec![0xffu8; pool * bs as usize]).unwrap();
    let out = debugfs(
        &img,
        &format!(
            "write /dev/null t\nwrite {} d\nsif d mode 040755\nsif d generation 0x5eed1234\n\
             unlink d\nlink <13> d\nsif <2> links_count 4\nsif <13> links_count 2\n\
             set_bg 0 used_dirs_count 3\nssv def_hash_version {hash}\n",
            data.display()
        ),
    );
    assert!(
        out.contains("Allocated inode: 12") && out.contains("Allocated inode: 13"),
        "{out}"
    );
    let blocks = debugfs(&img, "blocks <13>\n");
    let pool: Vec<u64> = blocks
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let dev = usfs_dev::FileDevice::open(&img, false).unwrap();
    let fs = crate::Ext4::open(Box::new(dev)).unwrap();
    let inode = fs.load_inode(13).unwrap();
    assert_eq!(inode.raw.i_generation(), 0x5eed_1234);
    let meta = FileMeta {
        f: File::options().read(true).write(true).open(&img).unwrap(),
        geo: fs.geometry().clone(),
        seed: fs.csum_seed(),
    };
    let hp = HashParams::from_superblock(fs.superblock());
    Image {
        _scratch: scratch,
        img,
        target: 12,
        meta,
        dir: PoolDir {
            ino: 13,
            gen: 0x5eed_1234,
            pool,
            n: 0,
            indexed: false,
        },
        hp,
    }
}

impl Image {
    fn ed(&mut self) -> DirEdit<'_> {
        DirEdit::new(&mut self.meta, &mut self.dir, &self.hp)
    }

    /// Gives the directory its final size, flags and blocks, fixes the target's link
    /// count, and checks the image with e2fsck and (as root) the kernel.
    fn check(&mut self, want: &BTreeSet<Vec<u8>>) {
        let bs = self.meta.geo.block_size as u64;
        let n = self.dir.n;
        let flags = 0x80000 | if self.dir.indexed { 0x1000 } else { 0 };
        let mut s = format!("sif <13> size {}\nsif <13> flags {flags:#x}\n", n * bs);
        if n < self.dir.pool.len() as u64 {
            s += &format!("punch <13> {n}\n");
        }
        s += &format!("sif <{}> links_count {}\n", self.target, want.len() + 1);
        debugfs(&self.img, &s);
        let o = Command::new("e2fsck")
            .arg("-fn")
            .arg(&self.img)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "e2fsck -fn:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        self.kernel_check(want);
    }

    fn kernel_check(&self, want: &BTreeSet<Vec<u8>>) {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            println!("SKIP: kernel mount check needs root");
            return;
        }
        let mnt = self.img.parent().unwrap().join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        run(Command::new("mount")
            .args(["-t", "ext4", "-o", "ro,loop"])
            .arg(&self.img)
            .arg(&mnt));
        let _m = Mounted(mnt.clone());
        use std::os::unix::ffi::OsStrExt;
        let got: BTreeSet<Vec<u8>> = std::fs::read_dir(mnt.join("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().as_bytes().to_vec())
            .collect();
        assert_eq!(got.len(), want.len(), "kernel readdir count");
        assert!(&got == want, "kernel readdir names differ");
        // Every name looked up through the kernel's index.
        for n in want {
            let p = mnt.join("d").join(std::ffi::OsStr::from_bytes(n));
            let md = std::fs::symlink_metadata(&p).unwrap();
            assert!(md.is_file());
        }
    }
}

fn name(i: usize) -> Vec<u8> {
    format!("entry-{i:06}").into_bytes()
}

fn add_all(im: &mut Image, names: &[Vec<u8>], want: &mut BTreeSet<Vec<u8>>) {
    let t = im.target;
    let mut ed = im.ed();
    for n in names {
        ed.add(n, t, FileType::Regular).unwrap();
        want.insert(n.clone());
    }
}

fn skip() -> bool {
    if !have_tools() {
        println!("SKIP: e2fsprogs not found");
        return true;
    }
    false
}

/// 1 -> 12,000 entries in 1 KiB blocks (an htree of two levels), a third removed, long
/// names added back; with and without metadata_csum.
#[test]
fn htree_1k_grows_to_two_levels() {
    if skip() {
        return;
    }
    for (tag, opts) in [("csum", &[][..]), ("nocsum", &["-O", "^metadata_csum"][..])] {
        let mut im = image(tag, 1024, opts, "half_md4", 1600);
        im.ed().init(2).unwrap();
        let mut want = BTreeSet::new();
        let names: Vec<_> = (0..12_000).map(name).collect();
        add_all(&mut im, &names, &mut want);
        let root = im.meta.read_meta(im.dir.pool[0]).unwrap();
        assert_eq!(root[0x18 + 6], 1, "two levels");
        let mut ed = im.ed();
        for n in names.iter().step_by(3) {
            ed.remove(n).unwrap();
            want.remove(n);
        }
        let long: Vec<_> = (0..600)
            .map(|i| [format!("{i:04}").into_bytes(), vec![b'L'; 251]].concat())
            .collect();
        add_all(&mut im, &long, &mut want);
        im.check(&want);
    }
}

/// 4 KiB blocks without metadata_csum, tea hash; the directory converts once.
#[test]
fn htree_4k_tea() {
    if skip() {
        return;
    }
    let mut im = image("tea", 4096, &["-O", "^metadata_csum"], "tea", 200);
    im.ed().init(2).unwrap();
    let mut want = BTreeSet::new();
    let names: Vec<_> = (0..3000).map(name).collect();
    add_all(&mut im, &names, &mut want);
    assert!(im.dir.indexed);
    let root = im.meta.read_meta(im.dir.pool[0]).unwrap();
    assert_eq!(
        root[0x1c],
        HashVersion::Tea.to_u8(),
        "the superblock's default hash"
    );
    let mut ed = im.ed();
    assert!(!ed.is_empty().unwrap());
    for n in names.iter().skip(100).step_by(2) {
        ed.remove(n).unwrap();
        want.remove(n);
    }
    im.check(&want);
}

/// Without dir_index the directory stays linear; emptied trailing blocks are freed.
#[test]
fn linear_without_dir_index() {
    if skip() {
        return;
    }
    let mut im = image("lin", 1024, &["-O", "^dir_index"], "half_md4", 200);
    im.ed().init(2).unwrap();
    let mut want = BTreeSet::new();
    let names: Vec<_> = (0..2000).map(name).collect();
    add_all(&mut im, &names, &mut want);
    assert!(!im.dir.indexed);
    let full = im.dir.n;
    let mut ed = im.ed();
    for n in names.iter().skip(1500) {
        ed.remove(n).unwrap();
        want.remove(n);
    }
    for n in names.iter().step_by(5).take(200) {
        ed.remove(n).unwrap();
        want.remove(n);
    }
    assert!(im.dir.n < full, "trailing empty blocks freed");
    let again: Vec<_> = (0..150).map(|i| format!("re-{i}").into_bytes()).collect();
    add_all(&mut im, &again, &mut want);
    im.check(&want);
}

/// Legacy hash: a colliding pair lands exactly at the split of make_indexed_dir, so the
/// second leaf's index entry carries the continuation bit; e2fsck checks the hash
/// ranges and the kernel must find both names.
#[test]
fn collision_across_leaves() {
    if skip() {
        return;
    }
    for (tag, opts, usable) in [
        ("coll", &[][..], 1012),
        ("collnc", &["-O", "^metadata_csum"][..], 1024),
    ] {
        let mut im = image(tag, 1024, opts, "legacy", 100);
        im.ed().init(2).unwrap();
        let (a, b) = legacy_collision(&im.hp, 1).remove(0);
        let cap = (usable - 24) / 16;
        let split = cap - 32;
        let h = dx_hash(
            &a,
            HashVersion::Legacy.with_unsigned_flag(im.hp.unsigned),
            &im.hp.seed,
        )
        .unwrap()
        .0;
        let mut order = neighbours(&im.hp, h, split - 1, cap - split - 1);
        order.push(a.clone());
        order.push(b.clone());
        order.push(b"z-trigger".to_vec());
        let mut want = BTreeSet::new();
        add_all(&mut im, &order, &mut want);
        let root = im.meta.read_meta(im.dir.pool[0]).unwrap();
        assert_eq!(root[0x1c], HashVersion::Legacy.to_u8());
        assert_eq!(dx::entry(&root, ROOT_COUNT_OFFSET, 1).0 & 1, 1);
        // More names around the same hash: later splits of the first leaf.
        let more = neighbours(&im.hp, h.wrapping_add(0x100), 40, 40);
        let more: Vec<_> = more.into_iter().filter(|n| !want.contains(n)).collect();
        add_all(&mut im, &more, &mut want);
        im.check(&want);
    }
}
