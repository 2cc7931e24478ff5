//! The third step of a check: the workers' own contexts joined into one (pFSCK's merge
//! at the end), then the passes that need the whole picture: the htree certification,
//! the xattr block reference counts, pass 1B (shared blocks), 3 (connectivity), 4
//! (reference counts) and 5 (group summaries).

use crate::chunked::Chunked;
use crate::ctx::{Counters, Ctx, Worker};
use crate::htree::{self, HtreeFact};
use crate::problem::{Code, Problem};
use crate::{pass1, pass1b, pass3, pass4, pass5, Phases};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;
use usfs_ext4::format::features::ro_compat;
use usfs_ext4::rw::repair::Found;

/// What the check keeps of the workers for its report.
pub(crate) struct Merged {
    /// The workers' counters, summed.
    pub(crate) counters: Counters,
    /// Busy seconds of each worker in pass 1 and pass 2.
    pub(crate) busy: Vec<[f64; 2]>,
    /// Each worker's stage switches.
    pub(crate) timelines: Vec<Vec<(u32, u8)>>,
    /// The group summaries as found where they disagree with the image (pass 5).
    pub(crate) found: Found,
    /// The quota files to write anew.
    pub(crate) quota: Vec<crate::quota::QuotaFix>,
}

/// The workers' intermediate results, joined, for the passes after the pipeline.
#[derive(Default)]
struct Joined {
    /// References to each xattr block, over all workers.
    xattr_refs: HashMap<u64, u32>,
    /// The EA inodes valid xattr blocks reference, by block (a block counts once).
    xattr_ea: HashMap<u64, Vec<u32>>,
    /// References to EA inodes (one entry per reference), sorted once joined.
    ea_refs: Vec<u32>,
    /// (directory, its `..` entry).
    dotdots: Chunked<(u32, u32)>,
    /// Entries naming directories.
    parents: Chunked<crate::ctx::SubdirEntry>,
    /// `/lost+found`, if a worker saw it.
    lost_found: Option<u32>,
    /// (inode, i_links_count) of inodes with many links.
    links: Vec<(u32, u16)>,
    /// References counted past the shared nibbles, over all workers.
    many_refs: crate::refs::ManyRefs,
    /// What pass 2 saw in indexed directories' blocks.
    htree_facts: Vec<HtreeFact>,
    /// Quota usage counted by pass 1.
    quota: crate::quota::Usage,
    /// Inodes with the imagic flag on a file system with imagic inodes.
    imagic: Vec<u32>,
    /// Indexed directories and their block counts.
    htree_dirs: Vec<(u32, u32)>,
    /// (inode, i_blocks its pass-1 fix sets), sorted: pass 4 judges an unattached inode
    /// empty by the fixed count, as e2fsck's pass 4 reads it after pass 1's fix.
    fixed_blocks: Vec<(u32, u64)>,
}

/// Joins the workers' contexts (their problems are appended to `problems`, in worker
/// order), runs the passes after the pipeline (their problems follow), sorts the
/// problems by pass and drops repeats; records the phases' times.
pub(crate) fn run(
    ctx: &Ctx,
    workers: &mut [Worker],
    problems: &mut Vec<Problem>,
    phases: &mut Phases,
) -> Merged {
    let t3 = Instant::now();
    let (merged, mut joined) = join(workers, problems);
    crate::pass0::place_missing(ctx, problems);
    let mut late = Worker::new(ctx.geo.block_size as usize);
    large_files(ctx, &merged.counters, &mut late);
    htree::check(&mut joined.htree_dirs, &mut joined.htree_facts, &mut late);
    joined.htree_facts = Vec::new();
    pass1::check_xattr_refcounts(ctx, &mut late, &joined.xattr_refs);
    // With shared_blocks, sharing is the feature (a deduplicated read-only image).
    let sharing_allowed = ctx.geo.features.has_ro_compat(ro_compat::SHARED_BLOCKS);
    if ctx.shared.any_dup.load(Ordering::Relaxed) && !sharing_allowed {
        pass1b::run(ctx, &mut late);
    }
    phases.push(("pass 1B + merge", t3.elapsed().as_secs_f64()));
    let mut merged = merged;
    joined.fixed_blocks = (problems.iter())
        .filter(|p| p.code == Code::BadIBlocks)
        .filter_map(|p| Some((p.ino()?, p.expected()?)))
        .collect();
    joined.fixed_blocks.sort_unstable();
    merged.found = passes_3_to_5(ctx, &mut late, &mut joined, phases);
    merged.quota = crate::quota::check(ctx, &joined.quota, &mut late);
    absorb(problems, &mut late.problems);
    // (/lost+found keeps its blocks for the files a repair puts there.)
    if let Some(l) = joined.lost_found {
        problems.retain(|p| !(p.code == Code::DirOptimize && p.ino() == Some(l)));
    }
    sort_problems(problems);
    problems.dedup();
    merged
}

/// e2fsck's end of pass 2: files of 2 GiB or more need the large_file feature, and a
/// revision 0 file system cannot have features.
fn large_files(ctx: &Ctx, counters: &Counters, late: &mut Worker) {
    if counters.large_files == 0 {
        return;
    }
    let mut what = Vec::new();
    if !ctx.geo.features.has_ro_compat(ro_compat::LARGE_FILE) {
        what.push("Filesystem contains large files, but lacks LARGE_FILE flag in superblock");
    }
    if ctx.fs.superblock().s_rev_level() == 0 {
        what.push("Filesystem has feature flag(s) set, but is a revision 0 filesystem");
    }
    if !what.is_empty() {
        late.report(Problem::new(Code::LargeFileFeature, what.join("\n")));
    }
}

/// Takes each worker's problems (onto `problems`), counters, timing and intermediate
/// results.
fn join(workers: &mut [Worker], problems: &mut Vec<Problem>) -> (Merged, Joined) {
    let mut merged = Merged {
        counters: Counters::default(),
        busy: Vec::new(),
        timelines: Vec::new(),
        found: Found::default(),
        quota: Vec::new(),
    };
    let mut j = Joined::default();
    for w in workers {
        j.dotdots.append(&mut w.dotdots);
        j.parents.append(&mut w.parents);
        absorb(problems, &mut w.problems);
        merged.counters.add(&w.counters);
        for (b, n) in w.xattr_refs.drain() {
            *j.xattr_refs.entry(b).or_insert(0) += n;
        }
        for (b, (_, charge)) in w.xattr_ea.drain() {
            if let Some(c) = charge {
                j.xattr_ea.entry(b).or_insert(c.inodes);
            }
        }
        absorb(&mut j.ea_refs, &mut w.ea_refs);
        absorb(&mut j.links, &mut w.links);
        j.many_refs.absorb(&mut w.many_refs);
        absorb(&mut j.htree_facts, &mut w.htree);
        absorb(&mut j.htree_dirs, &mut w.htree_dirs);
        j.lost_found = j.lost_found.or(w.lost_found);
        j.quota.absorb(&mut w.quota);
        absorb(&mut j.imagic, &mut w.imagic);
        merged
            .busy
            .push([w.busy_ns[0] as f64 / 1e9, w.busy_ns[1] as f64 / 1e9]);
        merged.timelines.push(std::mem::take(&mut w.timeline));
    }
    for (_, inodes) in j.xattr_ea.drain() {
        j.ea_refs.extend(inodes);
    }
    j.ea_refs.sort_unstable();
    (merged, j)
}

/// Sorts `problems` by [`Problem::sort_key`], stably (problems of one key stay in the
/// order their worker found them), without a second copy of the list: the order is
/// found on indices, then applied in place, cycle by cycle.
fn sort_problems(problems: &mut [Problem]) {
    let mut order: Vec<usize> = (0..problems.len()).collect();
    order.sort_by_key(|&i| problems[i].sort_key());
    // Position k is to hold what is at order[k] now.
    for start in 0..problems.len() {
        let mut cur = start;
        while order[cur] != usize::MAX {
            let src = order[cur];
            order[cur] = usize::MAX;
            if src == start {
                break;
            }
            problems.swap(cur, src);
            cur = src;
        }
    }
}

/// Moves `src`'s items to the end of `dst`, leaving `src` without its allocation: the
/// first taken whole (no copy), the others appended and freed at once, so that joining
/// never holds two copies of the workers' lists.
fn absorb<T>(dst: &mut Vec<T>, src: &mut Vec<T>) {
    if dst.is_empty() {
        std::mem::swap(dst, src);
    } else {
        dst.reserve_exact(src.len());
        dst.append(src);
    }
    *src = Vec::new();
}

/// Runs passes 3, 4 and 5 on the joined results, reporting into `late`; returns pass
/// 5's found summaries.
fn passes_3_to_5(ctx: &Ctx, late: &mut Worker, j: &mut Joined, phases: &mut Phases) -> Found {
    let t4 = Instant::now();
    pass3::run(
        ctx.geo,
        ctx.shared,
        late,
        std::mem::take(&mut j.dotdots),
        std::mem::take(&mut j.parents),
        j.lost_found,
    );
    phases.push(("pass 3", t4.elapsed().as_secs_f64()));
    let t5 = Instant::now();
    // Inodes no directory names by design: the orphan file, quota files, the journal,
    // imagic inodes (AFS's, where the feature says so).
    let sbr = ctx.fs.superblock();
    let mut special = std::mem::take(&mut j.imagic);
    special.extend([
        sbr.s_orphan_file_inum(),
        sbr.s_usr_quota_inum(),
        sbr.s_grp_quota_inum(),
        sbr.s_prj_quota_inum(),
        sbr.s_journal_inum(),
    ]);
    special.sort_unstable();
    j.links.sort_unstable();
    let fixed = std::mem::take(&mut j.fixed_blocks);
    let many_refs = std::mem::take(&mut j.many_refs).into_sorted();
    pass4::run(
        ctx.fs,
        ctx.geo,
        ctx.shared,
        late,
        &special,
        (&j.links, &fixed, &many_refs, &j.ea_refs),
    );
    phases.push(("pass 4", t5.elapsed().as_secs_f64()));
    let t6 = Instant::now();
    let found = pass5::run(ctx, late);
    phases.push(("pass 5", t6.elapsed().as_secs_f64()));
    found
}

#[cfg(test)]
mod tests {
    use super::sort_problems;
    use crate::problem::{Code, Problem};

    #[test]
    fn problems_sort_stably_in_place() {
        // Inodes in a scrambled order, two problems per inode told apart by detail.
        let inos: Vec<u32> = (0..200u32).map(|i| (i * 37) % 101).collect();
        let mut ps: Vec<Problem> = inos
            .iter()
            .enumerate()
            .map(|(k, &i)| Problem::new(Code::BadRefCount, k.to_string()).with_ino(i))
            .collect();
        let mut want = ps.clone();
        want.sort_by_key(Problem::sort_key);
        sort_problems(&mut ps);
        assert_eq!(ps, want);
    }
}
