//! Bad input: truncated images, zeroed superblocks and hundreds of seeded byte flips in
//! metadata. usfs must exit non-zero with a message or succeed, never panic (exit 101),
//! never be killed by a signal, never hang; `usfs fsck -n` must give a verdict (0, 4 or
//! 8) every time.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A small xorshift generator, so the corruption corpus is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Runs every read-only command over `image`; checks none panicked or hung.
fn exercise(image: &Path, scratch: &Scratch, label: &str) -> bool {
    let out = scratch.path("out");
    let _ = std::fs::remove_dir_all(&out);
    let mut all_ok = true;
    let cmds: Vec<Vec<String>> = vec![
        vec!["info".into()],
        vec!["ls".into(), "-lR".into()],
        vec!["export".into(), "--force".into()],
        vec!["cat".into()],
        vec!["stat".into()],
    ];
    // The checker: a verdict every time (0 clean, 4 errors, 8 unreadable), on both
    // thread counts.
    for j in ["1", "2"] {
        let mut c = Command::new(usfs());
        c.args(["fsck", "-n", "-j", j]).arg(image);
        let (code, _out, stderr) = run_limited(&mut c, Duration::from_secs(20));
        match code {
            Some(0 | 4 | 8) => {}
            None => {
                eprintln!("{label}: usfs fsck -j{j} hung or died by a signal");
                all_ok = false;
            }
            Some(c) => {
                eprintln!(
                    "{label}: usfs fsck -j{j} exited {c}:\n{}",
                    String::from_utf8_lossy(&stderr)
                );
                all_ok = false;
            }
        }
    }
    for args in cmds {
        let mut c = Command::new(usfs());
        c.arg(&args[0]);
        c.args(&args[1..]);
        c.arg(image);
        match args[0].as_str() {
            "export" => {
                c.arg(&out);
            }
            "cat" => {
                c.arg("/d/file0");
            }
            "stat" => {
                c.arg("/d/sub/link");
            }
            _ => {}
        }
        let (code, _stdout, stderr) = run_limited(&mut c, Duration::from_secs(20));
        let stderr = String::from_utf8_lossy(&stderr);
        match code {
            None => {
                eprintln!("{label}: usfs {} hung or died by a signal", args[0]);
                all_ok = false;
            }
            Some(101) => {
                eprintln!("{label}: usfs {} panicked:\n{stderr}", args[0]);
                all_ok = false;
            }
            Some(0) => {}
            Some(_) if stderr.contains("usfs: ") => {}
            Some(c) => {
                eprintln!("{label}: usfs {} exited {c} without a message", args[0]);
                all_ok = false;
            }
        }
    }
    all_ok
}

fn base_image(scratch: &Scratch, name: &str, args: &[&str]) -> std::path::PathBuf {
    let src = scratch.path(&format!("src-{name}"));
    std::fs::create_dir_all(src.join("d/sub")).unwrap();
    for i in 0..40 {
        std::fs::write(
            src.join(format!("d/file{i}")),
            vec![b'a' + (i % 26) as u8; i * 700],
        )
        .unwrap();
    }
    for i in 0..200 {
        std::fs::write(
            src.join(format!("d/sub/entry-with-a-longer-name-{i}")),
            b"x",
        )
        .unwrap();
    }
    std::os::unix::fs::symlink("../file1", src.join("d/sub/link")).unwrap();
    let img = scratch.path(&format!("{name}.img"));
    mke2fs(&img, "8M", args, Some(&src));
    img
}

#[test]
fn truncated_and_zeroed_images_fail_cleanly() {
    let s = Scratch::new("bad-trunc");
    let img = base_image(&s, "base", &["-t", "ext4", "-b", "1024", "-N", "512"]);
    let bytes = std::fs::read(&img).unwrap();
    let bad = s.path("bad.img");
    let mut ok = true;
    for len in [
        0usize,
        100,
        1024,
        1500,
        2048,
        4096,
        8192,
        65536,
        bytes.len() / 2,
        bytes.len() - 1024,
    ] {
        std::fs::write(&bad, &bytes[..len]).unwrap();
        ok &= exercise(&bad, &s, &format!("truncated to {len}"));
        let out = Command::new(usfs()).arg("ls").arg(&bad).output().unwrap();
        assert!(
            !out.status.success(),
            "a truncated image ({len} bytes) must be refused"
        );
    }
    let mut z = bytes.clone();
    z[1024..2048].fill(0);
    std::fs::write(&bad, &z).unwrap();
    ok &= exercise(&bad, &s, "zeroed superblock");
    let out = Command::new(usfs()).arg("info").arg(&bad).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a recognised"));
    assert!(ok, "see the messages above");
}

/// `usfs fsck --json` on an image it cannot check names the damaged structure as well as
/// printing the error's text.
#[test]
fn fsck_json_names_the_damaged_structure() {
    let s = Scratch::new("bad-json");
    let img = base_image(&s, "base", &["-t", "ext4", "-b", "1024", "-N", "512"]);
    let bytes = std::fs::read(&img).unwrap();
    let bad = s.path("bad.img");
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let out = Command::new(usfs())
        .args(["fsck", "-n", "--json"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(8));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = v["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("corrupt image: image is truncated"),
        "{v}"
    );
    assert_eq!(v["corruption"]["structure"], "Superblock", "{v}");
    assert!(v["corruption"]["ino"].is_null(), "{v}");
}

/// Flips random bytes in the metadata blocks (everything but file data) of images with
/// several feature sets; ~300 corrupted images in all.
#[test]
fn seeded_metadata_corruptions_never_panic() {
    let s = Scratch::new("bad-flip");
    let sets: [(&str, &[&str]); 3] = [
        (
            "ext4",
            &["-t", "ext4", "-b", "1024", "-N", "512", "-O", "inline_data"],
        ),
        (
            "ext4-nocsum",
            &[
                "-t",
                "ext4",
                "-b",
                "1024",
                "-N",
                "512",
                "-O",
                "^metadata_csum",
            ],
        ),
        ("ext2", &["-t", "ext2", "-b", "1024", "-N", "512"]),
    ];
    let mut ok = true;
    let mut rng = Rng(0x5eed_0f05_u64);
    for (name, args) in sets {
        let img = base_image(&s, name, args);
        let bytes = std::fs::read(&img).unwrap();
        // Metadata lives in the first blocks (superblock, descriptors, bitmaps, inode
        // tables, directory blocks); flip within the first 400 KiB.
        let region = (400 * 1024).min(bytes.len()) as u64;
        for case in 0..100 {
            let mut b = bytes.clone();
            let flips = 1 + rng.below(8);
            for _ in 0..flips {
                let at = 1024 + rng.below(region - 1024) as usize;
                b[at] ^= 1 << rng.below(8);
                if rng.below(4) == 0 {
                    b[at] = rng.next() as u8;
                }
            }
            let bad = s.path("bad.img");
            std::fs::write(&bad, &b).unwrap();
            ok &= exercise(&bad, &s, &format!("{name} case {case}"));
        }
    }
    assert!(ok, "see the messages above");
}
