//! Quota files written anew (e2fsck's "Update quota info for quota type N"): the usage
//! the check counted, with the limits, deadlines and grace periods the file had.

use crate::problem::{Code, Problem};
use crate::quota::QuotaFix;
use usfs_ext4::rw::Volume;
use usfs_fs::Result;

/// Applies `p` if it is a quota problem: writes the file its check found to write.
pub(super) fn apply(v: &mut Volume, p: &Problem, fixes: &[QuotaFix]) -> Result<()> {
    if p.code != Code::QuotaUsage {
        return Ok(());
    }
    let t = p.found().unwrap_or(u64::MAX) as usize;
    let Some(f) = fixes.iter().find(|f| f.qtype == t) else {
        return Err(usfs_fs::Error::Invalid);
    };
    v.write_quota_file(f.ino, f.qtype, f.grace, &f.dquots)
}
