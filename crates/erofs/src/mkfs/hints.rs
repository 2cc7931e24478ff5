//! `--compress-hints`: per file, the first rule whose POSIX extended expression matches
//! its path relative to the source root (mkfs.erofs's z_erofs_apply_compress_hints, on
//! erofs_fspath) gives its largest pcluster (0: stored uncompressed) and its algorithm
//! (a place in the `-z` list); a file no rule matches takes `-C` and the first.

use super::tree::Tree;
use super::Options;
use usfs_fs::Result;
use usfs_source::PosixRegex;

/// The compiled rules: (expression, pcluster bytes, algorithm).
pub(super) struct Hints {
    rules: Vec<(PosixRegex, u32, usize)>,
    /// Per node: its path relative to the root (computed only with rules).
    paths: Vec<Vec<u8>>,
}

impl Hints {
    /// The rules of `opts` for the nodes of `tree`.
    pub(super) fn new(opts: &Options, tree: &Tree<'_>) -> Result<Hints> {
        let rules = (opts.compress_hints.iter())
            .map(|h| Ok((PosixRegex::new(&h.pattern)?, h.pcluster_bytes, h.alg)))
            .collect::<Result<Vec<_>>>()?;
        let paths = if rules.is_empty() {
            Vec::new()
        } else {
            rel_paths(tree)
        };
        Ok(Hints { rules, paths })
    }

    /// (largest pcluster in bytes, algorithm) of node `i`, or None when it is stored
    /// uncompressed.
    pub(super) fn of(&self, i: usize, opts: &Options) -> Option<(u32, usize)> {
        let hit = (self.rules.iter())
            .find(|r| r.0.is_match(&self.paths[i]))
            .map(|r| (r.1, r.2));
        match hit {
            None => Some((opts.pcluster_bytes, 0)),
            Some((0, _)) => None,
            some => some,
        }
    }
}

/// Every node's path relative to the root (`a/b`; the root's is empty), by the name
/// its parent gives it (a hard link's first).
fn rel_paths(tree: &Tree<'_>) -> Vec<Vec<u8>> {
    let mut paths = vec![Vec::new(); tree.nodes.len()];
    // Breadth-first order: a parent's path is made before its children's.
    for (d, n) in tree.nodes.iter().enumerate() {
        for (name, k) in &n.children {
            if *k == d || !paths[*k].is_empty() {
                continue;
            }
            let mut p = paths[d].clone();
            if !p.is_empty() {
                p.push(b'/');
            }
            p.extend_from_slice(name);
            paths[*k] = p;
        }
    }
    paths
}
