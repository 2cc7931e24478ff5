//! The journal's fixes, as e2fsck makes them: an unusable journal inode is deleted
//! before the check reads on (has_journal off, the superblock's journal inode and its
//! copy of the map cleared, nothing to recover: the superblock written in place, as
//! e2fsck writes it), in a round of its own; once the repair is done, a new empty
//! journal of mke2fs's default size is made ("Recreate journal").

use super::superblock_of;
use crate::problem::{Code, Problem};
use std::sync::Arc;
use usfs_dev::Device;
use usfs_ext4::format::features::{compat, incompat};
use usfs_ext4::format::superblock::{STATE_VALID_FS, SUPERBLOCK_OFFSET};
use usfs_ext4::rw::Volume;
use usfs_fs::Result;

/// Is `p` a journal to delete (and make anew after)?
pub fn deletes(p: &Problem) -> bool {
    p.code == Code::JournalBad && p.found() == Some(1)
}

/// Is `p` a corrupt journal superblock to write anew?
fn resets(p: &Problem) -> bool {
    p.code == Code::JournalBad && p.found() == Some(2) && p.block().is_some()
}

/// Is `p` a fix written in place before any volume opens (the volume would not open
/// over the journal as it is)?
pub(super) fn raw(p: &Problem) -> bool {
    deletes(p) || resets(p) || p.code == Code::JournalClearV2
}

/// Applies the in-place journal fixes `ps` (all [`raw`]) to `dev`: returns whether the
/// journal was deleted.
pub(super) fn apply_raw(dev: &Arc<dyn Device>, ps: &[Problem]) -> Result<bool> {
    if ps.iter().any(deletes) {
        delete(dev)?;
        return Ok(true);
    }
    for p in ps.iter().filter(|p| p.code == Code::JournalClearV2) {
        clear_v2(dev, p.block().ok_or(usfs_fs::Error::Invalid)?)?;
    }
    for p in ps.iter().filter(|p| resets(p)) {
        let (blk, blocks) = p.block().zip(p.expected()).ok_or(usfs_fs::Error::Invalid)?;
        reset(dev, blk, blocks as u32)?;
    }
    Ok(false)
}

/// On an image whose journal needs recovery: a journal that keeps the replay from reading
/// the log, judged as e2fsck_check_ext3_journal judges it before it recovers: an
/// unusable journal inode or a superblock without the magic (to delete, e2fsck's
/// PR_0_JOURNAL_BAD_INODE), a corrupt superblock (a log block's type, a bad checksum or
/// block size, longer than its file: to write anew, PR_0_JOURNAL_BAD_SUPER). None when
/// the image needs no recovery or the journal loads (or has problems the replay
/// reports itself).
pub fn corrupt_before_replay(dev: &Arc<dyn Device>) -> Result<Option<Problem>> {
    let sb = superblock_of(dev)?;
    if sb.s_feature_incompat() & incompat::RECOVER == 0
        || sb.s_feature_compat() & compat::HAS_JOURNAL == 0
    {
        return Ok(None);
    }
    let (fs, _) = usfs_ext4::Ext4::open_unreplayed(Box::new(dev.clone()))?;
    Ok(crate::journal::check(&fs)
        .into_iter()
        .find(|p| resets(p) || deletes(p)))
}

/// Fixes what [`corrupt_before_replay`] found: the journal superblock written anew, or
/// the journal deleted (returns true then: the repair makes one anew at the end, see
/// [`crate::Options::journal_deleted`]). Either way the log it held is dropped,
/// needs_recovery cleared and the file system marked not clean (e2fsck's
/// e2fsck_clear_recover after an error: a full check follows).
pub fn reset_before_replay(dev: &Arc<dyn Device>, p: &Problem) -> Result<bool> {
    if deletes(p) {
        mark_not_clean(dev)?;
        delete(dev)?;
        return Ok(true);
    }
    let (blk, blocks) = p.block().zip(p.expected()).ok_or(usfs_fs::Error::Invalid)?;
    reset(dev, blk, blocks as u32)?;
    Ok(false)
}

/// Clears VALID_FS in the superblock on `dev`, in place, flushed: written before the
/// log of an image needing recovery is dropped, so that a crash after cannot leave an
/// image a later run skips as clean, its dropped log's changes unchecked.
fn mark_not_clean(dev: &Arc<dyn Device>) -> Result<()> {
    let mut sb = superblock_of(dev)?;
    sb.set_s_state(sb.s_state() & !STATE_VALID_FS);
    sb.update_checksum();
    dev.write_at(sb.bytes(), SUPERBLOCK_OFFSET)?;
    Ok(dev.flush()?)
}

/// Writes a new empty journal superblock for a journal of `blocks` blocks in block
/// `blk` (e2fsck's e2fsck_journal_reset_super), and clears needs_recovery: what the old
/// log held is not replayed, and the file system is marked not clean.
fn reset(dev: &Arc<dyn Device>, blk: u64, blocks: u32) -> Result<()> {
    let mut sb = super::superblock_of(dev)?;
    let bs = 1u32 << sb.block_size_log();
    if sb.s_feature_incompat() & incompat::RECOVER != 0 {
        mark_not_clean(dev)?;
        sb = superblock_of(dev)?;
    }
    let jsb = usfs_ext4::journal::JournalSuperblock::new_reset(bs, blocks, sb.s_uuid());
    dev.write_at(jsb.bytes(), blk * bs as u64)?;
    dev.flush()?;
    sb.set_s_feature_incompat(sb.s_feature_incompat() & !incompat::RECOVER);
    sb.update_checksum();
    dev.write_at(sb.bytes(), SUPERBLOCK_OFFSET)?;
    Ok(dev.flush()?)
}

/// Zeroes every field of the journal superblock in block `blk` past the V1 superblock
/// (features, uuid, users, checksum: e2fsck's clear_v2_journal_fields).
fn clear_v2(dev: &Arc<dyn Device>, blk: u64) -> Result<()> {
    let bs = 1u64 << super::superblock_of(dev)?.block_size_log();
    let mut b = vec![0u8; bs as usize];
    dev.read_at(&mut b, blk * bs)?;
    b[0x24..].fill(0);
    dev.write_at(&b, blk * bs)?;
    Ok(dev.flush()?)
}

/// Is the superblock's copy of the journal inode's map and size (`s_jnl_blocks`) on
/// `dev` missing, or is its map not the inode's (e2fsck's e2fsck_move_ext3_journal: the
/// size is not compared)? Only for an internal journal the superblock names, whose
/// inode can be read (as the check reads the image: what it found wrong is fixed in the
/// same round), on an image the repair can write (an announced copy does not make a
/// run fail).
pub(super) fn backup_stale(dev: &Arc<dyn Device>) -> Result<bool> {
    let sb = superblock_of(dev)?;
    let ino = sb.s_journal_inum();
    if ino == 0 || sb.s_feature_compat() & compat::HAS_JOURNAL == 0 {
        return Ok(false);
    }
    let Ok((fs, _)) = usfs_ext4::Ext4::open_for_check(Box::new(dev.clone())) else {
        return Ok(false);
    };
    let writable = usfs_ext4::rw::check_repair_features(&fs.geometry().features).is_ok();
    let Ok(raw) = fs.read_inode_raw(ino) else {
        return Ok(false);
    };
    // (A journal with problems is mended first; then it is made with the new one.)
    if !writable || !crate::journal::check(&fs).is_empty() {
        return Ok(false);
    }
    Ok(match sb.s_jnl_backup_type() {
        0 => true,
        BACKUP_BLOCKS => sb.s_jnl_blocks()[..60] != raw.i_block()[..],
        _ => false,
    })
}

/// Copies the journal inode's map and size into the superblock (e2fsck's
/// PR_0_BACKUP_JNL), in `v`'s transaction.
pub(super) fn backup(v: &mut Volume) -> Result<()> {
    let ino = v.reader().superblock().s_journal_inum();
    let jnl = v.reader().read_inode_raw(ino)?.journal_backup();
    v.edit_superblock(|sb| {
        sb.set_s_jnl_blocks(&jnl);
        sb.set_s_jnl_backup_type(BACKUP_BLOCKS);
    });
    Ok(())
}

/// [`backup`] of a clean image on `dev` a check skips (no `-f`), where the copy is
/// missing or stale, as e2fsck makes it before it decides to skip the check (in a
/// transaction of its own). Returns whether it was made.
pub fn backup_unchecked(dev: &Arc<dyn Device>) -> Result<bool> {
    if !backup_stale(dev)? {
        return Ok(false);
    }
    let found = usfs_ext4::rw::repair::Found::default();
    let mut v = Volume::open_for_repair(Box::new(dev.clone()), &found)?;
    backup(&mut v)?;
    v.close()?;
    Ok(true)
}

/// Does the journal of the image on `dev` have problems of its own (pass 0's journal
/// checks)? e2fsck checks the journal before it decides to skip a clean image, and
/// does not skip one whose journal it mended.
pub fn journal_has_problems(dev: &Arc<dyn Device>) -> Result<bool> {
    let (fs, _) = usfs_ext4::Ext4::open_for_check(Box::new(dev.clone()))?;
    let sb = fs.superblock();
    if sb.s_journal_inum() == 0 || sb.s_feature_compat() & compat::HAS_JOURNAL == 0 {
        return Ok(false);
    }
    Ok(!crate::journal::check(&fs).is_empty())
}

/// `s_jnl_backup_type` of a copy of the journal inode's i_block and size.
const BACKUP_BLOCKS: u8 = 1;

/// Deletes the journal named by the superblock on `dev`.
pub(super) fn delete(dev: &Arc<dyn Device>) -> Result<()> {
    let mut sb = super::superblock_of(dev)?;
    sb.set_s_feature_compat(sb.s_feature_compat() & !compat::HAS_JOURNAL);
    sb.set_s_feature_incompat(sb.s_feature_incompat() & !incompat::RECOVER);
    sb.set_s_journal_inum(0);
    sb.set_s_journal_dev(0);
    sb.set_s_journal_uuid(&[0u8; 16]);
    sb.set_s_jnl_blocks(&[0u8; 68]);
    sb.update_checksum();
    dev.write_at(sb.bytes(), SUPERBLOCK_OFFSET)?;
    Ok(dev.flush()?)
}

/// Makes a new journal of mke2fs's default size on the repaired image on `dev`: its
/// size in blocks, or why not (the file system too small or full).
pub(super) fn recreate(dev: &Arc<dyn Device>) -> std::result::Result<u32, String> {
    let sb = super::superblock_of(dev).map_err(|e| e.to_string())?;
    let blocks = sb.blocks_count(sb.s_feature_incompat() & incompat::BIT64 != 0);
    let sb = sb.into_inner();
    let Some(size) = usfs_ext4::write::default_journal_blocks(blocks) else {
        return Err("the file system is too small for a journal".into());
    };
    let failed = |e: usfs_fs::Error| format!("{e}: while trying to create journal ({size} blocks)");
    let (mut v, _) = Volume::open_uncounted(Box::new(dev.clone())).map_err(failed)?;
    if let Err(e) = v.make_journal(size) {
        // Nothing of it is committed: the volume goes, and the superblock is put back
        // (the data written so far lies in blocks that stay free).
        drop(v);
        let restored = dev
            .write_at(&sb, SUPERBLOCK_OFFSET)
            .and_then(|()| dev.flush());
        return Err(match restored {
            Ok(()) => failed(e),
            Err(r) => format!("{}; the superblock could not be put back: {r}", failed(e)),
        });
    }
    v.close().map_err(failed)?;
    Ok(size)
}
