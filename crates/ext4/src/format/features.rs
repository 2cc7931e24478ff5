//! Feature flags of the superblock, with the names mke2fs and dumpe2fs use.

/// `s_feature_compat` bits: a reader may ignore them.
pub mod compat {
    /// Directory preallocation.
    pub const DIR_PREALLOC: u32 = 0x1;
    /// AFS server inodes.
    pub const IMAGIC_INODES: u32 = 0x2;
    /// Has a journal (inode `s_journal_inum`).
    pub const HAS_JOURNAL: u32 = 0x4;
    /// Extended attributes.
    pub const EXT_ATTR: u32 = 0x8;
    /// Reserved GDT blocks for online resize (inode 7).
    pub const RESIZE_INODE: u32 = 0x10;
    /// Hashed (htree) directories.
    pub const DIR_INDEX: u32 = 0x20;
    /// Lazy block-group initialisation (old).
    pub const LAZY_BG: u32 = 0x40;
    /// Exclude inode (snapshots).
    pub const EXCLUDE_INODE: u32 = 0x80;
    /// Exclude bitmap (snapshots).
    pub const EXCLUDE_BITMAP: u32 = 0x100;
    /// Backups only in the groups named by s_backup_bgs.
    pub const SPARSE_SUPER2: u32 = 0x200;
    /// Fast commits in the journal.
    pub const FAST_COMMIT: u32 = 0x400;
    /// Inode numbers never change (for encryption policies).
    pub const STABLE_INODES: u32 = 0x800;
    /// Orphan file (s_orphan_file_inum).
    pub const ORPHAN_FILE: u32 = 0x1000;
}

/// `s_feature_incompat` bits: a reader must understand every one that is set.
pub mod incompat {
    /// Compression (never finished).
    pub const COMPRESSION: u32 = 0x1;
    /// Directory entries record the file type.
    pub const FILETYPE: u32 = 0x2;
    /// The journal needs recovery.
    pub const RECOVER: u32 = 0x4;
    /// This device is an external journal.
    pub const JOURNAL_DEV: u32 = 0x8;
    /// Meta block groups.
    pub const META_BG: u32 = 0x10;
    /// Extent-mapped files.
    pub const EXTENTS: u32 = 0x40;
    /// More than 2^32 blocks; 64-byte group descriptors.
    pub const BIT64: u32 = 0x80;
    /// Multi-mount protection.
    pub const MMP: u32 = 0x100;
    /// Flexible block groups.
    pub const FLEX_BG: u32 = 0x200;
    /// Large xattr values in inodes.
    pub const EA_INODE: u32 = 0x400;
    /// Data in directory entries (Lustre).
    pub const DIRDATA: u32 = 0x1000;
    /// Metadata checksum seed stored in the superblock.
    pub const CSUM_SEED: u32 = 0x2000;
    /// Directories over 2 GiB and 3-level htrees.
    pub const LARGEDIR: u32 = 0x4000;
    /// Data inside the inode.
    pub const INLINE_DATA: u32 = 0x8000;
    /// Encrypted inodes.
    pub const ENCRYPT: u32 = 0x10000;
    /// Case-insensitive directories.
    pub const CASEFOLD: u32 = 0x20000;
}

/// `s_feature_ro_compat` bits: a reader may ignore them, a writer must understand them.
pub mod ro_compat {
    /// Backup superblocks only in groups 0, 1 and powers of 3, 5, 7.
    pub const SPARSE_SUPER: u32 = 0x1;
    /// Files over 2 GiB.
    pub const LARGE_FILE: u32 = 0x2;
    /// B-tree directories (never used).
    pub const BTREE_DIR: u32 = 0x4;
    /// i_blocks in file-system blocks for huge files.
    pub const HUGE_FILE: u32 = 0x8;
    /// Group descriptor CRC16 checksums.
    pub const GDT_CSUM: u32 = 0x10;
    /// More than 65000 subdirectories (nlink 1 = many).
    pub const DIR_NLINK: u32 = 0x20;
    /// Large inodes with extra fields.
    pub const EXTRA_ISIZE: u32 = 0x40;
    /// Has a snapshot.
    pub const HAS_SNAPSHOT: u32 = 0x80;
    /// Quota inodes.
    pub const QUOTA: u32 = 0x100;
    /// Block clusters.
    pub const BIGALLOC: u32 = 0x200;
    /// CRC32C checksums on all metadata.
    pub const METADATA_CSUM: u32 = 0x400;
    /// Replicas.
    pub const REPLICA: u32 = 0x800;
    /// Read-only file system image.
    pub const READONLY: u32 = 0x1000;
    /// Project quotas.
    pub const PROJECT: u32 = 0x2000;
    /// Shared blocks (deduplicated, read-only).
    pub const SHARED_BLOCKS: u32 = 0x4000;
    /// fs-verity files.
    pub const VERITY: u32 = 0x8000;
    /// The orphan file has entries.
    pub const ORPHAN_PRESENT: u32 = 0x10000;
}

/// Which set a feature bit belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureSet {
    /// `s_feature_compat`.
    Compat,
    /// `s_feature_incompat`.
    Incompat,
    /// `s_feature_ro_compat`.
    RoCompat,
}

/// Every named feature: set, bit, the name mke2fs/dumpe2fs use.
pub const FEATURE_NAMES: &[(FeatureSet, u32, &str)] = &[
    (FeatureSet::Compat, compat::DIR_PREALLOC, "dir_prealloc"),
    (FeatureSet::Compat, compat::IMAGIC_INODES, "imagic_inodes"),
    (FeatureSet::Compat, compat::HAS_JOURNAL, "has_journal"),
    (FeatureSet::Compat, compat::EXT_ATTR, "ext_attr"),
    (FeatureSet::Compat, compat::RESIZE_INODE, "resize_inode"),
    (FeatureSet::Compat, compat::DIR_INDEX, "dir_index"),
    (FeatureSet::Compat, compat::LAZY_BG, "lazy_bg"),
    (
        FeatureSet::Compat,
        compat::EXCLUDE_INODE,
        "snapshot_exclude",
    ),
    (FeatureSet::Compat, compat::EXCLUDE_BITMAP, "exclude_bitmap"),
    (FeatureSet::Compat, compat::SPARSE_SUPER2, "sparse_super2"),
    (FeatureSet::Compat, compat::FAST_COMMIT, "fast_commit"),
    (FeatureSet::Compat, compat::STABLE_INODES, "stable_inodes"),
    (FeatureSet::Compat, compat::ORPHAN_FILE, "orphan_file"),
    (FeatureSet::Incompat, incompat::COMPRESSION, "compression"),
    (FeatureSet::Incompat, incompat::FILETYPE, "filetype"),
    (FeatureSet::Incompat, incompat::RECOVER, "needs_recovery"),
    (FeatureSet::Incompat, incompat::JOURNAL_DEV, "journal_dev"),
    (FeatureSet::Incompat, incompat::META_BG, "meta_bg"),
    (FeatureSet::Incompat, incompat::EXTENTS, "extent"),
    (FeatureSet::Incompat, incompat::BIT64, "64bit"),
    (FeatureSet::Incompat, incompat::MMP, "mmp"),
    (FeatureSet::Incompat, incompat::FLEX_BG, "flex_bg"),
    (FeatureSet::Incompat, incompat::EA_INODE, "ea_inode"),
    (FeatureSet::Incompat, incompat::DIRDATA, "dirdata"),
    (
        FeatureSet::Incompat,
        incompat::CSUM_SEED,
        "metadata_csum_seed",
    ),
    (FeatureSet::Incompat, incompat::LARGEDIR, "large_dir"),
    (FeatureSet::Incompat, incompat::INLINE_DATA, "inline_data"),
    (FeatureSet::Incompat, incompat::ENCRYPT, "encrypt"),
    (FeatureSet::Incompat, incompat::CASEFOLD, "casefold"),
    (
        FeatureSet::RoCompat,
        ro_compat::SPARSE_SUPER,
        "sparse_super",
    ),
    (FeatureSet::RoCompat, ro_compat::LARGE_FILE, "large_file"),
    (FeatureSet::RoCompat, ro_compat::BTREE_DIR, "btree_dir"),
    (FeatureSet::RoCompat, ro_compat::HUGE_FILE, "huge_file"),
    (FeatureSet::RoCompat, ro_compat::GDT_CSUM, "uninit_bg"),
    (FeatureSet::RoCompat, ro_compat::DIR_NLINK, "dir_nlink"),
    (FeatureSet::RoCompat, ro_compat::EXTRA_ISIZE, "extra_isize"),
    (FeatureSet::RoCompat, ro_compat::HAS_SNAPSHOT, "snapshot"),
    (FeatureSet::RoCompat, ro_compat::QUOTA, "quota"),
    (FeatureSet::RoCompat, ro_compat::BIGALLOC, "bigalloc"),
    (
        FeatureSet::RoCompat,
        ro_compat::METADATA_CSUM,
        "metadata_csum",
    ),
    (FeatureSet::RoCompat, ro_compat::REPLICA, "replica"),
    (FeatureSet::RoCompat, ro_compat::READONLY, "read-only"),
    (FeatureSet::RoCompat, ro_compat::PROJECT, "project"),
    (
        FeatureSet::RoCompat,
        ro_compat::SHARED_BLOCKS,
        "shared_blocks",
    ),
    (FeatureSet::RoCompat, ro_compat::VERITY, "verity"),
    (
        FeatureSet::RoCompat,
        ro_compat::ORPHAN_PRESENT,
        "orphan_present",
    ),
];

/// The three feature words of a superblock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// Compatible features.
    pub compat: u32,
    /// Incompatible features.
    pub incompat: u32,
    /// Read-only-compatible features.
    pub ro_compat: u32,
}

impl Features {
    /// Is compat feature `bit` set?
    pub fn has_compat(&self, bit: u32) -> bool {
        self.compat & bit != 0
    }

    /// Is incompat feature `bit` set?
    pub fn has_incompat(&self, bit: u32) -> bool {
        self.incompat & bit != 0
    }

    /// Is ro_compat feature `bit` set?
    pub fn has_ro_compat(&self, bit: u32) -> bool {
        self.ro_compat & bit != 0
    }

    /// Names of every set feature, in dumpe2fs order; unknown bits as `FEATURE_X0x..`.
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (set, word, prefix) in [
            (FeatureSet::Compat, self.compat, "C"),
            (FeatureSet::Incompat, self.incompat, "I"),
            (FeatureSet::RoCompat, self.ro_compat, "R"),
        ] {
            for bit in (0..32).map(|i| 1u32 << i).filter(|b| word & b != 0) {
                match FEATURE_NAMES
                    .iter()
                    .find(|(s, b, _)| *s == set && *b == bit)
                {
                    Some((_, _, name)) => out.push(name.to_string()),
                    None => out.push(format!("FEATURE_{prefix}{}", bit.trailing_zeros())),
                }
            }
        }
        out
    }
}

/// Incompat bits the reader understands.
pub const READ_INCOMPAT_SUPPORTED: u32 = incompat::FILETYPE
    | incompat::META_BG
    | incompat::EXTENTS
    | incompat::BIT64
    | incompat::MMP
    | incompat::FLEX_BG
    | incompat::EA_INODE
    | incompat::CSUM_SEED
    | incompat::LARGEDIR
    | incompat::INLINE_DATA
    // (Structure as any image's; names and contents are ciphertext: the checker reads
    // them, the reader refuses them, `Ext4::open`.)
    | incompat::ENCRYPT;

/// ro_compat bits whose meaning changes what a reader returns and that it does not
/// implement (reading would give wrong answers, so they are refused): none. (bigalloc
/// allocates in clusters but maps blocks: the reader reads it; the writers and the
/// checker, which allocate and count clusters, refuse it.)
pub const READ_RO_COMPAT_REFUSED: u32 = 0;
