//! Filling a new file system from a directory tree (mkfs.ext4 -d): three stages that run
//! at the same time, each taking what the one before has finished.
//!
//! 1. scan: the [`Source`] fills a [`Tree`] (usfs-source; for a host directory one
//!    parallel walk relative to open directories): attributes, xattrs, symlink targets,
//!    and which blocks of each regular file hold data that is not all zeros (all-zero
//!    blocks become holes, as with mke2fs -d; sparse sources are read by SEEK_DATA
//!    ranges). Small files' bytes are kept in memory ([`usfs_source::Hold`]) that is
//!    reused as soon as the copy has written them.
//! 2. place: depth first in name order, each directory as soon as it has been scanned:
//!    give every entry its inode (flex_bg/Orlov placement) and every file its blocks in
//!    one go, knowing its size (delayed allocation), build directories (htree when
//!    large), symlinks, device nodes and xattrs — in memory, except the blocks the
//!    writer makes (directory, extent-tree and symlink blocks), which go to the copy.
//! 3. [copy]: file data and those blocks go to the image by parallel workers, in
//!    physical order as placement hands them over, contiguous pieces coalesced into
//!    large writes past the page cache; kept files from memory, the others read again.
//!
//! A tree that does not fit fails when placement runs out of blocks or inodes; the
//! error then says what the whole tree needs (the scan is let finish for that).

mod copy;
mod shared_dev;

use super::dir::DirEntryIn;
use super::format::lost_found_entry;
use super::writer::{no_space, Writer};
use crate::alloc::{plan_extents, InodeKind};
use crate::format::features::ro_compat;
use crate::format::inode::ROOT_INO;
use copy::{pieces, Batcher, CopyJob};
use std::collections::HashMap;
use usfs_fs::{Error, Result};
use usfs_source::{FileData, Hold, Kind, Meta, ScanOptions, Source, Tree};

/// How to populate.
#[derive(Clone, Debug, Default)]
pub struct PopulateOptions {
    /// Make every file owned by root (uid and gid 0).
    pub all_root: bool,
    /// Worker threads scanning the source (0: eight per CPU, 8..=64); the copy uses at
    /// most two per CPU of them.
    pub threads: usize,
    /// Memory for keeping small files' bytes between scan and copy; it is reused as
    /// the copy catches up, and the scan waits for it while placement has work. 0: 64
    /// MiB, and up to an eighth of physical memory while placement waits for the scan.
    /// Files that are not kept are read again by the copy.
    pub hold_bytes: u64,
    /// An owner for the root directory that overrides the source root's (mkfs's
    /// -E root_owner).
    pub root_owner: Option<(u32, u32)>,
}

/// What populate did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PopulateReport {
    /// Regular files (inodes).
    pub files: u64,
    /// Directories (besides the root).
    pub dirs: u64,
    /// Symbolic links.
    pub symlinks: u64,
    /// Device nodes, fifos and sockets.
    pub specials: u64,
    /// Extra hard links (entries pointing at an inode already made).
    pub hardlinks: u64,
    /// Bytes of file data copied.
    pub bytes: u64,
    /// Extents of regular files.
    pub extents: u64,
    /// Xattr blocks shared by more than one inode.
    pub xattr_blocks: u64,
    /// When each stage ended, in milliseconds from the start: scan, placement, copy
    /// (they run at the same time).
    pub phase_ms: [u64; 3],
    /// Memory mapped for keeping small files between scan and copy (bytes).
    pub hold_bytes: u64,
}

impl std::fmt::Display for PopulateReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} files, {} directories, {} symlinks, {} special files, {} extra hard links, {} bytes in {} extents, {} shared xattr blocks",
            self.files,
            self.dirs,
            self.symlinks,
            self.specials,
            self.hardlinks,
            self.bytes,
            self.extents,
            self.xattr_blocks
        )
    }
}

/// An upper bound of the blocks and the number of inodes the tree needs.
fn estimate(tree: &Tree, bs: u64) -> (u64, u64) {
    let mut blocks = 0u64;
    let mut inodes = 0u64;
    let mut seen = std::collections::HashSet::new();
    let per_leaf = (bs - 12) / 12;
    for i in 0..tree.len() {
        let n = tree.node(i);
        if !matches!(n.kind, Kind::Dir(_))
            && n.meta.nlink > 1
            && !seen.insert((n.meta.dev, n.meta.ino))
        {
            continue;
        }
        inodes += 1;
        let xattrs = match &n.kind {
            Kind::Dir(d) => d.get().map_or(&n.xattrs, |d| &d.xattrs),
            _ => &n.xattrs,
        };
        if !xattrs.is_empty() {
            blocks += 1;
        }
        blocks += match &n.kind {
            Kind::Dir(d) => {
                let bytes: u64 = d
                    .get()
                    .map_or(&[][..], |d| &d.kids)
                    .iter()
                    .map(|&k| ((8 + tree.node(k).name.len() + 3) & !3) as u64)
                    .sum();
                let leaves = (bytes + 24).div_ceil(bs - 12) + 1;
                leaves + leaves.div_ceil(bs / 8) + 1
            }
            Kind::File(f) => {
                let b: u64 = f.blocks.iter().map(|x| x.1).sum();
                let extents = f.blocks.len() as u64 + b / 32768;
                b + if extents > 4 {
                    extents.div_ceil(per_leaf) + 1
                } else {
                    0
                }
            }
            Kind::Symlink(t) => u64::from(t.len() >= 60),
            Kind::Special => 0,
        };
    }
    (blocks, inodes)
}

/// Default memory for kept files. It is reused as the copy catches up, so it only needs
/// to cover what is in flight between scan and copy; more would only mean fresh memory,
/// whose first touch costs about what reading the files again would.
fn default_hold_bytes() -> u64 {
    64 << 20
}

/// Copy workers: most files are kept in memory, so the copy mostly moves bytes and
/// waits for its own writes; two per CPU (at most `threads`) do that, and more only
/// added switching between them (measured on the generated 200k-file tree).
fn copy_threads(threads: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    threads.min(cpus * 2).max(1)
}

/// Most memory for kept files, mapped only while placement waits for the scan (then
/// keeping a file in fresh memory is still cheaper than opening and reading it again):
/// an eighth of physical memory, 64 MiB to 2 GiB.
fn hold_cap() -> u64 {
    // SAFETY: sysconf only reads system configuration.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let total = (pages.max(0) as u64).saturating_mul(page.max(0) as u64);
    (total / 8).clamp(64 << 20, 2 << 30)
}

/// Fills the file system of `w` (freshly formatted, then opened) with the tree of `src`
/// (mkfs -d: a [`usfs_source::HostDir`]). The root directory is written anew with the
/// source root's entries and attributes (its owner from `opts.root_owner` when given);
/// lost+found is kept.
pub fn populate(
    w: &mut Writer,
    src: &dyn Source,
    opts: &PopulateOptions,
) -> Result<PopulateReport> {
    let t0 = std::time::Instant::now();
    // Format's root block goes back first, so the new root and the files can take it.
    w.drop_blocks(ROOT_INO)?;
    let threads = if opts.threads == 0 {
        usfs_source::default_threads()
    } else {
        opts.threads
    };
    let hold = if opts.hold_bytes == 0 {
        Hold::new(default_hold_bytes(), hold_cap())
    } else {
        Hold::new(opts.hold_bytes, opts.hold_bytes)
    };
    let bs = w.block_size() as u64;
    let (free_blocks, free_inodes) = (w.blocks.free_blocks(), w.inodes.free_inodes());
    let owned = Tree::new(ScanOptions {
        block_size: Some(w.block_size()),
        hold,
        background: true,
    });
    let mut report = PopulateReport::default();
    // Scan, placement and copy all run at once: placement takes each directory as soon
    // as it has been scanned, the copy takes batches of placed files (the device is
    // shared between the writer and the copy meanwhile).
    let dev = shared_dev::share(&mut w.core.dev);
    let (tx, rx) = std::sync::mpsc::sync_channel(8);
    let tree = &owned;
    let (scanned, placed, copied, ends) = std::thread::scope(|s| {
        let scanner = s.spawn(|| {
            let r = src.scan(tree, threads);
            (r, t0.elapsed())
        });
        let copier = s.spawn(|| copy::copy(dev.as_ref(), src, tree, rx, copy_threads(threads)));
        // However placement ends (even by a panic), the scan must stop keeping files.
        let done = PlacementDone(tree);
        let mut batcher = Batcher::new(tx);
        w.defer_writes();
        let placed = place(w, src, tree, opts, &mut report, &mut batcher)
            .and_then(|()| send_deferred(w, &mut batcher));
        batcher.finish();
        drop(done);
        let t_place = t0.elapsed();
        let lost = || Error::Io(std::io::Error::other("populate: a worker panicked"));
        let (scanned, t_scan) = scanner
            .join()
            .unwrap_or_else(|_| (Err(lost()), t0.elapsed()));
        let copied = copier.join().unwrap_or_else(|_| Err(lost()));
        (scanned, placed, copied, [t_scan, t_place, t0.elapsed()])
    });
    // The first cause wins: a source that could not be read explains a placement that
    // waited for it in vain, a tree too big for the file system any placement error (the
    // scan was let finish to know), a copy error a placement that stopped because the
    // copy did.
    if let Err(e) = placed {
        scanned?;
        if let Some(big) = too_big(tree, bs, free_blocks, free_inodes) {
            return Err(big);
        }
        copied?;
        return Err(e);
    }
    scanned?;
    report.bytes = copied?;
    w.stop_deferring()?;
    report.phase_ms = ends.map(|t| t.as_millis() as u64);
    report.xattr_blocks = w.xattr_blocks_shared();
    report.hold_bytes = tree.hold.bytes_mapped();
    // Freeing a large tree (a few allocations per entry: ~45 ms for 224k entries) is
    // left to a thread of its own, so it overlaps with writing the metadata.
    std::thread::spawn(move || drop(owned));
    Ok(report)
}

/// Calls [`Tree::consumer_done`] when dropped (placement is the tree's consumer).
struct PlacementDone<'a>(&'a Tree);

impl Drop for PlacementDone<'_> {
    fn drop(&mut self) {
        self.0.consumer_done();
    }
}

/// The error saying what the whole scanned tree needs against what the file system
/// had free, when it needs more than that.
fn too_big(tree: &Tree, bs: u64, free_blocks: u64, free_inodes: u64) -> Option<Error> {
    let (need_blocks, need_inodes) = estimate(tree, bs);
    if need_inodes > free_inodes + 1 {
        return Some(no_space(
            "the source tree",
            format!(
                "needs {} inodes, the file system has {free_inodes} free (use -N or -i)",
                need_inodes - 1
            ),
        ));
    }
    (need_blocks > free_blocks).then(|| {
        no_space(
            "the source tree",
            format!(
                "needs up to {need_blocks} blocks of {bs} bytes, the file system has {free_blocks} free"
            ),
        )
    })
}

/// Sends the blocks the writer made since the last call to the copy workers.
fn send_deferred(w: &mut Writer, jobs: &mut Batcher) -> Result<()> {
    for (dst, data) in w.take_deferred() {
        if !jobs.push(CopyJob::Meta { dst, data }) {
            return Err(Error::Io(std::io::Error::other("the copy stopped")));
        }
    }
    Ok(())
}

fn set_attrs(w: &mut Writer, ino: u32, m: &Meta, all_root: bool) {
    let isz = w.core.geo.inode_size as usize;
    let now = w.now;
    let mut i = w.inode_mut(ino);
    i.set_i_mode(m.mode as u16);
    if !all_root {
        i.set_uid(m.uid);
        i.set_gid(m.gid);
    }
    i.set_times(m.atime, m.mtime, m.ctime, now, isz);
}

fn file_type_code(k: &Kind, mode: u32) -> u8 {
    match k {
        Kind::Dir(_) => 2,
        Kind::File(_) => 1,
        Kind::Symlink(_) => 7,
        Kind::Special => match mode & libc::S_IFMT {
            libc::S_IFCHR => 3,
            libc::S_IFBLK => 4,
            libc::S_IFIFO => 5,
            _ => 6,
        },
    }
}

/// Phase 2.
fn place(
    w: &mut Writer,
    src: &dyn Source,
    tree: &Tree,
    opts: &PopulateOptions,
    report: &mut PopulateReport,
    jobs: &mut Batcher,
) -> Result<()> {
    let dir_nlink = w.core.geo.features.has_ro_compat(ro_compat::DIR_NLINK);
    let mut links: HashMap<(u64, u64), u32> = HashMap::new();
    let mut stack: Vec<(usize, u32, u32)> = vec![(0, ROOT_INO, ROOT_INO)];
    while let Some((d, dino, parent)) = stack.pop() {
        // A directory's inode was made with its parent's entries; its attributes and
        // entries come from its own scan, which this waits for. The root takes the
        // source root's attributes (its owner from -E root_owner when given).
        let ds = tree.dir(d)?;
        set_attrs(w, dino, &ds.meta, opts.all_root);
        if dino == ROOT_INO {
            if let Some((uid, gid)) = opts.root_owner {
                let mut r = w.inode_mut(ROOT_INO);
                r.set_uid(uid);
                r.set_gid(gid);
            }
        }
        w.set_xattrs(dino, &ds.xattrs)?;
        let kids = &ds.kids;
        let mut entries = Vec::with_capacity(kids.len() + 1);
        let mut subdirs = 0u64;
        if dino == ROOT_INO {
            entries.push(lost_found_entry());
            subdirs += 1;
        }
        let mut later = Vec::new();
        for &k in kids {
            let n = tree.node(k);
            let ft = file_type_code(&n.kind, n.meta.mode);
            let key = (n.meta.dev, n.meta.ino);
            if ft != 2 && n.meta.nlink > 1 {
                if let Some(&ino) = links.get(&key) {
                    // Its bytes (read by the scan as for any file) are not needed.
                    if let Kind::File(FileData { held: Some(h), .. }) = &n.kind {
                        tree.hold.release(*h);
                    }
                    let mut i = w.inode_mut(ino);
                    i.set_i_links_count(i.i_links_count().saturating_add(1));
                    entries.push(DirEntryIn {
                        name: n.name.clone(),
                        ino,
                        file_type: ft,
                    });
                    report.hardlinks += 1;
                    continue;
                }
            }
            let kind = match (&n.kind, dino == ROOT_INO) {
                (Kind::Dir(_), true) => InodeKind::TopDir,
                (Kind::Dir(_), false) => InodeKind::Dir,
                _ => InodeKind::File,
            };
            let ino = w.new_inode(kind, dino)?;
            if !matches!(n.kind, Kind::Dir(_)) {
                set_attrs(w, ino, &n.meta, opts.all_root);
                w.set_xattrs(ino, &n.xattrs)?;
            }
            w.inode_mut(ino).set_i_links_count(1);
            match &n.kind {
                Kind::Dir(_) => {
                    subdirs += 1;
                    report.dirs += 1;
                    later.push((k, ino));
                }
                Kind::File(data) => {
                    report.files += 1;
                    let goal = w.data_goal(ino, false);
                    let maps = plan_extents(&mut w.blocks, ino, goal, &data.blocks)
                        .map_err(|e| no_space(&src.path(tree, k).display().to_string(), e))?;
                    w.set_extents(ino, &maps)?;
                    w.inode_mut(ino).set_size(n.meta.size);
                    report.extents += maps.len() as u64;
                    if !maps.is_empty() {
                        let job = CopyJob::File {
                            node: k,
                            pieces: pieces(&maps, w.block_size() as u64, n.meta.size),
                        };
                        if !jobs.push(job) {
                            return Err(Error::Io(std::io::Error::other("the copy stopped")));
                        }
                    }
                }
                Kind::Symlink(t) => {
                    report.symlinks += 1;
                    w.write_symlink(ino, t).map_err(|e| {
                        Error::Incompatible(format!("{}: {e}", src.path(tree, k).display()))
                    })?;
                }
                Kind::Special => {
                    report.specials += 1;
                    let t = n.meta.mode & libc::S_IFMT;
                    if t == libc::S_IFCHR || t == libc::S_IFBLK {
                        w.set_device(ino, libc::major(n.meta.rdev), libc::minor(n.meta.rdev));
                    }
                }
            }
            send_deferred(w, jobs)?;
            if ft != 2 && n.meta.nlink > 1 {
                links.insert(key, ino);
            }
            entries.push(DirEntryIn {
                name: n.name.clone(),
                ino,
                file_type: ft,
            });
        }
        w.write_dir(dino, parent, &entries, 1, true)?;
        send_deferred(w, jobs)?;
        let nl = 2 + subdirs;
        let nl = if nl >= 65000 && dir_nlink {
            1
        } else {
            nl.min(65000)
        };
        w.inode_mut(dino).set_i_links_count(nl as u16);
        for (k, ino) in later.into_iter().rev() {
            stack.push((k, ino, dino));
        }
    }
    Ok(())
}
