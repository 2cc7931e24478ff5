//! A superblock summary in the words of `dump.erofs -s`.

use super::{incompat_names, Erofs};
use crate::format::superblock::compat;

fn uuid(u: &[u8; 16]) -> String {
    let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..16].concat()
    )
}

impl Erofs {
    pub(crate) fn describe_superblock(&self) -> Vec<(String, String)> {
        let sb = &self.sb;
        let name = sb.volume_name();
        let end = name.iter().position(|&b| b == 0).unwrap_or(16);
        let mut compat_f = Vec::new();
        if sb.feature_compat() & compat::SB_CHKSUM != 0 {
            compat_f.push("sb_csum");
        }
        if sb.feature_compat() & compat::MTIME != 0 {
            compat_f.push("mtime");
        }
        let v: Vec<(&str, String)> = vec![
            ("Filesystem magic number", format!("{:#010X}", sb.magic())),
            ("Filesystem blocks", sb.blocks().to_string()),
            (
                "Filesystem inode metadata start block",
                sb.meta_blkaddr().to_string(),
            ),
            (
                "Filesystem shared xattr metadata start block",
                sb.xattr_blkaddr().to_string(),
            ),
            ("Filesystem root nid", sb.root_nid().to_string()),
            ("Filesystem packed nid", sb.packed_nid().to_string()),
            ("Filesystem inode count", sb.inos().to_string()),
            (
                "Filesystem created",
                format!("{} (seconds since the epoch)", sb.build_time()),
            ),
            ("Filesystem block size", self.bs().to_string()),
            (
                "Filesystem volume name",
                String::from_utf8_lossy(&name[..end]).into_owned(),
            ),
            ("Filesystem UUID", uuid(sb.uuid())),
            ("Filesystem compat features", compat_f.join(" ")),
            (
                "Filesystem incompat features",
                incompat_names(sb.feature_incompat()),
            ),
            ("Filesystem checksum", format!("{:#010x}", sb.checksum())),
        ];
        v.into_iter().map(|(k, s)| (k.to_string(), s)).collect()
    }
}
