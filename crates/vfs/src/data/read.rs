//! The plain read of file bytes: straight from the image mapping where the back end has
//! them there, else through its `read_at`. The data path's caches fill through it, and the
//! FUSE server and the preload library's mmap of virtual descriptors read this way.

use crate::resolve::Errno;
use usfs_fs::{FileSystem, Ino};

/// Reads file data of `ino` at `offset` into `buf`; returns the bytes read (short only at
/// the end of the file). Uncompressed data stored contiguously in a memory-mapped image is
/// copied straight out of the mapping (no system call); the rest goes through the back
/// end's `read_at`. The preload library and the FUSE server both read this way.
pub fn read_file(
    fs: &dyn FileSystem,
    ino: Ino,
    offset: u64,
    buf: &mut [u8],
) -> Result<usize, Errno> {
    let mut done = 0;
    while done < buf.len() {
        let pos = offset + done as u64;
        match fs
            .mapped_data(ino, pos, buf.len() - done)
            .map_err(|e| e.errno())?
        {
            Some(src) if !src.is_empty() => {
                super::copy::copy(&mut buf[done..done + src.len()], src);
                done += src.len();
            }
            _ => {
                let n = fs
                    .read_at(ino, pos, &mut buf[done..])
                    .map_err(|e| e.errno())?;
                if n == 0 {
                    break;
                }
                done += n;
            }
        }
    }
    Ok(done)
}
