//! Inline data (inline_data) through `usfs_ext4::rw::Volume` on images mke2fs -d made:
//! small writes and truncations stay inline, larger writes convert to one extent-mapped
//! block, inline directories take entries until they overflow into a block, xattrs of
//! inline inodes can be set; e2fsck -fn and debugfs judge the result.

mod common;

use common::{have, open_volume as open, regular as file};
use std::path::Path;
use std::process::Command;
use usfs_ext4::rw::Volume;
use usfs_fs::FileSystem;

const INLINE_DATA: u32 = 0x1000_0000;
const EXTENTS: u32 = 0x8_0000;

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
}

fn debugfs_stat(img: &Path, path: &str) -> String {
    run(Command::new("debugfs")
        .args(["-R", &format!("stat {path}")])
        .arg(img))
}

fn read(v: &Volume, ino: u32, size: usize) -> Vec<u8> {
    let mut b = vec![0u8; size + 10];
    let n = v.reader().read_at(ino as u64, 0, &mut b).unwrap();
    b.truncate(n);
    b
}

#[test]
fn inline_files_and_directories_change_in_place_or_convert() {
    if !have("mke2fs") || !have("e2fsck") || !have("debugfs") {
        println!("SKIP: mke2fs/e2fsck/debugfs missing");
        return;
    }
    for (name, args) in [
        ("4k", vec!["-t", "ext4", "-O", "inline_data"]),
        (
            "1k-nocsum",
            vec![
                "-t",
                "ext4",
                "-O",
                "inline_data,^metadata_csum",
                "-b",
                "1024",
            ],
        ),
    ] {
        let dir = common::temp("rwinl", name);
        let src = dir.join("src");
        std::fs::create_dir_all(src.join("d")).unwrap();
        std::fs::write(src.join("f"), b"ten bytes\n").unwrap();
        std::fs::write(src.join("g"), [b'g'; 100]).unwrap();
        std::fs::write(src.join("h"), [b'h'; 100]).unwrap();
        std::fs::write(src.join("d/a"), b"a").unwrap();
        let img = dir.join("img");
        let o = Command::new("mke2fs")
            .args(["-q", "-F"])
            .args(&args)
            .arg("-d")
            .arg(&src)
            .arg(&img)
            .arg("16M")
            .env("MKE2FS_CONFIG", "/etc/mke2fs.conf")
            .status()
            .unwrap();
        assert!(o.success());
        let bs = {
            let mut v = open(&img);
            let bs = v.geometry().block_size as u64;
            let root = v.reader().root();
            let look =
                |v: &Volume, d: u64, n: &str| v.reader().lookup(d, n.as_bytes()).unwrap() as u32;
            let (f, g, h, d) = (
                look(&v, root, "f"),
                look(&v, root, "g"),
                look(&v, root, "h"),
                look(&v, root, "d"),
            );

            // f: truncated and rewritten with 40 bytes: stays inline in i_block.
            let mut rec = v.inode(f).unwrap();
            v.set_size(&mut rec, 0).unwrap();
            let forty = [b'F'; 40];
            v.write_data(&mut rec, 0, &forty).unwrap();
            assert!(rec.raw.has_flag(INLINE_DATA), "{name}: f stays inline");
            v.set_xattr(&mut rec, b"user.k", Some(b"value")).unwrap();
            assert!(v.set_xattr(&mut rec, b"system.data", Some(b"x")).is_err());
            v.put_inode(&mut rec).unwrap();
            assert_eq!(read(&v, f, 40), forty, "{name}: f reads back");
            assert_eq!(v.reader().get_xattr(f as u64, b"user.k").unwrap(), b"value");

            // g: 100 bytes (40 of them in system.data) grow by 20: still inline.
            let mut rec = v.inode(g).unwrap();
            v.write_data(&mut rec, 100, &[b'G'; 20]).unwrap();
            assert!(rec.raw.has_flag(INLINE_DATA), "{name}: g stays inline");
            assert_eq!(rec.raw.size(), 120);
            v.put_inode(&mut rec).unwrap();
            let mut want = vec![b'g'; 100];
            want.extend_from_slice(&[b'G'; 20]);
            assert_eq!(read(&v, g, 120), want, "{name}: g reads back");

            // h: a write past what the inode holds converts it to one extent block.
            let mut rec = v.inode(h).unwrap();
            v.write_data(&mut rec, 50, &[b'H'; 400]).unwrap();
            assert!(!rec.raw.has_flag(INLINE_DATA), "{name}: h converted");
            assert!(rec.raw.has_flag(EXTENTS), "{name}: h has an extent root");
            v.put_inode(&mut rec).unwrap();
            v.commit().unwrap(); // delayed allocation: the raw reader sees committed blocks
            let mut want = vec![b'h'; 50];
            want.extend_from_slice(&[b'H'; 400]);
            assert_eq!(read(&v, h, 450), want, "{name}: h reads back");

            // d: entries fill i_block, then system.data, then it becomes a block.
            let mut names = Vec::new();
            for i in 0..40 {
                let n = format!("entry_number_{i}");
                v.create(d, n.as_bytes(), file(0o644)).unwrap();
                names.push(n);
                let rec = v.inode(d).unwrap();
                if i == 2 {
                    assert!(rec.raw.has_flag(INLINE_DATA), "{name}: d inline after 3");
                    assert!(rec.raw.size() > 60, "{name}: d grew into system.data");
                }
            }
            let rec = v.inode(d).unwrap();
            assert!(!rec.raw.has_flag(INLINE_DATA), "{name}: d converted");
            v.unlink(d, b"entry_number_0").unwrap();
            let mut listed = Vec::new();
            v.reader()
                .readdir(d as u64, 0, &mut |e, _| {
                    listed.push(String::from_utf8(e.name).unwrap());
                    true
                })
                .unwrap();
            listed.sort();
            let mut want: Vec<String> = names[1..].to_vec();
            want.push("a".into());
            want.sort();
            assert_eq!(listed, want, "{name}: d lists its entries");
            v.close().unwrap();
            bs
        };
        let text = run(Command::new("e2fsck").arg("-fn").arg(&img));
        let st = Command::new("e2fsck")
            .arg("-fn")
            .arg(&img)
            .status()
            .unwrap();
        assert_eq!(st.code(), Some(0), "{name}: e2fsck -fn:\n{text}");
        let f = debugfs_stat(&img, "/f");
        assert!(
            f.contains("Size of inline data: 60") && f.contains("user.k"),
            "{name}: /f {f}"
        );
        let g = debugfs_stat(&img, "/g");
        assert!(g.contains("Size of inline data: 120"), "{name}: /g {g}");
        let h = debugfs_stat(&img, "/h");
        // One data block (delayed allocation gives it at the commit), no system.data.
        assert!(
            !h.contains("system.data")
                && h.contains("EXTENTS")
                && h.contains(&format!("Blockcount: {}\n", bs / 512)),
            "{name}: /h {h}"
        );
        let d = debugfs_stat(&img, "/d");
        assert!(
            !d.contains("system.data")
                && d.contains(&format!("Size: {bs}\n"))
                && d.contains("EXTENTS"),
            "{name}: /d {d}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
