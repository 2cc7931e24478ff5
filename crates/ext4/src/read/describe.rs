//! A superblock summary in the words of `dumpe2fs -h`.

use super::Ext4;
use crate::format::superblock::trim_nul;
use usfs_fs::format_uuid;

fn time_str(secs: u64) -> String {
    if secs == 0 {
        "n/a".into()
    } else {
        format!("{secs} (seconds since the epoch)")
    }
}

impl Ext4 {
    pub(crate) fn describe_superblock(&self) -> Vec<(String, String)> {
        let mut v = self.describe_identity();
        v.extend(self.describe_geometry());
        v.extend(self.describe_history());
        v.extend(self.describe_hash_and_checksum());
        let mut out: Vec<(String, String)> =
            v.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        out.extend(self.describe_journal());
        out
    }

    /// Name, UUID, magic, revision, features, flags, state, error behaviour, OS.
    fn describe_identity(&self) -> Vec<(&'static str, String)> {
        let sb = &self.core.sb;
        let g = &self.core.geo;
        let lossy = |b: &[u8]| String::from_utf8_lossy(trim_nul(b)).into_owned();
        let or = |s: String, none: &str| if s.is_empty() { none.into() } else { s };
        vec![
            (
                "Filesystem volume name",
                or(lossy(sb.s_volume_name()), "<none>"),
            ),
            (
                "Last mounted on",
                or(lossy(sb.s_last_mounted()), "<not available>"),
            ),
            ("Filesystem UUID", format_uuid(sb.s_uuid())),
            ("Filesystem magic number", format!("{:#06X}", sb.s_magic())),
            ("Filesystem revision #", format!("{}", sb.s_rev_level())),
            ("Filesystem features", g.features.names().join(" ")),
            ("Filesystem flags", {
                let f = sb.s_flags();
                let names = [
                    "signed_directory_hash",
                    "unsigned_directory_hash",
                    "test_filesystem",
                ];
                let set: Vec<&str> = (0..3)
                    .filter(|b| f & (1 << b) != 0)
                    .map(|b| names[b])
                    .collect();
                set.join(" ")
            }),
            (
                "Filesystem state",
                match sb.s_state() & 3 {
                    1 => "clean".into(),
                    3 => "clean with errors".into(),
                    2 => "not clean with errors".into(),
                    _ => "not clean".into(),
                },
            ),
            (
                "Errors behavior",
                match sb.s_errors() {
                    1 => "Continue".into(),
                    2 => "Remount read-only".into(),
                    3 => "Panic".into(),
                    e => format!("Unknown ({e})"),
                },
            ),
            (
                "Filesystem OS type",
                match sb.s_creator_os() {
                    0 => "Linux".into(),
                    1 => "Hurd".into(),
                    3 => "FreeBSD".into(),
                    o => format!("(unknown os {o})"),
                },
            ),
        ]
    }

    /// Counts, sizes and groups.
    fn describe_geometry(&self) -> Vec<(&'static str, String)> {
        let sb = &self.core.sb;
        let g = &self.core.geo;
        let is64 = g.is64();
        let mut v: Vec<(&str, String)> = vec![
            ("Inode count", g.inodes_count.to_string()),
            ("Block count", g.blocks_count.to_string()),
            ("Reserved block count", sb.r_blocks_count(is64).to_string()),
            ("Free blocks", sb.free_blocks_count(is64).to_string()),
            ("Free inodes", sb.s_free_inodes_count().to_string()),
            ("First block", g.first_data_block.to_string()),
            ("Block size", g.block_size.to_string()),
            ("Group descriptor size", g.desc_size.to_string()),
            (
                "Reserved GDT blocks",
                sb.s_reserved_gdt_blocks().to_string(),
            ),
            ("Blocks per group", g.blocks_per_group.to_string()),
            ("Inodes per group", g.inodes_per_group.to_string()),
            (
                "Inode blocks per group",
                (g.inodes_per_group as u64 * g.inode_size as u64)
                    .div_ceil(g.block_size as u64)
                    .to_string(),
            ),
            ("Block groups", g.group_count.to_string()),
        ];
        // (As dumpe2fs: with bigalloc the cluster size and clusters per group, and the
        // overhead where the superblock records it, each after its neighbour.)
        let after =
            |v: &mut Vec<(&'static str, String)>, key: &str, line: (&'static str, String)| {
                let at = v
                    .iter()
                    .position(|(k, _)| *k == key)
                    .map_or(v.len(), |i| i + 1);
                v.insert(at, line);
            };
        if sb.s_overhead_clusters() != 0 {
            let n = sb.s_overhead_clusters().to_string();
            after(&mut v, "Reserved block count", ("Overhead clusters", n));
        }
        if g.features
            .has_ro_compat(crate::format::features::ro_compat::BIGALLOC)
        {
            let size = (g.block_size as u64) << g.cluster_shift;
            after(&mut v, "Block size", ("Cluster size", size.to_string()));
            let per = sb.s_clusters_per_group().to_string();
            after(&mut v, "Blocks per group", ("Clusters per group", per));
        }
        if g.features
            .has_incompat(crate::format::features::incompat::FLEX_BG)
        {
            v.push((
                "Flex block group size",
                (1u64 << sb.s_log_groups_per_flex().min(31)).to_string(),
            ));
        }
        v
    }

    /// Times, mount counts, reserved owner, first inode, inode size and extra isize.
    fn describe_history(&self) -> Vec<(&'static str, String)> {
        let sb = &self.core.sb;
        let g = &self.core.geo;
        let t = |lo: u32, hi: u8| (hi as u64) << 32 | lo as u64;
        let mut v: Vec<(&str, String)> = vec![
            (
                "Filesystem created",
                time_str(t(sb.s_mkfs_time(), sb.s_mkfs_time_hi())),
            ),
            (
                "Last mount time",
                time_str(t(sb.s_mtime(), sb.s_mtime_hi())),
            ),
            (
                "Last write time",
                time_str(t(sb.s_wtime(), sb.s_wtime_hi())),
            ),
            ("Mount count", sb.s_mnt_count().to_string()),
            (
                "Maximum mount count",
                (sb.s_max_mnt_count() as i16).to_string(),
            ),
            (
                "Last checked",
                time_str(t(sb.s_lastcheck(), sb.s_lastcheck_hi())),
            ),
            ("Lifetime writes", format!("{} kB", sb.s_kbytes_written())),
            ("Reserved blocks uid", sb.s_def_resuid().to_string()),
            ("Reserved blocks gid", sb.s_def_resgid().to_string()),
            ("First inode", g.first_ino.to_string()),
            ("Inode size", g.inode_size.to_string()),
        ];
        if g.inode_size > 128 {
            v.push(("Required extra isize", sb.s_min_extra_isize().to_string()));
            v.push(("Desired extra isize", sb.s_want_extra_isize().to_string()));
        }
        v
    }

    /// Journal inode, directory hash, journal backup, checksums.
    fn describe_hash_and_checksum(&self) -> Vec<(&'static str, String)> {
        let sb = &self.core.sb;
        let mut v: Vec<(&str, String)> = Vec::new();
        if sb.s_journal_inum() != 0 {
            v.push(("Journal inode", sb.s_journal_inum().to_string()));
        }
        v.push((
            "Default directory hash",
            match sb.s_def_hash_version() {
                0 => "legacy".into(),
                1 => "half_md4".into(),
                2 => "tea".into(),
                h => format!("unknown ({h})"),
            },
        ));
        v.push(("Directory Hash Seed", format_uuid(sb.s_hash_seed())));
        match sb.s_jnl_backup_type() {
            0 => {}
            1 => v.push(("Journal backup", "inode blocks".into())),
            t => v.push(("Journal backup", format!("type {t}"))),
        }
        if let Some(seed) = self.core.csum_seed {
            v.push(("Checksum type", "crc32c".into()));
            v.push(("Checksum", format!("{:#010x}", sb.s_checksum())));
            v.push(("Checksum seed", format!("{seed:#010x}")));
        }
        v
    }
}
