//! Undo files in e2fsprogs' format (E2UNDO02, `e2fsck -z`, `e2undo`): before a block of
//! the image is first overwritten, its old contents go to the undo file, so `e2undo FILE
//! IMAGE` (or [`apply`]) puts back the image as it was.
//!
//! The file is cut into blocks of the file system's block size: block 0 holds the header,
//! block 1 a copy of the image's superblock as the changes leave it (e2undo refuses a
//! file whose superblock does not match the image's: the wrong image, or changes made
//! after), then key blocks (a magic, a checksum and up to block_size / 16 - 1 keys), each
//! followed by the data blocks its keys map. A key names a run of file-system blocks
//! (`fsblk`, bytes, the crc32c of those bytes). Every checksum is crc32c seeded with ~0,
//! not inverted (e2fsprogs' ext2fs_crc32c_le). Layout from lib/ext2fs/undo_io.c.

mod apply;
mod format;

pub use apply::{apply, Applied};

use crate::format::checksum::crc32c_raw;
use format::{Header, Key, KEY_BLOCK_MAGIC, MAX_EXTENT_BLOCKS};
use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;
use usfs_dev::{Device, IoStats};

/// A device that saves each block's old contents to an undo file before it is first
/// overwritten. [`UndoDevice::finish`] writes the final header (state "finished").
pub struct UndoDevice {
    /// The image.
    inner: Box<dyn Device>,
    /// The undo file and what has been written to it.
    state: Mutex<State>,
}

/// The undo file being written.
struct State {
    /// The file.
    file: File,
    /// Block size of the file system (and of the undo file).
    bs: u64,
    /// File-system blocks saved so far.
    saved: HashSet<u64>,
    /// The key block being filled: its keys.
    keys: Vec<Key>,
    /// Where that key block goes in the undo file (in blocks).
    key_blk: u64,
    /// The next free block of the undo file.
    next_blk: u64,
    /// Keys written in all key blocks.
    num_keys: u64,
    /// Undo data written since the file was last made durable: the image must not be
    /// overwritten before it is.
    unsynced: bool,
}

impl UndoDevice {
    /// Wraps `inner` (an ext2/3/4 image with blocks of `block_size` bytes), saving old
    /// blocks to a new undo file at `path` (replaced if it exists).
    pub fn create(inner: Box<dyn Device>, path: &Path, block_size: u32) -> io::Result<UndoDevice> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        let bs = block_size as u64;
        // Header, superblock copy and the first key block, reserved.
        file.write_all_at(&vec![0u8; 3 * bs as usize], 0)?;
        let state = State {
            file,
            bs,
            saved: HashSet::new(),
            keys: Vec::new(),
            key_blk: 2,
            next_blk: 3,
            num_keys: 0,
            unsynced: false,
        };
        Ok(UndoDevice {
            inner,
            state: Mutex::new(state),
        })
    }

    /// Writes the indexes and the header marked finished, and makes the file durable.
    pub fn finish(&self) -> io::Result<()> {
        let mut s = self.lock();
        s.write_indexes(&*self.inner, true)?;
        s.file.sync_all()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// Saves the old contents of every block of `offset..offset + len` not saved yet.
    fn save(&mut self, inner: &dyn Device, offset: u64, len: u64) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let (first, last) = (offset / self.bs, (offset + len - 1) / self.bs);
        for blk in first..=last {
            if !self.saved.insert(blk) || blk * self.bs >= inner.len() {
                continue;
            }
            let mut old = vec![0u8; self.bs as usize];
            let n = (inner.len() - blk * self.bs).min(self.bs) as usize;
            inner.read_at(&mut old[..n], blk * self.bs)?;
            self.append(blk, &old[..n])?;
        }
        Ok(())
    }

    /// Appends the old bytes of file-system block `blk` as the next data block, extending
    /// the last key when it ends just before `blk`.
    fn append(&mut self, blk: u64, old: &[u8]) -> io::Result<()> {
        let extends = self.keys.last().is_some_and(|k| {
            k.fsblk + (k.size as u64).div_ceil(self.bs) == blk
                && (k.size as u64) + (old.len() as u64) < MAX_EXTENT_BLOCKS * self.bs
        });
        if extends {
            let k = self.keys.last_mut().expect("a last key");
            k.crc = crc32c_raw(k.crc, old);
            k.size += old.len() as u32;
        } else {
            if self.keys.len() == format::keys_per_block(self.bs) {
                // The full key block is final; the next one follows the data.
                self.keys.clear();
                self.key_blk = self.next_blk;
                self.next_blk += 1;
            }
            self.keys.push(Key {
                fsblk: blk,
                crc: crc32c_raw(!0, old),
                size: old.len() as u32,
            });
            self.num_keys += 1;
        }
        self.file.write_all_at(old, self.next_blk * self.bs)?;
        self.next_blk += 1;
        self.unsynced = true;
        Ok(())
    }

    /// Writes the current key block, the superblock copy (the image's superblock now) and
    /// the header.
    fn write_indexes(&mut self, inner: &dyn Device, finished: bool) -> io::Result<()> {
        let bs = self.bs as usize;
        if !self.keys.is_empty() {
            let mut kb = vec![0u8; bs];
            kb[..4].copy_from_slice(&KEY_BLOCK_MAGIC.to_le_bytes());
            for (i, k) in self.keys.iter().enumerate() {
                k.put(&mut kb[16 + i * 16..32 + i * 16]);
            }
            let crc = crc32c_raw(!0, &kb);
            kb[4..8].copy_from_slice(&crc.to_le_bytes());
            self.file.write_all_at(&kb, self.key_blk * self.bs)?;
        }
        let mut sb = vec![0u8; 1024];
        inner.read_at(&mut sb, 1024)?;
        let header = Header {
            num_keys: self.num_keys,
            super_offset: 1,
            key_offset: 2,
            block_size: self.bs as u32,
            fs_block_size: self.bs as u32,
            sb_crc: crc32c_raw(!0, &sb),
            finished,
        };
        // (e2undo keeps the superblock with its magic inverted: no tool mistakes the
        // undo file for a file system.)
        let magic = u16::from_le_bytes([sb[0x38], sb[0x39]]);
        sb[0x38..0x3A].copy_from_slice(&(!magic).to_le_bytes());
        self.file.write_all_at(&sb, self.bs)?;
        self.file.write_all_at(&header.bytes(), 0)
    }
}

impl Device for UndoDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.lock();
        s.save(&*self.inner, offset, buf.len() as u64)?;
        if s.unsynced {
            // The old bytes and the keys naming them are durable before they are
            // overwritten: a crash leaves an undo file that restores what it covers.
            s.write_indexes(&*self.inner, false)?;
            s.file.sync_data()?;
            s.unsynced = false;
        }
        self.inner.write_at(buf, offset)
    }

    fn flush(&self) -> io::Result<()> {
        self.inner.flush()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }

    fn stats(&self) -> &IoStats {
        self.inner.stats()
    }
}
