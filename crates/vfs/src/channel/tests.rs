//! The channel end to end: an owner serving an in-memory volume on a socket, clients
//! changing it, errors and appends crossing intact, and a client's opens released when it
//! goes away.

use super::{Owner, Remote};
use std::os::unix::net::UnixListener;
use std::sync::Arc;
use usfs_dev::MemDevice;
use usfs_ext4::rw::Ext4Rw;
use usfs_ext4::write::{format, MkfsOptions};
use usfs_fs::{Error, FileSystem, FileSystemWrite, FileType, NewNode, SetAttr};

fn served() -> (Arc<Owner>, Arc<Ext4Rw>, std::path::PathBuf) {
    let size = 16 << 20;
    let dev = format(
        Box::new(MemDevice::new(vec![0u8; size], true)),
        &MkfsOptions::new(size as u64),
    )
    .unwrap();
    let fs = Arc::new(Ext4Rw::open(dev).unwrap());
    let dir = std::env::temp_dir().join(format!("usfs-channel-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let sock = dir.join(format!("{:?}.sock", std::thread::current().id()).replace(['(', ')'], ""));
    let _ = std::fs::remove_file(&sock);
    let owner = Owner::new(fs.clone(), false, &sock);
    owner.listen(UnixListener::bind(&sock).unwrap());
    (owner, fs, sock)
}

fn file(perm: u32) -> NewNode {
    NewNode {
        file_type: FileType::Regular,
        perm,
        uid: 0,
        gid: 0,
        rdev: 0,
    }
}

#[test]
fn a_client_changes_the_owners_volume() {
    let (_owner, fs, sock) = served();
    let r = Remote::connect(&sock).unwrap();
    assert_eq!(r.root(), 2);
    let d = r
        .mkdir(
            2,
            b"d",
            NewNode {
                file_type: FileType::Directory,
                ..file(0o755)
            },
        )
        .unwrap();
    let f = r.create(d.ino, b"f", file(0o600)).unwrap();
    assert_eq!(r.write_at(f.ino, 3, b"abc").unwrap(), 3);
    // Larger than one request: split and put back together.
    let big: Vec<u8> = (0..super::CHUNK * 2 + 5).map(|i| i as u8).collect();
    assert_eq!(r.write_at(f.ino, 10, &big).unwrap(), big.len());
    let mut back = vec![0u8; big.len()];
    assert_eq!(r.read_at(f.ino, 10, &mut back).unwrap(), big.len());
    assert!(back == big);
    // The owner's own view agrees.
    assert_eq!(fs.getattr(f.ino).unwrap().size, 10 + big.len() as u64);
    let mut head = [9u8; 6];
    fs.read_at(f.ino, 0, &mut head).unwrap();
    assert_eq!(&head, b"\0\0\0abc");
    r.rename(d.ino, b"f", 2, b"g", Default::default()).unwrap();
    assert_eq!(r.lookup(2, b"g").unwrap(), f.ino);
    let mut names = Vec::new();
    r.readdir_with_dots(2, 0, &mut |e, _| {
        names.push(e.name);
        true
    })
    .unwrap();
    assert!(names.contains(&b"g".to_vec()) && names.contains(&b"..".to_vec()));
    let m = r
        .setattr(
            f.ino,
            SetAttr {
                size: Some(4),
                ..SetAttr::default()
            },
        )
        .unwrap();
    assert_eq!(m.size, 4);
    // Errors come back as the same errors.
    assert!(matches!(r.lookup(2, b"nope"), Err(Error::NotFound)));
    assert!(matches!(r.create(2, b"g", file(0o644)), Err(Error::Exists)));
    assert!(matches!(r.rmdir(2, b"g"), Err(e) if e.errno() == libc::ENOTDIR));
}

#[test]
fn appends_from_many_clients_never_overlap() {
    let (_owner, _fs, sock) = served();
    let r = Remote::connect(&sock).unwrap();
    let f = r.create(2, b"log", file(0o644)).unwrap();
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let sock = sock.clone();
            std::thread::spawn(move || {
                let r = Remote::connect(&sock).unwrap();
                for _ in 0..50 {
                    r.append(f.ino, &[b'a' + t; 100], (0, 0)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut all = vec![0u8; 4 * 50 * 100];
    assert_eq!(r.read_at(f.ino, 0, &mut all).unwrap(), all.len());
    for rec in all.chunks(100) {
        assert!(rec.iter().all(|&c| c == rec[0]), "an append was torn");
    }
}

#[test]
fn a_departed_clients_opens_are_released() {
    let (owner, fs, sock) = served();
    let r = Remote::connect(&sock).unwrap();
    let f = r.create(2, b"tmp", file(0o644)).unwrap();
    r.write_at(f.ino, 0, b"data").unwrap();
    r.open_file(f.ino).unwrap();
    r.unlink(2, b"tmp").unwrap();
    // Open and unlinked: still there.
    assert_eq!(fs.getattr(f.ino).unwrap().nlink, 0);
    drop(r);
    owner.wait_idle();
    // The last opener went away: the inode is gone.
    assert!(
        fs.getattr(f.ino).is_err() || fs.getattr(f.ino).unwrap().file_type != FileType::Regular
    );
}
