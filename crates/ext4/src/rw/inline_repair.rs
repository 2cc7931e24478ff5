//! A checker's fixes of entries of inline directories. The checker names an entry by its
//! byte offset in the inline store (i_block, then the `system.data` value), as it walks
//! the two entry areas; each fix edits the area holding that byte and writes the store
//! back (i_size follows it).

use super::entry_fix::{edit_area, EntryFix};
use super::inline::areas;
use super::{InodeRec, Volume};
use usfs_fs::{Error, Result, Structure};

impl Volume {
    /// Applies `fix` to byte `off` of inline directory `dir`'s store.
    pub(crate) fn inline_fix(
        &mut self,
        dir: &mut InodeRec,
        off: usize,
        fix: EntryFix,
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
