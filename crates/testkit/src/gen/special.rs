//! `special/`: fifos, Unix sockets, and character and block device nodes.

use std::io;
use std::path::PathBuf;

use super::attrs;
use super::builder::{Builder, Special};

/// Character devices: old (8:8) and new (12:20) encodings, and 0:0 (a whiteout).
const CHAR_DEVS: &[(u32, u32)] = &[
    (1, 3),
    (1, 5),
    (4, 64),
    (136, 5),
    (255, 255),
    (256, 0),
    (0, 0),
    (4095, 1_048_575),
];
/// Block devices.
const BLOCK_DEVS: &[(u32, u32)] = &[(7, 0), (8, 16), (253, 1), (259, 65536), (4095, 1_048_575)];

/// Fifos, sockets and (when `devices` is set and mknod is allowed) device nodes.
pub(super) fn all(b: &mut Builder) -> io::Result<()> {
    let mut rng = b.rng("special");
    let dir = PathBuf::from("special");
    b.mkdir(&dir, attrs::dir(&mut rng))?;
    for i in 0..3 {
        b.special(
            &dir.join(format!("fifo-{i}")),
            Special::Fifo,
            attrs::file(&mut rng),
        )?;
    }
    for i in 0..2 {
        b.special(
            &dir.join(format!("socket-{i}")),
            Special::Socket,
            attrs::file(&mut rng),
        )?;
    }
    let mut devices_made = false;
    if b.opts.devices {
        'outer: for (list, block) in [(CHAR_DEVS, false), (BLOCK_DEVS, true)] {
            for &(ma, mi) in list {
                let (name, kind) = if block {
                    (format!("block-{ma}-{mi}"), Special::Block(ma, mi))
                } else {
                    (format!("char-{ma}-{mi}"), Special::Char(ma, mi))
                };
                if !b.special(&dir.join(name), kind, attrs::file(&mut rng))? {
                    break 'outer;
                }
                devices_made = true;
            }
        }
    }
    if b.opts.xattrs {
        b.xattrs(
            &dir.join("fifo-1"),
            &[(b"trusted.fifo".to_vec(), b"on a fifo".to_vec())],
        )?;
        if devices_made {
            let list = [(b"security.dev".to_vec(), b"on a device".to_vec())];
            b.xattrs(&dir.join("char-1-3"), &list)?;
        }
    }
    Ok(())
}
