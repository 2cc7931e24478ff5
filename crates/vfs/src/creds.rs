//! Permission checks as the kernel makes them for an unprivileged caller: search (x) on
//! every directory a path walks through, read (r) to open. Root passes everything but
//! executing a file with no execute bit (the kernel's rule for CAP_DAC_OVERRIDE).

use usfs_fs::{FileType, Metadata};

/// Who asks: effective user and every group (effective and supplementary).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creds {
    /// Effective user ID.
    pub uid: u32,
    /// Effective group ID and supplementary groups.
    pub groups: Vec<u32>,
}

/// Read permission.
pub const MAY_READ: u32 = 4;
/// Write permission.
pub const MAY_WRITE: u32 = 2;
/// Execute (files) or search (directories) permission.
pub const MAY_EXEC: u32 = 1;

impl Creds {
    /// True when the caller may do `want` (MAY_* bits) to an inode with attributes `m`.
    pub fn may(&self, m: &Metadata, want: u32) -> bool {
        if self.uid == 0 {
            let any_x = m.perm & 0o111 != 0 || m.file_type == FileType::Directory;
            return want & MAY_EXEC == 0 || any_x;
        }
        let bits = if m.uid == self.uid {
            m.perm >> 6
        } else if self.groups.contains(&m.gid) {
            m.perm >> 3
        } else {
            m.perm
        } & 7;
        bits & want == want
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(ft: FileType, perm: u32, uid: u32, gid: u32) -> Metadata {
        Metadata::synthetic(2, ft, perm, uid, gid)
    }

    #[test]
    fn owner_group_other_and_root() {
        let user = Creds {
            uid: 1000,
            groups: vec![100, 7],
        };
        let root = Creds {
            uid: 0,
            groups: vec![0],
        };
        let d700 = meta(FileType::Directory, 0o700, 0, 0);
        assert!(!user.may(&d700, MAY_EXEC) && root.may(&d700, MAY_EXEC));
        let f640 = meta(FileType::Regular, 0o640, 1, 7);
        assert!(user.may(&f640, MAY_READ) && !user.may(&f640, MAY_WRITE));
        let f604 = meta(FileType::Regular, 0o604, 1000, 7);
        assert!(user.may(&f604, MAY_READ) && user.may(&f604, MAY_WRITE));
        let f004 = meta(FileType::Regular, 0o004, 1000, 5);
        assert!(
            !user.may(&f004, MAY_READ),
            "owner bits apply to the owner, not other"
        );
        assert!(!root.may(&meta(FileType::Regular, 0o644, 0, 0), MAY_EXEC));
        assert!(root.may(&meta(FileType::Regular, 0o000, 5, 5), MAY_READ | MAY_WRITE));
    }
}
