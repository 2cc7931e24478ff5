//! The first step of a check: refuse what e2fsck -n cannot go on from, run pass 0 (the
//! superblock, the descriptors, the bad-blocks list) and cut the used inode tables into
//! the pass-1 work units the pipeline's workers take.

use crate::badblocks::{self, BadBlocks};
use crate::ctx::Ctx;
use crate::problem::{Code, Problem};
use crate::sched::{self, Queues};
use crate::state::Shared;
use crate::{pass0, pass1, Options};
use usfs_ext4::format::geometry::Geometry;
use usfs_ext4::{Ext4, OpenIssue};

/// What the check runs on after pass 0: the work queues (holding the pass-1 chunks) and
/// the bad-blocks list's verdict.
pub(crate) struct Plan {
    /// The work queues, filled with the pass-1 chunks.
    pub(crate) queues: Queues,
    /// The inodes the bad-blocks list makes unreadable.
    pub(crate) bad: BadBlocks,
}

/// Fails on a superblock whose checksum does not match: e2fsck -n cannot go on from it
/// (exit 8).
pub(crate) fn refuse_failed_superblock(issues: &[OpenIssue]) -> usfs_fs::Result<()> {
    if let Some(OpenIssue::SuperblockChecksum { stored, computed }) = issues
        .iter()
        .find(|i| matches!(i, OpenIssue::SuperblockChecksum { .. }))
    {
        return Err(usfs_fs::Error::corrupt(
            usfs_fs::Structure::Superblock,
            format!(
                "superblock checksum {stored:#010x} does not match contents ({computed:#010x})"
            ),
        ));
    }
    Ok(())
}

impl Plan {
    /// Runs pass 0 and the bad-blocks check (their problems go to `problems`), plans the
    /// pass-1 chunks and starts reading the first of them ahead.
    pub(crate) fn new(
        fs: &Ext4,
        geo: &Geometry,
        shared: &Shared,
        opts: &Options,
        problems: &mut Vec<Problem>,
    ) -> Plan {
        let threads = opts.threads.max(1);
        let queues = Queues::new(Vec::new(), threads);
        let no_bad = BadBlocks::default();
        let plan_ctx = Ctx {
            fs,
            geo,
            shared,
            queues: &queues,
            bad: &no_bad,
        };
        problems.extend(pass0::check(&plan_ctx));
        if problems.iter().any(|p| p.code == Code::GroupDescBackup) {
            // e2fsck reads the file system by the sound backup descriptors then: no
            // bitmap of theirs is missing, none is placed anew. Not e2fsck -p: it goes
            // on with the primary ones, whose problems were reported too.
            let dropped = match opts.preen {
                true => Code::GroupDescBackup,
                false => Code::GroupMetadataMissing,
            };
            problems.retain(|p| p.code != dropped);
        }
        problems.extend(crate::sbfields::check(&plan_ctx, opts.repairing));
        let bad = badblocks::check(&plan_ctx, problems);
        let chunks = sched::plan_chunks(&plan_ctx, opts.chunk_inodes.max(1));
        for c in chunks.iter().take(sched::CHUNKS_AHEAD) {
            pass1::readahead_chunk(&plan_ctx, c);
        }
        Plan {
            queues: Queues::new(chunks, threads),
            bad,
        }
    }
}
