//! Inode tables being filled: one zero-filled, page-aligned mapping per group that has
//! inodes, the size of the group's whole table. Pages are paid for when first touched,
//! so a group with few inodes costs few pages; nothing is ever moved or copied: the
//! table is checksummed in place and written straight from its pages (past the page
//! cache) by [`write_tables`], several groups at a time.

use crate::format::inode::Inode;
use std::sync::Mutex;
use usfs_dev::{Device, Pages, ALIGN};
use usfs_fs::{Error, Result};

/// One group's inode table in memory.
pub(super) struct InodeTable {
    /// The whole table, zeros where no inode was touched.
    pages: Pages,
    /// Bytes up to the end of the highest inode record touched.
    used: usize,
}

impl InodeTable {
    /// A zero table of `bytes` (one group's inode table).
    pub(super) fn new(bytes: usize) -> InodeTable {
        let pages = match Pages::new(bytes, false) {
            Ok(p) => p,
            // Out of address space or memory: what a Vec would do.
            Err(_) => std::alloc::handle_alloc_error(
                std::alloc::Layout::from_size_align(bytes.max(1), ALIGN).expect("table layout"),
            ),
        };
        InodeTable { pages, used: 0 }
    }

    /// Record `idx` of `isz` bytes, writable (panics past the table: a caller bug).
    pub(super) fn record_mut(&mut self, idx: usize, isz: usize) -> &mut [u8] {
        let end = (idx + 1) * isz;
        self.used = self.used.max(end);
        &mut self.pages.as_mut_slice()[idx * isz..end]
    }

    /// Record `idx` (zeros if never touched).
    pub(super) fn record(&self, idx: usize, isz: usize) -> &[u8] {
        &self.pages.as_slice()[idx * isz..(idx + 1) * isz]
    }

    /// Sets the checksum of every record in use (inode numbers from `first_ino_of_group`;
    /// records below `first_ino` of the file system are reserved and always count).
    fn checksum(&mut self, seed: u32, first_ino_of_group: u32, first_ino: u32, isz: usize) {
        let used = self.used;
        for (idx, rec) in self.pages.as_mut_slice()[..used]
            .chunks_exact_mut(isz)
            .enumerate()
        {
            let ino = first_ino_of_group + idx as u32;
            let mut i = Inode::new(rec).expect("record size");
            if i.i_mode() == 0 && i.i_links_count() == 0 && ino >= first_ino {
                continue; // unused
            }
            i.update_checksum(seed, ino, isz);
        }
    }
}

/// What [`write_tables`] needs to know of the file system.
pub(super) struct TableLayout {
    pub inode_size: usize,
    pub inodes_per_group: u32,
    pub first_ino: u32,
    /// Bytes of one group's table.
    pub table_bytes: usize,
    pub csum_seed: Option<u32>,
}

/// Checksums and writes every table in `tables` (`(group, table, byte offset on the
/// device)`), up to its last record in use rounded up to whole pages (the rest of a
/// table on a fresh device is zeros already), with up to `threads` groups at a time:
/// checksums of one group are computed while another's is being written.
pub(super) fn write_tables(
    dev: &dyn Device,
    layout: &TableLayout,
    tables: Vec<(u32, &mut InodeTable, u64)>,
    threads: usize,
) -> Result<()> {
    let work = Mutex::new(tables.into_iter());
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let one = || loop {
        let next = match work.lock() {
            Ok(mut w) => w.next(),
            Err(_) => None,
        };
        let Some((g, t, at)) = next else { return };
        if failed.lock().map(|f| f.is_some()).unwrap_or(true) {
            return;
        }
        if let Some(seed) = layout.csum_seed {
            let first = g * layout.inodes_per_group + 1;
            t.checksum(seed, first, layout.first_ino, layout.inode_size);
        }
        let len = (t.used.div_ceil(ALIGN) * ALIGN).min(layout.table_bytes);
        if let Err(e) = dev.write_direct(&t.pages.as_slice()[..len], at) {
            if let Ok(mut f) = failed.lock() {
                f.get_or_insert(Error::Io(e));
            }
            return;
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads.max(1) {
            s.spawn(one);
        }
        one();
    });
    match failed.into_inner() {
        Ok(Some(e)) => Err(e),
        Ok(None) => Ok(()),
        Err(_) => Err(Error::Io(std::io::Error::other(
            "an inode-table writer failed",
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use usfs_dev::MemDevice;

    #[test]
    fn tables_are_written_up_to_their_last_record_with_checksums() {
        let layout = TableLayout {
            inode_size: 256,
            inodes_per_group: 64,
            first_ino: 11,
            table_bytes: 64 * 256,
            csum_seed: Some(0x1234_5678),
        };
        let dev = MemDevice::new(vec![0xAA; 3 * 64 * 256], true);
        let mut a = InodeTable::new(layout.table_bytes);
        let mut b = InodeTable::new(layout.table_bytes);
        // group 0: reserved inode 2 (root) and inode 12; group 1: inode 65 (its first)
        for (which, idx) in [(0, 1usize), (0, 11), (1, 0)] {
            let t = if which == 0 { &mut a } else { &mut b };
            let mut i = Inode::new(t.record_mut(idx, 256)).unwrap();
            i.set_i_mode(0o100644);
            i.set_i_links_count(1);
            i.set_i_extra_isize(32);
        }
        assert_eq!(a.used, 12 * 256);
        write_tables(
            &dev,
            &layout,
            vec![(0, &mut a, 0), (1, &mut b, 64 * 256)],
            2,
        )
        .unwrap();
        let img = dev.into_inner();
        // written: group 0's first page (12 records = 3 KiB, rounded up), group 1's
        // first page; the rest untouched
        assert!(img[4096..64 * 256].iter().all(|&x| x == 0xAA));
        assert!(img[64 * 256 + 4096..].iter().all(|&x| x == 0xAA));
        for (off, ino) in [(256usize, 2u32), (11 * 256, 12), (64 * 256, 65)] {
            let rec = &img[off..off + 256];
            let i = Inode::from_raw(rec);
            assert_eq!(i.i_mode(), 0o100644);
            assert_eq!(
                i.compute_checksum(0x1234_5678, ino, 256) as u16,
                i.l_i_checksum_lo(),
                "inode {ino}"
            );
        }
        // an unused record past the reserved ones (inode 11) stays all zeros
        assert!(img[10 * 256..11 * 256].iter().all(|&x| x == 0));
        assert!(img[20 * 256..21 * 256].iter().all(|&x| x == 0xAA));
    }
}
