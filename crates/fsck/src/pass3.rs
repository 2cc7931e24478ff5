//! Pass 3: directory connectivity. Every directory must be reachable from the root
//! through entries, its `..` must name the directory holding it, no directory may have
//! two parents or sit in a loop, and /lost+found must exist. Memory stays proportional to
//! the directories: the pair lists read in order from the workers' chunks, one sorted
//! list of parents and a state byte for each entry of it, no hash maps.

use crate::chunked::{Chunked, Sorted};
use crate::ctx::{SubdirEntry, Worker};
use crate::problem::{Code, Problem};
use crate::state::{InodeKind, Shared};
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::format::inode::ROOT_INO;
use usfs_fs::FileType;

/// The index of `key` in a list of pairs sorted by their first element.
fn find(pairs: &[(u32, u32)], key: u32) -> Option<usize> {
    pairs.binary_search_by_key(&key, |p| p.0).ok()
}

/// The `..` entries, read in ascending order of their directories as pass 3 asks for
/// them.
struct DotDots(std::iter::Peekable<Sorted<(u32, u32), (u32, u32)>>);

impl DotDots {
    /// The `..` of directory `ino`, asked for in ascending order of `ino`.
    fn of(&mut self, ino: u32) -> Option<u32> {
        while self.0.next_if(|&(d, _)| d < ino).is_some() {}
        self.0.peek().filter(|&&(d, _)| d == ino).map(|&(_, p)| p)
    }
}

/// Runs pass 3 on the merged `..` and parent lists.
pub(crate) fn run(
    geo: &Geometry,
    shared: &Shared,
    w: &mut Worker,
    dotdots: Chunked<(u32, u32)>,
    parents: Chunked<SubdirEntry>,
    lost_found: Option<u32>,
) {
    if shared.kind(ROOT_INO) != InodeKind::Used(FileType::Directory) {
        w.report(Problem::new(Code::NoRoot, ""));
        return;
    }
    let chosen = choose_parents(w, parents);
    let mut dotdots = DotDots(dotdots.into_sorted_by_key(|&d| d).peekable());
    walk_up(geo, shared, w, &chosen, &mut dotdots);
    match lost_found {
        None => w.report(Problem::new(Code::NoLostFound, "")),
        Some(l) if shared.kind(l) != InodeKind::Used(FileType::Directory) => {
            w.report(Problem::new(Code::LostFoundNotDir, format!("ino={l}")).with_ino(l));
        }
        Some(l) if shared.policies.of(l).is_some() => {
            w.report(Problem::new(Code::LostFoundEncrypted, "").with_ino(l));
        }
        Some(_) => {}
    }
}

/// (directory, its parent) sorted, from the entries naming directories: several may
/// name one directory: the first in e2fsck's pass-2 order makes the parent; every later
/// one, and one naming the directory holding it (e2fsck's "link to '.'"), is a hard link
/// to a directory.
fn choose_parents(w: &mut Worker, parents: Chunked<SubdirEntry>) -> Vec<(u32, u32)> {
    let mut chosen: Vec<(u32, u32)> = Vec::with_capacity(parents.len());
    let mut sorted = parents.into_sorted_by_key(|&e| e).peekable();
    let mut group = Vec::new();
    while let Some(first) = sorted.next() {
        group.clear();
        group.push(first);
        while let Some(e) = sorted.next_if(|e| e.child == first.child) {
            // (A block the checker visits twice gives the same entry twice.)
            if group.last() != Some(&e) {
                group.push(e);
            }
        }
        let child = first.child;
        let pick = group.iter().find(|e| e.dir != child).map(|e| e.dir);
        let mut picked = false;
        for &e in &group {
            if e.dir != child && Some(e.dir) == pick && !picked {
                picked = true;
                continue;
            }
            let already = pick.unwrap_or(child);
            w.report(
                Problem::new(
                    Code::DirLinkToDir,
                    format!(
                        "in directory inode {} ({child}), already in {already}",
                        e.dir
                    ),
                )
                .with_ino(e.dir)
                .at_entry(e.at),
            );
        }
        if let Some(p) = pick {
            chosen.push((child, p));
        }
    }
    chosen
}

/// Every directory but the root must reach it through the chosen parents, and its `..`
/// must name its parent.
fn walk_up(
    geo: &Geometry,
    shared: &Shared,
    w: &mut Worker,
    chosen: &[(u32, u32)],
    dotdots: &mut DotDots,
) {
    // Per directory of `chosen`: 0 unknown, 1 on the current path, 2 reaches the root,
    // 3 does not.
    let mut state = vec![0u8; chosen.len()];
    let mut path = Vec::new();
    for ino in 1..=geo.inodes_count {
        if shared.kind(ino) != InodeKind::Used(FileType::Directory) || ino == ROOT_INO {
            continue;
        }
        let Some(at) = find(chosen, ino) else {
            let was = dotdots.of(ino).unwrap_or(0);
            w.report(
                Problem::new(Code::UnconnectedDir, format!("{ino} (was in {was})")).with_ino(ino),
            );
            continue;
        };
        let p = chosen[at].1;
        let dd = dotdots.of(ino).unwrap_or(0);
        if dd != p {
            w.report(
                Problem::new(
                    Code::BadDotDot,
                    format!("directory inode {ino} is {dd}, should be {p}"),
                )
                .with_ino(ino)
                .values(dd as u64, p as u64),
            );
        }
        // Walk up until a directory whose fate is known, or a loop.
        path.clear();
        let mut cur = at;
        let reaches = loop {
            match state[cur] {
                2 => break true,
                3 => break false,
                1 => {
                    w.report(
                        Problem::new(Code::UnconnectedDir, format!("{ino} (in a directory loop)"))
                            .with_ino(ino),
                    );
                    break false;
                }
                _ => {}
            }
            state[cur] = 1;
            path.push(cur);
            let up = chosen[cur].1;
            if up == ROOT_INO {
                break true;
            }
            // (A directory no entry names, or no directory: the walk ends unconnected.)
            match find(chosen, up) {
                Some(i) => cur = i,
                None => break false,
            }
        };
        for &d in &path {
            state[d] = if reaches { 2 } else { 3 };
        }
    }
}
