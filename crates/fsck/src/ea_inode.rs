//! Extended attribute values held in EA inodes (the ea_inode feature), checked as
//! e2fsck's check_large_ea_inode and pass 4's check_ea_inode do. An entry naming an EA
//! inode must name one in range, its `e_hash` must mix the entry's name with the hash
//! of the value the EA inode stores in i_atime (or the EA inode be an old Lustre one,
//! naming its owner in i_mtime), and the EA inode must carry the EA_INODE flag (else
//! set). A valid entry charges its owner the value's size in blocks (i_blocks, quota)
//! and counts one reference to the EA inode, whose stored count (i_ctime high, i_version
//! low) pass 4 compares with the references found.

use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use usfs_ext4::format::inode::{flags, Inode};
use usfs_ext4::format::xattr::entry_hash;
use usfs_ext4::walk::xattr::{Entry, Value};

/// One entry whose value lives in an EA inode, as a walk finds it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EaValue {
    /// The EA inode (`e_value_inum`).
    ea: u32,
    /// The value's size (`e_value_size`).
    size: u32,
    /// The entry's `e_hash`.
    hash: u32,
    /// The hash of the entry's name, names widened unsigned and signed.
    name_hash: [u32; 2],
}

impl EaValue {
    /// The EA-inode value of entry `e`, if its value lives in one.
    pub(crate) fn of(e: &Entry<'_>) -> Option<EaValue> {
        let Value::Inode { ino, size } = e.value else {
            return None;
        };
        Some(EaValue {
            ea: ino,
            size,
            hash: e.hash,
            name_hash: [
                entry_hash(e.name, &[], false),
                entry_hash(e.name, &[], true),
            ],
        })
    }
}

/// What the EA-inode values of one attribute list (an inode's area or a block) add up
/// to when every one is valid.
#[derive(Clone, Debug, Default)]
pub(crate) struct EaCharge {
    /// Blocks charged to the owner: each value's size, rounded up to blocks.
    pub(crate) blocks: u64,
    /// The EA inodes referenced, one per entry.
    pub(crate) inodes: Vec<u32>,
}

/// Checks the EA-inode values of the attributes of inode `owner` (its generation
/// `generation`); `block` is the xattr block they are in, None for the inode's own
/// area. Returns what they charge, or the problem whose fix clears the list (the
/// in-inode area, or the inode's xattr block): the first invalid entry's, as e2fsck
/// stops at it. A missing EA_INODE flag is reported on the way (its fix sets it).
pub(crate) fn check(
    ctx: &Ctx,
    w: &mut Worker,
    owner: (u32, u32),
    block: Option<u64>,
    values: &[EaValue],
) -> Result<EaCharge, Problem> {
    let mut charge = EaCharge::default();
    let mut flagless = Vec::new();
    for v in values {
        let (blocks, flagged) = value_blocks(ctx, v, owner).map_err(|p| match block {
            Some(b) => p.with_block(b),
            None => p,
        })?;
        charge.blocks += blocks;
        charge.inodes.push(v.ea);
        if !flagged {
            flagless.push(v.ea);
        }
    }
    for ea in flagless {
        // (Counted as an EA inode from now: the fix makes it one.)
        ctx.shared.ea_inodes.set(ea as u64);
        w.report(
            Problem::new(
                Code::EaInodeFlag,
                format!("{ea} for parent inode {}", owner.0),
            )
            .with_ino(ea)
            .with_found(Some(owner.0 as u64)),
        );
    }
    Ok(charge)
}

/// The blocks value `v` of inode `owner` (number, generation) charges it and whether
/// its EA inode has the EA_INODE flag, or the problem that makes the entry invalid
/// (e2fsck's check_large_ea_inode).
fn value_blocks(ctx: &Ctx, v: &EaValue, owner: (u32, u32)) -> Result<(u64, bool), Problem> {
    let (ino, generation) = owner;
    let illegal = || {
        Problem::new(
            Code::EaInodeValue,
            format!("{ino} has illegal extended attribute value inode {}", v.ea),
        )
        .with_ino(ino)
        .with_found(Some(v.ea as u64))
    };
    if v.ea < ctx.geo.first_ino || v.ea > ctx.geo.inodes_count {
        return Err(illegal());
    }
    let Ok(ea) = ctx.fs.read_inode_raw(v.ea) else {
        return Err(illegal());
    };
    let stored = ea.i_atime();
    let hashes = v.name_hash.map(|h| h.rotate_left(16) ^ stored);
    let flagged = ea.i_flags() & flags::EA_INODE != 0;
    if hashes.contains(&v.hash) {
        let bs = ctx.geo.block_size as u64;
        return Ok(((v.size as u64).div_ceil(bs), flagged));
    }
    // An old Lustre EA inode: its owner in i_mtime, the owner's generation; no charge.
    if ea.i_mtime() == ino && ea.i_generation() == generation {
        return Ok((0, flagged));
    }
    if !flagged {
        return Err(illegal());
    }
    Err(Problem::new(
        Code::EaInodeHash,
        format!("{ino} has a hash ({}) which is invalid", v.hash),
    )
    .with_ino(ino)
    .with_found(Some(v.hash as u64)))
}

/// The reference count an EA inode stores (i_ctime: high 32 bits, i_version: low).
pub(crate) fn stored_refs<B: AsRef<[u8]>>(r: &Inode<B>) -> u64 {
    ((r.i_ctime() as u64) << 32) | r.l_i_version() as u64
}

/// Pass 4 on EA inode `ino`, which no directory names and `refs` attributes reference
/// (more than none): reports a stored reference count other than `refs`, unless the
/// inode is an old Lustre one (i_ctime equal to i_atime, no count stored).
pub(crate) fn check_refs(ctx_fs: &usfs_ext4::Ext4, w: &mut Worker, ino: u32, refs: u64) {
    let Ok(r) = ctx_fs.read_inode_raw(ino) else {
        return;
    };
    let stored = stored_refs(&r);
    if stored != refs && r.i_ctime() != r.i_atime() {
        w.report(
            Problem::new(
                Code::EaInodeRefCount,
                format!("{ino} ref count is {stored}, should be {refs}"),
            )
            .with_ino(ino)
            .values(stored, refs),
        );
    }
}
