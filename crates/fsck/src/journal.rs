//! Pass 0's journal checks, as e2fsck_check_ext3_journal makes them: the journal
//! inode (unusable: deleted and made anew) and the journal superblock (no magic: as no
//! journal; V2 fields a V1 journal left; corrupt: written anew; unknown: no fix). Run on
//! the image as the check opens it, and before replay on one that needs recovery.

use crate::problem::{Code, Problem};
use usfs_ext4::Ext4;

/// The magic of a journal block (big-endian, at its start).
const JBD2_MAGIC: u32 = 0xC03B_3998;

/// The journal inode and superblock: an inode too short or unreadable is unusable
/// (e2fsck's PR_0_JOURNAL_BAD_INODE: deleted and made anew by a repair); a superblock
/// without the magic or a known type is corrupt.
pub(crate) fn check(fs: &Ext4) -> Vec<Problem> {
    use usfs_fs::FileSystem;
    let ino = fs.superblock().s_journal_inum();
    if ino == 0 {
        // External journal: nothing here to check.
        return Vec::new();
    }
    let bad_inode = |why: String| {
        vec![Problem::new(Code::JournalBad, why)
            .with_ino(ino)
            .values(1, 0)]
    };
    if let Some(why) = bad_map(fs, ino) {
        return bad_inode(why);
    }
    let mut sb = vec![0u8; fs.geometry().block_size as usize];
    match fs.read_at(ino as u64, 0, &mut sb) {
        Ok(n) if n == sb.len() => {
            let magic = u32::from_be_bytes(sb[0..4].try_into().unwrap());
            let btype = u32::from_be_bytes(sb[4..8].try_into().unwrap());
            // (e2fsck_journal_load: no magic, and the journal is as good as none.)
            if magic != JBD2_MAGIC {
                return bad_inode(format!("Superblock has an invalid journal (inode {ino})"));
            }
            let at = fs.journal_map().ok().and_then(|m| m.fs_block(0));
            let nr_users = u32::from_be_bytes(sb[0x40..0x44].try_into().unwrap());
            if let (4, 2.., Some(blk)) = (btype, nr_users, at) {
                return vec![Problem::new(Code::JournalClearV2, "")
                    .with_ino(ino)
                    .with_block(blk)];
            }
            journal_superblock(fs, ino, &sb, at)
        }
        Ok(_) => bad_inode("Journal is too short".into()),
        // Deleted only when e2fsck would find the inode itself unusable (read raw, as
        // e2fsck reads it: not in use or not a regular file, with no copy of its map
        // in the superblock); a read this reader refuses for other reasons (an inode
        // in a group's unused area) has no fix.
        Err(e) if journal_inode_unusable(fs, ino) => {
            bad_inode(format!("Journal inode is invalid: {e}"))
        }
        Err(e) => {
            vec![
                Problem::new(Code::JournalBad, format!("Journal inode is invalid: {e}"))
                    .with_ino(ino),
            ]
        }
    }
}

/// Does the journal the superblock names load: its inode usable, its first block read
/// whole and holding the journal magic? (e2fsck_check_ext3_journal's test before it
/// finds a journal without has_journal.)
pub(crate) fn loads(fs: &Ext4) -> bool {
    use usfs_fs::FileSystem;
    let ino = fs.superblock().s_journal_inum();
    if ino == 0 || bad_map(fs, ino).is_some() {
        return false;
    }
    let mut sb = vec![0u8; fs.geometry().block_size as usize];
    matches!(fs.read_at(ino as u64, 0, &mut sb), Ok(n) if n == sb.len())
        && u32::from_be_bytes(sb[0..4].try_into().unwrap()) == JBD2_MAGIC
}

/// Why e2fsck_get_journal would find the map of journal inode `ino`, a regular file in
/// use, unusable: a block outside the file system (EXT2_ET_BAD_BLOCK_NUM) or a hole
/// before its end (fewer blocks than its size), or the number itself out of range.
/// None for a good map; for an inode not in use, or one the reader refuses for its own
/// fields (the read judges those); and where the superblock keeps a block-map copy of
/// the map that may be good, from which e2fsck would read the journal instead.
fn bad_map(fs: &Ext4, ino: u32) -> Option<String> {
    if ino > fs.geometry().inodes_count {
        return Some(format!("Journal inode {ino} is out of range"));
    }
    let raw = fs.read_inode_raw(ino).ok()?;
    if !in_use_file(&raw) || fs.inode_loads(ino).is_err() {
        return None;
    }
    // (e2fsck retries a bad map with a block-map copy: one that is the same map, or
    // whose own pointers already fail (its first block missing, a block outside the file
    // system), fails the same way; another one is not judged here.)
    if let Some(copy) = block_map_copy(fs) {
        let (first, end) = (
            fs.superblock().s_first_data_block() as u64,
            fs.geometry().blocks_count,
        );
        let word = |i: usize| u32::from_le_bytes(copy[i * 4..i * 4 + 4].try_into().unwrap()) as u64;
        let fails = copy[..60] == raw.i_block()[..]
            || word(0) == 0
            || (0..15).any(|i| word(i) != 0 && (word(i) < first || word(i) >= end));
        if !fails {
            return None;
        }
    }
    let map = match fs.journal_map() {
        Ok(m) => m,
        Err(e) => return Some(format!("Journal inode is invalid: {e}")),
    };
    let geo = fs.geometry();
    let first = fs.superblock().s_first_data_block() as u64;
    let outside = |&(_, b, n): &(u32, u64, u32)| b < first || b + n as u64 > geo.blocks_count;
    let bad = map.runs().iter().find(|r| outside(r))?;
    Some(format!(
        "Journal inode is invalid: block {} outside the file system",
        bad.1
    ))
}

/// The journal superblock `sb` (block 0 of journal inode `ino`, at block `at`) as
/// e2fsck's e2fsck_journal_load judges it: corrupt (a log block's type, a bad checksum
/// or block size, longer than its file) is written anew (found 2: e2fsck's "Journal
/// superblock is corrupt"); a version or features it does not know stop the repair
/// (found 3: e2fsck aborts).
fn journal_superblock(fs: &Ext4, ino: u32, sb: &[u8], at: Option<u64>) -> Vec<Problem> {
    let bs = fs.geometry().block_size;
    let size = fs.read_inode_raw(ino).map_or(0, |r| r.size());
    let blocks = (size / bs as u64).min(u32::MAX as u64) as u32;
    match usfs_ext4::journal::JournalInfo::load(sb, bs, blocks) {
        Ok(_) => Vec::new(),
        Err(usfs_fs::Error::Corrupt(c)) => {
            let p = Problem::new(
                Code::JournalBad,
                format!("Journal superblock is corrupt ({})", c.detail),
            )
            .with_ino(ino)
            .values(2, blocks as u64);
            vec![match at {
                Some(blk) => p.with_block(blk),
                None => p,
            }]
        }
        Err(e) => vec![
            Problem::new(Code::JournalBad, format!("Journal superblock: {e}"))
                .with_ino(ino)
                .values(3, 0),
        ],
    }
}

/// Is journal inode `ino` unusable as e2fsck's e2fsck_get_journal reads it: not in use
/// or not a regular file, and no backup of its map in the superblock that e2fsck could
/// use instead (1.47 reads the backup as a block map: an extent tree there is no use)?
fn journal_inode_unusable(fs: &Ext4, ino: u32) -> bool {
    let Ok(raw) = fs.read_inode_raw(ino) else {
        return true;
    };
    !in_use_file(&raw) && block_map_copy(fs).is_none()
}

/// Is `raw` a regular file in use (what e2fsck_get_journal reads as the journal)?
fn in_use_file(raw: &usfs_ext4::format::inode::Inode<Vec<u8>>) -> bool {
    raw.i_links_count() != 0 && raw.i_mode() & 0o170000 == 0o100000
}

/// The superblock's copy of the journal inode's map (`s_jnl_blocks`), when e2fsck would
/// read the journal from it: a copy (backup type 1) of a block map (1.47 reads it as
/// one: an extent tree there is no use).
fn block_map_copy(fs: &Ext4) -> Option<[u8; 68]> {
    let sb = fs.superblock();
    let copy = sb.s_jnl_blocks();
    let extents = u16::from_le_bytes([copy[0], copy[1]]) == usfs_ext4::format::extent::EXTENT_MAGIC;
    (sb.s_jnl_backup_type() == 1 && !extents).then_some(*copy)
}
