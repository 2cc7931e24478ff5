//! Pass 2: directory blocks. Structure is checked as soon as a block arrives (checksum,
//! rec_len/name_len, `.` and `..`, duplicate names within the block, htree nodes), and
//! every entry is counted toward its inode's references. Checks that need pass 1's verdict
//! on the named inode (in use? which type?) run at once when pass 1 has finished that
//! inode's group, otherwise the block is revisited after pass 1 (deferred certification,
//! in-order commit).

use crate::ctx::{Ctx, DirBlock, SubdirEntry, Worker};
use crate::dirio;
use crate::encrypt::{Policy, MIN_NAME};
use crate::htree::HtreeFact;
use crate::problem::{Code, EntryAt, Problem};
use crate::state::InodeKind;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::ops::ControlFlow;
use usfs_dev::BlockHasher;
use usfs_ext4::format::dirent::{
    self, dirent_file_type, file_type_from_dirent, DirentFault, Dirents, TailFault,
};
use usfs_ext4::format::dx_hash::{dx_hash, HashVersion};
use usfs_ext4::format::features::incompat;
use usfs_ext4::format::inode::{flags, ROOT_INO};
use usfs_ext4::walk::dx::{self, DxCtx, DxIssue, DxKind};
use usfs_ext4::walk::Mode;
use usfs_fs::FileType;

/// How a block is being visited.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Visit {
    /// First visit: structure, counts, and reference checks where possible.
    First,
    /// After pass 1: only the reference checks.
    Revisit,
}

/// Checks a batch of directory blocks (first visit), sorted by block number, reading
/// neighbouring blocks together (see [`crate::dirio`]).
pub(crate) fn check_batch(ctx: &Ctx, w: &mut Worker, batch: &[DirBlock]) {
    visit_batch(ctx, w, batch, Visit::First);
}

/// Runs the deferred reference checks of a sorted batch of blocks (after pass 1).
pub(crate) fn revisit_batch(ctx: &Ctx, w: &mut Worker, batch: &[DirBlock]) {
    visit_batch(ctx, w, batch, Visit::Revisit);
}

fn visit_batch(ctx: &Ctx, w: &mut Worker, batch: &[DirBlock], how: Visit) {
    let log = ctx.geo.block_size_log;
    let bs = 1usize << log;
    let mut window = std::mem::take(&mut w.window);
    for run in dirio::runs(batch, dirio::MAX_RUN_BYTES >> log) {
        let whole = dirio::read_run(ctx, &run, &mut window).is_ok();
        w.counters.dir_reads += 1;
        w.counters.dir_read_blocks += run.count;
        for b in &batch[run.blocks.clone()] {
            if whole {
                let at = ((b.pblk - run.first) as usize) << log;
                visit_block(ctx, w, *b, &window[at..at + bs], how);
            } else {
                visit_unread(ctx, w, *b, how);
            }
        }
    }
    w.window = window;
}

/// A block whose run could not be read in one go: read it alone, so that an unreadable
/// block is reported as such.
fn visit_unread(ctx: &Ctx, w: &mut Worker, b: DirBlock, how: Visit) {
    let mut buf = std::mem::take(&mut w.dir_buf);
    if ctx.read_block(b.pblk, &mut buf).is_ok() {
        visit_block(ctx, w, b, &buf, how);
    } else if how == Visit::First {
        w.report(
            Problem::new(
                Code::DirCorruptEntry,
                format!("{}, block #{}: cannot be read", b.dir, b.lblk),
            )
            .with_ino(b.dir),
        );
    }
    w.dir_buf = buf;
}

fn visit_block(ctx: &Ctx, w: &mut Worker, b: DirBlock, buf: &[u8], how: Visit) {
    if how == Visit::First {
        w.counters.dir_blocks += 1;
    }
    let bs = buf.len();
    let is_dx_node = b.indexed && b.lblk != 0 && dirent::is_dx_node(buf);
    if is_dx_node {
        if how == Visit::First {
            check_dx_node(ctx, w, &b, buf, DxKind::Node);
        }
        return;
    }
    let mut end = bs;
    let root_dx = b.indexed && b.lblk == 0;
    // A dx root has no leaf tail (its dx tail may even look like one: the kernel builds
    // the root from a former leaf block, leaving the old tail bytes in dt_reserved).
    if let (Some(seed), false) = (ctx.fs.csum_seed(), root_dx) {
        let tail = match how {
            Visit::First => dirent::check_tail(seed, b.dir, b.generation, buf),
            // (A revisit needs only where the entries end: the first visit judged the
            // checksum.)
            Visit::Revisit => dirent::find_tail(buf).map(|_| ()).ok_or(TailFault::Missing),
        };
        match tail {
            Ok(()) => end = bs - dirent::TAIL_SIZE,
            Err(TailFault::Checksum { .. }) => {
                end = bs - dirent::TAIL_SIZE;
                if how == Visit::First {
                    w.report(
                        Problem::new(
                            Code::DirBlockChecksum,
                            format!("{}, block #{}", b.dir, b.lblk),
                        )
                        .with_ino(b.dir)
                        .with_block(b.pblk),
                    );
                }
            }
            Err(TailFault::Missing) => {
                if how == Visit::First {
                    w.report(
                        Problem::new(Code::DirNoTail, format!("{}, block #{}", b.dir, b.lblk))
                            .with_ino(b.dir)
                            .with_block(b.pblk),
                    );
                }
            }
        }
    }
    // A leaf of an indexed directory: the range of its names' hashes, for the htree
    // certification after pass 2.
    let leaf_hash = b.hash.filter(|_| how == Visit::First && !root_dx);
    let mut range = (u32::MAX, 0u32);
    let deferred = walk_entries(
        ctx,
        w,
        &b,
        &buf[..end],
        0,
        how,
        leaf_hash.map(|v| (v, &mut range)),
    );
    if leaf_hash.is_some() {
        w.htree.push(HtreeFact::Leaf {
            dir: b.dir,
            lblk: b.lblk,
            min: range.0,
            max: range.1,
        });
    }
    if how == Visit::First {
        if root_dx {
            check_dx_node(ctx, w, &b, buf, DxKind::Root);
        }
        if deferred {
            w.revisit.push(b);
        }
    }
}

/// Walks the entries of one area (a block, or an inline directory's area). Returns
/// whether some reference checks had to be deferred.
fn walk_entries(
    ctx: &Ctx,
    w: &mut Worker,
    b: &DirBlock,
    area: &[u8],
    base: usize,
    how: Visit,
    hashes: Option<(HashVersion, &mut (u32, u32))>,
) -> bool {
    let geo = ctx.geo;
    let has_ft = geo.features.has_incompat(incompat::FILETYPE);
    let mut walk = EntryWalk {
        ctx,
        b,
        dir_policy: ctx.shared.policies.of(b.dir),
        report: how == Visit::First,
        has_ft,
        names: HashSet::default(),
        refs: Vec::new(),
        hashes,
    };
    let first_block = b.lblk == 0 && base == 0;
    // (Inline areas start past the inode's first 4 bytes: base 4 or 60; blocks at 0.)
    let chain = match base {
        0 => Dirents::lenient(area, geo.block_size, has_ft).in_block(),
        _ => Dirents::lenient(area, geo.block_size, has_ft),
    };
    for (index, e) in chain.enumerate() {
        let e = match e {
            Ok(e) => e,
            Err((at, fault)) => {
                if walk.report {
                    w.report(corrupt_entry(b, base + at, fault));
                }
                break;
            }
        };
        if walk.report {
            w.counters.entries += 1;
        }
        // `.` and `..` lead the first block.
        if first_block && index < 2 {
            walk.dot_entry(w, index, e.ino, e.name);
            // e2fsck also wants the byte after the name zero (PR_2_DOT_NULL_TERM).
            let after = e.off + 8 + e.name.len();
            if walk.report && after < e.off + e.rec_len && area.get(after).is_some_and(|&c| c != 0)
            {
                walk.dot_unterminated(w, index);
            }
        } else if e.ino != 0 {
            let at = EntryAt {
                lblk: b.lblk,
                off: (base + e.off) as u32,
            };
            walk.entry(w, e.ino, e.file_type, e.name, at);
        }
    }
    walk.finish(w, how)
}

/// One walk over the entries of an area of directory block `b`: what the checks of its
/// entries share.
struct EntryWalk<'a> {
    /// The shared read-only context.
    ctx: &'a Ctx<'a>,
    /// The block.
    b: &'a DirBlock,
    /// The directory's encryption policy, if it is encrypted.
    dir_policy: Option<Policy>,
    /// First visit: report structure problems and count references.
    report: bool,
    /// Entries carry a file type (the filetype feature).
    has_ft: bool,
    /// The names seen so far (for duplicates).
    /// (Hashed by the project's fast hasher, not SipHash: a block holds a few hundred
    /// names at most, nothing to fear from names made to collide.)
    names: HashSet<&'a [u8], BuildHasherDefault<BlockHasher>>,
    /// Entries whose target pass 1 must have judged: checked together at the end, now if
    /// every target's group is done, else all after pass 1 (so none is checked twice).
    refs: Vec<(u32, u8, &'a [u8], EntryAt)>,
    /// An htree leaf's hash version and the range of its names' hashes so far.
    hashes: Option<(HashVersion, &'a mut (u32, u32))>,
}

impl<'a> EntryWalk<'a> {
    /// Entry `index` (0 or 1) of a directory's first block, which must be `.` (naming the
    /// directory) or `..` (naming its parent).
    fn dot_entry(&mut self, w: &mut Worker, index: usize, ino: u32, name: &[u8]) {
        let (b, geo, report) = (self.b, self.ctx.geo, self.report);
        let want: &[u8] = if index == 0 { b"." } else { b".." };
        if name != want || ino == 0 {
            if report {
                let code = if index == 0 {
                    Code::DirBadDot
                } else {
                    Code::DirBadDotDot
                };
                let what = if index == 0 { "'.'" } else { "'..'" };
                w.report(
                    Problem::new(code, format!("Missing {what} in directory inode {}", b.dir))
                        .with_ino(b.dir),
                );
            }
        } else if index == 0 {
            if ino != b.dir && report {
                w.report(
                    Problem::new(
                        Code::DirBadDot,
                        format!("'.' in directory inode {} points to {ino}", b.dir),
                    )
                    .with_ino(b.dir),
                );
            }
            if report && ino <= geo.inodes_count && ino != 0 {
                self.ctx.shared.add_ref(ino, &mut w.many_refs);
            }
        } else if report && ino <= geo.inodes_count {
            self.ctx.shared.add_ref(ino, &mut w.many_refs);
            w.dotdots.push((b.dir, ino));
        }
    }

    /// `.` (index 0) or `..` (1) whose name is right but not followed by a zero byte.
    fn dot_unterminated(&self, w: &mut Worker, index: usize) {
        let (code, what) = if index == 0 {
            (Code::DirBadDot, "'.'")
        } else {
            (Code::DirBadDotDot, "'..'")
        };
        let dir = self.b.dir;
        w.report(
            Problem::new(
                code,
                format!("{what} directory entry in directory inode {dir} is not NULL terminated"),
            )
            .with_ino(dir),
        );
    }

    /// A named entry (inode `ino` != 0, dirent file type `ft`): the inode number's range,
    /// the name, duplicates, a link to the root; counts the reference and the hash, and
    /// keeps it for the checks that need pass 1's verdict.
    fn entry(&mut self, w: &mut Worker, ino: u32, ft: u8, name: &'a [u8], at: EntryAt) {
        let (b, geo) = (self.b, self.ctx.geo);
        let shown = || {
            format!(
                "'{}' in directory inode {}",
                String::from_utf8_lossy(name),
                b.dir
            )
        };
        if ino > geo.inodes_count || (ino != ROOT_INO && ino < geo.first_ino) {
            if self.report {
                w.report(
                    Problem::new(Code::DirBadInode, format!("{} ({ino})", shown()))
                        .with_ino(b.dir)
                        .at_entry(at),
                );
            }
            return;
        }
        // (An encrypted name is ciphertext: any bytes, but a cipher block at least.)
        if self.report && self.dir_policy.is_some() && name.len() < MIN_NAME {
            w.report(
                Problem::new(Code::EncryptShortName, shown())
                    .with_ino(b.dir)
                    .at_entry(at),
            );
            return;
        }
        if self.report {
            let plain = self.dir_policy.is_none();
            if plain && (name.is_empty() || name.contains(&b'/') || name.contains(&0)) {
                w.report(
                    Problem::new(Code::DirBadName, shown())
                        .with_ino(b.dir)
                        .at_entry(at),
                );
            }
            // A `.` or `..` past the first two entries is a duplicate too.
            if name == b"." || name == b".." || !self.names.insert(name) {
                w.report(Problem::new(Code::DirDuplicateEntry, shown()).with_ino(b.dir));
            }
            if ino == ROOT_INO {
                w.report(
                    Problem::new(Code::DirEntryToRoot, shown())
                        .with_ino(b.dir)
                        .at_entry(at),
                );
            }
            self.ctx.shared.add_ref(ino, &mut w.many_refs);
            if let Some((version, range)) = self.hashes.as_mut() {
                let seed = self.ctx.fs.superblock().hash_seed();
                if let Ok((h, _)) = dx_hash(name, *version, &seed) {
                    range.0 = range.0.min(h);
                    range.1 = range.1.max(h);
                }
            }
            if b.dir == ROOT_INO && name == b"lost+found" {
                w.lost_found = Some(ino);
            }
        }
        self.refs.push((ino, ft, name, at));
    }

    /// Runs the kept reference checks if pass 1 has judged every target (or this is the
    /// revisit); returns whether they had to be deferred.
    fn finish(self, w: &mut Worker, how: Visit) -> bool {
        let geo = self.ctx.geo;
        let ready = how == Visit::Revisit
            || self
                .refs
                .iter()
                .all(|r| self.ctx.shared.inode_checked(r.0, geo.inodes_per_group));
        if !ready {
            return true;
        }
        for (ino, ft, name, at) in self.refs {
            let kind = self.ctx.shared.kind(ino);
            let hidden = match kind {
                InodeKind::Unused => self.ctx.in_unused_area(ino),
                _ => None,
            };
            match hidden {
                Some(area) => {
                    hidden_reference(w, self.b.dir, ino, (name, at), area);
                    let what = (ft, name, at);
                    hidden_file_type(self.ctx, w, self.b.dir, ino, what, self.has_ft);
                }
                None => {
                    let dir = (self.b, self.dir_policy);
                    check_reference(self.ctx, w, dir, ino, (ft, name, at), kind, self.has_ft)
                }
            }
        }
        false
    }
}

/// The problem for a broken entry chain at byte `off` of directory block `b`.
fn corrupt_entry(b: &DirBlock, off: usize, fault: DirentFault) -> Problem {
    let at = format!("{}, block #{}, offset {off}", b.dir, b.lblk);
    let detail = match fault {
        DirentFault::RecLen { rec_len, name_len } | DirentFault::NameLen { rec_len, name_len } => {
            format!("{at}: rec_len {rec_len}, name_len {name_len}")
        }
        // (Inode faults are not raised by the lenient walk.)
        DirentFault::TruncatedHeader | DirentFault::Inode { .. } => at,
    };
    Problem::new(Code::DirCorruptEntry, detail)
        .with_ino(b.dir)
        .at_entry(EntryAt {
            lblk: b.lblk,
            off: off as u32,
        })
}

/// An entry naming inode `ino`, which pass 1 did not read because it lies in group
/// `g`'s unused area (`uninit`: the group is INODE_UNINIT; else past itable_unused).
/// e2fsck's fix makes the descriptor stop hiding the inode; the next check reads it, and
/// the entry stays if the inode is in use.
fn hidden_reference(
    w: &mut Worker,
    dir: u32,
    ino: u32,
    (name, at): (&[u8], EntryAt),
    (g, uninit): (u32, bool),
) {
    let (code, area) = match uninit {
        true => (Code::DirInodeUninitGroup, "uninitialized inode"),
        false => (Code::DirInodeInUnusedArea, "unused inodes"),
    };
    let name = String::from_utf8_lossy(name);
    w.report(
        Problem::new(
            code,
            format!("'{name}' in directory inode {dir} references inode {ino} found in group {g}'s {area} area"),
        )
        .with_ino(dir)
        .with_group(g)
        .at_entry(at),
    );
}

/// The file type of an entry naming a hidden inode (see [`hidden_reference`]), judged
/// against the inode as the table holds it, as e2fsck's check_filetype reads it (a
/// never-used inode: type 0). A type other than 0 that disagrees is fixed to it.
fn hidden_file_type(
    ctx: &Ctx,
    w: &mut Worker,
    dir: u32,
    ino: u32,
    (ft, name, at): (u8, &[u8], EntryAt),
    has_ft: bool,
) {
    let mode = ctx.fs.read_inode_raw(ino).map_or(0, |r| r.i_mode());
    let should_be = FileType::from_mode(mode as u32).map_or(0, dirent_file_type);
    if has_ft && ft != 0 && ft != should_be {
        let name = String::from_utf8_lossy(name);
        w.report(
            Problem::new(
                Code::DirBadFileType,
                format!("'{name}' in directory inode {dir} ({ino})"),
            )
            .with_ino(dir)
            .at_entry(at)
            .values(ft as u64, should_be as u64),
        );
    }
}

/// The checks that need pass 1's verdict on the named inode.
fn check_reference(
    ctx: &Ctx,
    w: &mut Worker,
    (b, dir_policy): (&DirBlock, Option<Policy>),
    ino: u32,
    (ft, name, at): (u8, &[u8], EntryAt),
    kind: InodeKind,
    has_ft: bool,
) {
    let dir = b.dir;
    let shown = || {
        format!(
            "'{}' in directory inode {dir}",
            String::from_utf8_lossy(name)
        )
    };
    match kind {
        InodeKind::InBadBlock => {
            w.report(
                Problem::new(Code::DirBadBlockInode, format!("{} ({ino})", shown()))
                    .with_ino(dir)
                    .at_entry(at),
            );
        }
        InodeKind::Unused => {
            w.report(
                Problem::new(Code::DirUnusedInode, format!("{} ({ino})", shown()))
                    .with_ino(dir)
                    .at_entry(at),
            );
        }

        InodeKind::Used(t) => {
            // A zero file type is tolerated (e2fsck sets it silently).
            if has_ft && ft != 0 && file_type_from_dirent(ft) != Some(t) {
                w.report(
                    Problem::new(Code::DirBadFileType, format!("{} ({ino})", shown()))
                        .with_ino(dir)
                        .at_entry(at)
                        .values(ft as u64, dirent_file_type(t) as u64),
                );
            }
            if let Some(policy) = dir_policy {
                // (e2fsck goes by the entry's file type where it has one.)
                let ty = file_type_from_dirent(ft).filter(|_| has_ft).unwrap_or(t);
                let needs = matches!(
                    ty,
                    FileType::Regular | FileType::Directory | FileType::Symlink
                );
                if let Some(p) = crate::encrypt::entry_problem(ctx, policy, ino, needs, &shown()) {
                    w.report(p.with_ino(dir).at_entry(at));
                    return;
                }
            }
            if t == FileType::Directory {
                w.parents.push(SubdirEntry {
                    child: ino,
                    order: SubdirEntry::order(b.lblk, b.pblk),
                    dir,
                    at,
                });
            }
        }
    }
}

/// Judges a dx root or interior node with the lenient dx walker and records its
/// children for the certification after pass 2 (which also judges their range).
fn check_dx_node(ctx: &Ctx, w: &mut Worker, b: &DirBlock, buf: &[u8], kind: DxKind) {
    let cx = DxCtx {
        ino: b.dir,
        generation: b.generation,
        seed: ctx.fs.csum_seed(),
        large_dir: ctx.geo.features.has_incompat(incompat::LARGEDIR),
        nblocks: u64::MAX,
    };
    let node = dx::scan_node(buf, kind, &cx, Mode::Lenient, &mut |issue| {
        w.report(dx_problem(b, issue));
        ControlFlow::Continue(())
    });
    let Some(node) = node else {
        return;
    };
    let children = node
        .entries
        .iter()
        .map(|&(h, child)| (h & !1, child))
        .collect();
    w.htree.push(HtreeFact::Node {
        dir: b.dir,
        lblk: b.lblk,
        depth: node.root.map_or(0, |r| r.levels + 1),
        children,
    });
}

/// The problem a dx walker issue in block `b` is.
fn dx_problem(b: &DirBlock, issue: DxIssue) -> Problem {
    let (dir, lblk) = (b.dir, b.lblk);
    let p = match issue {
        DxIssue::Checksum => Problem::new(Code::HtreeChecksum, format!("{dir} (block #{lblk})"))
            .at_entry(EntryAt { lblk, off: 0 }),
        DxIssue::RootInfo {
            levels,
            hash_version,
            ..
        } => Problem::new(
            Code::HtreeBad,
            format!("{dir}: root node fails checks (levels {levels}, hash {hash_version})"),
        ),
        DxIssue::Header(fault) => Problem::new(
            Code::HtreeBad,
            format!("{dir}: block #{lblk} has a {fault}"),
        ),
        DxIssue::Unordered { .. } => Problem::new(
            Code::HtreeBad,
            format!("{dir}: block #{lblk} has unordered hash table"),
        ),
        DxIssue::Child { child, .. } => Problem::new(
            Code::HtreeBad,
            format!("{dir}: block #{lblk}: bad block number {child}"),
        ),
    };
    p.with_ino(dir).with_block(b.pblk)
}

/// Inline directories are checked in pass 1 (their entries live in the inode): the
/// parent in the first four bytes of i_block, entries after it and in system.data.
pub(crate) fn check_inline_dir(ctx: &Ctx, w: &mut Worker, ino: u32) {
    let ib: [u8; 60] = *w.inode.i_block();
    let parent = u32::from_le_bytes(ib[0..4].try_into().unwrap());
    let b = DirBlock {
        dir: ino,
        generation: w.inode.i_generation(),
        lblk: 1,
        pblk: 0,
        indexed: false,
        hash: None,
    };
    // `.` is implicit; `..` is the stored parent.
    ctx.shared.add_ref(ino, &mut w.many_refs);
    if parent == 0 || parent > ctx.geo.inodes_count {
        w.report(
            Problem::new(
                Code::DirBadDotDot,
                format!("Bad '..' ({parent}) in inline directory inode {ino}"),
            )
            .with_ino(ino),
        );
    } else {
        ctx.shared.add_ref(parent, &mut w.many_refs);
        w.dotdots.push((ino, parent));
    }
    // Entries referencing inodes of groups pass 1 has not finished are re-checked later
    // through the reader-independent revisit list: inline areas are small, so re-parse
    // them from the inode then.
    let extra = inline_extra(ctx, ino);
    let d1 = walk_entries(ctx, w, &b, &ib[4..], 4, Visit::First, None);
    let d2 = match &extra {
        Some(x) => walk_entries(ctx, w, &b, x, 60, Visit::First, None),
        None => false,
    };
    if d1 || d2 {
        w.revisit.push(DirBlock { pblk: 0, ..b });
    }
    let _ = flags::INLINE_DATA;
}

/// The system.data part of an inline directory, read through the reader.
fn inline_extra(ctx: &Ctx, ino: u32) -> Option<Vec<u8>> {
    ctx.fs.inline_data_extra(ino).ok().filter(|v| !v.is_empty())
}

/// Revisits an inline directory (its DirBlock has pblk 0).
pub(crate) fn revisit_inline(ctx: &Ctx, w: &mut Worker, b: DirBlock) {
    let Ok(raw) = ctx.fs.read_inode_raw(b.dir) else {
        return;
    };
    let ib: [u8; 60] = *raw.i_block();
    walk_entries(ctx, w, &b, &ib[4..], 4, Visit::Revisit, None);
    if let Some(x) = inline_extra(ctx, b.dir) {
        walk_entries(ctx, w, &b, &x, 60, Visit::Revisit, None);
    }
}
