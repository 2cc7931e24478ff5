//! Attribute pools: permission modes, owners and timestamps, both random choices for the
//! bulk of the tree and the hand-picked edge cases.

use crate::rng::Rng;
use crate::sys::Timespec;

/// The attributes the final pass gives one inode.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Attrs {
    /// Permission bits (mode & 0o7777); ignored for symbolic links.
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Access time.
    pub atime: Timespec,
    /// Modification time.
    pub mtime: Timespec,
}

/// Permission modes for regular files and special files, including setuid/setgid/sticky.
pub(crate) const FILE_MODES: &[u32] = &[
    0o000, 0o400, 0o444, 0o600, 0o640, 0o644, 0o664, 0o666, 0o700, 0o711, 0o750, 0o755, 0o777,
    0o1000, 0o1755, 0o2000, 0o2755, 0o4000, 0o4755, 0o6755, 0o7777, 0o4711, 0o2711,
];

/// Permission modes for directories.
pub(crate) const DIR_MODES: &[u32] = &[
    0o000, 0o500, 0o555, 0o700, 0o711, 0o750, 0o755, 0o775, 0o777, 0o1777, 0o2775, 0o3777, 0o2755,
    0o1755, 0o7777,
];

/// Owners (uid, gid): 0, small, the 16-bit edge, nobody, and large ids.
pub(crate) const OWNERS: &[(u32, u32)] = &[
    (0, 0),
    (1, 1),
    (0, 100),
    (1000, 1000),
    (1000, 0),
    (65534, 65534),
    (65535, 65535),
    (65536, 65536),
    (100000, 100000),
    (0, 100000),
    (123456, 7),
    (4_000_000_000, 4_000_000_001),
];

/// Edge timestamps: before 1970 (including fractional negative seconds), the epoch, the
/// 2038 edge, 2040, 2106, and just inside the ext4 range (1901..2446).
pub(crate) const EDGE_TIMES: &[Timespec] = &[
    Timespec::new(-1, 500_000_000),
    Timespec::new(-1, 1),
    Timespec::new(-315_619_200, 123_456_789),
    Timespec::new(-2_147_483_647, 999_999_999),
    Timespec::new(-1_000_000_000, 1),
    Timespec::new(0, 0),
    Timespec::new(0, 1),
    Timespec::new(1, 999_999_999),
    Timespec::new(1_000_000_000, 0),
    Timespec::new(1_700_000_000, 999_999_999),
    Timespec::new(2_147_483_647, 999_999_999),
    Timespec::new(2_147_483_648, 1),
    Timespec::new(2_208_988_800, 123_456_789),
    Timespec::new(2_240_611_199, 7),
    Timespec::new(4_294_967_296, 5),
    Timespec::new(15_032_385_534, 999_999_998),
];

/// A timestamp: mostly 2000..2030 with random nanoseconds, sometimes an edge value.
pub(crate) fn time(rng: &mut Rng) -> Timespec {
    if rng.chance(1, 4) {
        if let Some(t) = rng.pick(EDGE_TIMES) {
            return *t;
        }
    }
    let sec = rng.range(946_684_800, 1_893_456_000) as i64;
    Timespec::new(sec, rng.range(1, 999_999_999) as u32)
}

fn owner(rng: &mut Rng) -> (u32, u32) {
    if rng.chance(2, 3) {
        (0, 0)
    } else {
        rng.pick(OWNERS).copied().unwrap_or((0, 0))
    }
}

fn with(rng: &mut Rng, perm: u32) -> Attrs {
    let (uid, gid) = owner(rng);
    Attrs {
        perm,
        uid,
        gid,
        atime: time(rng),
        mtime: time(rng),
    }
}

/// Random attributes for a regular or special file.
pub(crate) fn file(rng: &mut Rng) -> Attrs {
    let perm = if rng.chance(2, 3) {
        0o644
    } else {
        *rng.pick(FILE_MODES).unwrap_or(&0o644)
    };
    with(rng, perm)
}

/// Random attributes for a directory.
pub(crate) fn dir(rng: &mut Rng) -> Attrs {
    let perm = if rng.chance(3, 4) {
        0o755
    } else {
        *rng.pick(DIR_MODES).unwrap_or(&0o755)
    };
    with(rng, perm)
}

/// Random attributes for a symbolic link (permission bits unused).
pub(crate) fn symlink(rng: &mut Rng) -> Attrs {
    with(rng, 0o777)
}
