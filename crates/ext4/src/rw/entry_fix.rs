//! A checker's fixes of single directory entries named by their place (the area of
//! entries and the byte offset in it), one code path for the leaves of block
//! directories and the areas of inline ones: remove the entry, salvage the area's chain,
//! set the entry's file type, make its name legal.

use super::dir_leaf::LeafFmt;
use super::dir_salvage::salvage_area;
use crate::format::dirent::Dirents;

/// What to do to the entry (or the area) at the byte named.
#[derive(Clone, Copy, Debug)]
pub(crate) enum EntryFix {
    /// Remove the entry.
    Remove,
    /// Salvage the area's chain of entries (e2fsck's salvage_directory).
    Salvage,
    /// Set the entry's file type.
    SetType(u8),
    /// Replace '/' and NUL in the name with '.' (an empty name: remove the entry).
    FixName,
}

/// Applies `fix` to the entry at `off` of `area`; false when no entry starts there.
pub(crate) fn edit_area(fmt: &LeafFmt, area: &mut [u8], off: usize, fix: EntryFix) -> bool {
    if let EntryFix::Salvage = fix {
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
        EntryFix::Remove => fmt.delete(area, off, rec_len, prev),
        EntryFix::FixName if name_len == 0 => fmt.delete(area, off, rec_len, prev),
        EntryFix::FixName => {
            for c in &mut area[off + 8..off + 8 + name_len] {
                if *c == b'/' || *c == 0 {
                    *c = b'.';
                }
            }
        }
        EntryFix::SetType(ft) => area[off + 7] = ft,
        EntryFix::Salvage => {}
    }
    true
}
