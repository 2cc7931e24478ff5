//! Pass 3: directory connectivity. Every directory must be reachable from the root
//! through entries, its `..` must name the directory holding it, no directory may have
//! two parents or sit in a loop, and /lost+found must exist.

use crate::ctx::Worker;
use crate::problem::{Code, Problem};
use crate::state::{InodeKind, Shared};
use std::collections::HashMap;
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::format::inode::ROOT_INO;
use usfs_fs::FileType;

/// Runs pass 3 on the merged `..` and parent lists.
pub fn run(
    geo: &Geometry,
    shared: &Shared,
    w: &mut Worker,
    dotdots: &[(u32, u32)],
    parents: &[(u32, u32)],
    lost_found: Option<u32>,
) {
    if shared.kind(ROOT_INO) != InodeKind::Used(FileType::Directory) {
        w.report(Problem::new(Code::NoRoot, ""));
        return;
    }
    let dotdot: HashMap<u32, u32> = dotdots.iter().copied().collect();
    let mut parent: HashMap<u32, u32> = HashMap::with_capacity(parents.len());
    for &(child, p) in parents {
        if let Some(&first) = parent.get(&child) {
            if first != p || child != ROOT_INO {
                w.report(
                    Problem::new(
                        Code::DirLinkToDir,
                        format!("in directory inode {p} ({child}), already in {first}"),
                    )
                    .ino(p),
                );
            }
        } else {
            parent.insert(child, p);
        }
    }
    // 0 unknown, 1 on the current path, 2 reaches the root.
    let mut state: HashMap<u32, u8> = HashMap::with_capacity(parent.len());
    state.insert(ROOT_INO, 2);
    for ino in 1..=geo.inodes_count {
        if shared.kind(ino) != InodeKind::Used(FileType::Directory) || ino == ROOT_INO {
            continue;
        }
        let Some(&p) = parent.get(&ino) else {
            let was = dotdot.get(&ino).copied().unwrap_or(0);
            w.report(Problem::new(Code::UnconnectedDir, format!("{ino} (was in {was})")).ino(ino));
            continue;
        };
        let dd = dotdot.get(&ino).copied().unwrap_or(0);
        if dd != p {
            w.report(
                Problem::new(
                    Code::BadDotDot,
                    format!("directory inode {ino} is {dd}, should be {p}"),
                )
                .ino(ino),
            );
        }
        // Walk up until a directory known to reach the root, or a loop.
        let mut path = Vec::new();
        let mut cur = ino;
        let verdict = loop {
            match state.get(&cur).copied().unwrap_or(0) {
                2 => break 2,
                1 => break 3,
                _ => {}
            }
            state.insert(cur, 1);
            path.push(cur);
            match parent.get(&cur) {
                Some(&p) => cur = p,
                None => break 4,
            }
        };
        let fin = if verdict == 2 { 2 } else { 0 };
        if verdict == 3 {
            w.report(
                Problem::new(Code::UnconnectedDir, format!("{ino} (in a directory loop)")).ino(ino),
            );
        }
        for d in path {
            state.insert(d, if fin == 2 { 2 } else { 5 });
        }
    }
    match lost_found {
        None => w.report(Problem::new(Code::NoLostFound, "")),
        Some(l) if shared.kind(l) != InodeKind::Used(FileType::Directory) => {
            w.report(Problem::new(Code::LostFoundNotDir, format!("ino={l}")).ino(l));
        }
        Some(_) => {}
    }
}
