//! Journal replay, as the kernel's fs/jbd2/recovery.c and e2fsprogs 1.47's copy of it in
//! e2fsck/recovery.c: PASS_SCAN finds the end of the valid log (checking commit
//! checksums), PASS_REVOKE collects revoke records, PASS_REPLAY takes the last logged copy
//! of every block not revoked. [`plan_replay`] only reads; [`replay_onto`] writes the plan
//! home and marks the journal empty, as `e2fsck -E journal_only` does.
//!
//! The passes follow recovery.c's control flow step by step, including its quirks (a
//! `break` inside its `switch` goes on scanning; tid 0 as "end not known yet"). Two
//! deliberate differences, for bounded time and memory on garbage: a pass stops after
//! consuming twice the journal's length in blocks (a crafted log of descriptors with no
//! commit could make jbd2 loop forever), and more than 2^22 distinct revoked blocks fail
//! the recovery.

use super::descriptor::{self, flag};
use super::{blocktype, commit, fast_commit, feature, revoke, tid_geq, tid_gt};
use super::{BlockHeader, JournalInfo, JournalMap, JournalSuperblock, Log, JBD2_MAGIC};
use crate::format::checksum::crc32_be;
use crate::format::features::incompat;
use crate::format::superblock::{Superblock, SUPERBLOCK_OFFSET};
use std::collections::{BTreeMap, HashMap};
use usfs_dev::Device;
use usfs_fs::{Error, Result, Structure};

/// Where the contents of a replayed block are: its last unrevoked copy in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoggedBlock {
    /// Journal block holding the copy.
    pub log_block: u32,
    /// The copy was escaped: its first 4 bytes must read as the jbd2 magic.
    pub escaped: bool,
}

/// What a replay does, computed without writing anything.
#[derive(Clone, Debug)]
pub struct ReplayPlan {
    /// The journal superblock as loaded.
    pub info: JournalInfo,
    /// File-system block -> where its final contents are in the log (memory is bounded
    /// by the log's length; the contents are read with [`ReplayPlan::read_block`]).
    pub blocks: BTreeMap<u64, LoggedBlock>,
    /// First transaction of the log (`s_sequence`).
    pub first_tid: u32,
    /// First transaction not replayed (the end of the valid log).
    pub end_tid: u32,
    /// Complete transactions replayed (`end_tid - first_tid`, 0 when the log is empty).
    pub transactions: u32,
    /// `s_sequence` the journal superblock gets after the replay (`end_tid + 1` as jbd2
    /// sets it; unchanged when recovery failed; `s_sequence + 1` for an empty log).
    pub next_sequence: u32,
    /// Tagged copies replayed (a block logged twice counts twice).
    pub replays: u64,
    /// Revoke records read.
    pub revokes: u64,
    /// Copies skipped because revoked.
    pub revoke_hits: u64,
    /// A commit block whose checksum failed (jbd2's j_failed_commit): e2fsck marks the
    /// file system as having errors.
    pub failed_commit: Option<u32>,
    /// Recovery reported an error (checksum of a logged block, unreadable log block, a
    /// transaction with a bad descriptor or revoke checksum): e2fsck replays what it
    /// could, keeps `s_sequence` and marks the file system not clean; the kernel refuses
    /// to mount.
    pub error: Option<String>,
    /// The fast commits that follow the log (transaction `end_tid`), checked and
    /// decoded; applied after the log's blocks (`crate::rw`).
    pub fast_commits: fast_commit::FastCommits,
}

impl ReplayPlan {
    /// The replayed contents of file-system block `blk` (one block), if the plan has it.
    pub fn read_block(
        &self,
        dev: &dyn Device,
        map: &JournalMap,
        blk: u64,
    ) -> Result<Option<Vec<u8>>> {
        let Some(lb) = self.blocks.get(&blk) else {
            return Ok(None);
        };
        let mut buf = vec![0u8; self.info.block_size as usize];
        log(dev, map, &self.info).read(lb.log_block, &mut buf)?;
        if lb.escaped {
            buf[..4].copy_from_slice(&JBD2_MAGIC.to_be_bytes());
        }
        Ok(Some(buf))
    }

    /// True when there is nothing to write home.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

fn log<'a>(dev: &'a dyn Device, map: &'a JournalMap, info: &JournalInfo) -> Log<'a> {
    Log {
        dev,
        map,
        bs: info.block_size as usize,
        total_len: info.total_len,
    }
}

/// Computes the replay of the journal mapped by `map` on `dev` (a file system of
/// `fs_block_size`-byte blocks). Errors: the journal superblock is unusable (corrupt,
/// unknown features, shared), or the fast-commit area holds a transaction to replay
/// (refused: usfs does not replay fast commits). A log that recovery would stop early or
/// fail on gives a plan with [`ReplayPlan::error`] / [`ReplayPlan::failed_commit`].
pub fn plan_replay(dev: &dyn Device, map: &JournalMap, fs_block_size: u32) -> Result<ReplayPlan> {
    let info = super::load_info(dev, map, fs_block_size)?;
    let mut st = Recovery {
        log: log(dev, map, &info),
        j: &info,
        end: 0,
        revoked: HashMap::new(),
        blocks: BTreeMap::new(),
        replays: 0,
        revokes: 0,
        revoke_hits: 0,
        failed_commit: None,
    };
    let mut plan = ReplayPlan {
        info: info.clone(),
        blocks: BTreeMap::new(),
        first_tid: info.sequence,
        end_tid: info.sequence,
        transactions: 0,
        next_sequence: info.sequence.wrapping_add(1),
        replays: 0,
        revokes: 0,
        revoke_hits: 0,
        failed_commit: None,
        error: None,
        fast_commits: Default::default(),
    };
    if info.start == 0 {
        return Ok(plan);
    }
    let mut result = st.pass(Pass::Scan);
    if result.is_ok() {
        match st.scan_fast_commits(dev) {
            Ok(fc) => plan.fast_commits = fc,
            Err(e) => result = Err(e),
        }
    }
    if result.is_ok() {
        result = st.pass(Pass::Revoke);
    }
    if result.is_ok() {
        result = st.pass(Pass::Replay);
    }
    if st.end != 0 || info.sequence == 0 {
        // (A scan that failed before finding the end leaves it unknown: nothing replayed.)
        plan.end_tid = st.end;
        plan.transactions = st.end.wrapping_sub(info.sequence);
    }
    plan.blocks = st.blocks;
    plan.replays = st.replays;
    plan.revokes = st.revokes;
    plan.revoke_hits = st.revoke_hits;
    plan.failed_commit = st.failed_commit;
    match result {
        Ok(()) => plan.next_sequence = st.end.wrapping_add(1),
        Err(e) => {
            plan.next_sequence = info.sequence;
            plan.error = Some(e);
        }
    }
    Ok(plan)
}

/// Distinct revoked blocks a log may name before replay gives up (memory bound; jbd2
/// has none, real logs stay far below: a transaction is limited to a quarter of the log).
const MAX_REVOKED: usize = 1 << 22;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pass {
    Scan,
    Revoke,
    Replay,
}

/// recovery_info plus the revoke table and the replay result.
struct Recovery<'a> {
    log: Log<'a>,
    j: &'a JournalInfo,
    /// info->end_transaction (0: not known yet, as in jbd2).
    end: u32,
    revoked: HashMap<u64, u32>,
    blocks: BTreeMap<u64, LoggedBlock>,
    replays: u64,
    revokes: u64,
    revoke_hits: u64,
    failed_commit: Option<u32>,
}

/// Per-pass state of do_one_pass.
struct PassState {
    next_id: u32,
    next_block: u32,
    crc32_sum: u32,
    need_check_commit_time: bool,
    last_commit_time: u64,
    /// A non-fatal error to report at the end (jbd2's `success`).
    success: Option<String>,
    block_error: bool,
    /// Blocks consumed, against the loop bound.
    consumed: u64,
}

/// How a log block ended its step of the pass.
enum Step {
    /// Go on scanning.
    Next,
    /// End of the valid log (jbd2's `goto done` or a `break` out of the loop).
    Done,
}

impl Recovery<'_> {
    fn pass(&mut self, pass: Pass) -> std::result::Result<(), String> {
        let mut s = PassState {
            next_id: self.j.sequence,
            next_block: self.j.start,
            crc32_sum: !0,
            need_check_commit_time: false,
            last_commit_time: 0,
            success: None,
            block_error: false,
            consumed: 0,
        };
        let bound = 2 * self.j.total_len as u64;
        let mut buf = vec![0u8; self.log.bs];
        loop {
            if pass != Pass::Scan && tid_geq(s.next_id, self.end) {
                break;
            }
            if s.consumed > bound {
                break;
            }
            s.consumed += 1;
            self.log
                .read(s.next_block, &mut buf)
                .map_err(|e| e.to_string())?;
            s.next_block = self.j.next_block(s.next_block);
            let h = BlockHeader::new(&buf[..]).expect("a block");
            if h.h_magic() != JBD2_MAGIC || h.h_sequence() != s.next_id {
                break;
            }
            let step = match h.h_blocktype() {
                blocktype::DESCRIPTOR => self.descriptor(pass, &mut s, &buf)?,
                blocktype::COMMIT => self.commit(pass, &mut s, &buf)?,
                blocktype::REVOKE => self.revoke(pass, &mut s, &buf)?,
                _ => Step::Done,
            };
            if let Step::Done = step {
                break;
            }
        }
        // done:
        if pass == Pass::Scan {
            if self.end == 0 {
                self.end = s.next_id;
            }
        } else if self.end != s.next_id && s.success.is_none() {
            s.success = Some(format!(
                "journal: recovery pass {pass:?} ended at transaction {}, expected {}",
                s.next_id, self.end
            ));
        }
        if let Some(e) = s.success {
            return Err(e);
        }
        if s.block_error {
            return Err("journal: a logged block failed its checksum".into());
        }
        Ok(())
    }

    fn descriptor(
        &mut self,
        pass: Pass,
        s: &mut PassState,
        buf: &[u8],
    ) -> std::result::Result<Step, String> {
        if !descriptor::tail_ok(self.j, buf) {
            if pass != Pass::Scan {
                return Err(format!(
                    "journal: invalid descriptor checksum in transaction {}",
                    s.next_id
                ));
            }
            s.need_check_commit_time = true;
        }
        let tags = descriptor::tags(self.j, buf);
        if pass != Pass::Replay {
            if pass == Pass::Scan
                && self.j.compat & feature::COMPAT_CHECKSUM != 0
                && !s.need_check_commit_time
                && self.end == 0
            {
                // calc_chksums; on a read error jbd2 leaves the switch and scans on.
                s.crc32_sum = crc32_be(s.crc32_sum, buf);
                let mut data = vec![0u8; self.log.bs];
                for _ in &tags {
                    let io = s.next_block;
                    s.next_block = self.j.next_block(s.next_block);
                    s.consumed += 1;
                    if self.log.read(io, &mut data).is_err() {
                        return Ok(Step::Next);
                    }
                    s.crc32_sum = crc32_be(s.crc32_sum, &data);
                }
                return Ok(Step::Next);
            }
            // next_log_block += count_tags(); wrap() (one subtraction, as jbd2 does).
            s.consumed += tags.len() as u64;
            let n = s.next_block.saturating_add(tags.len() as u32);
            s.next_block = if n >= self.j.wrap_last {
                n - (self.j.wrap_last - self.j.first)
            } else {
                n
            };
            return Ok(Step::Next);
        }
        let mut data = vec![0u8; self.log.bs];
        for t in &tags {
            let io = s.next_block;
            s.next_block = self.j.next_block(s.next_block);
            if let Err(e) = self.log.read(io, &mut data) {
                s.success = Some(format!("journal: recovering log block {io}: {e}"));
                continue;
            }
            if self.is_revoked(t.block, s.next_id) {
                self.revoke_hits += 1;
                continue;
            }
            if !descriptor::tag_ok(self.j, t, s.next_id, &data) {
                s.success = Some(format!(
                    "journal: invalid checksum recovering data block {} in log",
                    t.block
                ));
                s.block_error = true;
                continue;
            }
            self.blocks.insert(
                t.block,
                LoggedBlock {
                    log_block: io,
                    escaped: t.flags & flag::ESCAPE != 0,
                },
            );
            self.replays += 1;
        }
        Ok(Step::Next)
    }

    fn commit(
        &mut self,
        pass: Pass,
        s: &mut PassState,
        buf: &[u8],
    ) -> std::result::Result<Step, String> {
        let commit_time = commit::commit_sec(buf);
        if s.need_check_commit_time {
            if commit_time >= s.last_commit_time {
                return Err(format!(
                    "journal: invalid checksum found in transaction {}",
                    s.next_id
                ));
            }
            // ignore_crc_mismatch: likely stale blocks; end the log here.
            return Ok(Step::Done);
        }
        let mut chksum_error = false;
        if pass == Pass::Scan && self.j.compat & feature::COMPAT_CHECKSUM != 0 {
            if self.end != 0 {
                self.failed_commit = Some(self.end);
                return Ok(Step::Next);
            }
            if commit::v1_ok(buf, s.crc32_sum) {
                s.crc32_sum = !0;
            } else {
                chksum_error = true;
            }
        }
        if chksum_error || (pass == Pass::Scan && !commit::csum_ok(self.j, buf)) {
            if commit_time < s.last_commit_time {
                return Ok(Step::Done);
            }
            self.end = s.next_id;
            if !self.j.has_incompat(feature::ASYNC_COMMIT) {
                self.failed_commit = Some(s.next_id);
                return Ok(Step::Next);
            }
        }
        if pass == Pass::Scan {
            s.last_commit_time = commit_time;
        }
        s.next_id = s.next_id.wrapping_add(1);
        Ok(Step::Next)
    }

    fn revoke(
        &mut self,
        pass: Pass,
        s: &mut PassState,
        buf: &[u8],
    ) -> std::result::Result<Step, String> {
        if pass == Pass::Scan && !descriptor::tail_ok(self.j, buf) {
            s.need_check_commit_time = true;
        }
        if pass != Pass::Revoke {
            return Ok(Step::Next);
        }
        let records = revoke::records(self.j, buf).ok_or_else(|| {
            format!(
                "journal: revoke block of transaction {} has r_count past the block",
                s.next_id
            )
        })?;
        for b in records {
            if self.revoked.len() >= MAX_REVOKED && !self.revoked.contains_key(&b) {
                return Err(format!(
                    "journal: more than {MAX_REVOKED} revoked blocks (garbage log?)"
                ));
            }
            let e = self.revoked.entry(b).or_insert(s.next_id);
            if tid_gt(s.next_id, *e) {
                *e = s.next_id;
            }
            self.revokes += 1;
        }
        Ok(Step::Next)
    }

    /// jbd2_journal_test_revoke: a revoke record of a transaction at or after `tid`.
    fn is_revoked(&self, blk: u64, tid: u32) -> bool {
        self.revoked.get(&blk).is_some_and(|&r| !tid_gt(tid, r))
    }

    /// Scans the fast-commit area for fast commits of the transaction after the log
    /// ([`fast_commit::scan`]); the inode size comes from the ext4 superblock on `dev`.
    fn scan_fast_commits(
        &self,
        dev: &dyn Device,
    ) -> std::result::Result<fast_commit::FastCommits, String> {
        let Some(fc) = self.j.fc_first else {
            return Ok(Default::default());
        };
        let mut sb = vec![0u8; 1024];
        dev.read_at(&mut sb, SUPERBLOCK_OFFSET)
            .map_err(|e| format!("fast commit: superblock: {e}"))?;
        let inode_size = Superblock::new(&sb[..]).expect("1024").s_inode_size() as u32;
        let n = self.j.total_len.saturating_sub(fc);
        let bs = self.log.bs;
        fast_commit::scan(
            |i| {
                let mut buf = vec![0u8; bs];
                self.log.read(fc + i, &mut buf).ok().map(|_| buf)
            },
            n,
            self.end,
            inode_size.max(128),
        )
    }
}

/// Writes `plan` home as `e2fsck -E journal_only` does: every replayed block, a flush,
/// then `between` (the fast-commit replay, which needs the log's blocks in place and must
/// finish before the log is marked empty), then [`mark_recovered`]. Returns the number of
/// blocks written home.
pub fn replay_onto_with(
    dev: &dyn Device,
    map: &JournalMap,
    plan: &ReplayPlan,
    between: impl FnOnce() -> Result<()>,
) -> Result<usize> {
    let bs = plan.info.block_size as u64;
    // Nothing is written when a tag names a block past the device (e2fsck would extend
    // an image file there; the kernel fails at the device's end).
    if let Some((&blk, _)) = plan.blocks.range(dev.len() / bs..).next() {
        return Err(Error::corrupt(
            Structure::Journal,
            format!("journal: replayed block {blk} lies past the end of the device"),
        )
        .with_block(blk));
    }
    for &blk in plan.blocks.keys() {
        let data = plan.read_block(dev, map, blk)?.expect("planned");
        dev.write_at(&data, blk * bs)?;
    }
    dev.flush()?;
    between()?;
    mark_recovered(dev, map, plan)?;
    Ok(plan.blocks.len())
}

/// [`replay_onto_with`] for a plan without fast commits to apply (refused otherwise:
/// dropping them would lose changes the kernel made durable).
pub fn replay_onto(dev: &dyn Device, map: &JournalMap, plan: &ReplayPlan) -> Result<usize> {
    if !plan.fast_commits.records.is_empty() {
        return Err(Error::incompatible(
            "fast_commit: this replay does not apply the fast commits it found",
        ));
    }
    replay_onto_with(dev, map, plan, || Ok(()))
}

/// After the replayed blocks are home: the journal superblock marked empty (`s_start` 0,
/// `s_sequence` = `next_sequence`, `s_errno` cleared), a flush, then the ext4 superblock
/// (read back, the replay may have rewritten it) with needs_recovery cleared, `s_state`
/// without VALID after a recovery error and with ERROR_FS after a failed commit, and its
/// checksum updated; a last flush.
pub fn mark_recovered(dev: &dyn Device, map: &JournalMap, plan: &ReplayPlan) -> Result<()> {
    let bs = plan.info.block_size as u64;
    let lg = log(dev, map, &plan.info);
    let mut raw = vec![0u8; bs as usize];
    lg.read(0, &mut raw)?;
    recovered_journal_superblock(&mut raw, plan);
    lg.write(0, &raw)?;
    dev.flush()?;
    let mut sb = vec![0u8; 1024];
    dev.read_at(&mut sb, SUPERBLOCK_OFFSET)?;
    recovered_superblock(&mut sb, plan);
    dev.write_at(&sb, SUPERBLOCK_OFFSET)?;
    dev.flush()?;
    Ok(())
}

/// The journal superblock (journal block 0, `raw`) as a replay of `plan` leaves it:
/// `s_start` 0, `s_sequence` = [`ReplayPlan::next_sequence`], `s_errno` cleared when
/// e2fsck moves it into the file system's state; checksum updated.
pub fn recovered_journal_superblock(raw: &mut [u8], plan: &ReplayPlan) {
    let mut jsb = JournalSuperblock::new(raw).expect("a block");
    jsb.set_s_start(0);
    jsb.set_s_sequence(plan.next_sequence);
    if plan.failed_commit.is_some() || plan.info.errno != 0 {
        // e2fsck sets s_errno = -EINVAL for a failed commit, then moves any s_errno into
        // the ext4 superblock's state (ERROR_FS) and clears it.
        jsb.set_s_errno(0);
    }
    jsb.update_checksum();
}

/// The ext4 superblock (1024 bytes at byte 1024, read after the replayed blocks are in
/// place) as e2fsck leaves it after a replay: needs_recovery cleared; VALID_FS cleared
/// after a recovery error; ERROR_FS set after a failed commit or a journal `s_errno`;
/// checksum updated (metadata_csum).
pub fn recovered_superblock(raw: &mut [u8], plan: &ReplayPlan) {
    let mut sb = Superblock::new(raw).expect("1024 bytes");
    sb.set_s_feature_incompat(sb.s_feature_incompat() & !incompat::RECOVER);
    if plan.error.is_some() {
        sb.set_s_state(sb.s_state() & !1);
    }
    if plan.failed_commit.is_some() || plan.info.errno != 0 {
        sb.set_s_state(sb.s_state() | 2);
    }
    if sb.s_feature_ro_compat() & crate::format::features::ro_compat::METADATA_CSUM != 0 {
        let c = sb.compute_checksum();
        sb.set_s_checksum(c);
    }
}
