//! `usfs fsck -y` and `-p`, and asked on a terminal: the journal replayed, then a check
//! and its repairs (the `usfs_fsck::repair` module), printed and ended with e2fsck's exit
//! codes: 0 clean, 1 errors corrected, 4 errors left uncorrected, 8 an operational error.

use crate::cmd_fsck::{display_name, print_preen_lines, print_problem_lines, FsckArgs};
use crate::cmd_fsck::{EXIT_CLEAN, EXIT_OPERATIONAL, EXIT_UNCORRECTED};
use crate::image::CliResult;
use std::process::ExitCode;
use std::sync::Arc;
use usfs_dev::Device;
use usfs_ext4::backup_sb::Backup;
use usfs_ext4::undo::UndoDevice;
use usfs_fsck::repair::{repair, repair_asking, Answer, Mode};

/// Errors were corrected.
const EXIT_CORRECTED: u8 = 1;

use usfs_ext4::format::superblock::{
    Superblock, STATE_ERROR_FS as ERROR_FS, STATE_VALID_FS as VALID_FS, SUPERBLOCK_OFFSET,
};

/// Runs a repair of `a.image` in `mode`, or asking before each fix (None).
pub(crate) fn run(a: &FsckArgs, mode: Option<Mode>, opts: &usfs_fsck::Options) -> CliResult {
    let path = a.image.display().to_string();
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("usfs fsck: {path}: {e}");
        Ok(ExitCode::from(EXIT_OPERATIONAL))
    };
    let file: Arc<dyn Device> = match usfs_dev::FileDevice::open(&a.image, true) {
        Ok(f) => Arc::new(f),
        Err(e) => return fail(&e),
    };
    let backup = match crate::fsck_backup::choose(a, &file, mode == Some(Mode::Preen), false) {
        Ok(b) => b,
        Err(code) => return Ok(code),
    };
    // (Refused before anything is written: bigalloc is checked, but the volume does
    // not allocate clusters yet.)
    let at = backup.map_or(SUPERBLOCK_OFFSET, |b| b.block * b.block_size as u64);
    if bigalloc_at(&*file, at) {
        return fail(&usfs_fs::Error::incompatible("bigalloc"));
    }
    let (dev, undo) = match open(a, file, backup) {
        Ok(d) => d,
        Err(e) => return fail(&e),
    };
    // (Read by a backup superblock, the image gets the primary made from it first.)
    if let Some(b) = &backup {
        if let Err(e) = usfs_ext4::backup_sb::restore_primary(&*dev, b) {
            return fail(&e);
        }
    }
    let code = repair_image(a, mode, opts, &path, dev, backup.is_some())?;
    if let Some(u) = undo {
        if let Err(e) = u.finish() {
            eprintln!("usfs fsck: undo file: {e}");
            return Ok(ExitCode::from(EXIT_OPERATIONAL));
        }
    }
    Ok(code)
}

/// Does the superblock at byte `at` of `dev` name the bigalloc feature?
fn bigalloc_at(dev: &dyn Device, at: u64) -> bool {
    let mut raw = vec![0u8; 1024];
    dev.read_at(&mut raw, at).is_ok()
        && Superblock::new(&raw[..]).is_some_and(|sb| {
            sb.s_magic() == usfs_ext4::format::superblock::EXT4_MAGIC
                && sb.s_feature_ro_compat() & usfs_ext4::format::features::ro_compat::BIGALLOC != 0
        })
}

/// The image as the repair writes it, and the undo device it goes through (`-z`).
type Opened = (Arc<dyn Device>, Option<Arc<UndoDevice>>);

/// The image `file` as the repair writes it: through an undo device when `-z` names a
/// file (in blocks of the size the superblock names: `backup`'s, when the image is read
/// by one).
fn open(a: &FsckArgs, file: Arc<dyn Device>, backup: Option<Backup>) -> std::io::Result<Opened> {
    let Some(z) = &a.undo else {
        return Ok((file, None));
    };
    let block_size = match backup {
        Some(b) => b.block_size,
        None => {
            let mut raw = vec![0u8; 1024];
            file.read_at(&mut raw, SUPERBLOCK_OFFSET)?;
            let log = Superblock::new(&raw[..]).map_or(u32::MAX, |sb| sb.s_log_block_size());
            if log > 6 {
                return Err(std::io::Error::other("not an ext2/3/4 image (block size)"));
            }
            1024 << log
        }
    };
    let u = Arc::new(UndoDevice::create(Box::new(file), z, block_size)?);
    Ok((u.clone(), Some(u)))
}

/// The journal replay, the clean-image shortcut and the repair of `dev`.
fn repair_image(
    a: &FsckArgs,
    mode: Option<Mode>,
    opts: &usfs_fsck::Options,
    path: &str,
    dev: Arc<dyn Device>,
    restored: bool,
) -> CliResult {
    let fail = |what: &str, e: usfs_fs::Error| {
        eprintln!("usfs fsck: {path}: {what}{e}");
        Ok(ExitCode::from(EXIT_OPERATIONAL))
    };
    let mut asker = crate::fsck_ask::Asker::default();
    let (mode, mended, deleted) = match mend_journal(mode, path, &dev, &mut asker) {
        Ok(Ok(m)) => m,
        Ok(Err(code)) => return Ok(code),
        Err(e) => return fail("while checking journal: ", e),
    };
    // (A primary written from a backup changed the image, as e2fsck's.)
    let mended = mended || restored;
    let opts = usfs_fsck::Options {
        journal_deleted: deleted,
        ..opts.clone()
    };
    let replayed = match usfs_ext4::replay_journal(Box::new(dev.clone())) {
        Ok(p) => p.is_some(),
        Err(e) => return fail("while recovering journal: ", e),
    };
    let (fs, _) = match usfs_ext4::Ext4::open_for_check(Box::new(dev.clone())) {
        Ok(f) => f,
        Err(e) => return fail("", e),
    };
    let name = display_name(fs.superblock().label(), path);
    if replayed {
        println!("{name}: recovering journal");
    }
    let sb = fs.superblock();
    // (e2fsck checks the journal before it decides to skip.)
    let journal_bad = || usfs_fsck::repair::journal_has_problems(&dev).unwrap_or(true);
    if !a.force
        && !replayed
        && !mended
        && !journal_bad()
        && !usfs_fsck::repair::orphans_listed(sb)
        && sb.s_state() & (VALID_FS | ERROR_FS) == VALID_FS
    {
        // (e2fsck copies the journal inode's map before it decides to skip.)
        match usfs_fsck::repair::backup_unchecked(&dev) {
            Ok(true) => {
                let prefix = match mode {
                    Some(Mode::Preen) => format!("{name}: "),
                    _ => String::new(),
                };
                println!("{prefix}Backing up journal inode block information.\n");
            }
            Ok(false) => {}
            Err(e) => return fail("", e),
        }
        let is64 = fs.geometry().is64();
        let (inodes, blocks) = (sb.s_inodes_count(), sb.blocks_count(is64));
        println!(
            "{name}: clean, {}/{inodes} files, {}/{blocks} blocks",
            inodes - sb.s_free_inodes_count(),
            blocks - sb.free_blocks_count(is64)
        );
        return Ok(ExitCode::from(EXIT_CLEAN));
    }
    drop(fs);
    let out = match mode {
        Some(m) => repair(dev, &opts, m),
        None => repair_asking(dev, &opts, &mut |p, round| asker.ask(p, round)),
    };
    let out = match out {
        Ok(o) => o,
        Err(e) => return fail("", e),
    };
    if a.trace {
        for (stage, secs) in &out.stages {
            eprintln!("trace: repair {stage:<10} {secs:.3} s");
        }
    }
    if let Some(why) = &out.orphans_dropped {
        match mode {
            Some(Mode::Preen) => println!("{name}: {why}"),
            _ => println!("{why}"),
        }
    }
    for o in &out.orphans {
        let what = if o.truncated {
            "Truncating"
        } else {
            "Clearing"
        };
        let prefix = if mode == Some(Mode::Preen) {
            format!("{name}: ")
        } else {
            String::new()
        };
        println!(
            "{prefix}{what} orphaned inode {} (uid={}, gid={}, mode=0{:o}, size={})",
            o.ino, o.uid, o.gid, o.mode, o.size
        );
    }
    if let Some(m) = mode {
        for r in &out.rounds {
            match m {
                Mode::Preen => print_preen_lines(&name, &r.problems, "FIXED."),
                Mode::Yes => print_problem_lines(&r.problems, Some("yes")),
            }
            if r.problems
                .iter()
                .any(|p| p.code == usfs_fsck::problem::Code::JournalBad && p.found() == Some(1))
            {
                println!("\n*** journal has been deleted ***\n");
            }
        }
    }
    let recreate = match mode {
        Some(Mode::Preen) => format!("{name}: Recreate journal.\n"),
        _ => "\nRecreate journal? yes\n\n".to_string(),
    };
    match &out.journal {
        Some(Ok(blocks)) => println!(
            "{recreate}Creating journal ({blocks} blocks):  Done.\n\n*** journal has been regenerated ***"
        ),
        Some(Err(why)) => println!("{recreate}Creating journal: {why}"),
        None => {}
    }
    if let Some((_, rest)) = out.declined.split_first() {
        // The first was asked and declined; the rest of its round was not asked.
        asker.unasked(rest, out.rounds.len() + 1);
    }
    // (Replaying the journal, releasing orphans or fixes e2fsck only announces change
    // the image but, as in e2fsck, not the exit status: a replay counts only where it
    // leaves the file system marked not clean, which the repair then marks valid.)
    // A fix counts where something marked the file system changed (e2fsck's exit 1 needs
    // both), which releasing orphans does and descriptor checksums alone do not.
    let fixed = |r: &usfs_fsck::repair::Round| r.problems.iter().any(|p| p.code.counts_as_fixed());
    let marks = |r: &usfs_fsck::repair::Round| r.problems.iter().any(|p| p.code.marks_changed());
    let changed = out.rounds.iter().any(marks)
        || !out.orphans.is_empty()
        || out.orphans_dropped.is_some()
        || mended;
    let modified = out.rounds.iter().any(fixed) && changed || mended || out.marked_valid;
    if !out.unfixable.is_empty() {
        if mode == Some(Mode::Preen) && out.failed.is_none() {
            // (e2fsck -p halts at the first problem preen may not fix.)
            print_preen_lines(&name, &out.unfixable[..1], "");
            println!("\n{name}: UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY.\n\t(i.e., without -a or -p options)");
            return Ok(ExitCode::from(EXIT_UNCORRECTED));
        }
        print_problem_lines(&out.last.problems, None);
        match &out.failed {
            Some((p, why)) => println!(
                "\nusfs fsck: repairing \"{}\" failed ({why}); the rest of that round was not applied",
                p.message()
            ),
            None => {
                let mut names: Vec<&str> =
                    out.unfixable.iter().map(|p| p.code.def().name).collect();
                names.sort_unstable();
                names.dedup();
                println!("\nusfs fsck: no repair yet for: {}", names.join(", "));
            }
        }
    }
    // (e2fsck -p says nothing of it.)
    if changed && mode != Some(Mode::Preen) {
        println!("\n{name}: ***** FILE SYSTEM WAS MODIFIED *****");
    }
    if out.last.has_errors() || out.failed.is_some() {
        println!("\n{name}: ********** WARNING: Filesystem still has errors **********\n");
        println!("{}", out.last.summary.line(&name));
        return Ok(ExitCode::from(EXIT_UNCORRECTED));
    }
    println!("{}", out.last.summary.line(&name));
    let code = if modified { EXIT_CORRECTED } else { EXIT_CLEAN };
    Ok(ExitCode::from(code))
}

/// What [`mend_journal`] did: the mode the rest runs in, whether the journal was mended
/// and whether deleted.
type Mended = (Option<Mode>, bool, bool);

/// Before the replay, a journal of an image needing recovery that the replay cannot read
/// is mended as e2fsck mends it first, preen too: a corrupt superblock written anew
/// ("Journal superblock is corrupt."), an unusable inode or a superblock without the
/// magic deleted ("Superblock has an invalid journal"; made anew at the end); the log
/// is dropped, the image marked not clean. Asked on a terminal; declined, the repair
/// cannot go on (e2fsck's exit 12). Returns the mode the rest runs in (an 'a' answer
/// fixes everything after), whether it was mended and whether deleted, or the exit code
/// to end with.
fn mend_journal(
    mode: Option<Mode>,
    path: &str,
    dev: &Arc<dyn Device>,
    asker: &mut crate::fsck_ask::Asker,
) -> usfs_fs::Result<Result<Mended, ExitCode>> {
    let Some(p) = usfs_fsck::repair::corrupt_before_replay(dev)? else {
        return Ok(Ok((mode, false, false)));
    };
    let (fix, fixed) = match usfs_fsck::repair::deletes(&p) {
        true => ("Clear", "CLEARED"),
        false => ("Fix", "FIXED"),
    };
    let mut raw = vec![0u8; 1024];
    dev.read_at(&mut raw, SUPERBLOCK_OFFSET)?;
    let label = Superblock::new(&raw[..]).map(|sb| sb.label().to_vec());
    let name = display_name(&label.unwrap_or_default(), path);
    let mode = match mode {
        Some(Mode::Preen) => {
            println!("{name}: {}.\n{fixed}.", p.message());
            mode
        }
        Some(Mode::Yes) => {
            println!("{}.\n{fix}? yes\n", p.message());
            mode
        }
        None => match asker.ask(&p, 1) {
            Answer::No => {
                eprintln!("usfs fsck: The journal superblock is corrupt while checking journal for {path}");
                eprintln!("usfs fsck: Cannot proceed with file system check");
                return Ok(Err(ExitCode::from(EXIT_UNCORRECTED | EXIT_OPERATIONAL)));
            }
            Answer::All => Some(Mode::Yes),
            Answer::Yes => None,
        },
    };
    let deleted = usfs_fsck::repair::reset_before_replay(dev, &p)?;
    if deleted {
        println!("*** journal has been deleted ***\n");
    }
    Ok(Ok((mode, true, deleted)))
}
