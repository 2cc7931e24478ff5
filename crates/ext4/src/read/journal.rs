//! The reader's side of the journal: mapping the journal inode ([`Ext4::journal_map`]),
//! and opening an image whose journal needs recovery by replaying it in memory (an
//! [`Overlay`] over the device; the image is never written).

use super::inode::LoadedInode;
use super::Ext4;
use crate::format::features::compat;
use crate::format::inode::{flags, Inode};
use crate::format::superblock::SUPERBLOCK_OFFSET;
use crate::journal::{self, replay, JournalMap, ReplayPlan};
use std::sync::Arc;
use usfs_dev::{Device, Overlay};
use usfs_fs::{Error, Result, Structure};

impl Ext4 {
    /// The journal's block map, from the extents or block map of inode
    /// `s_journal_inum`. An external journal device (no journal inode) is refused by
    /// name; a hole in the journal is corruption.
    pub fn journal_map(&self) -> Result<JournalMap> {
        let ino = self.core.sb.s_journal_inum();
        if ino == 0 {
            return Err(Error::incompatible(
                "external journal device (the journal is not in this image)",
            ));
        }
        let inode = self.journal_inode(ino)?;
        let nblocks = inode.raw.size() >> self.core.geo.block_size_log;
        // A journal larger than the file system is garbage (and would make the map's
        // size unbounded).
        if nblocks > u32::MAX as u64 || nblocks > self.core.geo.blocks_count {
            return Err(Error::corrupt(
                Structure::Journal,
                format!("journal inode {ino}: {nblocks} blocks"),
            )
            .with_ino(ino));
        }
        let mut map = JournalMap::new();
        let mut l = 0u64;
        while l < nblocks {
            let run = self.map_block(&inode, l)?;
            let skip = l - run.lblk.min(l);
            let Some(p) = run.pblk else {
                return Err(Error::corrupt(
                    Structure::Journal,
                    format!("journal inode {ino}: hole at block {l}"),
                )
                .with_ino(ino));
            };
            let len = (run.len - skip).min(nblocks - l).max(1);
            map.push(p + skip, len as u32);
            l += len;
        }
        Ok(map)
    }

    /// The journal inode, or (as e2fsck does) the copy of its block map and size in the
    /// superblock (`s_jnl_blocks`) when the inode is not a regular file in use.
    fn journal_inode(&self, ino: u32) -> Result<LoadedInode> {
        let raw = self.read_inode_raw(self.check_ino(ino as u64)?)?;
        let usable = raw.i_links_count() != 0 && raw.i_mode() & 0o170000 == 0o100000;
        if usable || self.core.sb.s_jnl_backup_type() != 1 {
            return self.load_inode(ino as u64);
        }
        let b = self.core.sb.s_jnl_blocks();
        let mut raw = Inode::from_raw(&vec![0u8; self.core.geo.inode_size as usize]);
        let iblock: [u8; 60] = b[..60].try_into().expect("60 bytes");
        raw.set_i_block(&iblock);
        let word = |i: usize| u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().expect("4"));
        raw.set_size((word(15) as u64) << 32 | word(16) as u64);
        raw.set_i_links_count(1);
        raw.set_i_mode(0o100600);
        if u16::from_le_bytes([iblock[0], iblock[1]]) == crate::format::extent::EXTENT_MAGIC {
            raw.set_i_flags(flags::EXTENTS);
        }
        Ok(LoadedInode { ino, raw })
    }

    /// The journal's superblock fields in the words of `dumpe2fs` ("Journal features",
    /// "Total journal size", ...), or nothing without an internal journal.
    pub(crate) fn describe_journal(&self) -> Vec<(String, String)> {
        if !self.core.geo.features.has_compat(compat::HAS_JOURNAL)
            || self.core.sb.s_journal_inum() == 0
        {
            return Vec::new();
        }
        let fc = self.core.geo.features.has_compat(compat::FAST_COMMIT);
        let raw = self.journal_map().and_then(|m| {
            let mut raw = vec![0u8; self.core.geo.block_size as usize];
            let b = m
                .fs_block(0)
                .ok_or_else(|| Error::corrupt(Structure::Journal, "journal: empty"))?;
            self.read_block_into(b, &mut raw, Structure::Journal, "journal superblock")?;
            Ok(raw)
        });
        match raw {
            Ok(raw) => journal::superblock::describe(&raw, self.core.geo.block_size, fc),
            Err(e) => vec![("Journal superblock".into(), format!("unreadable: {e}"))],
        }
    }

    /// Opens an image whose journal needs recovery: a lenient first open finds the
    /// journal, the replay is planned, and the file system is opened again through an
    /// overlay holding the replayed blocks, the journal superblock marked empty and the
    /// superblock as recovery leaves it (needs_recovery clear).
    pub(super) fn open_recovering(dev: Box<dyn Device>) -> Result<Ext4> {
        let (pre, _) = Ext4::open_inner(dev, false, true)?;
        let map = pre.journal_map()?;
        let bs = pre.core.geo.block_size;
        let plan = journal::plan_replay(&*pre.core.dev, &map, bs)?;
        if let Some(e) = &plan.error {
            return Err(Error::corrupt(
                Structure::Journal,
                format!("journal recovery failed: {e}"),
            ));
        }
        let ov = Arc::new(Overlay::new(pre.core.dev, bs));
        overlay_replay(&ov, &map, &plan)?;
        replay_fast_commits(&ov, &plan)?;
        let (fs, _) = Ext4::open_inner(Box::new(ov), true, false)?;
        Ok(fs)
    }
}

/// Puts `plan`'s blocks, the recovered journal superblock and the recovered ext4
/// superblock into `ov`.
fn overlay_replay(ov: &Overlay, map: &JournalMap, plan: &ReplayPlan) -> Result<()> {
    let bs = ov.block_size() as u64;
    let dev_blocks = ov.len() / bs;
    for &b in plan.blocks.keys() {
        if b >= dev_blocks {
            continue;
        }
        let data = plan.read_block(ov.base(), map, b)?.expect("planned");
        ov.put(b, Arc::from(data));
    }
    if let Some(j0) = map.fs_block(0) {
        let mut raw = vec![0u8; bs as usize];
        ov.read_at(&mut raw, j0 * bs)?;
        replay::recovered_journal_superblock(&mut raw, plan);
        ov.put(j0, Arc::from(raw));
    }
    let sb_blk = SUPERBLOCK_OFFSET / bs;
    let mut raw = vec![0u8; bs as usize];
    ov.read_at(&mut raw, sb_blk * bs)?;
    let at = (SUPERBLOCK_OFFSET - sb_blk * bs) as usize;
    replay::recovered_superblock(&mut raw[at..at + 1024], plan);
    ov.put(sb_blk, Arc::from(raw));
    Ok(())
}

/// Replays the journal of the image on `dev` onto it, as `e2fsck -E journal_only` does
/// ([`journal::replay_onto`]). `Ok(None)` when the superblock does not say the journal
/// needs recovery; then only a journal `s_errno` is moved into the file system's state
/// (ERROR_FS), as e2fsck's journal check does on every run.
pub fn replay_journal(dev: Box<dyn Device>) -> Result<Option<ReplayPlan>> {
    if !super::needs_recovery(&*dev) {
        let (fs, _) = Ext4::open_inner(dev, false, false)?;
        fs.clear_journal_errno()?;
        return Ok(None);
    }
    let (pre, _) = Ext4::open_inner(dev, false, true)?;
    let map = pre.journal_map()?;
    let plan = journal::plan_replay(&*pre.core.dev, &map, pre.core.geo.block_size)?;
    if plan.fast_commits.records.is_empty() {
        journal::replay_onto(&*pre.core.dev, &map, &plan)?;
        return Ok(Some(plan));
    }
    // The fast commits are applied in memory over the replayed log, and what they
    // change is written home with the log's blocks, before the log is marked empty.
    let dev: Arc<dyn Device> = Arc::from(pre.core.dev);
    let ov = Arc::new(Overlay::new(Box::new(dev.clone()), pre.core.geo.block_size));
    overlay_replay(&ov, &map, &plan)?;
    replay_fast_commits(&ov, &plan)?;
    let bs = pre.core.geo.block_size as u64;
    let last = [map.fs_block(0), Some(SUPERBLOCK_OFFSET / bs)];
    let held = ov.snapshot();
    journal::replay::replay_onto_with(&*dev, &map, &plan, || {
        for (b, data) in &held {
            if !last.contains(&Some(*b)) {
                dev.write_at(data, b * bs)?;
            }
        }
        dev.flush()?;
        Ok(())
    })?;
    // mark_recovered wrote the superblock as read back: the fast commits' free counts
    // are in the overlay's copy, which recovery's changes were applied to as well.
    let sb_blk = SUPERBLOCK_OFFSET / bs;
    if let Some((_, data)) = held.iter().find(|(b, _)| *b == sb_blk) {
        dev.write_at(data, sb_blk * bs)?;
        dev.flush()?;
    }
    Ok(Some(plan))
}

/// Applies `plan`'s fast commits ([`crate::rw::fast_commit`]) over `ov`, which holds the
/// replayed log and the recovered superblocks: what they change lands in `ov`.
fn replay_fast_commits(ov: &Arc<Overlay>, plan: &ReplayPlan) -> Result<()> {
    if plan.fast_commits.records.is_empty() {
        return Ok(());
    }
    crate::rw::fast_commit::replay(Box::new(Absorb(ov.clone())), &plan.fast_commits.records)
}

/// A device whose writes stay in an [`Overlay`] (whole blocks put into it): the
/// fast-commit replay of a read-only open never reaches the image.
struct Absorb(Arc<Overlay>);

impl Device for Absorb {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let bs = self.0.block_size() as u64;
        let (mut off, mut done) = (offset, 0usize);
        while done < buf.len() {
            let blk = off / bs;
            let at = (off % bs) as usize;
            let n = (bs as usize - at).min(buf.len() - done);
            let mut block = vec![0u8; bs as usize];
            self.0.read_at(&mut block, blk * bs)?;
            block[at..at + n].copy_from_slice(&buf[done..done + n]);
            self.0.put(blk, Arc::from(block));
            done += n;
            off += n as u64;
        }
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        self.0.len()
    }
    fn stats(&self) -> &usfs_dev::IoStats {
        self.0.stats()
    }
}

impl Ext4 {
    /// A journal superblock with `s_errno` set: clears it and marks the file system as
    /// having errors (e2fsck_check_ext3_journal). Without a readable internal journal,
    /// nothing.
    fn clear_journal_errno(&self) -> Result<()> {
        if !self.core.geo.features.has_compat(compat::HAS_JOURNAL)
            || self.core.sb.s_journal_inum() == 0
        {
            return Ok(());
        }
        let Some(j0) = self.journal_map().ok().and_then(|m| m.fs_block(0)) else {
            return Ok(());
        };
        // (A journal that cannot be read is the checker's to judge.)
        let Ok(mut raw) = self.read_block(j0, Structure::Journal, "journal superblock") else {
            return Ok(());
        };
        let mut jsb = journal::JournalSuperblock::new(&mut raw[..]).expect("a block");
        if jsb.h_magic() != journal::JBD2_MAGIC || jsb.s_errno() == 0 {
            return Ok(());
        }
        jsb.set_s_errno(0);
        jsb.update_checksum();
        let bs = self.core.geo.block_size as u64;
        self.core.dev.write_at(&raw, j0 * bs)?;
        let mut sb = self.core.sb.bytes()[..1024].to_vec();
        let mut s = crate::format::superblock::Superblock::new(&mut sb[..]).expect("1024 bytes");
        s.set_s_state(s.s_state() | 2);
        if self.core.csum_seed.is_some() {
            let c = s.compute_checksum();
            s.set_s_checksum(c);
        }
        self.core.dev.write_at(&sb, SUPERBLOCK_OFFSET)?;
        self.core.dev.flush()?;
        Ok(())
    }
}
