//! Repairs: the problems a check found, fixed through the read-write volume's
//! transactions (`usfs_ext4::rw::repair`), from the values each problem carries.
//!
//! A repair runs in rounds, as e2fsck restarts: check, fix everything found in one
//! transaction, check again, until a check finds nothing to fix (at most [`ROUNDS`]).
//! Fixes interact (a reconnected directory changes its old parent's link count), and the
//! next round's check sees their effects. A round runs only when every error its check
//! found has a fix here: a partial repair would write group summaries computed on the
//! assumption that the other problems were fixed too (a corrupt image is never made
//! worse). Preening (`-p`) fixes only what e2fsck's preen fixes (its PR_PREEN_OK
//! problems).
//!
//! The fixes so far: group summaries (bitmaps, their checksums and padding, free and
//! directory counts, the superblock's totals and checksum, descriptor checksums) written
//! from what passes 1-4 found; inode fields (`inode`: link counts, i_size, i_blocks,
//! dtime, extra size, checksums; a bad mode clears the inode; a bad xattr block is let
//! go, a good one with a wrong checksum gets it set, as do extent,
//! directory and htree blocks); directory entries
//! (`entry`: removed); connectivity (`connect`: lost+found, reconnection,
//! `..`); group descriptors (`group`: unused-inodes counts, uninit flags).

mod connect;
mod entry;
mod group;
mod inode;

use crate::problem::{Code, Problem};
use crate::{check, Options, Report};
use std::sync::Arc;
use usfs_dev::Device;
use usfs_ext4::format::features::ro_compat::ORPHAN_PRESENT;
use usfs_ext4::rw::Volume;

/// Checks a repair runs at most before it stops with what is left.
pub const ROUNDS: usize = 5;

/// How the repair answers e2fsck's questions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `-y`: fix everything.
    Yes,
    /// `-p`: fix what is safe without asking; anything else stops the repair.
    Preen,
}

/// One round: a check and what was fixed after it.
#[derive(Debug)]
pub struct Round {
    /// The check.
    pub report: Report,
    /// The problems fixed after it.
    pub fixed: Vec<Problem>,
}

/// The outcome of a repair.
#[derive(Debug)]
pub struct Outcome {
    /// The rounds that changed the image, in order.
    pub rounds: Vec<Round>,
    /// The last check: the image as the repair leaves it.
    pub last: Report,
    /// Errors of the last check that have no fix here (or, preening, that preen may not
    /// fix): the round they were found in changed nothing.
    pub unfixable: Vec<Problem>,
    /// A fix that failed (the problem and why): its round changed nothing.
    pub failed: Option<(Problem, String)>,
}

/// Does `code` have a fix here, and may preen apply it (e2fsck's PR_PREEN_OK)?
fn fix_of(code: Code) -> Option<bool> {
    use Code::*;
    Some(match code {
        BlockBitmapDiff | InodeBitmapDiff | GroupFreeBlocks | GroupFreeInodes | GroupDirs
        | TotalFreeBlocks | TotalFreeInodes | BitmapChecksum | BitmapPadding
        | SuperblockChecksum | GroupDescChecksum => true,
        BadRefCount | BadISize | BadIBlocks | InodeDtimeSet | InodeZeroDtime | InodeChecksum
        | NoLostFound | SuperblockCounts => true,
        DirUnusedInode | DirBlockChecksum | GroupUnusedInodes | HtreeChecksum => true,
        UnconnectedDir | UnattachedInode | BadDotDot | DirBadInode | DirBadBlockInode
        | DirNlinkFeature | XattrBlockChecksum | BadXattrBlock | ExtentChecksum => false,
        _ => return None,
    })
}

/// Checks the image on `dev` (writable, its journal replayed) and repairs what the checks
/// find, round by round (see the module header), as `mode` permits.
pub fn repair(dev: Arc<dyn Device>, opts: &Options, mode: Mode) -> usfs_fs::Result<Outcome> {
    release_orphans(&dev)?;
    let mut rounds = Vec::new();
    loop {
        let report = check(Box::new(dev.clone()), opts)?;
        let allowed = |p: &Problem| match fix_of(p.code) {
            Some(preen_ok) => mode == Mode::Yes || preen_ok,
            None => false,
        };
        // Problems of either severity without a fix block the round: e2fsck would fix
        // them (relocate a bitmap, rebuild the journal), and the summaries found assume
        // it did.
        let unfixable: Vec<Problem> = report
            .problems
            .iter()
            .filter(|p| !allowed(p))
            .cloned()
            .collect();
        let fixed: Vec<Problem> = report
            .problems
            .iter()
            .filter(|p| allowed(p))
            .cloned()
            .collect();
        if !unfixable.is_empty() || fixed.is_empty() || rounds.len() == ROUNDS {
            return Ok(Outcome {
                rounds,
                last: report,
                unfixable,
                failed: None,
            });
        }
        if let Err(failed) = apply(&dev, &report, &fixed)? {
            return Ok(Outcome {
                rounds,
                last: report,
                unfixable: vec![failed.0.clone()],
                failed: Some(*failed),
            });
        }
        rounds.push(Round { report, fixed });
    }
}

/// Frees the inodes on the orphan list (files unlinked while open, truncates in
/// progress) before the check, as e2fsck and the kernel's mount do: the volume's own
/// orphan cleanup, when the image opens for writing (consistent bitmaps); otherwise the
/// check reports the list and the repair stops there.
fn release_orphans(dev: &Arc<dyn Device>) -> usfs_fs::Result<()> {
    let mut sb = vec![0u8; 1024];
    dev.read_at(&mut sb, 1024)?;
    let le32 = |at: usize| u32::from_le_bytes(sb[at..at + 4].try_into().expect("4 bytes"));
    const LAST_ORPHAN: usize = 0xE8;
    const RO_COMPAT: usize = 0x64;
    let present = le32(LAST_ORPHAN) != 0 || le32(RO_COMPAT) & ORPHAN_PRESENT != 0;
    if !present {
        return Ok(());
    }
    match Volume::open(Box::new(dev.clone())) {
        Ok(mut v) => v.close(),
        Err(usfs_fs::Error::Corrupt(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// A fix that failed: the problem, and why (boxed: a problem is large).
type Failed = Box<(Problem, String)>;

/// Applies `fixed` (problems of `report`) in one transaction. A fix that fails leaves
/// the image as it was (nothing reached it but the superblock's in-use mark, which is
/// put back) and is returned.
fn apply(
    dev: &Arc<dyn Device>,
    report: &Report,
    fixed: &[Problem],
) -> usfs_fs::Result<Result<(), Failed>> {
    let mut sb = vec![0u8; 1024];
    dev.read_at(&mut sb, 1024)?;
    let mut v = Volume::open_for_repair(Box::new(dev.clone()), &report.found)?;
    let fixes = fixed.iter().try_for_each(|p| {
        group::apply(&mut v, p);
        let r = inode::apply(&mut v, p)
            .and_then(|()| entry::apply(&mut v, p))
            .and_then(|()| connect::apply(&mut v, p));
        r.map_err(|e| Box::new((p.clone(), e.to_string())))
    });
    if let Err(failed) = fixes {
        drop(v);
        dev.write_at(&sb, 1024)?;
        dev.flush()?;
        return Ok(Err(failed));
    }
    v.close_repaired()?;
    Ok(Ok(()))
}
