//! Quota usage (e2fsck's quota context): pass 1 charges each inode's blocks and the inode
//! itself to its user, group and project; after pass 5 each quota file the superblock
//! names is read and compared with what was counted (e2fsck's
//! `quota_compare_and_update`). A file whose usage differs, that lacks an id, or that
//! cannot be read is a problem whose fix writes the file anew: the counted usage, the
//! limits and grace periods the file had.

use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use std::collections::{BTreeMap, HashMap};
use usfs_ext4::format::features::{incompat, ro_compat};
use usfs_ext4::format::inode::{flags, GOOD_OLD_INODE_SIZE};
use usfs_ext4::format::quota::{Dquot, QuotaFile, DEFAULT_GRACE};

/// The names e2fsck gives the quota types in messages.
const TYPE_NAMES: [&str; 3] = ["user", "group", "project"];

/// Space (bytes) and inodes charged to one id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Charge {
    /// Bytes.
    space: u64,
    /// Inodes.
    inodes: u64,
}

/// Usage counted per quota type (user, group, project): id -> charge.
#[derive(Debug, Default)]
pub(crate) struct Usage {
    /// Per type.
    ids: [HashMap<u32, Charge>; 3],
}

impl Usage {
    /// Adds `other`'s counts to these.
    pub(crate) fn absorb(&mut self, other: &mut Usage) {
        for (mine, theirs) in self.ids.iter_mut().zip(&mut other.ids) {
            for (id, c) in theirs.drain() {
                let m = mine.entry(id).or_default();
                m.space += c.space;
                m.inodes += c.inodes;
            }
        }
    }
}

/// A quota file to write anew: what a repair needs of the problem's check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaFix {
    /// The quota type (0 user, 1 group, 2 project).
    pub qtype: usize,
    /// The quota inode.
    pub ino: u32,
    /// Grace periods (blocks, inodes): the file's, or the default for an unreadable one.
    pub grace: (u32, u32),
    /// Every id, by id: the usage counted, the limits and deadlines the file had.
    pub dquots: Vec<Dquot>,
}

/// The superblock's quota inode numbers (user, group, project; 0 = none).
pub(crate) fn inodes(ctx: &Ctx) -> [u32; 3] {
    let sb = ctx.fs.superblock();
    [
        sb.s_usr_quota_inum(),
        sb.s_grp_quota_inum(),
        sb.s_prj_quota_inum(),
    ]
}

/// Is `ino` impossible as a quota inode (e2fsck's rule: a reserved inode other than 3
/// and 4, or past the inode count)?
pub(crate) fn invalid_inode(ctx: &Ctx, ino: u32) -> bool {
    ino != 0 && ([1, 2, 5, 6, 7, 8, 9, 10].contains(&ino) || ino > ctx.geo.inodes_count)
}

/// The quota types counted: those with a valid inode, with the quota feature (project
/// quotas only where inodes have room for a project id).
/// (Not with ea_inode yet: e2fsck charges an owner for the EA inodes its xattr block
/// names, which this count does not see, and a rewrite would set usage too low.)
fn counted(ctx: &Ctx) -> [bool; 3] {
    let on = ctx.geo.features.has_ro_compat(ro_compat::QUOTA)
        && !ctx.geo.features.has_incompat(incompat::EA_INODE);
    let large = ctx.geo.inode_size as usize > GOOD_OLD_INODE_SIZE;
    let inos = inodes(ctx);
    std::array::from_fn(|t| on && inos[t] != 0 && !invalid_inode(ctx, inos[t]) && (t < 2 || large))
}

/// Charges inode `ino` (its record in `w.inode`), found in use by pass 1 with `blocks`
/// blocks and `ea_inodes` EA inodes holding its xattr values, to its ids, as e2fsck's
/// pass 1 does: the root and ordinary inodes, not the project quota file, the orphan
/// file or EA inodes (charged to their owners).
pub(crate) fn charge(ctx: &Ctx, w: &mut Worker, ino: u32, blocks: u64, ea_inodes: u64) {
    if !ctx.geo.features.has_ro_compat(ro_compat::QUOTA) {
        return;
    }
    let sb = ctx.fs.superblock();
    let ordinary = ino == 2 || ino >= ctx.geo.first_ino;
    if !ordinary
        || ino == sb.s_prj_quota_inum()
        || ino == sb.s_orphan_file_inum()
        || w.inode.i_flags() & flags::EA_INODE != 0
    {
        return;
    }
    // (`blocks` are clusters with bigalloc.)
    let space = (blocks << ctx.geo.cluster_shift) * ctx.geo.block_size as u64;
    let ids = w.inode.quota_ids();
    for (t, on) in counted(ctx).into_iter().enumerate() {
        if on {
            let c = w.quota.ids[t].entry(ids[t]).or_default();
            c.space += space;
            c.inodes += 1 + ea_inodes;
        }
    }
}

/// Compares each counted type's quota file with `usage`: a problem (and the file to
/// write) per file that differs.
pub(crate) fn check(ctx: &Ctx, usage: &Usage, w: &mut Worker) -> Vec<QuotaFix> {
    let mut fixes = Vec::new();
    let inos = inodes(ctx);
    for (t, on) in counted(ctx).into_iter().enumerate() {
        if !on {
            continue;
        }
        let ino = inos[t];
        let file = read_file(ctx, ino, t);
        let (lines, fix) = compare(t, ino, &usage.ids[t], file);
        if let Some(fix) = fix {
            let mut text = lines.join("\n");
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&format!("Update quota info for quota type {t}"));
            w.report(Problem::new(Code::QuotaUsage, text).values(t as u64, t as u64));
            fixes.push(fix);
        }
    }
    fixes
}

/// The quota file in inode `ino` of type `t`, or why it cannot be read.
fn read_file(ctx: &Ctx, ino: u32, t: usize) -> Result<QuotaFile, String> {
    ctx.fs.read_quota_file(ino, t).map_err(|why| {
        format!(
            "Quota inode {ino} ({} quota) corrupted: {why}",
            TYPE_NAMES[t]
        )
    })
}

/// Compares `file` (type `t`, inode `ino`) with the usage counted: e2fsck's warnings and,
/// when they differ, the file to write.
fn compare(
    t: usize,
    ino: u32,
    counted: &HashMap<u32, Charge>,
    file: Result<QuotaFile, String>,
) -> (Vec<String>, Option<QuotaFix>) {
    let mut out: BTreeMap<u32, Dquot> = counted
        .iter()
        .map(|(&id, c)| {
            let q = Dquot {
                id,
                curspace: c.space,
                curinodes: c.inodes,
                ..Dquot::default()
            };
            (id, q)
        })
        .collect();
    let mut lines = Vec::new();
    let (grace, on_disk) = match file {
        Ok(f) => ((f.bgrace, f.igrace), f.dquots),
        Err(why) => {
            lines.push(why);
            ((DEFAULT_GRACE, DEFAULT_GRACE), Vec::new())
        }
    };
    let mut seen = std::collections::HashSet::new();
    for d in &on_disk {
        seen.insert(d.id);
        let q = out.entry(d.id).or_insert(Dquot {
            id: d.id,
            ..Dquot::default()
        });
        if (q.curspace, q.curinodes) != (d.curspace, d.curinodes) {
            lines.push(format!(
                "[QUOTA WARNING] Usage inconsistent for ID {}:actual ({}, {}) != expected ({}, {})",
                d.id, q.curspace, q.curinodes, d.curspace, d.curinodes
            ));
        }
        (q.ihardlimit, q.isoftlimit, q.bhardlimit, q.bsoftlimit) =
            (d.ihardlimit, d.isoftlimit, d.bhardlimit, d.bsoftlimit);
        (q.btime, q.itime) = (d.btime, d.itime);
    }
    for id in out.keys().filter(|id| !seen.contains(id)) {
        lines.push(format!("[QUOTA WARNING] Missing quota entry ID {id}"));
    }
    if lines.is_empty() {
        return (lines, None);
    }
    let fix = QuotaFix {
        qtype: t,
        ino,
        grace,
        dquots: out.into_values().collect(),
    };
    (lines, Some(fix))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dquots: Vec<Dquot>) -> Result<QuotaFile, String> {
        Ok(QuotaFile {
            bgrace: 5,
            igrace: 6,
            dquots,
        })
    }

    #[test]
    fn differences_are_warned_and_limits_kept() {
        let counted = HashMap::from([
            (
                0,
                Charge {
                    space: 13312,
                    inodes: 2,
                },
            ),
            (
                100,
                Charge {
                    space: 2048,
                    inodes: 2,
                },
            ),
        ]);
        let disk = vec![
            Dquot {
                id: 0,
                curspace: 14336,
                curinodes: 3,
                ..Dquot::default()
            },
            Dquot {
                id: 100,
                curspace: 1024,
                curinodes: 1,
                bhardlimit: 9,
                ..Dquot::default()
            },
        ];
        let (lines, fix) = compare(0, 3, &counted, file(disk));
        assert_eq!(
            lines,
            [
                "[QUOTA WARNING] Usage inconsistent for ID 0:actual (13312, 2) != expected (14336, 3)",
                "[QUOTA WARNING] Usage inconsistent for ID 100:actual (2048, 2) != expected (1024, 1)",
            ]
        );
        let fix = fix.unwrap();
        assert_eq!(fix.grace, (5, 6));
        assert_eq!(fix.dquots[1].bhardlimit, 9);
        assert_eq!((fix.dquots[1].curspace, fix.dquots[1].curinodes), (2048, 2));
    }

    #[test]
    fn equal_usage_is_clean_and_missing_ids_are_not() {
        let counted = HashMap::from([(
            7,
            Charge {
                space: 4096,
                inodes: 1,
            },
        )]);
        let disk = vec![
            Dquot {
                id: 7,
                curspace: 4096,
                curinodes: 1,
                ..Dquot::default()
            },
            Dquot {
                id: 8,
                bhardlimit: 100,
                ..Dquot::default()
            },
        ];
        assert_eq!(compare(0, 3, &counted, file(disk)), (Vec::new(), None));
        let (lines, fix) = compare(0, 3, &counted, file(Vec::new()));
        assert_eq!(lines, ["[QUOTA WARNING] Missing quota entry ID 7"]);
        assert_eq!(fix.unwrap().dquots.len(), 1);
        let (lines, fix) = compare(1, 4, &counted, Err("bad magic".into()));
        assert_eq!(lines[0], "bad magic");
        assert_eq!(fix.unwrap().grace, (DEFAULT_GRACE, DEFAULT_GRACE));
    }
}
