//! Extended attributes: entries in the inode after the extra fields (after a 4-byte magic),
//! or in an xattr block (after a 32-byte header). Values live in the same area, or in an
//! EA inode (ea_inode feature).

use super::checksum::crc32c_raw;
use usfs_fs::{Error, Result};

/// Magic of the in-inode area and of xattr blocks.
pub const XATTR_MAGIC: u32 = 0xEA02_0000;
/// Size of the xattr block header.
pub const BLOCK_HEADER_SIZE: usize = 32;
/// Size of the fixed part of an entry.
pub const ENTRY_HEADER_SIZE: usize = 16;
/// Offset of `h_checksum` in the block header.
pub const BLOCK_CHECKSUM_OFFSET: usize = 0x10;

usfs_fs::layout! {
    /// Header of an xattr block (struct ext4_xattr_header).
    pub struct XattrBlockHeader[32] {
        /// 0xEA020000.
        h_magic / set_h_magic: u32 @ 0x00,
        /// Inodes sharing this block.
        h_refcount / set_h_refcount: u32 @ 0x04,
        /// Blocks used (always 1).
        h_blocks / set_h_blocks: u32 @ 0x08,
        /// Hash of all attributes.
        h_hash / set_h_hash: u32 @ 0x0C,
        /// crc32c(seed, le64 block number || block with this field zeroed).
        h_checksum / set_h_checksum: u32 @ 0x10,
        /// Reserved.
        h_reserved / set_h_reserved: [12] @ 0x14,
    }
}

usfs_fs::layout! {
    /// One attribute entry (struct ext4_xattr_entry); `e_name_len` name bytes follow,
    /// padded to 4 bytes. A list ends with four zero bytes.
    pub struct XattrEntry[16] {
        /// Length of the name.
        e_name_len / set_e_name_len: u8 @ 0,
        /// Namespace index ([`prefix`]).
        e_name_index / set_e_name_index: u8 @ 1,
        /// Offset of the value: from the first entry (in-inode) or the block start.
        e_value_offs / set_e_value_offs: u16 @ 2,
        /// Inode holding the value (ea_inode), else 0.
        e_value_inum / set_e_value_inum: u32 @ 4,
        /// Size of the value.
        e_value_size / set_e_value_size: u32 @ 8,
        /// Hash of name and value (0 if not computed).
        e_hash / set_e_hash: u32 @ 12,
    }
}

/// Namespace index 7: `system.` (inline data lives in `system.data`).
pub const INDEX_SYSTEM: u8 = 7;
/// Index of `system.posix_acl_access`.
pub const INDEX_POSIX_ACL_ACCESS: u8 = 2;
/// Index of `system.posix_acl_default`.
pub const INDEX_POSIX_ACL_DEFAULT: u8 = 3;

/// The name prefix of a namespace index.
pub fn prefix(index: u8) -> Option<&'static str> {
    Some(match index {
        0 => "",
        1 => "user.",
        2 => "system.posix_acl_access",
        3 => "system.posix_acl_default",
        4 => "trusted.",
        6 => "security.",
        7 => "system.",
        8 => "system.richacl",
        _ => return None,
    })
}

/// Space an entry with an `n`-byte name takes (header + name, rounded up to 4).
pub fn entry_size(name_len: usize) -> usize {
    (ENTRY_HEADER_SIZE + name_len + 3) & !3
}

/// The hash of an xattr block entry (`e_hash`): name bytes mixed in with a 5-bit rotate,
/// then the value as little-endian 32-bit words (zero-padded) with a 16-bit rotate.
/// `signed_chars` selects the variant that widened name bytes as signed chars (both
/// exist on disk; checkers accept either).
pub fn entry_hash(name: &[u8], value: &[u8], signed_chars: bool) -> u32 {
    let mut h: u32 = 0;
    for &c in name {
        let v = if signed_chars {
            c as i8 as i32 as u32
        } else {
            c as u32
        };
        h = (h << 5) ^ (h >> 27) ^ v;
    }
    for chunk in value.chunks(4) {
        let mut w = [0u8; 4];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h << 16) ^ (h >> 16) ^ u32::from_le_bytes(w);
    }
    h
}

/// Checksum of an xattr block.
pub fn block_checksum(seed: u32, block_nr: u64, block: &[u8]) -> u32 {
    let c = crc32c_raw(seed, &block_nr.to_le_bytes());
    let c = crc32c_raw(c, &block[..BLOCK_CHECKSUM_OFFSET]);
    let c = crc32c_raw(c, &[0; 4]);
    crc32c_raw(c, &block[BLOCK_CHECKSUM_OFFSET + 4..])
}

/// POSIX ACL tags (shared by the ext4 and the xattr encodings).
pub mod acl {
    /// Owner.
    pub const USER_OBJ: u16 = 0x01;
    /// Named user (has an id).
    pub const USER: u16 = 0x02;
    /// Owning group.
    pub const GROUP_OBJ: u16 = 0x04;
    /// Named group (has an id).
    pub const GROUP: u16 = 0x08;
    /// Mask.
    pub const MASK: u16 = 0x10;
    /// Others.
    pub const OTHER: u16 = 0x20;
    /// Version of ext4's compact on-disk ACL.
    pub const EXT4_ACL_VERSION: u32 = 1;
    /// Version of the generic `system.posix_acl_*` xattr format.
    pub const POSIX_ACL_XATTR_VERSION: u32 = 2;
}

/// Converts ext4's compact ACL (version 1: 4-byte entries, 8 bytes for named user/group)
/// into the generic xattr format getxattr returns (version 2, 8-byte entries, id
/// 0xFFFFFFFF where none). `None` if malformed.
pub fn acl_ext4_to_xattr(v: &[u8]) -> Option<Vec<u8>> {
    if v.len() < 4 || u32::from_le_bytes(v[0..4].try_into().ok()?) != acl::EXT4_ACL_VERSION {
        return None;
    }
    let mut out = acl::POSIX_ACL_XATTR_VERSION.to_le_bytes().to_vec();
    let mut p = 4;
    while p < v.len() {
        let tag = u16::from_le_bytes(v.get(p..p + 2)?.try_into().ok()?);
        let perm = u16::from_le_bytes(v.get(p + 2..p + 4)?.try_into().ok()?);
        let id = match tag {
            acl::USER | acl::GROUP => {
                let id = u32::from_le_bytes(v.get(p + 4..p + 8)?.try_into().ok()?);
                p += 8;
                id
            }
            acl::USER_OBJ | acl::GROUP_OBJ | acl::MASK | acl::OTHER => {
                p += 4;
                u32::MAX
            }
            _ => return None,
        };
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    Some(out)
}

/// Splits a full attribute name into (namespace index, name suffix) as ext4 stores it:
/// the longest known prefix wins; `None` for names no namespace covers.
pub fn split_name(full: &[u8]) -> Option<(u8, &[u8])> {
    let mut best: Option<(u8, usize)> = None;
    for index in [1u8, 2, 3, 4, 6, 7] {
        let p = prefix(index)?.as_bytes();
        let exact = matches!(index, 2 | 3);
        let hit = if exact {
            full == p
        } else {
            full.starts_with(p)
        };
        if hit && best.is_none_or(|(_, l)| p.len() > l) {
            best = Some((index, p.len()));
        }
    }
    best.map(|(i, l)| (i, &full[l..]))
}

/// Converts a POSIX ACL from the xattr format getxattr returns (version 2, 8-byte
/// entries) into ext4's compact on-disk form (version 1; 4-byte entries, 8 with an id
/// for named users and groups). `None` if malformed.
pub fn acl_xattr_to_ext4(v: &[u8]) -> Option<Vec<u8>> {
    if v.len() < 4 || u32::from_le_bytes(v[0..4].try_into().ok()?) != acl::POSIX_ACL_XATTR_VERSION {
        return None;
    }
    if !(v.len() - 4).is_multiple_of(8) {
        return None;
    }
    let mut out = acl::EXT4_ACL_VERSION.to_le_bytes().to_vec();
    for e in v[4..].chunks_exact(8) {
        let tag = u16::from_le_bytes([e[0], e[1]]);
        out.extend_from_slice(&e[0..4]);
        match tag {
            acl::USER | acl::GROUP => out.extend_from_slice(&e[4..8]),
            acl::USER_OBJ | acl::GROUP_OBJ | acl::MASK | acl::OTHER => {}
            _ => return None,
        }
    }
    Some(out)
}

/// One attribute in on-disk form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OnDisk {
    /// Namespace index.
    pub index: u8,
    /// Name within the namespace.
    pub name: Vec<u8>,
    /// Value as stored (ACLs in ext4's compact form).
    pub value: Vec<u8>,
}

fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// Lays out `attrs` as entries from `base` (entry offsets) with values packed downward
/// from `end`; value offsets are relative to `rel`. Returns false if they do not fit.
pub fn lay_out(buf: &mut [u8], base: usize, end: usize, rel: usize, attrs: &[OnDisk]) -> bool {
    let entries: usize = attrs
        .iter()
        .map(|a| entry_size(a.name.len()))
        .sum::<usize>()
        + 4;
    let values: usize = attrs.iter().map(|a| pad4(a.value.len())).sum();
    if base + entries + values > end {
        return false;
    }
    let mut e = base;
    let mut v = end;
    for a in attrs {
        let offs = if a.value.is_empty() {
            0
        } else {
            v -= pad4(a.value.len());
            buf[v..v + a.value.len()].copy_from_slice(&a.value);
            v - rel
        };
        let mut h = XattrEntry::new(&mut buf[e..e + 16]).expect("16 bytes");
        h.set_e_name_len(a.name.len() as u8);
        h.set_e_name_index(a.index);
        h.set_e_value_offs(offs as u16);
        h.set_e_value_size(a.value.len() as u32);
        h.set_e_hash(entry_hash(&a.name, &a.value, false));
        buf[e + 16..e + 16 + a.name.len()].copy_from_slice(&a.name);
        e += entry_size(a.name.len());
    }
    true
}

/// Converts a full name and a getxattr-style value of inode `ino` to on-disk form.
pub fn to_on_disk(ino: u32, name: &[u8], value: &[u8]) -> Result<OnDisk> {
    let bad = |why: &str| {
        Error::incompatible(format!(
            "inode {ino}: xattr {}: {why}",
            String::from_utf8_lossy(name)
        ))
    };
    let (index, suffix) = split_name(name).ok_or_else(|| bad("unknown namespace"))?;
    if suffix.len() > 255 {
        return Err(bad("name too long"));
    }
    let value = if index == INDEX_POSIX_ACL_ACCESS || index == INDEX_POSIX_ACL_DEFAULT {
        acl_xattr_to_ext4(value).ok_or_else(|| bad("malformed POSIX ACL"))?
    } else {
        value.to_vec()
    };
    Ok(OnDisk {
        index,
        name: suffix.to_vec(),
        value,
    })
}

/// Sets an xattr block's header (magic, one block, h_hash over its entries' hashes as
/// the kernel's ext4_xattr_rehash computes it) for `attrs` laid out by [`lay_out`] from
/// [`BLOCK_HEADER_SIZE`]; the refcount and checksum are left to the caller.
pub fn finish_block_header(blk: &mut [u8], attrs: &[OnDisk]) {
    let hash = attrs.iter().fold(0u32, |hash, a| {
        (hash << 16) ^ (hash >> 16) ^ entry_hash(&a.name, &a.value, false)
    });
    let mut h = XattrBlockHeader::new(&mut blk[..32]).expect("32 bytes");
    h.set_h_magic(XATTR_MAGIC);
    h.set_h_blocks(1);
    h.set_h_hash(hash);
}
