//! e2fsck's fix of names a directory holds twice (rehash.c, duplicate_search_and_fix,
//! run on every directory pass 2 found a duplicate in): the entries are sorted by name,
//! and of one name by inode number, highest first; each entry of the same name as the
//! one before it is removed when it names the same inode as that one does now (a removed
//! entry names inode 0), else renamed with e2fsck's mutate_name (`name~0`, `name~1`, ...,
//! unique in the directory); repeated until nothing changes. A `.` or `..` past the
//! first two entries is removed (pass 2's "duplicate '.' entry"). An htree directory
//! whose names changed loses its index (e2fsck rebuilds it; the kernel reads a linear
//! directory as well).

use super::dir_edit::DirEdit;
use usfs_fs::Result;

/// One live entry, as the fix sees it.
#[derive(Clone, Debug)]
pub(super) struct Named {
    /// Its directory block.
    pub(super) lblk: u64,
    /// Its offset in the block.
    pub(super) off: usize,
    /// Inode number; 0 once removed.
    pub(super) ino: u32,
    /// Its name (as renamed).
    pub(super) name: Vec<u8>,
    /// Its file type code.
    pub(super) ft: u8,
    /// Removed or renamed by the fix.
    pub(super) changed: bool,
}

/// The live entries of a directory and the places (block, offset) of stray `.` and `..`.
type Entries = (Vec<Named>, Vec<(u64, usize)>);

impl DirEdit<'_> {
    /// Fixes the duplicate names of this directory (module header); returns whether
    /// anything changed.
    pub fn fix_duplicates(&mut self) -> Result<bool> {
        let (mut ents, dots) = self.named_entries()?;
        let mut changed = !dots.is_empty();
        for (lblk, off) in dots {
            self.remove_at(lblk, off)?;
        }
        let renamed = resolve(&mut ents);
        for e in ents.iter().filter(|e| e.changed) {
            changed = true;
            if e.ino == 0 {
                self.remove_at(e.lblk, e.off)?;
            } else {
                self.rename_at(e.lblk, e.off, &e.name)?;
            }
        }
        if renamed && self.indexed() {
            self.drop_index()?;
        }
        Ok(changed)
    }

    /// The live entries of the leaf blocks (not `.` and `..` of block 0), and the places
    /// of `.` and `..` entries found elsewhere.
    fn named_entries(&mut self) -> Result<Entries> {
        let indexed = self.indexed();
        let (mut ents, mut dots) = (Vec::new(), Vec::new());
        for lblk in 0..self.d.nblocks() {
            if indexed && (lblk == 0 || self.is_dx_node(lblk)?) {
                continue;
            }
            let (_, buf) = self.read_raw(lblk)?;
            let skip = if lblk == 0 && !indexed { 2 } else { 0 };
            for (i, e) in self.live(lblk, &buf)?.into_iter().enumerate() {
                if i < skip {
                    continue;
                }
                if e.name == b"." || e.name == b".." {
                    dots.push((lblk, e.off));
                    continue;
                }
                ents.push(Named {
                    lblk,
                    off: e.off,
                    ino: e.ino,
                    name: e.name.to_vec(),
                    ft: e.file_type,
                    changed: false,
                });
            }
        }
        Ok((ents, dots))
    }

    /// Writes `name` over the name of the entry at byte `off` of block `lblk` (it is
    /// never longer than the record's padding allows: [`mutate_name`]).
    fn rename_at(&mut self, lblk: u64, off: usize, name: &[u8]) -> Result<()> {
        let (pblk, mut buf) = self.read_raw(lblk)?;
        let rec_len = self
            .live(lblk, &buf)?
            .iter()
            .find(|e| e.off == off)
            .map(|e| e.rec_len);
        match rec_len {
            Some(r) if crate::format::dirent::entry_size(name.len()) <= r => {}
            _ => return Err(self.corrupt(lblk, format!("no room to rename the entry at {off}"))),
        }
        buf[off + 6] = name.len() as u8;
        if !self.fmt.has_ft {
            buf[off + 7] = 0;
        }
        buf[off + 8..off + 8 + name.len()].copy_from_slice(name);
        self.write_leaf(pblk, buf)
    }
}

/// e2fsck's duplicate_search_and_fix over `ents`, repeated until it changes nothing;
/// returns whether any entry was renamed.
pub(super) fn resolve(ents: &mut [Named]) -> bool {
    let mut renamed = false;
    // Each pass removes or renames at least one entry, which then sorts apart from the
    // rest of its name: the passes are bounded by the entries (and a little more).
    for _ in 0..ents.len() + 2 {
        ents.sort_by(|a, b| a.name.cmp(&b.name).then(b.ino.cmp(&a.ino)));
        let mut fixed = false;
        for i in 1..ents.len() {
            if ents[i].ino == 0 || ents[i].name != ents[i - 1].name {
                continue;
            }
            fixed = true;
            ents[i].changed = true;
            if ents[i].ino == ents[i - 1].ino {
                ents[i].ino = 0;
                continue;
            }
            let mut new = ents[i].name.clone();
            mutate_name(&mut new);
            while ents
                .iter()
                .enumerate()
                .any(|(j, e)| j != i && e.name == new)
            {
                mutate_name(&mut new);
            }
            ents[i].name = new;
            renamed = true;
        }
        if !fixed {
            break;
        }
    }
    renamed
}

/// e2fsck's mutate_name: a name not ending in `~digits` gets `~0` (in the padding of its
/// record: two more bytes when that fits, else over its last two), one that does is
/// counted up (`~9` to `~10` by carrying into the character before).
fn mutate_name(s: &mut Vec<u8>) {
    let l = s.len();
    let mut i = l - 1;
    while i > 0 && s[i].is_ascii_digit() {
        i -= 1;
    }
    if i == l - 1 || s[i] != b'~' {
        let n = if (l - 1) & 3 < 2 { l + 2 } else { (l + 3) & !3 }.min(255);
        s.resize(n, 0);
        s[n - 2] = b'~';
        s[n - 1] = b'0';
        return;
    }
    for i in (0..l).rev() {
        if s[i].is_ascii_digit() {
            if s[i] == b'9' {
                s[i] = b'0';
                continue;
            }
            s[i] += 1;
            return;
        }
        if i == 1 {
            match s[0] {
                b'z' => s[0] = b'A',
                b'Z' => {
                    s[0] = b'~';
                    s[1] = b'0';
                }
                _ => s[0] += 1,
            }
        } else if i > 0 {
            s[i] = b'1';
            s[i - 1] = b'~';
        } else if s[0] == b'~' {
            s[0] = b'a';
        } else {
            s[0] += 1;
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::{mutate_name, resolve, Named};

    fn m(s: &str) -> String {
        let mut v = s.as_bytes().to_vec();
        mutate_name(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn names_mutate_as_e2fsck_mutates_them() {
        // (f_dup_de's expect.1 names these.)
        assert_eq!(m("fstab"), "fstab~0");
        assert_eq!(m("localtime"), "localtime~0");
        assert_eq!(m("mailcap.dpkg-old"), "mailcap.dpkg-o~0");
        assert_eq!(m("modules.conf.old"), "modules.conf.o~0");
        assert_eq!(m("fstab~0"), "fstab~1");
        // The count carries into the character before it, the length kept.
        assert_eq!(m("fstab~9"), "fsta~10");
    }

    fn named(name: &str, ino: u32, off: usize) -> Named {
        Named {
            lblk: 0,
            off,
            ino,
            name: name.as_bytes().to_vec(),
            ft: 1,
            changed: false,
        }
    }

    #[test]
    fn same_inode_goes_other_inodes_are_renamed() {
        let mut e = vec![
            named("a", 5, 12),
            named("a", 5, 24),
            named("a", 7, 36),
            named("b", 3, 48),
        ];
        assert!(resolve(&mut e));
        e.sort_by_key(|x| x.off);
        let got: Vec<(String, u32)> = e
            .iter()
            .map(|x| (String::from_utf8(x.name.clone()).unwrap(), x.ino))
            .collect();
        // Sorted a(7), a(5), a(5): the first a(5) differs from a(7) and becomes a~0; the
        // next pass finds the other a(5) after a(7) again and makes it a~1 (a~0 taken).
        let want: Vec<(String, u32)> = vec![
            ("a~0".into(), 5),
            ("a~1".into(), 5),
            ("a".into(), 7),
            ("b".into(), 3),
        ];
        assert_eq!(got, want);
        // Two entries of one name and inode: the second goes.
        let mut e = vec![named("c", 9, 12), named("c", 9, 24)];
        assert!(!resolve(&mut e));
        assert_eq!(e.iter().filter(|x| x.ino == 0 && x.changed).count(), 1);
    }
}
