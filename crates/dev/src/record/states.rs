//! Crash states: which of the logged writes a crash leaves on the disk, enumerated from a
//! plan (flush points, prefixes of an epoch, seeded random subsets in random order with
//! optional sector tearing) and described so a failure names the state exactly.

use super::{Event, Log, SECTOR};
use std::fmt;
use std::io;
use std::ops::Range;

/// Part of one logged write: bytes `range` of write event `event`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Index of the write in [`Log::events`].
    pub event: usize,
    /// Byte range within that write's payload.
    pub range: Range<u64>,
}

impl Piece {
    /// All of write event `i`.
    pub fn whole(log: &Log, i: usize) -> io::Result<Piece> {
        match log.events().get(i) {
            Some(&Event::Write { len, .. }) => Ok(Piece {
                event: i,
                range: 0..len,
            }),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("log event {i} is not a write"),
            )),
        }
    }
}

/// How a state was chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateKind {
    /// The first `epoch` epochs whole, nothing of the rest: the image at a flush point
    /// (or, past the last flush, with every write applied).
    Epochs,
    /// The first `n` writes of the epoch in log order.
    Prefix {
        /// Writes applied.
        n: usize,
    },
    /// Every write of the epoch in log order except one.
    AllBut {
        /// The write left out (index in [`Log::events`]).
        dropped: usize,
    },
    /// A seeded random subset of the epoch's writes (in random order when the plan
    /// reorders; some may be torn into sectors).
    Subset {
        /// The plan's seed.
        seed: u64,
        /// Which subset of that epoch (0-based).
        index: usize,
        /// Writes chosen (whole or torn).
        chosen: usize,
        /// Writes of the epoch.
        of: usize,
        /// Writes of which only some sectors were applied.
        torn: usize,
    },
}

/// One image a crash could leave: the first `epoch` epochs whole, then `pieces`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashState {
    /// Epochs applied whole (all writes before flush `epoch`).
    pub epoch: usize,
    /// How `pieces` were chosen from epoch `epoch`.
    pub kind: StateKind,
    /// Parts of writes of epoch `epoch` applied after the whole epochs, in this order.
    pub pieces: Vec<Piece>,
}

impl fmt::Display for CrashState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            StateKind::Epochs => write!(
                f,
                "epochs 0..{} whole (flush point {})",
                self.epoch, self.epoch
            ),
            StateKind::Prefix { n } => {
                write!(
                    f,
                    "epochs 0..{} whole + first {n} writes of epoch {}",
                    self.epoch, self.epoch
                )
            }
            StateKind::AllBut { dropped } => write!(
                f,
                "epochs 0..{e} whole + all writes of epoch {e} but event {dropped}",
                e = self.epoch
            ),
            StateKind::Subset {
                seed,
                index,
                chosen,
                of,
                torn,
            } => {
                write!(
                    f,
                    "epochs 0..{e} whole + subset #{index} (seed {seed}) of epoch {e}: {chosen} of {of} writes, {torn} torn; pieces",
                    e = self.epoch
                )?;
                for p in self.pieces.iter().take(24) {
                    write!(f, " {}[{}..{}]", p.event, p.range.start, p.range.end)?;
                }
                if self.pieces.len() > 24 {
                    write!(f, " ...")?;
                }
                Ok(())
            }
        }
    }
}

/// Which epochs get states inside them (prefixes and subsets).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum InEpochs {
    /// Every epoch.
    #[default]
    All,
    /// Only the last epoch (the writes since the last flush, or the last flushed epoch).
    Last,
    /// These epochs.
    Only(Vec<usize>),
}

/// What [`Log::states`] enumerates.
#[derive(Clone, Debug)]
pub struct CrashPlan {
    /// The image at every flush point, and with every write applied.
    pub flush_points: bool,
    /// Prefixes of each selected epoch (strictly between its flush points).
    pub prefixes: bool,
    /// Most prefixes per epoch, evenly spaced when the epoch has more writes (0: all).
    pub max_prefixes: usize,
    /// For each write of a selected epoch, the state with all the others (in log order).
    pub all_but_one: bool,
    /// Random subsets per selected epoch.
    pub subsets: usize,
    /// Seed of the subsets.
    pub seed: u64,
    /// Apply each subset in a random order (else in log order).
    pub reorder: bool,
    /// Let a chosen write of more than one sector be torn: only some of its sectors land.
    pub tear: bool,
    /// Epochs that get prefixes and subsets.
    pub epochs: InEpochs,
}

impl Default for CrashPlan {
    /// Flush points and all prefixes of every epoch; no all-but-one states, no random subsets.
    fn default() -> CrashPlan {
        CrashPlan {
            flush_points: true,
            prefixes: true,
            max_prefixes: 0,
            all_but_one: false,
            subsets: 0,
            seed: 0,
            reorder: true,
            tear: false,
            epochs: InEpochs::All,
        }
    }
}

/// splitmix64: enough randomness for choosing subsets, and the same sequence everywhere.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

impl Log {
    /// The states `plan` asks for, epoch by epoch (flush point `k`, then the states inside
    /// epoch `k`), ending with the state holding every write.
    pub fn states(&self, plan: &CrashPlan) -> io::Result<Vec<CrashState>> {
        let epochs = self.epochs();
        let selected = |k: usize| match &plan.epochs {
            InEpochs::All => true,
            InEpochs::Last => k + 1 == epochs.len(),
            InEpochs::Only(v) => v.contains(&k),
        };
        let mut out = Vec::new();
        for (k, writes) in epochs.iter().enumerate() {
            if plan.flush_points {
                out.push(self.epochs_state(k));
            }
            if !selected(k) {
                continue;
            }
            if plan.prefixes {
                for n in prefix_lengths(writes.len(), plan.max_prefixes) {
                    out.push(CrashState {
                        epoch: k,
                        kind: StateKind::Prefix { n },
                        pieces: writes[..n]
                            .iter()
                            .map(|&i| Piece::whole(self, i))
                            .collect::<io::Result<_>>()?,
                    });
                }
            }
            if plan.all_but_one && writes.len() > 1 {
                for &dropped in writes {
                    out.push(CrashState {
                        epoch: k,
                        kind: StateKind::AllBut { dropped },
                        pieces: writes
                            .iter()
                            .filter(|&&i| i != dropped)
                            .map(|&i| Piece::whole(self, i))
                            .collect::<io::Result<_>>()?,
                    });
                }
            }
            for index in 0..plan.subsets {
                out.push(self.subset(k, writes, plan, index)?);
            }
        }
        if plan.flush_points {
            out.push(self.epochs_state(epochs.len()));
        }
        Ok(out)
    }

    /// The image after the first `k` epochs.
    pub fn epochs_state(&self, k: usize) -> CrashState {
        CrashState {
            epoch: k,
            kind: StateKind::Epochs,
            pieces: Vec::new(),
        }
    }

    /// Random subset `index` of epoch `k` (whose writes are `writes`) under `plan`.
    fn subset(
        &self,
        k: usize,
        writes: &[usize],
        plan: &CrashPlan,
        index: usize,
    ) -> io::Result<CrashState> {
        let mut rng = Mix(plan.seed ^ (k as u64).wrapping_mul(0x1000_0001) ^ (index as u64) << 40);
        let mut chosen: Vec<usize> = writes
            .iter()
            .copied()
            .filter(|_| rng.next() & 1 == 1)
            .collect();
        if plan.reorder {
            for i in (1..chosen.len()).rev() {
                chosen.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        let (mut pieces, mut torn) = (Vec::new(), 0);
        for &i in &chosen {
            let whole = Piece::whole(self, i)?;
            match self.tear(&whole, plan.tear, &mut rng) {
                Some(parts) => {
                    torn += 1;
                    pieces.extend(parts);
                }
                None => pieces.push(whole),
            }
        }
        Ok(CrashState {
            epoch: k,
            kind: StateKind::Subset {
                seed: plan.seed,
                index,
                chosen: chosen.len(),
                of: writes.len(),
                torn,
            },
            pieces,
        })
    }

    /// With `tear` set, one time in four: some (not all, not none) of the sectors `whole`
    /// covers, as pieces cut at device sector boundaries.
    fn tear(&self, whole: &Piece, tear: bool, rng: &mut Mix) -> Option<Vec<Piece>> {
        let Some(&Event::Write { offset, len, .. }) = self.events().get(whole.event) else {
            return None;
        };
        if !tear || rng.below(4) != 0 {
            return None;
        }
        // Cut points: the payload offsets of the device's sector boundaries inside it.
        let mut cuts = vec![0];
        let mut b = (offset / SECTOR + 1) * SECTOR;
        while b < offset + len {
            cuts.push(b - offset);
            b += SECTOR;
        }
        cuts.push(len);
        let sectors = cuts.len() - 1;
        if sectors < 2 {
            return None;
        }
        let mut keep: Vec<bool> = (0..sectors).map(|_| rng.next() & 1 == 1).collect();
        if keep.iter().all(|&k| k) || keep.iter().all(|&k| !k) {
            // All or none: flip all but one sector (sectors >= 2, so now some, not all).
            let s = rng.below(sectors as u64) as usize;
            keep.iter_mut().enumerate().for_each(|(j, k)| *k ^= j != s);
        }
        Some(
            (0..sectors)
                .filter(|&s| keep[s])
                .map(|s| Piece {
                    event: whole.event,
                    range: cuts[s]..cuts[s + 1],
                })
                .collect(),
        )
    }
}

/// Prefix lengths strictly between 0 and `len`: all, or at most `max` evenly spaced.
fn prefix_lengths(len: usize, max: usize) -> Vec<usize> {
    let inner = len.saturating_sub(1);
    if max == 0 || inner <= max {
        return (1..len).collect();
    }
    let mut v: Vec<usize> = (1..=max).map(|j| (j * len / (max + 1)).max(1)).collect();
    v.dedup();
    v
}
