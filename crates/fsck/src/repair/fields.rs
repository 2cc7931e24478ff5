//! Fixes of single inode fields (link counts, i_size, i_blocks, dtime, i_faddr, the
//! high halves without their features, checksums): one [`Edit`] per problem, applied
//! alone through the volume (`inode::apply`) or, for the inodes of a round that have
//! no other kind of problem, by the workers in parallel (pFSCK's parallel repair): each
//! worker reads its share of the inode-table blocks concerned, edits the inodes in
//! them and sets their checksums; the blocks go into the repair's transaction in
//! batches of [`BATCH_BLOCKS`], which commits as it fills, so memory stays bounded.

use crate::problem::{Code, Problem};
use std::collections::HashSet;
use std::sync::Arc;
use usfs_dev::Device;
use usfs_ext4::format::inode::{flags, Inode};
use usfs_ext4::rw::meta::Meta;
use usfs_ext4::rw::Volume;
use usfs_fs::{Error, Result};

/// One field fix, from the values its problem carries.
#[derive(Clone, Copy, Debug)]
pub(super) enum Edit {
    /// i_links_count.
    Links(u16),
    /// i_size.
    Size(u64),
    /// i_blocks (in 512-byte units).
    Blocks(u64),
    /// i_dtime.
    Dtime(u32),
    /// i_faddr zeroed.
    Faddr,
    /// l_i_blocks_high zeroed.
    BlocksHi,
    /// l_i_file_acl_high zeroed.
    FileAclHi,
    /// The EA_INODE flag set.
    EaInodeFlag,
    /// An EA inode's reference count (i_ctime high, i_version low).
    EaRefs(u64),
    /// Nothing but the checksum, which every write sets.
    Rewrite,
}

impl Edit {
    /// The edit fixing `p`, if it is a field's (`now`: the dtime of a deleted inode);
    /// an error when the problem lacks the value its fix sets.
    pub(super) fn of(p: &Problem, now: u32) -> Result<Option<Edit>> {
        let want = || p.expected().ok_or(Error::Invalid);
        Ok(Some(match p.code {
            Code::BadRefCount | Code::DirOverflowRefCount => Edit::Links(want()? as u16),
            Code::BadISize => Edit::Size(want()?),
            Code::BadIBlocks => Edit::Blocks(want()?),
            Code::InodeDtimeSet => Edit::Dtime(0),
            Code::InodeZeroDtime => Edit::Dtime(now),
            Code::OrphanListRefugee => Edit::Dtime(p.expected().map_or(now, |t| t as u32)),
            Code::InodeFaddr => Edit::Faddr,
            Code::BlocksHi => Edit::BlocksHi,
            Code::FileAclHi => Edit::FileAclHi,
            Code::InodeChecksum => Edit::Rewrite,
            Code::EaInodeFlag => Edit::EaInodeFlag,
            Code::EaInodeRefCount => Edit::EaRefs(want()?),
            _ => return Ok(None),
        }))
    }

    /// Applies the edit to the raw inode `r`.
    pub(super) fn apply<B: AsRef<[u8]> + AsMut<[u8]>>(self, r: &mut Inode<B>) {
        match self {
            Edit::Links(n) => r.set_i_links_count(n),
            Edit::Size(n) => r.set_size(n),
            Edit::Blocks(n) => r.set_blocks_512(n),
            Edit::Dtime(t) => r.set_i_dtime(t),
            Edit::Faddr => r.set_i_obso_faddr(0),
            Edit::BlocksHi => r.set_l_i_blocks_high(0),
            Edit::FileAclHi => r.set_l_i_file_acl_high(0),
            Edit::EaInodeFlag => r.set_i_flags(r.i_flags() | flags::EA_INODE),
            Edit::EaRefs(n) => {
                r.set_i_ctime((n >> 32) as u32);
                r.set_l_i_version(n as u32);
            }
            Edit::Rewrite => {}
        }
    }
}

/// A field fix of one inode: (inode, the index of its problem). (Eight bytes for each
/// of a round's problems, perhaps 100k: the edit is made from the problem when placed.)
type InodeEdit = (u32, u32);

/// The field fixes of the inodes whose every problem in `problems` is a field's, sorted
/// by inode (each inode's in the problems' order), and which problems they cover (by
/// index).
fn field_only(problems: &[Problem], now: u32) -> Result<(Vec<InodeEdit>, Vec<bool>)> {
    let mut edits: Vec<InodeEdit> = Vec::new();
    let mut other = HashSet::new();
    for (i, p) in problems.iter().enumerate() {
        let Some(ino) = p.ino() else { continue };
        match Edit::of(p, now)? {
            Some(_) if p.entry().is_none() && p.claims().is_none() => edits.push((ino, i as u32)),
            _ => {
                other.insert(ino);
            }
        }
    }
    edits.retain(|(ino, _)| !other.contains(ino));
    edits.sort_unstable();
    let mut covered = vec![false; problems.len()];
    edits.iter().for_each(|&(_, i)| covered[i as usize] = true);
    Ok((edits, covered))
}

/// Inode-table blocks the workers prepare at a time: the buffer they fill is a copy of
/// what the volume's transaction then holds (up to its own limit), so it is kept small
/// (256 KiB of 4 KiB blocks) for the peak memory; the workers' start costs little.
const BATCH_BLOCKS: usize = 64;

/// Applies the field fixes of the inodes that have nothing else to fix in `problems`,
/// `threads` workers preparing the inode-table blocks (read from `dev`, which the
/// round has not changed yet) into one buffer per batch, the volume taking them and
/// committing whenever its transaction is full. Returns
/// which problems were fixed (by index), and whether a transaction was committed.
pub(super) fn apply_parallel(
    v: &mut Volume,
    dev: &Arc<dyn Device>,
    problems: &[Problem],
    threads: usize,
) -> Result<(Vec<bool>, bool)> {
    let now = v.now().sec as u32;
    let (edits, covered) = field_only(problems, now)?;
    let mut committed = false;
    if edits.is_empty() {
        return Ok((covered, committed));
    }
    let geo = v.geometry().clone();
    let (bs, isz) = (geo.block_size as u64, geo.inode_size as usize);
    let seed = v.reader().csum_seed();
    let edit_block = |job: &[Placed], buf: &mut [u8]| {
        for one in job.chunk_by(|a, b| a.2 == b.2) {
            let (off, ino) = (one[0].1, one[0].2);
            let edit = |r: &mut Inode<&mut [u8]>| {
                one.iter().for_each(|x| x.3.apply(r));
                if let Some(seed) = seed {
                    r.update_checksum(seed, ino, isz);
                }
            };
            match Inode::new(&mut buf[off..off + isz]) {
                Some(mut r) => edit(&mut r),
                None => {
                    // (A 128-byte record: edited in a copy padded to the view's size.)
                    let mut padded = Inode::from_raw(&buf[off..off + isz]).into_inner();
                    edit(&mut Inode::new(&mut padded[..]).expect("padded"));
                    buf[off..off + isz].copy_from_slice(&padded[..isz]);
                }
            }
        }
    };
    let bsz = bs as usize;
    // A worker's share: its blocks read a run of neighbours at a time, then edited.
    let prepare = |part: &[&[Placed]], out: &mut [u8]| -> Result<()> {
        let runs = part.chunk_by(|a, b| b[0].0 == a[0].0 + 1);
        let mut at = 0;
        for run in runs {
            let len = run.len() * bsz;
            dev.read_at(&mut out[at..at + len], run[0][0].0 * bs)?;
            at += len;
        }
        (part.iter().zip(out.chunks_mut(bsz))).for_each(|(job, b)| edit_block(job, b));
        Ok(())
    };
    let mut buf = Vec::new();
    let mut rest = &edits[..];
    while !rest.is_empty() {
        let placed = place_batch(v, &mut rest, problems, now)?;
        let batch: Vec<&[Placed]> = placed.chunk_by(|a, b| a.0 == b.0).collect();
        buf.resize(batch.len() * bs as usize, 0);
        let per = batch.len().div_ceil(threads.max(1));
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let workers: Vec<_> = (batch.chunks(per))
                .zip(buf.chunks_mut(per * bs as usize))
                .map(|(part, out)| s.spawn(move || prepare(part, out)))
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("no panic"))
                .collect()
        });
        results.into_iter().collect::<Result<()>>()?;
        for (job, block) in batch.iter().zip(buf.chunks(bs as usize)) {
            v.write_meta(job[0].0, block.to_vec())?;
            // (Block by block: the transaction must fit the journal, which may hold
            // fewer blocks than a batch.)
            committed |= v.commit_when_full()?;
        }
    }
    Ok((covered, committed))
}

/// An edit placed: (inode-table block, the inode's offset in it, inode, edit).
type Placed = (u64, usize, u32, Edit);

/// The next batch of `rest` (sorted by inode; fixes of `problems`), placed: the edits of
/// its first [`BATCH_BLOCKS`] inode-table blocks. (Placed a batch at a time: for a round
/// of many fixes, the whole list placed would be a copy of it.)
fn place_batch(
    v: &Volume,
    rest: &mut &[InodeEdit],
    problems: &[Problem],
    now: u32,
) -> Result<Vec<Placed>> {
    let bs = v.geometry().block_size as u64;
    let mut placed: Vec<Placed> = Vec::new();
    let mut blocks = 0;
    while let Some((&(ino, i), tail)) = rest.split_first() {
        let e = Edit::of(&problems[i as usize], now)?.ok_or(Error::Invalid)?;
        let at = v.reader().inode_offset(ino);
        let blk = at / bs;
        if placed.last().is_none_or(|l| l.0 != blk) {
            if blocks == BATCH_BLOCKS {
                break;
            }
            blocks += 1;
        }
        placed.push((blk, (at % bs) as usize, ino, e));
        *rest = tail;
    }
    Ok(placed)
}
