//! The htree certification at the end of pass 2, as e2fsck does it: pass 2 records what
//! each block of an indexed directory holds ([`HtreeFact`]: a leaf's range of name hashes,
//! a dx node's children), in whatever order and thread the blocks came; afterwards the
//! facts of each directory are put together, and every block must be referenced exactly
//! once, sit at the depth the root promises, and hold only hashes inside the range its
//! parent's entry gives it.

use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use std::collections::BTreeMap;
use usfs_ext4::format::dx_hash::HashVersion;
use usfs_ext4::format::features::incompat;
use usfs_ext4::walk::dx;

/// `s_flags` bit: the directory hash treats bytes as unsigned.
const FLAG_UNSIGNED_HASH: u32 = 0x2;
/// dx entries keep the child block in the low 28 bits.
const DX_BLOCK_MASK: u32 = 0x0fff_ffff;
/// The upper bound of the last child's range.
const LAST_MAX_HASH: u32 = 0xffff_fffe;

/// What pass 2 learnt about one block of an indexed directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HtreeFact {
    /// A leaf and the smallest and largest hash of its entries (`min > max`: none).
    Leaf {
        /// The directory.
        dir: u32,
        /// Logical block.
        lblk: u32,
        /// Smallest hash.
        min: u32,
        /// Largest hash.
        max: u32,
    },
    /// A dx node whose header passed its checks: (hash with the collision bit cleared,
    /// child block) per entry, entry 0 with hash 0. Block 0 is the root; `depth` is its
    /// indirect_levels + 1 (the leaves' depth).
    Node {
        /// The directory.
        dir: u32,
        /// Logical block.
        lblk: u32,
        /// The tree's depth (root only, else 0).
        depth: u8,
        /// The entries.
        children: Vec<(u32, u32)>,
    },
}

impl HtreeFact {
    fn key(&self) -> (u32, u32) {
        match self {
            HtreeFact::Leaf { dir, lblk, .. } | HtreeFact::Node { dir, lblk, .. } => (*dir, *lblk),
        }
    }
}

/// The hash version an indexed directory's names use, read from its root block at
/// `pblk` (None when unreadable or its root info fails the dx walker's checks, which
/// pass 2 reports and which leaves nothing to certify; None for siphash too: its leaves
/// are then not hashed).
pub(crate) fn root_hash_version(ctx: &Ctx, pblk: u64, buf: &mut [u8]) -> Option<HashVersion> {
    if !ctx.valid_block(pblk) || ctx.read_block(pblk, buf).is_err() {
        return None;
    }
    let large_dir = ctx.geo.features.has_incompat(incompat::LARGEDIR);
    let info = dx::root_info(buf, large_dir).ok()?;
    let unsigned = ctx.fs.superblock().s_flags() & FLAG_UNSIGNED_HASH != 0;
    Some(info.version())
        .filter(|v| *v != HashVersion::Siphash)
        .map(|v| v.with_unsigned_flag(unsigned))
}

/// e2fsck's record of one block during the certification.
#[derive(Clone, Copy, Debug, Default)]
struct Block {
    node: bool,
    leaf: bool,
    min: u32,
    max: u32,
    node_min: u32,
    node_max: u32,
    first: bool,
    last: bool,
    referenced: bool,
    dup: bool,
    parent: u32,
}

/// Certifies every indexed directory: `dirs` are (directory, blocks it maps), `facts`
/// what pass 2 recorded (any order).
pub(crate) fn check(dirs: &mut [(u32, u32)], facts: &mut [HtreeFact], w: &mut Worker) {
    dirs.sort_unstable();
    facts.sort_unstable_by_key(HtreeFact::key);
    let mut rest: &[HtreeFact] = facts;
    for &(dir, nblocks) in dirs.iter() {
        let start = rest.partition_point(|f| f.key().0 < dir);
        let end = start + rest[start..].partition_point(|f| f.key().0 == dir);
        check_dir(dir, nblocks, &rest[start..end], w);
        rest = &rest[end..];
    }
}

fn check_dir(dir: u32, nblocks: u32, facts: &[HtreeFact], w: &mut Worker) {
    // A root that failed its checks was reported already; nothing to certify against.
    let depth = match facts.first() {
        Some(HtreeFact::Node { lblk: 0, depth, .. }) => *depth as u32,
        _ => return,
    };
    let mut blocks: BTreeMap<u32, Block> = BTreeMap::new();
    for f in facts {
        match f {
            HtreeFact::Leaf { lblk, min, max, .. } => {
                let b = blocks.entry(*lblk).or_default();
                (b.leaf, b.min, b.max) = (true, *min, *max);
            }
            HtreeFact::Node { lblk, children, .. } => {
                let b = blocks.entry(*lblk).or_default();
                b.node = true;
                b.min = children.iter().map(|c| c.0).min().unwrap_or(u32::MAX);
                b.max = children.iter().map(|c| c.0).max().unwrap_or(0);
            }
        }
    }
    let bad = |w: &mut Worker, what: String| {
        w.report(Problem::new(Code::HtreeBad, format!("{dir}: {what}")).with_ino(dir));
    };
    // The root references itself.
    let root = blocks.entry(0).or_default();
    (root.referenced, root.first, root.last) = (true, true, true);
    for f in facts {
        let HtreeFact::Node { lblk, children, .. } = f else {
            continue;
        };
        for (i, &(hash, child)) in children.iter().enumerate() {
            let child = child & DX_BLOCK_MASK;
            if child >= nblocks {
                bad(w, format!("block #{lblk}: bad block number {child}"));
                continue;
            }
            let b = blocks.entry(child).or_default();
            if b.referenced {
                b.dup = true;
            } else {
                (b.referenced, b.parent) = (true, *lblk);
            }
            b.node_min = hash;
            match children.get(i + 1) {
                Some(next) => b.node_max = next.0,
                None => (b.node_max, b.last) = (LAST_MAX_HASH, true),
            }
            b.first |= i == 0;
        }
    }
    // A node's range is that of the leaves at its ends (then, for three levels, that of
    // the nodes at the ends of its parent).
    for leaves in [true, false] {
        let ends: Vec<(u32, Block)> = blocks
            .iter()
            .filter(|(l, b)| {
                **l != 0 && b.leaf == leaves && b.node != leaves && (b.first || b.last)
            })
            .map(|(l, b)| (*l, *b))
            .collect();
        for (_, b) in ends {
            if let Some(p) = blocks.get_mut(&b.parent) {
                if b.first {
                    p.min = b.min;
                }
                if b.last {
                    p.max = b.max;
                }
            }
        }
    }
    for (&lblk, b) in &blocks {
        if !b.first && b.min < b.node_min {
            bad(w, format!("block #{lblk} has bad min hash"));
        }
        if b.leaf && !b.node {
            let mut d = 0;
            let mut at = b;
            while d <= 8 {
                if at.parent == 0 {
                    d += 1;
                    break;
                }
                d += 1;
                match blocks.get(&at.parent) {
                    Some(p) => at = p,
                    None => break,
                }
            }
            if d != depth {
                bad(w, format!("block #{lblk} has invalid depth ({depth})"));
            }
        }
        if lblk != 0 && b.max > b.node_max {
            bad(w, format!("block #{lblk} has bad max hash"));
        }
        if !b.referenced {
            bad(w, format!("block #{lblk} not referenced"));
        } else if b.dup {
            bad(w, format!("block #{lblk} referenced twice"));
        }
    }
}
