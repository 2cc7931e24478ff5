//! A checker's fixes of entries of inline directories. The checker names an entry by its
//! byte offset in the inline store (i_block, then the `system.data` value), as it walks
//! the two entry areas; each fix edits the area holding that byte and writes the store
//! back (i_size follows it).

use super::dir_leaf::LeafFmt;
use super::dir_salvage::salvage_area;
use super::inline::areas;
use super::{InodeRec, Volume};
use crate::format::dirent::Dirents;
use usfs_fs::{Error, Result, Structure};

/// What to do to the entry (or the area) at the byte named.
#[derive(Clone, Copy, Debug)]
pub(crate) enum InlineFix {
    /// Remove the entry.
    Remove,
    /// Salvage the area's chain of entries (e2fsck's salvage_directory).
    Salvage,
    /// Set the entry's file type.
    SetType(u8),
    /// Replace '/' and NUL in the name with '.' (an empty name: remove the entry).
    FixName,
}

impl Volume {
    /// Applies `fix` to byte `off` of inline directory `dir`'s store.
    pub(crate) fn inline_fix(
        &mut self,
        dir: &mut InodeRec,
        off: usize,
        fix: InlineFix,
    ) -> Result<()> {
        let mut b = self.inline_store(dir)?;
        let area = areas(b.len())
            .into_iter()
            .find(|&(s, e)| off >= s && off < e);
        let Some((s, e)) = area else {
            return Err(Error::corrupt(
                Structure::InlineData,
                format!(
                    "inline directory {}: no entry area holds byte {off}",
                    dir.ino
                ),
            )
            .with_ino(dir.ino));
        };
        let fmt = self.inline_fmt();
        if !edit_area(&fmt, &mut b[s..e], off - s, fix) {
            return Err(Error::corrupt(
                Structure::Directory,
                format!("inline directory {}: no entry at byte {off}", dir.ino),
            )
            .with_ino(dir.ino));
        }
        self.inline_dir_put(dir, b)
    }
}

/// Applies `fix` to the entry at `off` of `area`; false when no entry starts there.
fn edit_area(fmt: &LeafFmt, area: &mut [u8], off: usize, fix: InlineFix) -> bool {
    if let InlineFix::Salvage = fix {
        salvage_area(fmt, area);
        return true;
    }
    let mut prev = None;
    let mut found = None;
    for e in Dirents::lenient(area, fmt.bs, fmt.has_ft) {
        let Ok(e) = e else { break };
        if e.off == off {
            found = Some((e.rec_len, e.name.len()));
            break;
        }
        prev = Some((e.off, e.rec_len));
    }
    let Some((rec_len, name_len)) = found else {
        return false;
    };
    match fix {
        InlineFix::Remove => fmt.delete(area, off, rec_len, prev),
        InlineFix::FixName if name_len == 0 => fmt.delete(area, off, rec_len, prev),
        InlineFix::FixName => {
            for c in &mut area[off + 8..off + 8 + name_len] {
                if *c == b'/' || *c == 0 {
                    *c = b'.';
                }
            }
        }
        InlineFix::SetType(ft) => area[off + 7] = ft,
        InlineFix::Salvage => {}
    }
    true
}
