//! The journal's fixes, as e2fsck makes them: an unusable journal inode is deleted
//! before the check reads on (has_journal off, the superblock's journal inode and its
//! copy of the map cleared, nothing to recover: the superblock written in place, as
//! e2fsck writes it), in a round of its own; once the repair is done, a new empty
//! journal of mke2fs's default size is made ("Recreate journal").

use crate::problem::{Code, Problem};
use std::sync::Arc;
use usfs_dev::Device;
use usfs_ext4::format::features::{compat, incompat};
use usfs_ext4::format::superblock::{Superblock, SUPERBLOCK_OFFSET};
use usfs_ext4::rw::Volume;
use usfs_fs::{Error, Result};

/// Is `p` a journal to delete (and make anew after)?
pub(super) fn deletes(p: &Problem) -> bool {
    p.code == Code::JournalBad && p.found == Some(1)
}

/// Deletes the journal named by the superblock on `dev`.
pub(super) fn delete(dev: &Arc<dyn Device>) -> Result<()> {
    let mut raw = vec![0u8; 1024];
    dev.read_at(&mut raw, SUPERBLOCK_OFFSET)?;
    let mut sb = Superblock::new(raw).ok_or(Error::Invalid)?;
    sb.set_s_feature_compat(sb.s_feature_compat() & !compat::HAS_JOURNAL);
    sb.set_s_feature_incompat(sb.s_feature_incompat() & !incompat::RECOVER);
    sb.set_s_journal_inum(0);
    sb.set_s_jnl_blocks(&[0u8; 68]);
    sb.update_checksum();
    dev.write_at(sb.bytes(), SUPERBLOCK_OFFSET)?;
    Ok(dev.flush()?)
}

/// Makes a new journal of mke2fs's default size on the repaired image on `dev`: its
/// size in blocks, or why not (the file system too small or full).
pub(super) fn recreate(dev: &Arc<dyn Device>) -> std::result::Result<u32, String> {
    let mut sb = vec![0u8; 1024];
    dev.read_at(&mut sb, SUPERBLOCK_OFFSET)
        .map_err(|e| e.to_string())?;
    let blocks = Superblock::new(&sb[..]).map_or(0, |s| {
        s.blocks_count(s.s_feature_incompat() & incompat::BIT64 != 0)
    });
    let Some(size) = usfs_ext4::write::default_journal_blocks(blocks) else {
        return Err("the file system is too small for a journal".into());
    };
    let failed = |e: usfs_fs::Error| format!("{e}: while trying to create journal ({size} blocks)");
    let mut v = Volume::open(Box::new(dev.clone())).map_err(failed)?;
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
