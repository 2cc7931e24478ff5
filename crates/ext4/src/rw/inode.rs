//! Inodes in the read-write volume: loading a record for change, writing it back into
//! its inode-table block (checksummed) inside the transaction, allocating and freeing.

use super::volume::Volume;
use crate::alloc::InodeKind;
use crate::format::inode::Inode;
use crate::rw::meta::Meta;
use crate::write::no_space;
use usfs_fs::{Error, FileType, Result, Structure, Timestamp};

/// `i_extra_isize` given to new inodes (every field through i_projid), as the kernel's
/// default s_want_extra_isize.
const NEW_EXTRA_ISIZE: u16 = 32;

/// An inode record held for change.
pub struct InodeRec {
    /// Inode number.
    pub ino: u32,
    /// The record (at least 160 bytes; the first `inode_size` are written back).
    pub raw: Inode<Vec<u8>>,
}

impl InodeRec {
    /// The file type from i_mode.
    pub fn file_type(&self) -> Result<FileType> {
        FileType::from_mode(self.raw.i_mode() as u32).ok_or_else(|| {
            Error::corrupt(
                Structure::Inode,
                format!("inode {}: invalid mode {:#o}", self.ino, self.raw.i_mode()),
            )
            .with_ino(self.ino)
        })
    }

    /// Adds `delta` file-system blocks to i_blocks (512-byte units, or blocks with the
    /// HUGE_FILE flag).
    pub fn add_blocks(&mut self, delta: i64, block_size: u32) {
        use crate::format::inode::flags;
        let unit = if self.raw.has_flag(flags::HUGE_FILE) {
            1
        } else {
            block_size as i64 / 512
        };
        let cur = (self.raw.l_i_blocks_high() as u64) << 32 | self.raw.i_blocks_lo() as u64;
        let new = (cur as i64 + delta * unit).max(0) as u64;
        self.raw.set_blocks_512(new);
    }
}

impl Volume {
    /// Block and byte offset of inode `ino`'s record.
    fn inode_place(&self, ino: u32) -> (u64, usize) {
        let off = self.fs.inode_offset(ino);
        let bs = self.fs.core.geo.block_size as u64;
        (off / bs, (off % bs) as usize)
    }

    /// Loads in-use inode `ino` for change (checked as the reader checks it; an open
    /// orphan too).
    pub fn inode(&self, ino: u32) -> Result<InodeRec> {
        match self.fs.load_inode(ino as u64) {
            Ok(l) => Ok(InodeRec { ino, raw: l.raw }),
            Err(Error::Corrupt(_)) if self.is_open(ino) => self.inode_any(ino),
            Err(e) => Err(e),
        }
    }

    /// Loads inode `ino` whatever its state (orphans have no links), checking its
    /// checksum and mode only.
    pub(crate) fn inode_any(&self, ino: u32) -> Result<InodeRec> {
        let ino = self.fs.check_ino(ino as u64)?;
        let raw = self.fs.read_inode_raw(ino)?;
        if let Some(seed) = self.fs.core.csum_seed {
            if !raw.checksum_ok(seed, ino, self.fs.core.geo.inode_size as usize) {
                return Err(Error::corrupt(
                    Structure::Inode,
                    format!("inode {ino}: checksum does not match"),
                )
                .with_ino(ino));
            }
        }
        let rec = InodeRec { ino, raw };
        rec.file_type()?;
        Ok(rec)
    }

    /// Writes `rec` back into its inode-table block with its checksum.
    pub fn put_inode(&mut self, rec: &mut InodeRec) -> Result<()> {
        let isz = self.fs.core.geo.inode_size as usize;
        if let Some(seed) = self.fs.core.csum_seed {
            rec.raw.update_checksum(seed, rec.ino, isz);
        }
        let (blk, off) = self.inode_place(rec.ino);
        let mut block = self.read_meta(blk)?;
        block[off..off + isz].copy_from_slice(&rec.raw.bytes()[..isz]);
        self.write_meta(blk, block)
    }

    /// Allocates an inode for a new `file_type` in directory `parent` (flex_bg/Orlov
    /// placement) and returns its fresh record: mode, owner, one link, times `now`, a new
    /// generation; nothing is written until [`Volume::put_inode`].
    pub fn new_inode(
        &mut self,
        parent: u32,
        file_type: FileType,
        perm: u32,
        uid: u32,
        gid: u32,
    ) -> Result<InodeRec> {
        let geo = &self.fs.core.geo;
        let kind = match file_type {
            FileType::Directory if parent == crate::format::inode::ROOT_INO => InodeKind::TopDir,
            FileType::Directory => InodeKind::Dir,
            _ => InodeKind::File,
        };
        let gpf = self.blocks.geometry().groups_per_flex;
        let pg = (parent - 1) / geo.inodes_per_group;
        let blocks = &self.blocks;
        let flex_total = |f: u32| -> u64 {
            let first = f * gpf;
            let last = (first + gpf).min(geo.group_count);
            (first..last).map(|g| geo.group_blocks(g) as u64).sum()
        };
        let ino = self
            .inodes
            .alloc(kind, pg, &|f| blocks.flex_free(f), &flex_total)
            .map_err(|e| no_space("inodes", e))?;
        Ok(self.fresh_record(ino, kind != InodeKind::File, file_type, perm, uid, gid))
    }

    /// Takes inode `ino` for a new `file_type` (a checker's re-creation of the root
    /// directory), whatever it held: its fresh record, as [`Volume::new_inode`]. (One the
    /// check counted in use stays counted; the next check corrects the group's counts.)
    pub fn take_inode(&mut self, ino: u32, file_type: FileType, perm: u32) -> InodeRec {
        let is_dir = file_type == FileType::Directory;
        let _ = self.inodes.reserve(ino, is_dir);
        self.fresh_record(ino, is_dir, file_type, perm, 0, 0)
    }

    /// The record of newly allocated inode `ino` (its group joins the transaction, its
    /// descriptor covers it): mode, owner, one link, times now, a new generation.
    fn fresh_record(
        &mut self,
        ino: u32,
        is_dir: bool,
        file_type: FileType,
        perm: u32,
        uid: u32,
        gid: u32,
    ) -> InodeRec {
        let geo = &self.fs.core.geo;
        let g = (ino - 1) / geo.inodes_per_group;
        self.txn.groups.insert(g);
        self.undo_inode(ino, is_dir, true);
        self.mark_inode_slot_used(ino);
        self.blank_record(ino, file_type, perm, uid, gid)
    }

    /// A new record for inode `ino` (nothing allocated or written): mode, owner, one
    /// link, times now, a new generation, the extra size new inodes get.
    pub(crate) fn blank_record(
        &mut self,
        ino: u32,
        file_type: FileType,
        perm: u32,
        uid: u32,
        gid: u32,
    ) -> InodeRec {
        let geo = &self.fs.core.geo;
        let isz = geo.inode_size as usize;
        let mut raw = Inode::from_raw(&vec![0u8; isz.max(160)]);
        if isz > 128 {
            raw.set_i_extra_isize(NEW_EXTRA_ISIZE.min((isz - 128) as u16));
        }
        raw.set_i_mode((file_type.mode_bits() | (perm & 0o7777)) as u16);
        raw.set_uid(uid);
        raw.set_gid(gid);
        raw.set_i_links_count(1);
        let now = (self.clock)();
        raw.set_times(now, now, now, now, isz);
        raw.set_i_generation(self.next_generation());
        // (i_blocks counts 512-byte units; the HUGE_FILE flag stays off.)
        InodeRec { ino, raw }
    }

    /// Makes the descriptor of `ino`'s group cover the inode at once (INODE_UNINIT off,
    /// itable_unused below it), so the reader accepts it within this transaction.
    pub(super) fn mark_inode_slot_used(&mut self, ino: u32) {
        use crate::format::group_desc::BG_INODE_UNINIT;
        if !crate::alloc::seed::uninit_tracking(&self.fs.core.geo) {
            return;
        }
        let ipg = self.fs.core.geo.inodes_per_group;
        let (g, idx) = ((ino - 1) / ipg, (ino - 1) % ipg);
        self.undo_desc(g);
        let d = &mut self.fs.core.groups[g as usize];
        if d.has_flag(BG_INODE_UNINIT) {
            d.set_bg_flags(d.bg_flags() & !BG_INODE_UNINIT);
            d.set_itable_unused(ipg);
        }
        if idx >= ipg - d.itable_unused().min(ipg) {
            d.set_itable_unused(ipg - idx - 1);
        }
    }

    /// Frees inode `ino` (its blocks must already be gone): the record keeps its contents
    /// with i_links_count 0 and i_dtime set, as the kernel leaves it.
    pub fn free_inode(&mut self, rec: &mut InodeRec) -> Result<()> {
        let is_dir = rec.file_type()? == FileType::Directory;
        self.inodes.free(rec.ino, is_dir).map_err(|e| {
            Error::corrupt(Structure::Bitmap, format!("freeing inode: {e}")).with_ino(rec.ino)
        })?;
        self.undo_inode(rec.ino, is_dir, false);
        self.drop_pending(rec.ino);
        let g = (rec.ino - 1) / self.fs.core.geo.inodes_per_group;
        self.txn.groups.insert(g);
        let now = (self.clock)();
        rec.raw.set_i_links_count(0);
        rec.raw.set_i_dtime(now.sec as u32);
        self.put_inode(rec)
    }

    /// A generation number for a new inode.
    fn next_generation(&mut self) -> u32 {
        // xorshift over the clock and a counter: distinct, not predictable across runs.
        let t = (self.clock)();
        let mut x = (t.nsec as u64)
            ^ ((t.sec as u64) << 20)
            ^ self.gen_counter.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.gen_counter = self.gen_counter.wrapping_add(1);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u32
    }

    /// Sets ctime (and with `modified` mtime) of `rec` to now.
    pub fn touch(&self, rec: &mut InodeRec, modified: bool) {
        let now = (self.clock)();
        set_time(rec, now, modified, self.fs.core.geo.inode_size as usize);
    }
}

/// Sets ctime (and mtime when `modified`) keeping atime and crtime.
fn set_time(rec: &mut InodeRec, now: Timestamp, modified: bool, isz: usize) {
    let a = rec.raw.atime(isz);
    let m = if modified { now } else { rec.raw.mtime(isz) };
    let cr = rec.raw.crtime(isz).unwrap_or(now);
    rec.raw.set_times(a, m, now, cr, isz);
}
