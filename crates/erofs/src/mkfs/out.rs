//! The image being written: a block cursor over the device. File data, the metadata area
//! and directory blocks are appended at the cursor; writeback of what was written is
//! started every [`WRITEBACK_CHUNK`] bytes, so the final flush has little left to wait for.
//! With `-E dedupe` it also knows the pclusters written so far by content.

use super::dedupe::Dedupe;
use crate::format::round_up;
use std::io;
use usfs_dev::Device;
use usfs_fs::Result;

/// Writeback of file data is started every this many bytes.
const WRITEBACK_CHUNK: u64 = 32 << 20;

/// The device and where the next block goes.
pub(super) struct Out<'a> {
    pub(super) dev: &'a dyn Device,
    /// Block size in bytes.
    pub(super) bs: u64,
    /// Next free block.
    pub(super) cursor: u64,
    /// Bytes before this were handed to writeback already.
    started: u64,
    /// `-E dedupe`: the pclusters written so far.
    pub(super) dedupe: Option<Dedupe>,
}

impl<'a> Out<'a> {
    /// Starts after the `head` blocks (the superblock's, written last).
    pub(super) fn new(dev: &'a dyn Device, bs: u64, head: u64, dedupe: bool) -> Out<'a> {
        Out {
            dev,
            bs,
            cursor: head,
            started: 0,
            dedupe: dedupe.then(Dedupe::default),
        }
    }

    /// Writes `bytes` (whole blocks but for the last) at the cursor; returns their first
    /// block.
    pub(super) fn put_blocks(&mut self, bytes: &[u8]) -> Result<u32> {
        let at = self.cursor;
        let end = at + (bytes.len() as u64).div_ceil(self.bs);
        self.check_room(end)?;
        self.dev.write_at(bytes, at * self.bs)?;
        self.cursor = end;
        let end = self.cursor * self.bs;
        if end - self.started >= WRITEBACK_CHUNK {
            self.dev.start_writeback(self.started, end - self.started);
            self.started = end;
        }
        Ok(u32::try_from(at).map_err(|_| {
            io::Error::new(io::ErrorKind::FileTooLarge, "image larger than 2^32 blocks")
        })?)
    }

    /// Fails unless the device holds `blocks` blocks.
    pub(super) fn check_room(&self, blocks: u64) -> Result<()> {
        if blocks.saturating_mul(self.bs) <= self.dev.len() {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::StorageFull,
            format!(
                "the image needs more than the {} bytes of the device",
                self.dev.len()
            ),
        )
        .into())
    }
}

/// `b` padded with zeros to whole blocks.
pub(super) fn pad_to(b: &[u8], bs: u64) -> Vec<u8> {
    let mut v = b.to_vec();
    v.resize(round_up(b.len() as u64, bs) as usize, 0);
    v
}
