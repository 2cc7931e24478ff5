//! Pass 1's checks of device files, FIFOs, sockets and symlinks, as e2fsck makes them
//! (pass1.c): a special file whose first block (or inline data) starts like a directory
//! is taken for one (check_is_really_dir); a special file whose i_block holds what no
//! device does, or a symlink whose target does not check out, is bad, and cleared (e2fsck's
//! pass 2 asks when it reaches it by an entry; the entries and the inode's bits go in the
//! next round, as the check goes on with the inode in use, as e2fsck -n does); otherwise
//! flags and a size such a file may not have are cleared.

use crate::blocks::map_ctx;
use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use usfs_ext4::format::dirent::decode_rec_len;
use usfs_ext4::format::extent::{self, Extent, ExtentHeader};
use usfs_ext4::format::features::incompat;
use usfs_ext4::format::inode::{flags, Inode};
use usfs_ext4::walk;
use usfs_fs::FileType;

/// Bytes of i_block (`EXT4_MIN_INLINE_DATA_SIZE`, the fast symlink limit).
const I_BLOCK: usize = 60;

/// Checks inode `ino` (its record in `w.inode`, `links` links) of file type `ft`:
/// returns the type pass 1 goes on with (a directory, for a special file that is really
/// one).
pub(crate) fn check(ctx: &Ctx, w: &mut Worker, ino: u32, ft: FileType, links: u16) -> FileType {
    if matches!(ft, FileType::Directory | FileType::Regular) {
        return ft;
    }
    if ft == FileType::Symlink
        && ctx.geo.features.has_incompat(incompat::EXTENTS)
        && w.inode.i_flags() & flags::EXTENTS != 0
        && !has_valid_blocks(&w.inode, ft)
    {
        // e2fsck clears the flag before it checks the target.
        w.report(Problem::new(Code::FastSymlinkExtents, ino.to_string()).with_ino(ino));
        let f = w.inode.i_flags() & !flags::EXTENTS;
        w.inode.set_i_flags(f);
    }
    if ft != FileType::Symlink && treat_as_dir(ctx, w, ino, Some(ft), links) {
        return FileType::Directory;
    }
    let inode = &w.inode;
    let iflags = inode.i_flags();
    let i_size = inode.size();
    if ft == FileType::Symlink {
        if !symlink_ok(ctx, inode, ino) {
            w.report(Problem::new(Code::BadSymlink, ino.to_string()).with_ino(ino));
            return ft;
        }
    } else if !device_ok(inode) {
        let what = match ft {
            FileType::CharDevice => "character device",
            FileType::BlockDevice => "block device",
            FileType::Fifo => "FIFO",
            _ => "socket",
        };
        w.report(
            Problem::new(Code::BadSpecial, format!("{ino} is an illegal {what}")).with_ino(ino),
        );
        return ft;
    } else {
        if iflags & (flags::EXTENTS | flags::INLINE_DATA) != 0 {
            w.report(Problem::new(Code::SpecialFlags, ino.to_string()).with_ino(ino));
        }
        if i_size != 0 {
            w.report(
                Problem::new(Code::SpecialSize, ino.to_string())
                    .with_ino(ino)
                    .values(i_size, 0),
            );
        }
    }
    if iflags & (flags::IMMUTABLE | flags::APPEND) != 0 {
        w.report(Problem::new(Code::SpecialImmutable, ino.to_string()).with_ino(ino));
    }
    ft
}

/// ext2fs_inode_has_valid_blocks2 (e2fsprogs 1.47.0): does i_block map blocks? Not for
/// special files or inline data; for a symlink without an xattr block when i_blocks is
/// not 0; with one, when the size or i_block[1] says i_block holds no target.
pub(crate) fn has_valid_blocks(inode: &Inode<Vec<u8>>, ft: FileType) -> bool {
    match ft {
        FileType::Symlink if inode.file_acl() == 0 => {
            inode.i_blocks_lo() != 0 || inode.l_i_blocks_high() != 0
        }
        FileType::Symlink => {
            let size = inode.size();
            size >= I_BLOCK as u64 || (size > 4 && ptr(inode, 1) == 0)
        }
        FileType::Directory | FileType::Regular => inode.i_flags() & flags::INLINE_DATA == 0,
        _ => false,
    }
}

/// e2fsck's check_is_really_dir on inode `ino` (its record in `w.inode`), a device
/// file, FIFO, socket or (`ft` None) an inode whose mode has no file type: if its data
/// is a directory's, reports that its mode becomes a directory's and says so.
pub(crate) fn treat_as_dir(
    ctx: &Ctx,
    w: &mut Worker,
    ino: u32,
    ft: Option<FileType>,
    links: u16,
) -> bool {
    let inode = &w.inode;
    if !really_dir(ctx, inode, ino, ft, links) {
        return false;
    }
    let mode = inode.i_mode();
    let was = match ft {
        Some(ft) => format!("a {}", type_name(ft)),
        None => format!("a unknown file type with mode {:#o}", mode),
    };
    w.report(
        Problem::new(Code::TreatAsDirectory, format!("{ino} is {was}"))
            .with_ino(ino)
            .values(u64::from(mode), u64::from(mode & 0o7777 | 0o040000)),
    );
    true
}

/// e2fsck's name of a file type in "Inode N is a ... but it looks like it is really a
/// directory".
fn type_name(ft: FileType) -> &'static str {
    match ft {
        FileType::CharDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Fifo => "named pipe",
        _ => "socket",
    }
}

/// e2fsck_pass1_check_device_inode: no index or extents flag, and with the immutable or
/// append-only flag nothing past i_block[3].
fn device_ok(inode: &Inode<Vec<u8>>) -> bool {
    let f = inode.i_flags();
    if f & (flags::INDEX | flags::EXTENTS) != 0 {
        return false;
    }
    f & (flags::IMMUTABLE | flags::APPEND) == 0 || inode.i_block()[16..].iter().all(|&b| b == 0)
}

/// i_block[i] as a block-map pointer.
fn ptr(inode: &Inode<Vec<u8>>, i: usize) -> u64 {
    u64::from(u32::from_le_bytes(
        inode.i_block()[i * 4..i * 4 + 4].try_into().unwrap(),
    ))
}

/// e2fsck's check_is_really_dir for a device file, FIFO, socket or (`ft` None) an inode
/// whose mode has no file type: does its inline data
/// or first block start with a plausible `.` and `..`? (e2fsck also rules out blocks
/// pass 1 has already seen claimed; a parallel pass cannot know which those are.)
fn really_dir(
    ctx: &Ctx,
    inode: &Inode<Vec<u8>>,
    ino: u32,
    ft: Option<FileType>,
    links: u16,
) -> bool {
    if ptr(inode, 0) == 0 {
        return false;
    }
    let geo = ctx.geo;
    let iflags = inode.i_flags();
    let mut not_device = false;
    let blk =
        if geo.features.has_incompat(incompat::INLINE_DATA) && iflags & flags::INLINE_DATA != 0 {
            return inline_looks_like_dir(ctx, inode, ino);
        } else if geo.features.has_incompat(incompat::EXTENTS) && iflags & flags::EXTENTS != 0 {
            not_device = true;
            let cx = map_ctx(ctx, ino, inode.i_generation());
            match walk::map(ctx, &cx, inode.i_block(), true, 0) {
                Ok(m) => match m.pblk {
                    Some(b) => b,
                    None => return false,
                },
                Err(_) => return false,
            }
        } else {
            for i in 0..15 {
                let b = ptr(inode, i);
                if b == 0 {
                    continue;
                }
                not_device |= i >= 4;
                if b < geo.first_data_block || b >= geo.blocks_count {
                    return false;
                }
            }
            ptr(inode, 0)
        };
    if matches!(ft, Some(FileType::CharDevice | FileType::BlockDevice)) && links == 1 && !not_device
    {
        return false;
    }
    if blk >= geo.blocks_count {
        return false;
    }
    let mut buf = vec![0u8; geo.block_size as usize];
    if ctx.read_block(blk, &mut buf).is_err() {
        return false;
    }
    block_starts_dir(&buf, ino)
}

/// Does directory block `buf` of inode `ino` start with `.` (naming `ino`) and `..`, with
/// sane record lengths (e2fsck's test)?
fn block_starts_dir(buf: &[u8], ino: u32) -> bool {
    let bs = buf.len();
    let rec = |at: usize| {
        decode_rec_len(u16::from_le_bytes([buf[at + 4], buf[at + 5]]), bs as u32) as usize
    };
    let first = u32::from_le_bytes(buf[0..4].try_into().unwrap());
    let len1 = rec(0);
    if buf[6] != 1
        || buf[8] != b'.'
        || first != ino
        || len1 < 12
        || len1 % 4 != 0
        || len1 >= bs - 12
    {
        return false;
    }
    let len2 = rec(len1);
    buf[len1 + 6] == 2 && &buf[len1 + 8..len1 + 10] == b".." && len2 >= 12 && len2 % 4 == 0
}

/// check_is_really_dir for inline data: a size that is a multiple of 4, a parent and a
/// first entry naming plausible inodes, and a first record that fits i_block.
fn inline_looks_like_dir(ctx: &Ctx, inode: &Inode<Vec<u8>>, ino: u32) -> bool {
    let Some(size) = inline_size(ctx, inode, ino) else {
        return false;
    };
    if size % 4 != 0 {
        return false;
    }
    let ib = inode.i_block();
    let word = |at: usize| u32::from_le_bytes(ib[at..at + 4].try_into().unwrap());
    let (geo, first) = (ctx.geo, ctx.geo.first_ino);
    let (dotdot, de) = (word(0), word(4));
    let len = decode_rec_len(u16::from_le_bytes([ib[8], ib[9]]), geo.block_size) as usize;
    !(dotdot >= geo.inodes_count
        || (dotdot < first && dotdot != 2)
        || de >= geo.inodes_count
        || (de < first && de != 0)
        || len > I_BLOCK - 4)
}

/// ext2fs_inline_data_size: i_block and the `system.data` value (none: i_block alone);
/// `None` when the xattr area is damaged.
pub(crate) fn inline_size(ctx: &Ctx, inode: &Inode<Vec<u8>>, ino: u32) -> Option<usize> {
    crate::iflags::system_data(ctx, inode, ino).map(|v| I_BLOCK + v.unwrap_or(0))
}

/// e2fsck_pass1_check_symlink: a size (under 4 GiB, not 0), no index flag, and a target
/// whose length is the size: inline (the inline size is i_size), fast (in i_block, no
/// extents flag) or in one block (a single one-block extent at 0 in a depth-0 tree, or
/// i_block[0] alone), terminated inside its buffer.
pub(crate) fn symlink_ok(ctx: &Ctx, inode: &Inode<Vec<u8>>, ino: u32) -> bool {
    let iflags = inode.i_flags();
    let size = inode.size();
    if inode.i_size_high() != 0 || size == 0 || iflags & flags::INDEX != 0 {
        return false;
    }
    if iflags & flags::INLINE_DATA != 0 {
        return iflags & flags::EXTENTS == 0
            && inline_size(ctx, inode, ino).is_some_and(|n| n as u64 == size);
    }
    let block;
    let buf: &[u8] = if size < I_BLOCK as u64 {
        if iflags & flags::EXTENTS != 0 {
            return false;
        }
        inode.i_block()
    } else {
        let Some(blk) = one_block(ctx, inode) else {
            return false;
        };
        let mut b = vec![0u8; ctx.geo.block_size as usize];
        if ctx.read_block(blk, &mut b).is_err() {
            return false;
        }
        block = b;
        &block
    };
    let len = if iflags & flags::ENCRYPT != 0 {
        u16::from_le_bytes([buf[0], buf[1]]) as usize + 2
    } else {
        buf.iter().position(|&c| c == 0).unwrap_or(buf.len())
    };
    len < buf.len() && len as u64 == size
}

/// The block of a slow symlink: its only extent (depth 0, one extent, logical 0, one
/// block) or its only block pointer, in range.
fn one_block(ctx: &Ctx, inode: &Inode<Vec<u8>>) -> Option<u64> {
    let ib = inode.i_block();
    let blk = if inode.i_flags() & flags::EXTENTS != 0 {
        let h = ExtentHeader::new(&ib[..12])?;
        let e = Extent::new(&ib[12..24])?;
        if !extent::header_ok(ib) || h.eh_entries() != 1 || h.eh_depth() != 0 {
            return None;
        }
        if e.ee_block() != 0 || e.len() != 1 {
            return None;
        }
        e.start()
    } else {
        if (1..15).any(|i| ptr(inode, i) != 0) {
            return None;
        }
        ptr(inode, 0)
    };
    (blk >= ctx.geo.first_data_block && blk < ctx.geo.blocks_count).then_some(blk)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1 KiB directory block of inode `ino` starting with `.` and `..`.
    fn dir_block(ino: u32, dot_len: u16) -> Vec<u8> {
        let mut b = vec![0u8; 1024];
        b[0..4].copy_from_slice(&ino.to_le_bytes());
        b[4..6].copy_from_slice(&dot_len.to_le_bytes());
        b[6] = 1;
        b[8] = b'.';
        let at = dot_len as usize;
        b[at..at + 4].copy_from_slice(&2u32.to_le_bytes());
        b[at + 4..at + 6].copy_from_slice(&(1024 - dot_len).to_le_bytes());
        b[at + 6] = 2;
        b[at + 8..at + 10].copy_from_slice(b"..");
        b
    }

    #[test]
    fn a_block_starting_with_dot_and_dotdot_is_a_directory() {
        assert!(block_starts_dir(&dir_block(12, 12), 12));
        // '.' must name the inode itself, with a sane record length.
        assert!(!block_starts_dir(&dir_block(12, 12), 13));
        assert!(!block_starts_dir(&dir_block(12, 10), 12));
        assert!(!block_starts_dir(&dir_block(12, 14), 12));
        assert!(!block_starts_dir(&dir_block(12, 1012), 12));
        let mut b = dir_block(12, 12);
        b[12 + 9] = b'x';
        assert!(!block_starts_dir(&b, 12));
    }

    #[test]
    fn symlinks_map_blocks_as_e2fsprogs_1_47_0_decides() {
        let mut i = Inode::<Vec<u8>>::from_raw(&[0u8; 256]);
        i.set_i_mode(0o120777);
        i.set_size(10);
        assert!(!has_valid_blocks(&i, FileType::Symlink));
        i.set_i_blocks_lo(2);
        assert!(has_valid_blocks(&i, FileType::Symlink));
        // With an xattr block, i_blocks counts it: the size and i_block[1] decide.
        i.set_file_acl(100);
        let mut ib = [0u8; 60];
        ib[4] = 1;
        i.set_i_block(&ib);
        assert!(!has_valid_blocks(&i, FileType::Symlink));
        i.set_size(60);
        assert!(has_valid_blocks(&i, FileType::Symlink));
        assert!(!has_valid_blocks(&i, FileType::Fifo));
    }
}
