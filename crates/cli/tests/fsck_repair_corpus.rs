//! Repair on e2fsprogs' own test images (tests/f_* of 1.47.0, outside the project in
//! ../shared/corpus or $USFS_E2FSPROGS_CORPUS; skipped visibly when absent), as
//! e2fsprogs' runner checks e2fsck: `usfs fsck -fy`, then `usfs fsck -fn` and
//! `e2fsck -fn`. Whenever usfs says the file system is clean or was repaired (exit 0 or
//! 1), both checkers must find it clean, unless listed below with the reason. When usfs
//! stops with problems it cannot repair yet (exit 4) and says it changed nothing, the
//! image must be byte for byte what it was. usfs never hangs or dies by a signal, and
//! refuses (exit 8) only with a message. An image usfs repairs must hold the tree
//! `e2fsck -fy` makes of it (exported by `usfs export`, compared entry by entry), unless
//! listed in [`TREE_DIFFERS`] with the reason. The counts are printed.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Images usfs repairs into a state it finds clean but e2fsck does not: problems the
/// checker does not see yet (so nothing fixes them), and why.
const KNOWN_LEFT: &[(&str, &str)] = &[];

/// Images of the corpus on which `usfs fsck -fy` exits with expect.1's status, at least
/// (of 191).
const SAME_EXIT_FLOOR: usize = 168;

/// Images usfs repairs into a state e2fsck finds clean (exit 1, or 0 where only what
/// e2fsck announces changed them, then clean): each must stay so. (A newly repaired image is reported, to be added here.)
const REPAIRED: &[&str] = &[
    // (Images marked not clean: e2fsck -fy marks them valid, exit status 1; f_special_ea
    // also lacks the superblock's copy of the journal inode, which is made too.)
    "f_hurd",
    "f_special_ea",
    "f_uninit_disable",
    "f_big_sparse",
    "f_bad_local_jnl",
    // (A journal inode whose map holds a block outside the file system, a hole: e2fsck's
    // get_journal finds it unusable, the journal is deleted and made anew.)
    "f_badjour_indblks",
    "f_badjourblks",
    "f_jnl_etb_alloc_fail",
    "f_badorphan",
    "f_itable_collision",
    "f_nospc_create_lnf",
    "f_imagic",
    "f_bad_disconnected_inode",
    "f_quota",
    "f_quota_invalid_inum",
    "f_del_dup_quota",
    "f_bad_bbitmap",
    "f_overfsblks",
    "f_badbblocks",
    "f_badprimary",
    "f_badtable",
    "f_bbfile",
    "f_invalid_bad_inode",
    "f_bb_in_bb",
    "f_ea_value_crash",
    "f_inode_ea_collision",
    "f_miss_journal",
    "f_bad_bmap_csum",
    "f_bad_gdt_csum",
    "f_bad_ibitmap",
    "f_bitmaps",
    "f_deleted_inode_bad_csum",
    "f_end-bitmap",
    "f_eofblocks",
    "f_expand",
    "f_expandroot_create_lnf",
    "f_jnl_32bit",
    "f_jnl_64bit",
    // (Exit 0, as e2fsck's: only orphans released and the journal moved to inode 8,
    // which e2fsck announces and does not count, or descriptor checksums set, which do
    // not mark the file system changed; f_jnl_errno: the journal's errno copied and
    // cleared.)
    "f_jnl_errno",
    "f_journal",
    "f_orphan",
    "f_orphan_extents_inode",
    "f_orphan_indirect_inode",
    "f_orphquot",
    // (Not clean, with shared_blocks, which the volume does not write: marked valid in
    // place.)
    "f_unshare_blocks_no_space",
    "f_lpf",
    "f_lpf2",
    "f_no_cache_corrupt_inode",
    "f_readonly_fsck",
    "f_reconnect",
    "f_summary_counts",
    "f_uninit_enable",
    "f_bbinode",
    "f_uninit_inode_past_unused",
    "f_uninit_restart_fsck",
    "f_unused_itable",
    "f_many_subdirs",
    "f_ea_bad_csum",
    "f_file_acl_high",
    "f_extent_int_bad_csum",
    "f_extent_leaf_bad_csum",
    "f_htree_leaf_csum",
    "f_uninit_bad_free_inodes",
    "f_uninit_blk_used_not_set",
    "f_uninit_checksum_bad",
    "f_uninit_set_inode_not_set",
    "f_bad_inode_csum",
    "f_baddir2",
    "f_salvage_dir",
    "f_recnect_bad",
    "f_cloneblock_alloc_error",
    "f_dup",
    "f_dup2",
    "f_dup3",
    "f_dupsuper",
    "f_ext_zero_len",
    "f_extent_bad_node",
    "f_extent_int_bad_extent",
    "f_extent_int_bad_magic",
    "f_extent_interior_start_lblk",
    "f_extent_leaf_bad_extent",
    "f_extent_leaf_bad_magic",
    "f_extents2",
    "f_ind_inode_collision",
    "f_messy_inode",
    "f_holedir2",
    "f_yesall",
    "f_zeroed_ext_header",
    "f_baddotdir",
    "f_h_badnode",
    "f_h_badroot",
    "f_h_reindex",
    "f_holedir",
    "f_holedir3",
    "f_rebuild_csum_rootdir",
    "f_badinode",
    "f_badsymlinks",
    "f_clear_xattr",
    "f_dir_bad_mode",
    "f_fast_symlink_extents",
    "f_inlinedir_detector",
    "f_invalid_extent_symlink",
    "f_orphan_dotdot_ft",
    "f_ea_checks",
    "f_filetype",
    "f_baddir",
    "f_dirlink",
    "f_dupfsblks",
    "f_emptydir",
    "f_hugedir_blocks",
    "f_lotsbad",
    "f_resize_inode_meta_bg",
    "f_toobig_extent_dir",
    "f_uninit_dir",
    "f_dup_de",
    "f_dup_de2",
    "f_dupdot",
    "f_extents",
    "f_idata_and_extents",
    "f_inlinedata_dirblocks",
    "f_inlinedata_flags",
    "f_trunc_dirent_header",
    "f_write_ea_no_extra_isize",
    "f_write_ea_toobig_extra_isize",
    "f_write_ea_toosmall_extra_isize",
    "f_lpffile",
    "f_badroot",
    "f_mke2fs2b",
    "f_extra_journal",
    "f_first_meta_bg_too_big",
    "f_sb_extra_isize",
    "f_noroot",
    "f_illbbitmap",
    "f_illibitmap",
    "f_illitable",
    "f_illitable_flexbg",
    "f_miss_blk_bmap",
    "f_misstable",
    "f_preen",
    "f_zero_group",
    "f_corrupt_dirent_tail",
    "f_dir_bad_csum",
    "f_htree_bad_csum",
    // (EA inodes: illegal, hash, missing flag, reference counts; i_blocks charged by
    // value size.)
    "f_ea_inode",
    "f_ea_inode_self_ref",
    // (Inline directories' i_size, an inline symlink's xattr block uncounted, a mode
    // without a type over directory data.)
    "f_inlinedata_repair",
    // (An unusable primary superblock: read by group 1's backup, which the repair
    // writes over the primary.)
    "f_zero_super",
    "f_super_bad_csum",
    "f_zero_inode_size",
    // (Encrypted: contexts missing or corrupt, entries too short or of another policy,
    // an encrypted /lost+found.)
    "f_short_encrypted_dirent",
    "f_dup_de_crypt",
    "f_encrypted_lpf",
    "f_bad_encryption",
    "f_badsymlinks2",
    // (Extent trees rebuilt compactly, as e2fsck's pass 1E: not counted as fixes.)
    "f_collapse_extent_tree",
    "f_compress_extent_tree_level",
    "f_extent_too_deep",
    "f_quota_extent_opt",
];

/// Images where `usfs fsck -fp` exits otherwise than `e2fsck -fp` on the same image
/// (besides those usfs refuses by name), and why.
const PREEN_DIFFERS: &[(&str, &str)] = &[];

/// Repaired images whose tree (`usfs export`) differs from what `e2fsck -fy` makes of
/// the same image, and why.
const TREE_DIFFERS: &[(&str, &str)] = &[
    (
        "f_big_sparse",
        "the repair sets i_size to the end of the last block (4398050758656), as e2fsck -fy \
         does, beyond what a block-mapped file of 1 KiB blocks may hold: the kernel refuses the \
         inode (bad i_size value) in both repairs",
    ),
    (
        "f_itable_collision",
        "inode 14's map lies over inode-table blocks: e2fsck counts the illegal pointers in \
         those blocks toward its limit of 12 and clears the inode (PR_1_CRITICAL_METADATA_\
         COLLISION); usfs clones the blocks and keeps /b",
    ),
    (
        "f_dupsuper",
        "a file shares the superblock's block: usfs's copy of it holds s_state as the repair's \
         in-use mark left it (not valid, on this image without a journal), e2fsck's copy the \
         state before the check",
    ),
];

/// Are we root (loop mounts)?
fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Does the tree of `repaired` (usfs's repair of `orig`) equal the tree of `orig`
/// repaired by `e2fsck -fy`? Both exported by `usfs export` and compared entry by entry
/// (names, lost+found's `#INO` included, types, modes, owners, sizes, contents, xattrs,
/// file times; not atimes, nor directory mtimes, which adding to lost+found changes).
/// As root, the kernel's view of usfs's repair (a read-only loop mount) must equal its
/// export too, unless the kernel refuses e2fsck's repair as well (features it does not
/// mount): returns whether the kernel's view was compared.
fn same_tree_as_e2fsck(s: &Scratch, repaired: &Path, orig: &[u8]) -> Result<bool, String> {
    let theirs = s.path("e2fsck-repaired");
    std::fs::write(&theirs, orig).unwrap();
    let (code, out, _) = run(Command::new("e2fsck").arg("-fy").arg(&theirs), 30);
    if !matches!(code, Some(0..=3)) {
        return Err(format!("e2fsck -fy exit {code:?}:\n{out}"));
    }
    let trees = tree_scratch();
    let (a, b) = (trees.path("tree-usfs"), trees.path("tree-e2fsck"));
    // (Linux lets no one set a user.* xattr on a symlink, which an image may hold:
    // where an export cannot restore one, both trees are exported and compared without
    // xattrs.)
    let mut xattrs = true;
    let export = |img: &Path, dir: &Path, xattrs: bool| {
        let _ = std::fs::remove_dir_all(dir);
        let mut cmd = Command::new(usfs());
        cmd.arg("export").arg(img).arg(dir);
        if !xattrs {
            cmd.arg("--no-xattrs");
        }
        run(&mut cmd, 30)
    };
    for (img, dir) in [(repaired, &a), (theirs.as_path(), &b)] {
        let (mut code, _, mut err) = export(img, dir, xattrs);
        if code != Some(0)
            && xattrs
            && err.contains("xattr")
            && err.contains("Operation not permitted")
        {
            xattrs = false;
            (code, _, err) = export(repaired, &a, false);
            if code == Some(0) {
                (code, _, err) = export(img, dir, false);
            }
        }
        if code != Some(0) {
            return Err(format!(
                "usfs export {}: exit {code:?}: {err}",
                img.display()
            ));
        }
    }
    let opts = usfs_testkit::CmpOptions {
        atime: false,
        ignore_dir_mtime: true,
        xattrs,
        ..Default::default()
    };
    usfs_testkit::compare(&a, &b, &opts).map_err(|d| d.to_string())?;
    if !is_root() {
        return Ok(false);
    }
    let mnt = s.path("mnt");
    match Mount::try_new(repaired, &mnt, "ext4", "ro") {
        Some(m) => {
            let same = usfs_testkit::compare(&m.dir, &a, &opts);
            drop(m);
            let Err(e) = same else {
                return Ok(true);
            };
            // (Where the kernel refuses part of e2fsck's repair as well, as an entry
            // naming an EA inode, which both repairs keep, its view is no oracle.)
            let theirs_too = Mount::try_new(&theirs, &mnt, "ext4", "ro")
                .is_some_and(|m| usfs_testkit::compare(&m.dir, &b, &opts).is_err());
            match theirs_too {
                true => Ok(false),
                false => Err(format!(
                    "the kernel's view of the repair differs from usfs's: {e}"
                )),
            }
        }
        None => match Mount::try_new(&theirs, &mnt, "ext4", "ro") {
            Some(_) => Err("the kernel mounts e2fsck's repair but not usfs's".into()),
            None => Ok(false),
        },
    }
}

/// Where the exported trees go: a tmpfs where there is one (/dev/shm), whose xattr
/// values may be as large as those EA inodes hold (an ext4 without ea_inode holds one
/// only up to a block).
fn tree_scratch() -> Scratch {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return Scratch::new("e2fsprogs-repair-trees");
    }
    let p = shm.join(format!("usfs-test-e2fsprogs-trees-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    Scratch(p)
}

/// Does the image (bytes) have the encrypt feature (its names and contents are
/// ciphertext: `usfs export` refuses it)?
fn encrypted(bytes: &[u8]) -> bool {
    let at = 1024 + 0x60;
    bytes.len() >= at + 4
        && u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) & 0x10000 != 0
}

/// For an encrypted image: does `e2fsck -fn` count the same inodes and blocks in use on
/// usfs's repair as on e2fsck's (its summary line)?
fn same_counts_as_e2fsck(s: &Scratch, repaired: &Path, orig: &[u8]) -> Result<(), String> {
    let theirs = s.path("e2fsck-repaired");
    std::fs::write(&theirs, orig).unwrap();
    run(Command::new("e2fsck").arg("-fy").arg(&theirs), 30);
    let summary = |img: &Path| {
        let (_, out, _) = run(Command::new("e2fsck").arg("-fn").arg(img), 30);
        out.lines()
            .find(|l| l.contains(" files ("))
            .map(|l| l.split_once(": ").map_or(l, |(_, r)| r).to_string())
    };
    let (ours, e2) = (summary(repaired), summary(&theirs));
    match ours == e2 && ours.is_some() {
        true => Ok(()),
        false => Err(format!(
            "e2fsck counts {ours:?} on usfs's repair, {e2:?} on its own"
        )),
    }
}

/// e2fsck's exit status on the first run, from the case's expect.1.
fn expected_exit(case: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(case.join("expect.1")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Exit status is "))?;
    line["Exit status is ".len()..].trim().parse().ok()
}

/// The exit status of `cmd` on `img` (None: it hung or died by a signal), with stdout.
fn run(cmd: &mut Command, secs: u64) -> (Option<i32>, String, String) {
    let (code, out, err) = run_limited(cmd, Duration::from_secs(secs));
    let s = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    (code, s(out), s(err))
}

#[test]
fn usfs_fsck_repairs_e2fsprogs_images() {
    let Some(dir) = e2fsprogs_corpus() else {
        eprintln!("SKIP e2fsprogs corpus repair: not found (set USFS_E2FSPROGS_CORPUS or provide ../shared/corpus)");
        return;
    };
    if !need_tool("e2fsprogs corpus repair", "e2fsck")
        || !need_tool("e2fsprogs corpus repair", "gzip")
    {
        return;
    }
    let s = Scratch::new("e2fsprogs-repair");
    let img = s.path("image");
    let (mut total, mut repaired, mut clean, mut left, mut refused, mut known, mut same_exit) =
        (0, 0, 0, 0, 0, 0, 0);
    let (mut same_tree, mut kernel_view, mut encrypted_same) = (0, 0, 0);
    let mut failures = Vec::new();
    let mut preened = [0usize; 4];
    for (name, case, bytes) in e2fsprogs_images(&dir) {
        std::fs::write(&img, &bytes).unwrap();
        total += 1;
        let (code, stdout, stderr) = run(
            Command::new(usfs())
                .args(["fsck", "-fy", "-j", "2"])
                .arg(&img),
            60,
        );
        if code.is_some() && code == expected_exit(&case) {
            same_exit += 1;
        }
        let known_reason = KNOWN_LEFT.iter().find(|(n, _)| *n == name).map(|(_, r)| *r);
        let listed = REPAIRED.contains(&name.as_str());
        // (Changed with nothing counted as a fix: e2fsck's exit 0 after what it only
        // announces, as on f_journal, or descriptor checksums alone, as on f_bad_gdt_csum.)
        let modified = code == Some(1) || code == Some(0) && std::fs::read(&img).unwrap() != bytes;
        if listed && !modified {
            failures.push(format!(
                "{name}: listed as repaired, but usfs fsck -fy exit {code:?}:\n{stdout}"
            ));
        }
        match code {
            None => failures.push(format!("{name}: usfs fsck -fy hung or died by a signal")),
            Some(8) if !stderr.trim().is_empty() => refused += 1,
            Some(c @ (0 | 1)) => {
                let (u, uout, _) = run(Command::new(usfs()).args(["fsck", "-fn"]).arg(&img), 30);
                if u != Some(0) {
                    failures.push(format!(
                        "{name}: usfs fsck -fy exit {c}, then usfs fsck -fn exit {u:?}\n{uout}"
                    ));
                }
                let (e2, e2out, _) = run(Command::new("e2fsck").arg("-fn").arg(&img), 15);
                match (e2 == Some(0), known_reason) {
                    (true, None) if modified => {
                        repaired += 1;
                        if !listed {
                            eprintln!("{name}: repaired now: add it to REPAIRED");
                        }
                        let compared = match encrypted(&bytes) {
                            true => same_counts_as_e2fsck(&s, &img, &bytes).map(|()| {
                                encrypted_same += 1;
                                false
                            }),
                            false => same_tree_as_e2fsck(&s, &img, &bytes),
                        };
                        match compared {
                            Ok(mounted) => {
                                same_tree += 1;
                                kernel_view += mounted as usize;
                            }
                            Err(e) => match TREE_DIFFERS.iter().find(|(n, _)| *n == name) {
                                Some((_, why)) => {
                                    eprintln!("{name}: known: the tree differs from e2fsck -fy's: {why}");
                                }
                                None => failures.push(format!(
                                    "{name}: the repaired tree differs from e2fsck -fy's: {e}"
                                )),
                            },
                        }
                    }
                    (true, None) => clean += 1,
                    (true, Some(_)) => failures.push(format!("{name}: listed in KNOWN_LEFT but e2fsck finds it clean now: remove it")),
                    (false, Some(r)) => {
                        known += 1;
                        eprintln!("{name}: known: e2fsck -fn finds more after the repair: {r}");
                    }
                    (false, None) => failures.push(format!(
                        "{name}: usfs fsck -fy exit {c}, but e2fsck -fn exit {e2:?}:\n{e2out}\nusfs said:\n{stdout}"
                    )),
                }
            }
            Some(4) => {
                left += 1;
                let touched =
                    stdout.contains("WAS MODIFIED") || stdout.contains("recovering journal");
                if !touched && std::fs::read(&img).unwrap() != bytes {
                    failures.push(format!(
                        "{name}: exit 4 without a repair, but the image changed:\n{stdout}"
                    ));
                }
            }
            Some(c) => failures.push(format!("{name}: usfs fsck -fy exited {c}: {stderr}")),
        }
        std::fs::write(&img, &bytes).unwrap();
        if let Err(f) = preen(&name, &img, &bytes, &mut preened) {
            failures.push(f);
        }
    }
    eprintln!(
        "e2fsprogs corpus repair: {total} images: {repaired} repaired and clean for e2fsck, {clean} clean to start with, {left} left with problems usfs cannot repair yet (unchanged unless it repaired some), {refused} refused by name, {known} known differences; exit status as e2fsck's expect.1 on {same_exit}; {} failures",
        failures.len()
    );
    eprintln!(
        "of the {repaired} repaired, {same_tree} hold the tree e2fsck -fy makes of the image (usfs export of both; {encrypted_same} encrypted, whose ciphertext no export reads: the same inode and block counts as e2fsck's repair), {kernel_view} of them checked against the kernel's view too (read-only loop mount)"
    );
    eprintln!(
        "preen (-p): {} repaired, {} stopped with UNEXPECTED INCONSISTENCY (unchanged unless preen fixed some first), {} clean; exit status as e2fsck -fp's on {}, {} listed in PREEN_DIFFERS",
        preened[0], preened[1], preened[2], preened[3], PREEN_DIFFERS.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // (A floor, raised as exits come to agree: f_journal's 0 after a journal replay
    // and a journal moved, and f_bad_gdt_csum's after descriptor checksums alone, as
    // e2fsck counts none of them, are the latest.)
    assert!(
        total < SAME_EXIT_FLOOR || same_exit >= SAME_EXIT_FLOOR,
        "exit status as e2fsck's expect.1 on {same_exit} images, fewer than {SAME_EXIT_FLOOR}"
    );
}

/// `usfs fsck -fp` on image `img` (holding `orig`): it exits as `e2fsck -fp` does on a
/// copy (PREEN_DIFFERS and what usfs refuses by name aside); preen fixes only what
/// e2fsck's preen fixes, so a repaired image is clean for e2fsck (known differences
/// aside), and a stop (exit 4, "UNEXPECTED INCONSISTENCY") leaves the image unchanged.
/// Counts into `n` (repaired, stopped, clean, exit as e2fsck's).
fn preen(name: &str, img: &Path, orig: &[u8], n: &mut [usize; 4]) -> Result<(), String> {
    let (code, stdout, stderr) = run(
        Command::new(usfs())
            .args(["fsck", "-fp", "-j", "2"])
            .arg(img),
        60,
    );
    let copy = img.with_extension("e2fsck");
    std::fs::write(&copy, orig).unwrap();
    let (e2, e2out, _) = run(Command::new("e2fsck").arg("-fp").arg(&copy), 60);
    let _ = std::fs::remove_file(&copy);
    let refused = code == Some(8) && stderr.contains("unsupported feature");
    let listed = PREEN_DIFFERS.iter().any(|(n, _)| *n == name);
    if code == e2 {
        n[3] += 1;
        if listed {
            return Err(format!("{name}: listed in PREEN_DIFFERS but usfs fsck -fp exits as e2fsck -fp does now: remove it"));
        }
    } else if !refused && !listed {
        return Err(format!(
            "{name}: usfs fsck -fp exit {code:?}, e2fsck -fp exit {e2:?}\nusfs:\n{stdout}\ne2fsck:\n{e2out}"
        ));
    }
    let known = KNOWN_LEFT.iter().any(|(n, _)| *n == name);
    match code {
        Some(4) if stdout.contains("UNEXPECTED INCONSISTENCY") => {
            n[1] += 1;
            let touched = stdout.contains("WAS MODIFIED")
                || stdout.contains("recovering journal")
                || stdout.contains("orphaned inode")
                || stdout.contains("Journal superblock is corrupt")
                || stdout.contains("Backing up journal inode")
                // (Fixes preen made before it stopped, as e2fsck -p makes them.)
                || stdout.contains(".  FIXED.")
                || stdout.contains("CLEARED.");
            if !touched && std::fs::read(img).unwrap() != orig {
                return Err(format!(
                    "{name}: preen stopped but the image changed:\n{stdout}"
                ));
            }
        }
        Some(1) if !known => {
            n[0] += 1;
            let (e2, e2out, _) = run(Command::new("e2fsck").arg("-fn").arg(img), 15);
            if e2 != Some(0) {
                return Err(format!(
                    "{name}: usfs fsck -fp exit 1, but e2fsck -fn exit {e2:?}:\n{e2out}"
                ));
            }
        }
        Some(0) => n[2] += 1,
        None => return Err(format!("{name}: usfs fsck -fp hung or died by a signal")),
        Some(c) => eprintln!("{name}: usfs fsck -fp exit {c}"),
    }
    Ok(())
}

/// A directory whose htree index is bad gets an index again, as e2fsck's pass 3A
/// rebuilds it (f_h_reindex: directory 16001, ~30000 entries, bad hashes in its index):
/// after `usfs fsck -fy` its INDEX flag is on and `debugfs htree` walks the index, and
/// e2fsck finds the image clean.
#[test]
fn a_bad_htree_index_is_built_again() {
    let Some(dir) = e2fsprogs_corpus() else {
        eprintln!("SKIP htree rebuild: the e2fsprogs corpus is not found");
        return;
    };
    if !need_tool("htree rebuild", "debugfs") || !need_tool("htree rebuild", "e2fsck") {
        return;
    }
    let Some((_, _, bytes)) = e2fsprogs_images(&dir).find(|(n, _, _)| n == "f_h_reindex") else {
        eprintln!("SKIP htree rebuild: f_h_reindex is not in the corpus");
        return;
    };
    let s = Scratch::new("htree-rebuild");
    let img = s.path("image");
    std::fs::write(&img, &bytes).unwrap();
    let (code, out, _) = run(Command::new(usfs()).args(["fsck", "-fy"]).arg(&img), 120);
    assert_eq!(code, Some(1), "{out}");
    let (e2, e2out, _) = run(Command::new("e2fsck").arg("-fn").arg(&img), 30);
    assert_eq!(e2, Some(0), "{e2out}");
    let stat = Command::new("debugfs")
        .args(["-R", "stat <16001>"])
        .arg(&img)
        .output()
        .unwrap();
    let stat = String::from_utf8_lossy(&stat.stdout);
    assert!(
        stat.contains("Flags: 0x1000"),
        "no INDEX flag after the repair:\n{stat}"
    );
    let htree = Command::new("debugfs")
        .args(["-R", "htree <16001>"])
        .arg(&img)
        .output()
        .unwrap();
    let htree = String::from_utf8_lossy(&htree.stdout);
    assert!(
        htree.contains("Root node dump") && htree.contains("Entry #"),
        "{htree}"
    );
}
