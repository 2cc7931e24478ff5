//! What to make: [`MkfsOptions`] (mke2fs's knobs) and the feature set.

use crate::format::features::{compat, incompat, ro_compat, FeatureSet, Features, FEATURE_NAMES};
use usfs_fs::{Error, Result};

/// Options of `mkfs.ext4`, named after mke2fs's.
#[derive(Clone, Debug)]
pub struct MkfsOptions {
    /// Size of the file system in bytes.
    pub size: u64,
    /// Block size (-b); default 1024 below 512 MiB, else 4096 (mke2fs's "small" type).
    pub block_size: Option<u32>,
    /// Number of inodes (-N).
    pub inodes: Option<u64>,
    /// Bytes per inode (-i); default by size as mke2fs.conf's types.
    pub bytes_per_inode: Option<u64>,
    /// Inode record size (256; 512 and 1024 are accepted too).
    pub inode_size: u32,
    /// Percentage of blocks reserved for the superuser (-m).
    pub reserved_percent: f64,
    /// Volume label (-L), at most 16 bytes.
    pub label: Vec<u8>,
    /// Volume UUID (-U); random when absent.
    pub uuid: Option<[u8; 16]>,
    /// Feature edits (-O): `name` turns a feature on, `^name` off.
    pub features: Vec<String>,
    /// RAID stride in blocks (-E stride=).
    pub stride: u32,
    /// RAID stripe width in blocks (-E stripe_width=).
    pub stripe_width: u32,
    /// Owner of the root directory (-E root_owner=); without it root:root, or with -d
    /// the source root's owner.
    pub root_owner: Option<(u32, u32)>,
    /// Creation time, seconds since the epoch (-T); now when absent.
    pub time: Option<i64>,
    /// Journal size in blocks; mke2fs's default for the size when absent.
    pub journal_blocks: Option<u32>,
}

impl MkfsOptions {
    /// mke2fs's defaults for an image of `size` bytes.
    pub fn new(size: u64) -> MkfsOptions {
        MkfsOptions {
            size,
            block_size: None,
            inodes: None,
            bytes_per_inode: None,
            inode_size: 256,
            reserved_percent: 5.0,
            label: Vec::new(),
            uuid: None,
            features: Vec::new(),
            stride: 0,
            stripe_width: 0,
            root_owner: None,
            time: None,
            journal_blocks: None,
        }
    }
}

/// The default feature set: mke2fs 1.47's ext4 (Debian's mke2fs.conf) without
/// resize_inode, which usfs does not write.
pub fn default_features() -> Features {
    Features {
        compat: compat::HAS_JOURNAL | compat::EXT_ATTR | compat::DIR_INDEX,
        incompat: incompat::FILETYPE | incompat::EXTENTS | incompat::BIT64 | incompat::FLEX_BG,
        ro_compat: ro_compat::SPARSE_SUPER
            | ro_compat::LARGE_FILE
            | ro_compat::HUGE_FILE
            | ro_compat::DIR_NLINK
            | ro_compat::EXTRA_ISIZE
            | ro_compat::METADATA_CSUM,
    }
}

/// Features the writer can turn on or off.
const EDITABLE: &[&str] = &[
    "has_journal",
    "ext_attr",
    "dir_index",
    "64bit",
    "flex_bg",
    "sparse_super",
    "large_file",
    "huge_file",
    "dir_nlink",
    "extra_isize",
    "metadata_csum",
    "metadata_csum_seed",
    "uninit_bg",
];

/// Applies -O edits to the default set. Unknown features and features usfs cannot write
/// are usage errors naming them.
pub fn apply_feature_edits(edits: &[String]) -> Result<Features> {
    let mut f = default_features();
    for item in edits
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.is_empty())
    {
        let (on, name) = match item.strip_prefix('^') {
            Some(n) => (false, n),
            None => (true, item),
        };
        if name == "resize_inode" && !on {
            continue; // never written anyway
        }
        let Some(&(set, bit, _)) = FEATURE_NAMES.iter().find(|(_, _, n)| *n == name) else {
            return Err(Error::incompatible(format!("unknown feature '{name}'")));
        };
        if !EDITABLE.contains(&name) {
            return Err(Error::incompatible(format!(
                "feature '{name}' cannot be {} by usfs mkfs.ext4",
                if on { "enabled" } else { "disabled" }
            )));
        }
        let word = match set {
            FeatureSet::Compat => &mut f.compat,
            FeatureSet::Incompat => &mut f.incompat,
            FeatureSet::RoCompat => &mut f.ro_compat,
        };
        if on {
            *word |= bit;
        } else {
            *word &= !bit;
        }
    }
    if f.has_ro_compat(ro_compat::METADATA_CSUM) {
        f.ro_compat &= !ro_compat::GDT_CSUM;
    } else if f.has_incompat(incompat::CSUM_SEED) {
        return Err(Error::incompatible(
            "metadata_csum_seed needs metadata_csum".to_string(),
        ));
    }
    Ok(f)
}
