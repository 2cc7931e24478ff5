//! Extended attributes: an ibody header after the inode (with shared xattr ids), then
//! inline entries; shared entries live in the shared xattr area. Entries are 4-byte aligned.

/// Size of `erofs_xattr_ibody_header`.
pub const IBODY_HEADER_SIZE: usize = 12;
/// Size of `erofs_xattr_entry` before the name.
pub const ENTRY_HEADER_SIZE: usize = 4;

/// Name indexes: which prefix a stored name has.
pub mod index {
    /// `user.`
    pub const USER: u8 = 1;
    /// `system.posix_acl_access` (empty name).
    pub const POSIX_ACL_ACCESS: u8 = 2;
    /// `system.posix_acl_default` (empty name).
    pub const POSIX_ACL_DEFAULT: u8 = 3;
    /// `trusted.`
    pub const TRUSTED: u8 = 4;
    /// `lustre.`
    pub const LUSTRE: u8 = 5;
    /// `security.`
    pub const SECURITY: u8 = 6;
}

/// Prefix of each name index.
pub const PREFIXES: [(u8, &[u8]); 6] = [
    (index::USER, b"user."),
    (index::POSIX_ACL_ACCESS, b"system.posix_acl_access"),
    (index::POSIX_ACL_DEFAULT, b"system.posix_acl_default"),
    (index::TRUSTED, b"trusted."),
    (index::LUSTRE, b"lustre."),
    (index::SECURITY, b"security."),
];

/// Splits a full xattr name into (index, suffix); `None` if EROFS cannot store it.
pub fn split_name(name: &[u8]) -> Option<(u8, &[u8])> {
    for (idx, p) in PREFIXES {
        if idx == index::POSIX_ACL_ACCESS || idx == index::POSIX_ACL_DEFAULT {
            if name == p {
                return Some((idx, &[]));
            }
        } else if let Some(rest) = name.strip_prefix(p) {
            if !rest.is_empty() && rest.len() <= 255 {
                return Some((idx, rest));
            }
        }
    }
    None
}

/// The prefix of a name index, if known.
pub fn prefix(idx: u8) -> Option<&'static [u8]> {
    PREFIXES.iter().find(|(i, _)| *i == idx).map(|(_, p)| *p)
}

/// Bytes an entry with this name and value length takes (aligned to 4).
pub fn entry_size(name_len: usize, value_len: usize) -> usize {
    (ENTRY_HEADER_SIZE + name_len + value_len + 3) & !3
}

usfs_fs::layout! {
    /// `struct erofs_xattr_ibody_header`, right after the inode; followed by
    /// `h_shared_count` 4-byte shared xattr ids, then inline entries.
    pub struct IbodyHeader[12] {
        /// Reserved (name filter with COMPAT_XATTR_FILTER).
        h_name_filter / set_h_name_filter: u32 @ 0,
        /// Number of shared xattr ids that follow.
        h_shared_count / set_h_shared_count: u8 @ 4,
        /// Reserved.
        h_reserved2 / set_h_reserved2: [7] @ 5,
    }
}

usfs_fs::layout! {
    /// `struct erofs_xattr_entry`: followed by the name suffix and the value.
    pub struct Entry[4] {
        /// Length of the name suffix.
        e_name_len / set_e_name_len: u8 @ 0,
        /// Name index ([`index`]).
        e_name_index / set_e_name_index: u8 @ 1,
        /// Length of the value.
        e_value_size / set_e_value_size: u16 @ 2,
    }
}
