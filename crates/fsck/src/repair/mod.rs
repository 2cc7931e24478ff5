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
//! problems, and what it only announces). Asked (`repair_asking`, e2fsck without
//! -p/-y/-n on a terminal), every fix of a round is put to the user (what e2fsck only
//! announces, shown) before any is applied; a round runs only when all were
//! accepted (its group summaries assume every fix), and a declined fix ends the repair.
//!
//! The fixes so far: group summaries (bitmaps, their checksums and padding, free and
//! directory counts, the superblock's totals and checksum, descriptor checksums) written
//! from what passes 1-4 found; inode fields (`inode`: link counts, i_size, i_blocks,
//! dtime, extra size, checksums; a bad mode clears the inode; a bad xattr block is let
//! go, a good one with a wrong checksum gets it set, as do extent,
//! directory and htree blocks); directory entries
//! (`entry`: removed); connectivity (`connect`: lost+found, reconnection,
//! `..`); group descriptors (`group`: unused-inodes counts, uninit flags); blocks claimed
//! more than once (`dup`: cloned, as e2fsck's pass 1D).

mod badblocks;
mod connect;
mod dup;
mod entry;
mod fields;
mod group;
mod inode;
mod journal;
mod quota;
mod superblock;

pub use journal::{
    backup_unchecked, corrupt_before_replay, deletes, journal_has_problems, reset_before_replay,
};

use crate::problem::{Code, Pass, Problem};
use crate::{check, Options, Report};
use std::sync::Arc;
use std::time::Instant;
use usfs_dev::Device;
use usfs_ext4::format::features::incompat::BIT64;
use usfs_ext4::format::features::ro_compat::ORPHAN_PRESENT;
use usfs_ext4::format::superblock::{Superblock, STATE_VALID_FS, SUPERBLOCK_OFFSET};
use usfs_ext4::rw::{ReleasedOrphan, Volume};
use usfs_fs::Structure;

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

/// Who answers an asked repair's questions: given the problem and its round (from 1).
pub type Asker<'a> = &'a mut dyn FnMut(&Problem, usize) -> Answer;

/// An answer to one of an asked repair's questions (e2fsck's `ask_yn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Fix this problem.
    Yes,
    /// Do not fix it: the round it is in is not applied, and the repair ends.
    No,
    /// Fix this and every later problem without asking (e2fsck's 'a').
    All,
}

/// One round: the problems a check found, every one of which was fixed after it (a
/// round runs only then).
#[derive(Debug)]
pub struct Round {
    /// The problems, sorted by pass.
    pub problems: Vec<Problem>,
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
    /// A fix that failed (the problem and why): the rest of its round was not applied.
    pub failed: Option<(Problem, String)>,
    /// Asked: the fixes of the last check the user declined, the first one asked and
    /// answered no, the rest not asked (that round changed nothing).
    pub declined: Vec<Problem>,
    /// The journal deleted in a round (e2fsck's "*** journal has been deleted ***") made
    /// anew at the end ("Recreate journal"): its size in blocks, or why it could not
    /// be.
    pub journal: Option<std::result::Result<u32, String>>,
    /// Seconds spent per stage, in order: `orphans`, then per round `check N`, `fix N`
    /// (the fixes, with the commits of transactions that filled up) and `commit N`.
    pub stages: Vec<(String, f64)>,
    /// The inodes released from the orphan list before the first check (e2fsck's
    /// "Clearing orphaned inode ..."), in list order.
    pub orphans: Vec<usfs_ext4::rw::ReleasedOrphan>,
    /// An orphan list that could not be released, dropped (the line e2fsck prints).
    pub orphans_dropped: Option<String>,
    /// An image not marked valid when the repair began was left clean and marked so
    /// (e2fsck counts that as a correction: exit 1; one marked with errors is marked
    /// clean too, which e2fsck does not count).
    pub marked_valid: bool,
}

/// Does `code` have a fix here, and may preen apply it (e2fsck's PR_PREEN_OK)?
fn fix_of(code: Code) -> Option<bool> {
    use Code::*;
    Some(match code {
        BlockBitmapDiff | InodeBitmapDiff | GroupFreeBlocks | GroupFreeInodes | GroupDirs
        | TotalFreeBlocks | TotalFreeInodes | BitmapChecksum | BitmapPadding
        | SuperblockChecksum | GroupDescChecksum => true,
        BadRefCount | DirOverflowRefCount | BadISize | BadIBlocks | InodeDtimeSet
        | InodeZeroDtime | InodeChecksum | NoLostFound | SuperblockCounts => true,
        DirUnusedInode | DirBlockChecksum | GroupUnusedInodes | HtreeChecksum => true,
        LastGroupBlockUninit => true,
        DirInodeInUnusedArea | DirInodeUninitGroup => true,
        UnconnectedDir | UnattachedInode | BadDotDot | DirBadInode | DirBadBlockInode
        | DirNlinkFeature | XattrBlockChecksum | BadXattrBlock | ExtentChecksum => false,
        DirLinkToDir | DirDuplicateEntry | DirBadName | DirEntryToRoot | InodeBadMode
        | DirCorruptEntry | InodeFaddr | MultiplyClaimed => false,
        BadExtraIsize | SpecialSize | FileAclHi => true,
        BadFlags | BadInlineData | InlineJunk | InlineFeature | InlineNoFeature => false,
        ExtentFeature | ExtentsNoFeature | LostFoundNotDir | NoRoot | ReservedInode => false,
        GroupMetadataLocation | GroupDescBackup | DirNoTail => false,
        GroupMetadataMissing => true,
        QuotaInode | ResizeInodeMetaBg | ResizeInodeNotClear => false,
        MinExtraIsize | WantExtraIsize | FirstMetaBgTooBig | HurdFiletype => false,
        JournalHasJournal | UnattachedZeroLen | DirOptimize => true,
        BlocksHi | ZeroLengthDir | TooBigDir | DirUninitExtent => false,
        BadBlocksIllegal | BadBlocksPrimary | BadBlocksMetadata | BadBlocksInodeClear => false,
        BadXattrInInode | XattrRefcount | OrphanListRefugee => false,
        // (PR_PREEN_OK, all four.)
        EaInodeValue | EaInodeHash | EaInodeFlag | EaInodeRefCount => true,
        EncryptNoContext | EncryptBadContext | EncryptShortName | EncryptUnencryptedFile => false,
        EncryptPolicyDiffers | LostFoundEncrypted => false,
        // (PR_PREEN_NO: preen answers no without stopping; dropped before, see rounds.)
        ExtentOptimize => false,
        // (PR_0_JOURNAL_BAD_INODE and PR_0_JOURNAL_BAD_SUPER; only those have a fix.)
        JournalBad => true,
        JournalInodeNotClear | LargeFileFeature => true,
        // (Announced, not asked: preen applies them as e2fsck's fix_problem does.)
        JournalClearV2 | JournalBackup | JournalMove => true,
        QuotaUsage => true,
        TreatAsDirectory | FastSymlinkExtents | SpecialFlags | SpecialImmutable | BadSpecial
        | BadSymlink | DirBadFileType => false,
        DirCollapse => false,
        IllegalBlock | ExtentBad | ExtentOrder | ExtentHeader | DirHole | DirBadDot
        | DirBadDotDot | HtreeBad => false,
        _ => return None,
    })
}

/// Checks the image on `dev` (writable, its journal replayed) and repairs what the checks
/// find, round by round (see the module header), as `mode` permits.
pub fn repair(dev: Arc<dyn Device>, opts: &Options, mode: Mode) -> usfs_fs::Result<Outcome> {
    rounds(dev, opts, mode, None)
}

/// [`repair`], asking `ask` before each fix (with its round, from 1), in the order the
/// problems are printed (by pass), the whole round before any fix of it is applied.
/// Problems without a fix here stop the repair before anything is asked, as in
/// [`Mode::Yes`].
pub fn repair_asking(
    dev: Arc<dyn Device>,
    opts: &Options,
    ask: Asker<'_>,
) -> usfs_fs::Result<Outcome> {
    rounds(dev, opts, Mode::Yes, Some(ask))
}

/// The rounds of a repair; `ask`, when given, answers for each fix until it answers
/// [`Answer::All`].
fn rounds(
    dev: Arc<dyn Device>,
    opts: &Options,
    mode: Mode,
    mut ask: Option<Asker<'_>>,
) -> usfs_fs::Result<Outcome> {
    let opts = &Options {
        repairing: true,
        preen: mode == Mode::Preen,
        ..opts.clone()
    };
    let mut clock = Stages::default();
    let mut was_invalid = superblock_of(&dev)?.s_state() & STATE_VALID_FS == 0;
    let (mut orphans, orphans_dropped) = release_orphans(&dev)?;
    was_invalid |= orphans_dropped.is_some();
    clock.lap("orphans".into());
    let mut rounds = Vec::new();
    // Was the journal deleted (to be made anew once the image is clean)?
    let mut deleted = opts.journal_deleted;
    // Has the superblock's copy of the journal inode been looked at?
    let mut backup_seen = false;
    let remake = |deleted: bool, done: bool| (deleted && done).then(|| journal::recreate(&dev));
    loop {
        let n = rounds.len() + 1;
        let mut report = check(Box::new(dev.clone()), opts)?;
        clock.lap(format!("check {n}"));
        if mode == Mode::Preen {
            // (e2fsck -p does not optimize extent trees: PR_PREEN_NO, answered no, not
            // a stop.)
            report.problems.retain(|p| p.code != Code::ExtentOptimize);
        }
        let allowed = |p: &Problem| match fix_of(p.code) {
            // (Of misplaced metadata, only bitmaps outside the file system have a fix.)
            Some(_) if p.code == Code::GroupMetadataLocation && p.found().is_none() => false,
            Some(_) if p.code == Code::JournalBad && !journal::raw(p) => false,
            Some(preen_ok) => mode == Mode::Yes || preen_ok,
            None => false,
        };
        restart_first(&mut report, allowed);
        report.found.distrust_bad_descriptors = report
            .problems
            .iter()
            .any(|p| p.code == Code::GroupDescChecksum);
        // Problems of either severity without a fix block the round: e2fsck would fix
        // them (relocate a bitmap, rebuild the journal), and the summaries found assume
        // it did.
        let unfixable: Vec<Problem> = report
            .problems
            .iter()
            .filter(|p| !allowed(p))
            .cloned()
            .collect();
        // The copy of the journal inode's map in the superblock, made where it is
        // missing or stale (e2fsck's PR_0_BACKUP_JNL) in the first round that ends the
        // repair (the journal as the repair leaves it).
        // (Or the round moving the journal to inode 8: e2fsck backs the map up first.)
        let settled = report.problems.iter().all(|p| settles(p.code))
            || report.problems.iter().any(|p| p.code == Code::JournalMove);
        if !backup_seen && unfixable.is_empty() && settled && rounds.len() < ROUNDS {
            backup_seen = true;
            if journal::backup_stale(&dev)? {
                report
                    .problems
                    .insert(0, Problem::new(Code::JournalBackup, ""));
            }
        }
        if !unfixable.is_empty() || report.problems.is_empty() || rounds.len() == ROUNDS {
            let clean = unfixable.is_empty() && report.problems.is_empty();
            let marked_valid = clean && mark_valid(&dev, was_invalid, true)?;
            let journal = remake(deleted, clean);
            if journal.is_some() {
                recount(&dev, &mut report.summary)?;
            }
            return Ok(Outcome {
                rounds,
                last: report,
                unfixable,
                failed: None,
                declined: Vec::new(),
                journal,
                stages: std::mem::take(&mut clock.done),
                orphans: std::mem::take(&mut orphans),
                orphans_dropped: orphans_dropped.clone(),
                marked_valid,
            });
        }
        let declined = ask_round(&report.problems, n, &mut ask);
        if !declined.is_empty() {
            return Ok(Outcome {
                rounds,
                last: report,
                unfixable: Vec::new(),
                failed: None,
                declined,
                journal: None,
                stages: std::mem::take(&mut clock.done),
                orphans: std::mem::take(&mut orphans),
                orphans_dropped: orphans_dropped.clone(),
                marked_valid: false,
            });
        }
        if report.problems.iter().all(journal::raw) {
            deleted |= journal::apply_raw(&dev, &report.problems)?;
            clock.lap(format!("fix {n}"));
            rounds.push(Round {
                problems: std::mem::take(&mut report.problems),
            });
            continue;
        }
        // (A round whose fixes all settle is the last: its close is the repair's.)
        let finished = report.problems.iter().all(|p| settles(p.code));
        let applied = apply(&dev, &report, &mut clock, n, opts.threads, finished)?;
        if let Err(failed) = applied {
            return Ok(Outcome {
                rounds,
                last: report,
                unfixable: vec![failed.0.clone()],
                failed: Some(*failed),
                declined: Vec::new(),
                journal: None,
                stages: std::mem::take(&mut clock.done),
                orphans: std::mem::take(&mut orphans),
                orphans_dropped: orphans_dropped.clone(),
                marked_valid: false,
            });
        }
        // (A /lost+found there was no room to make changes nothing: lost files go to
        // the root, as e2fsck puts them, and the next check would ask again.)
        let no_room = || !lost_found_exists(&dev);
        let last = finished
            || report
                .problems
                .iter()
                .all(|p| settles(p.code) || p.code == Code::NoLostFound)
                && no_room();
        rounds.push(Round {
            problems: std::mem::take(&mut report.problems),
        });
        if last {
            // Nothing the next check would find: the image is as this one judged it
            // clean, but for the superblock's counts the fixes wrote.
            recount(&dev, &mut report.summary)?;
            let journal = remake(deleted, true);
            if journal.is_some() {
                recount(&dev, &mut report.summary)?;
            }
            return Ok(Outcome {
                rounds,
                last: report,
                unfixable: Vec::new(),
                failed: None,
                declined: Vec::new(),
                journal,
                stages: std::mem::take(&mut clock.done),
                orphans: std::mem::take(&mut orphans),
                orphans_dropped: orphans_dropped.clone(),
                marked_valid: mark_valid(&dev, was_invalid, !finished)?,
            });
        }
    }
}

/// Marks the file system on `dev`, which the last check found clean, valid as e2fsck
/// ends every run that may write (a round's fixes end with the same marks; an image
/// needing no fix, or whose only fixes were written in place, gets them here). With
/// `always`, an image marked valid gets them too where e2fsck's cleanup would reset a
/// descriptor's uninit flags or unused-inodes count (ext2fs_set_gdt_csum, on every run
/// that writes) and the volume opens it; otherwise a clean image is left as it is. Returns whether it was not valid when the
/// repair began (`was_invalid`) and is now: e2fsck counts that as a correction. An
/// image the volume cannot write (features it refuses) gets the marks in place.
fn mark_valid(dev: &Arc<dyn Device>, was_invalid: bool, always: bool) -> usfs_fs::Result<bool> {
    use usfs_ext4::format::superblock::STATE_ERROR_FS;
    let state = superblock_of(dev)?.s_state();
    let valid = state & (STATE_VALID_FS | STATE_ERROR_FS) == STATE_VALID_FS;
    let stale = || {
        usfs_ext4::Ext4::open_structure(Box::new(dev.clone()))
            .and_then(|fs| usfs_ext4::rw::repair::uninit_stale(fs.core()))
            .unwrap_or(false)
    };
    if !valid || always && stale() {
        let found = usfs_ext4::rw::repair::Found::default();
        match Volume::open_for_repair(Box::new(dev.clone()), &found) {
            Ok(mut v) => v.close_repaired(true)?,
            // (A valid image the volume does not open keeps its marks.)
            Err(_) if valid => {}
            // (Features the volume does not write, e.g. shared_blocks: the marks alone
            // are written in place, one superblock write, as e2fsck writes them.)
            Err(usfs_fs::Error::Incompatible(_)) => mark_valid_in_place(dev)?,
            Err(e) => return Err(e),
        }
    }
    Ok(was_invalid && superblock_of(dev)?.s_state() & STATE_VALID_FS != 0)
}

/// The marks of [`Volume::close_repaired`] (valid, no errors, mount count 0, last
/// check now) written into the superblock on `dev` in place, flushed.
fn mark_valid_in_place(dev: &Arc<dyn Device>) -> usfs_fs::Result<()> {
    let mut sb = superblock_of(dev)?;
    sb.mark_checked(usfs_fs::Timestamp::now().sec);
    sb.update_checksum();
    dev.write_at(sb.bytes(), SUPERBLOCK_OFFSET)?;
    Ok(dev.flush()?)
}

/// The primary superblock on `dev` as it is now (the repair's raw reads and in-place
/// writes of it go through this).
fn superblock_of(dev: &Arc<dyn Device>) -> usfs_fs::Result<Superblock<Vec<u8>>> {
    let mut raw = vec![0u8; 1024];
    dev.read_at(&mut raw, SUPERBLOCK_OFFSET)?;
    Superblock::new(raw).ok_or(usfs_fs::Error::Invalid)
}

/// Does the root on `dev` name `/lost+found`? (Only a lookup that finds no such entry
/// says no: an image that cannot be read is not taken for one without it.)
fn lost_found_exists(dev: &Arc<dyn Device>) -> bool {
    use usfs_fs::FileSystem;
    !matches!(
        usfs_ext4::Ext4::open(Box::new(dev.clone())).and_then(|fs| fs.lookup(2, b"lost+found")),
        Err(usfs_fs::Error::NotFound)
    )
}

/// Sets `summary`'s in-use counts from the superblock on `dev`, as the repair left it.
fn recount(dev: &Arc<dyn Device>, summary: &mut crate::Summary) -> usfs_fs::Result<()> {
    let sb = superblock_of(dev)?;
    let is64 = sb.s_feature_incompat() & BIT64 != 0;
    summary.recount(sb.s_free_inodes_count() as u64, sb.free_blocks_count(is64));
    Ok(())
}

/// Does fixing `code` settle it, its effects already counted by the check that found
/// it, so that no fix of the same round changes what another found? Such a fix sets a
/// field to the value the check computed (link counts as pass 4 counted them, i_size
/// and i_blocks as pass 1 measured them, dtime, checksums, the group summaries of pass
/// 5) and touches nothing another pass reads. A round of such fixes only is the last:
/// e2fsck does not restart for them either, and the next check would find nothing.
/// Fixes that remove entries, clear inodes or move things change what the other passes
/// counted, and the next round's check looks again.
fn settles(code: Code) -> bool {
    use Code::*;
    matches!(
        code,
        BlockBitmapDiff
            | InodeBitmapDiff
            | GroupFreeBlocks
            | GroupFreeInodes
            | GroupDirs
            | TotalFreeBlocks
            | TotalFreeInodes
            | BitmapChecksum
            | BitmapPadding
            | SuperblockChecksum
            | SuperblockCounts
            | GroupUnusedInodes
            | BadRefCount
            | DirOverflowRefCount
            | BadISize
            | BadIBlocks
            | InodeDtimeSet
            | InodeZeroDtime
            | OrphanListRefugee
            | JournalInodeNotClear
            | LargeFileFeature
            | InodeChecksum
            | FileAclHi
            | BlocksHi
            | DirBlockChecksum
            | HtreeChecksum
            | ExtentChecksum
            | XattrBlockChecksum
            | QuotaUsage
            | JournalBackup
    )
}

/// Puts each fix of round `round` to `ask` (when there is one): returns the declined
/// ones. After the first "no" the rest are not asked (the round will not run) and count
/// as declined; after "all", `ask` is dropped and nothing more is asked. Fixes e2fsck
/// only announces ([`Code::asks`]) go to `ask` too, to be shown: its answer to them
/// is taken as yes.
fn ask_round(problems: &[Problem], round: usize, ask: &mut Option<Asker<'_>>) -> Vec<Problem> {
    for (i, p) in problems.iter().enumerate() {
        let Some(f) = ask.as_mut() else {
            return Vec::new();
        };
        match f(p, round) {
            _ if !p.code.asks() => {}
            Answer::Yes => {}
            Answer::All => *ask = None,
            Answer::No => return problems[i..].to_vec(),
        }
    }
    Vec::new()
}

/// Fixes after which the rest of a check is not to be trusted: an entry naming an inode
/// the group descriptors hide from pass 1 (past itable_unused, or in an INODE_UNINIT
/// group), and a directory block whose chain of entries is broken. e2fsck unhides the
/// first and restarts; it salvages the second before it reads on. What else the check
/// found may stem from them (entries taken for dangling, inodes for unattached), so a
/// round that has any fixes only these, and the next round's check reads the inodes and
/// the salvaged entries. Missing `.` and `..` entries are made first too, as e2fsck's
/// pass 2 makes them before it reads on, and bad htree indexes dropped (what else the
/// check said of their nodes is void then). (The group summaries the volume writes with any fix are the
/// check's; the next round counts again.)
fn restart_first(report: &mut Report, allowed: impl Fn(&Problem) -> bool) {
    let ps = &mut report.problems;
    // A journal deleted changes what the check said of its inode: problems of that
    // inode without a fix here (preening: illegal blocks in its map) do not stop the
    // deletion, as e2fsck deletes the journal before pass 1 reads the inode.
    let deleted: Vec<u32> = ps
        .iter()
        .filter(|p| journal::deletes(p) && allowed(p))
        .filter_map(|p| p.ino())
        .collect();
    // (Blocks shared with the journal are not shared once it is gone; a sharing that
    // does not involve it is found again by the next round's check, which stops a preen
    // there.)
    let void = |p: &Problem| {
        p.ino().is_some_and(|i| deleted.contains(&i)) || p.code == Code::MultiplyClaimed
    };
    if !deleted.is_empty() && ps.iter().all(|p| allowed(p) || void(p)) {
        ps.retain(journal::raw);
        return;
    }
    // Superblock, descriptor and block-ownership problems without a fix stop the round
    // whatever else it has: nothing is safe to write over them (two directories sharing
    // a block would take turns at its '.').
    if ps
        .iter()
        .any(|p| p.code.def().pass <= Pass::P1B && !allowed(p))
    {
        return;
    }
    // A cleared bad-blocks inode takes its list with it: what the check said of the
    // inodes in listed inode-table blocks (unread, their entries dangling) is void.
    if ps.iter().any(|p| p.code == Code::BadBlocksInodeClear) {
        ps.retain(|p| p.code == Code::BadBlocksInodeClear);
        return;
    }
    // A journal deleted or its superblock mended changes what the volume opens with:
    // alone, first.
    if ps.iter().any(journal::raw) {
        ps.retain(journal::raw);
        return;
    }
    // A journal moved to inode 8 changes the root and the inodes the check read, as
    // e2fsck moves it before pass 1: alone, first.
    if ps.iter().any(|p| p.code == Code::JournalMove) {
        ps.retain(|p| p.code == Code::JournalMove);
        return;
    }
    // Backup descriptors in place of bad primary ones change everything the check read
    // through them: alone, first.
    if ps.iter().any(|p| p.code == Code::GroupDescBackup) {
        ps.retain(|p| p.code == Code::GroupDescBackup);
        return;
    }
    // A relocated inode table is a zeroed one: what the check found of its group and
    // of the entries naming its inodes is void. It goes first, with the bitmaps (e2fsck
    // restarts after it).
    let relocated = |p: &Problem| p.code == Code::GroupMetadataLocation && p.found().is_some();
    if ps.iter().any(|p| relocated(p) && p.found() == Some(3)) {
        ps.retain(relocated);
        return;
    }
    // A feature turned on changes how the check reads every inode: e2fsck reads the
    // inodes after the first that turns it on with it, and the ones before without. So
    // that goes first, with the fixes of the inodes before it that lacked it.
    let first = |code: Code| {
        ps.iter()
            .filter(|p| p.code == code)
            .filter_map(|p| p.ino())
            .min()
    };
    let (extents, inline) = (first(Code::ExtentFeature), first(Code::InlineFeature));
    if extents.is_some() || inline.is_some() {
        let before = |at: Option<u32>, p: &Problem| at.zip(p.ino()).is_some_and(|(a, i)| i < a);
        ps.retain(|p| match p.code {
            Code::ExtentFeature | Code::InlineFeature => true,
            Code::ExtentsNoFeature => before(extents, p),
            Code::InlineNoFeature => before(inline, p),
            _ => false,
        });
        return;
    }
    // Blocks claimed twice are cloned (with pass 1's fixes) before anything reads them
    // as one inode's, as e2fsck's pass 1B-1D runs before pass 2; a directory's holes are
    // collapsed before pass 2 reads its blocks, as e2fsck's pass 1 moves them down.
    if ps
        .iter()
        .any(|p| matches!(p.code, Code::MultiplyClaimed | Code::DirCollapse))
    {
        // (A collapsed directory's i_size is judged on its new map, next round.)
        let collapsed: Vec<u32> = (ps.iter())
            .filter(|p| p.code == Code::DirCollapse)
            .filter_map(|p| p.ino())
            .collect();
        ps.retain(|p| {
            p.code.def().pass <= Pass::P1B
                && !(p.code == Code::BadISize && p.ino().is_some_and(|i| collapsed.contains(&i)))
        });
        return;
    }
    let first = |p: &Problem| {
        matches!(
            p.code,
            Code::DirInodeInUnusedArea
                | Code::DirInodeUninitGroup
                | Code::DirCorruptEntry
                | Code::DirBadDot
                | Code::DirBadDotDot
                | Code::HtreeBad
        )
    };
    // Pass 1's fixes go with them: they do not depend on entries, and pass 2's fixes
    // may need them (a salvage needs the directory's i_size to cover the block). So
    // does the file type of an entry naming a hidden inode, which e2fsck judges (from
    // the inode as the table holds it) before it restarts.
    if ps.iter().any(first) {
        let hidden: std::collections::HashSet<_> = (ps.iter())
            .filter(|p| {
                matches!(
                    p.code,
                    Code::DirInodeInUnusedArea | Code::DirInodeUninitGroup
                )
            })
            .map(|p| (p.ino(), p.entry()))
            .collect();
        let hidden_type =
            |p: &Problem| p.code == Code::DirBadFileType && hidden.contains(&(p.ino(), p.entry()));
        ps.retain(|p| first(p) || p.code.def().pass <= Pass::P1B || hidden_type(p));
    }
    // Quota usage and large files are counted on the image as the check found it: with
    // fixes that free, clone, shrink or make blocks and inodes they would be stale, and
    // the next round counts them again.
    if ps.iter().any(|p| !settles(p.code)) {
        ps.retain(|p| !matches!(p.code, Code::QuotaUsage | Code::LargeFileFeature));
    }
}

/// Frees the inodes on the orphan list (files unlinked while open, truncates in
/// progress) before the check, as e2fsck and the kernel's mount do: the volume's own
/// orphan cleanup, in one transaction. Returns what it released and, for a list that
/// could not be released for its own damage (a number out of range, an inode not in
/// use or unreadable, a loop), the line e2fsck prints for it: such a list is dropped, as e2fsck and the kernel drop
/// it ("win or lose, we won't be using the head of the orphan inode list again"), the
/// image marked not clean, and the check judges the inodes it named. The list of an
/// image marked with errors is dropped unread, as e2fsck drops it.
fn release_orphans(
    dev: &Arc<dyn Device>,
) -> usfs_fs::Result<(Vec<ReleasedOrphan>, Option<String>)> {
    use usfs_ext4::format::superblock::STATE_ERROR_FS;
    let sb = superblock_of(dev)?;
    if !orphans_listed(&sb) {
        return Ok((Vec::new(), None));
    }
    if sb.s_state() & STATE_ERROR_FS != 0 {
        drop_orphan_list(dev, false)?;
        return Ok((Vec::new(), None));
    }
    match Volume::open_uncounted(Box::new(dev.clone())) {
        Ok((mut v, released)) => v.close().map(|()| (released, None)),
        Err(usfs_fs::Error::Corrupt(c)) => {
            let (first, count) = (sb.s_first_ino(), sb.s_inodes_count());
            let illegal = |i: u64| i != 0 && (i < first as u64 || i > count as u64);
            let head = sb.s_last_orphan() as u64;
            // (Only the list's own damage drops it: bitmaps that disagree with their
            // descriptors, or an orphan file, leave it for the check to report.)
            let the_list = matches!(c.structure, Structure::Orphan | Structure::Inode);
            if head == 0 || !(the_list || illegal(head)) {
                return Ok((Vec::new(), None));
            }
            let why = match c.ino {
                _ if illegal(head) => format!("Illegal orphaned inode {head} in superblock."),
                Some(i) if illegal(i) => format!("Illegal inode {i} in orphaned inode list."),
                _ => format!("Orphaned inode list not released ({c}): dropped."),
            };
            drop_orphan_list(dev, true)?;
            Ok((Vec::new(), Some(why)))
        }
        Err(e) => Err(e),
    }
}

/// Empties the superblock's orphan list in place (`invalid`: marking the file system
/// not clean, so that it is checked in full), flushed.
fn drop_orphan_list(dev: &Arc<dyn Device>, invalid: bool) -> usfs_fs::Result<()> {
    let mut sb = superblock_of(dev)?;
    sb.set_s_last_orphan(0);
    if invalid {
        sb.set_s_state(sb.s_state() & !STATE_VALID_FS);
    }
    sb.update_checksum();
    dev.write_at(sb.bytes(), SUPERBLOCK_OFFSET)?;
    Ok(dev.flush()?)
}

/// Does superblock `sb` list orphans (the orphan list, or the orphan file's flag)? A
/// repair releases them first, as e2fsck does even on an image it then finds clean.
pub fn orphans_listed<B: AsRef<[u8]>>(sb: &Superblock<B>) -> bool {
    sb.s_last_orphan() != 0 || sb.s_feature_ro_compat() & ORPHAN_PRESENT != 0
}

/// The stages of a repair timed so far ([`Outcome::stages`]).
struct Stages {
    /// (stage, seconds) of the stages ended.
    done: Vec<(String, f64)>,
    /// When the current stage began.
    since: Instant,
}

impl Default for Stages {
    fn default() -> Stages {
        Stages {
            done: Vec::new(),
            since: Instant::now(),
        }
    }
}

impl Stages {
    /// Ends the current stage as `name`; the next begins now.
    fn lap(&mut self, name: String) {
        self.done.push((name, self.since.elapsed().as_secs_f64()));
        self.since = Instant::now();
    }
}

/// A fix that failed: the problem, and why (boxed: a problem is large).
type Failed = Box<(Problem, String)>;

/// Fixes every problem of `report` in one transaction, or in several when it would not
/// fit the journal (each commit a step nearer the repaired image; a re-run finishes what
/// a crash interrupted). A fix that fails leaves the image as it was when nothing was
/// committed yet (nothing reached it but the superblock's in-use mark, which is put
/// back), else as the commits so far left it; it is returned. `clock` times the stages
/// `fields N`, `fix N` and `commit N`. `finished`: no round follows (the descriptors'
/// uninit flags are reset at the close, as e2fsck's cleanup resets them).
fn apply(
    dev: &Arc<dyn Device>,
    report: &Report,
    clock: &mut Stages,
    n: usize,
    threads: usize,
    finished: bool,
) -> usfs_fs::Result<Result<(), Failed>> {
    let sb = superblock_of(dev)?.into_inner();
    let mut v = Volume::open_for_repair(Box::new(dev.clone()), &report.found)?;
    let mut committed = false;
    let mut dups = dup::Dups::of(&report.problems);
    let give_up = inode::too_many_illegal(&report.problems);
    // Directories rebuilt whole go last, each once (in the name of its first problem):
    // the entry fixes before them name entries by their place as the check found them.
    let rehash = entry::rehash_dirs(&report.problems);
    // The field fixes of inodes with nothing else to fix, by the workers, first (read
    // from the image as the check found it: no other fix has written yet).
    let (done, in_batches) = fields::apply_parallel(&mut v, dev, &report.problems, threads)?;
    committed |= in_batches;
    clock.lap(format!("fields {n}"));
    // A file's size set to 2 GiB or more needs the large_file feature (as e2fsprogs'
    // ext2fs_inode_size_set turns it on).
    let large = |p: &Problem| {
        p.code == Code::BadISize
            && p.expected()
                .is_some_and(|s| s >= crate::pass1::LARGE_FILE_SIZE)
    };
    if report.problems.iter().any(large)
        && !v
            .geometry()
            .features
            .has_ro_compat(usfs_ext4::format::features::ro_compat::LARGE_FILE)
    {
        v.add_ro_compat(usfs_ext4::format::features::ro_compat::LARGE_FILE);
    }
    let rest = report.problems.iter().enumerate();
    let steps = (rest.filter(|&(i, _)| !done[i]).map(|(_, p)| (p, None)))
        .chain(rehash.iter().map(|(&dir, &p)| (p, Some(dir))));
    for (p, rehash) in steps {
        let fix = v.apply_fix(|v| {
            if let Some(dir) = rehash {
                return v.rehash_dir(dir);
            }
            dups.apply(v, p)?;
            badblocks::apply(v, p)?;
            group::apply(v, p)?;
            superblock::apply(v, p)?;
            inode::apply(v, p, &give_up)?;
            entry::apply(v, p)?;
            connect::apply(v, p)?;
            quota::apply(v, p, &report.quota)
        });
        if let Err(e) = fix {
            let failed = Box::new((p.clone(), e.to_string()));
            if committed {
                v.close()?;
            } else {
                drop(v);
                dev.write_at(&sb, SUPERBLOCK_OFFSET)?;
                dev.flush()?;
            }
            return Ok(Err(failed));
        }
        committed |= v.commit_when_full()?;
    }
    clock.lap(format!("fix {n}"));
    v.close_repaired(finished)?;
    clock.lap(format!("commit {n}"));
    Ok(Ok(()))
}
