//! The tree a tar stream describes, built entry by entry as mkfs.erofs 1.9.3 builds it
//! (lib/tar.c, lib/rebuild.c): paths are resolved from the root (empty and `.`
//! components skipped, `..` goes up but never above the root), directories a path needs
//! but the archive has not (yet) named are made 0755 (plus the group/other write bits
//! of their parent) with the parent's owner and time; a later entry replaces an earlier
//! one of the same path (a directory over a directory keeps its entries and gains the
//! new attributes); a hard link shares its target's inode. With `aufs`, `.wh.NAME`
//! becomes an overlayfs whiteout (a 0/0 character device NAME, and its directory gets
//! `trusted.overlay.origin`) and `.wh..wh..opq` makes its directory opaque
//! (`trusted.overlay.opaque=y`); `ovlfs_strip` drops the whiteouts and those xattrs.

use crate::entry::{Meta, Xattrs};
use std::collections::BTreeMap;

/// overlayfs' opaque-directory xattr.
pub(crate) const OPAQUE: &[u8] = b"trusted.overlay.opaque";
/// The xattr mkfs.erofs puts on a directory holding whiteouts.
pub(crate) const ORIGIN: &[u8] = b"trusted.overlay.origin";
/// aufs' whiteout prefix.
const WH: &[u8] = b".wh.";
/// aufs' opaque-directory marker.
const WH_OPQ: &[u8] = b".wh..wh..opq";

/// A file's data: the ranges of the file that hold data and where each is stored.
#[derive(Clone, Debug, Default)]
pub(crate) struct Data {
    /// `(offset in the file, length, offset in the store)`, in file order.
    pub(crate) segs: Vec<(u64, u64, u64)>,
}

/// What an inode is.
#[derive(Debug)]
pub(crate) enum What {
    /// A directory: entries by name.
    Dir(BTreeMap<Vec<u8>, usize>),
    /// A regular file.
    File(Data),
    /// A symbolic link's target.
    Symlink(Vec<u8>),
    /// A device node or fifo (the type is in the mode).
    Special,
}

/// One inode of the tree.
#[derive(Debug)]
pub(crate) struct Inode {
    /// Attributes (`ino` is the inode's index + 1, `nlink` is set by [`Build::finish`]).
    pub(crate) meta: Meta,
    /// Extended attributes.
    pub(crate) xattrs: Xattrs,
    /// What it is.
    pub(crate) what: What,
    /// Its directory (a directory's parent; for other inodes the directory of the link
    /// that made them).
    pub(crate) parent: usize,
    /// A directory holding whiteouts made from aufs entries.
    whiteouts: bool,
}

/// One entry of the archive, as the parser hands it over.
pub(crate) struct Entry {
    /// The path.
    pub(crate) path: Vec<u8>,
    /// Attributes (mode with its type).
    pub(crate) meta: Meta,
    /// Extended attributes.
    pub(crate) xattrs: Xattrs,
    /// What it is (for a hard link: [`What::Special`], with `link` set).
    pub(crate) what: What,
    /// A hard link's target path.
    pub(crate) link: Option<Vec<u8>>,
}

/// How the tree is built.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rules {
    /// Turn aufs whiteouts into overlayfs ones (mkfs.erofs `--aufs`).
    pub(crate) aufs: bool,
    /// Leave overlayfs metadata out (mkfs.erofs `--ovlfs-strip=1`).
    pub(crate) ovlfs_strip: bool,
}

/// The tree being built: inode 0 is the root.
pub(crate) struct Build {
    pub(crate) inodes: Vec<Inode>,
    rules: Rules,
}

/// A path resolved: the directory it is in, its last name (`None`: the root itself)
/// and what aufs made of that name.
struct Place {
    dir: usize,
    name: Option<Vec<u8>>,
    whiteout: bool,
    opaque: bool,
}

impl Build {
    /// A tree with only the root, whose attributes are `root` until the archive names
    /// it.
    pub(crate) fn new(root: Meta, rules: Rules) -> Build {
        Build {
            inodes: vec![Inode {
                meta: root,
                xattrs: Vec::new(),
                what: What::Dir(BTreeMap::new()),
                parent: 0,
                whiteouts: false,
            }],
            rules,
        }
    }

    fn kids(&self, d: usize) -> Option<&BTreeMap<Vec<u8>, usize>> {
        match &self.inodes[d].what {
            What::Dir(k) => Some(k),
            _ => None,
        }
    }

    fn kids_mut(&mut self, d: usize) -> &mut BTreeMap<Vec<u8>, usize> {
        match &mut self.inodes[d].what {
            What::Dir(k) => k,
            _ => unreachable!("only directories are walked into"),
        }
    }

    /// A directory made for a path that needs it, under `parent`.
    fn implied_dir(&mut self, parent: usize, name: &[u8]) -> usize {
        let p = &self.inodes[parent].meta;
        let meta = Meta {
            mode: libc::S_IFDIR | 0o755 | (p.mode & 0o022),
            uid: p.uid,
            gid: p.gid,
            mtime: p.mtime,
            atime: p.mtime,
            ctime: p.mtime,
            ..Meta::default()
        };
        let i = self.push(meta, Vec::new(), What::Dir(BTreeMap::new()), parent);
        self.kids_mut(parent).insert(name.to_vec(), i);
        i
    }

    fn push(&mut self, meta: Meta, xattrs: Xattrs, what: What, parent: usize) -> usize {
        self.inodes.push(Inode {
            meta,
            xattrs,
            what,
            parent,
            whiteouts: false,
        });
        self.inodes.len() - 1
    }

    /// Resolves `path`: makes missing directories on the way when `create`; an error
    /// when a component on the way is not a directory (or is missing, without
    /// `create`).
    fn resolve(&mut self, path: &[u8], create: bool) -> Result<Place, &'static str> {
        let comps: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        let mut dir = 0usize;
        let mut place = Place {
            dir: 0,
            name: None,
            whiteout: false,
            opaque: false,
        };
        for (i, &c) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            if c == b".." {
                dir = self.inodes[dir].parent;
                if last {
                    // "a/.." names a directory itself: the one reached.
                    return self.named_dir(dir);
                }
                continue;
            }
            if last {
                let mut name = c;
                if self.rules.aufs {
                    if c == WH_OPQ {
                        place.dir = dir;
                        place.opaque = true;
                        return Ok(place);
                    }
                    if let Some(n) = c.strip_prefix(WH) {
                        name = n;
                        place.whiteout = true;
                    }
                }
                place.dir = dir;
                place.name = Some(name.to_vec());
                return Ok(place);
            }
            let next = self.kids(dir).and_then(|k| k.get(c).copied());
            dir = match next {
                Some(n) if matches!(self.inodes[n].what, What::Dir(_)) => n,
                Some(_) => return Err("a path component is not a directory"),
                None if create => self.implied_dir(dir, c),
                None => return Err("hard link target not found"),
            };
        }
        place.dir = dir;
        Ok(place)
    }

    /// The place of directory `d` itself (as its parent's entry).
    fn named_dir(&self, d: usize) -> Result<Place, &'static str> {
        if d == 0 {
            return Ok(Place {
                dir: 0,
                name: None,
                whiteout: false,
                opaque: false,
            });
        }
        let p = self.inodes[d].parent;
        let name = self
            .kids(p)
            .and_then(|k| k.iter().find(|(_, &v)| v == d).map(|(n, _)| n.clone()));
        Ok(Place {
            dir: p,
            name,
            whiteout: false,
            opaque: false,
        })
    }

    /// Adds one archive entry.
    pub(crate) fn add(&mut self, e: Entry) -> Result<(), &'static str> {
        let place = self.resolve(&e.path, true)?;
        if place.opaque {
            if place.dir == 0 {
                // mkfs.erofs 1.9.3 fails here too (ENOTDIR).
                return Err("an opaque marker (.wh..wh..opq) at the root");
            }
            set_xattr(&mut self.inodes[place.dir].xattrs, OPAQUE, b"y");
            return Ok(());
        }
        let is_dir = matches!(e.what, What::Dir(_));
        let Some(name) = place.name else {
            // The root itself ("./" or "/").
            if !is_dir {
                return Err("the root of the archive is not a directory");
            }
            self.update_dir(0, e.meta, e.xattrs);
            return Ok(());
        };
        let old = self.kids(place.dir).and_then(|k| k.get(&name).copied());
        if let Some(target) = &e.link {
            let t = self.resolve(target, false)?;
            let tdir = t.dir;
            let tnode = t
                .name
                .and_then(|n| self.kids(tdir).and_then(|k| k.get(&n).copied()))
                .ok_or("hard link target not found")?;
            if matches!(self.inodes[tnode].what, What::Dir(_)) {
                return Err("hard link to a directory");
            }
            if old != Some(tnode) {
                self.kids_mut(place.dir).insert(name, tnode);
            }
            return Ok(());
        }
        if let (Some(o), true) = (old, is_dir) {
            if matches!(self.inodes[o].what, What::Dir(_)) {
                self.update_dir(o, e.meta, e.xattrs);
                return Ok(());
            }
        }
        let (mut meta, what) = (e.meta, e.what);
        let what = if place.whiteout {
            // mkfs.erofs 1.9.3 gives whiteouts no permission bits.
            meta.mode = libc::S_IFCHR;
            meta.rdev = 0;
            meta.size = 0;
            self.inodes[place.dir].whiteouts = true;
            What::Special
        } else {
            what
        };
        let i = self.push(meta, e.xattrs, what, place.dir);
        self.kids_mut(place.dir).insert(name, i);
        Ok(())
    }

    /// A directory entry for an existing directory: new attributes, xattrs added.
    fn update_dir(&mut self, d: usize, meta: Meta, xattrs: Xattrs) {
        let node = &mut self.inodes[d];
        node.meta = meta;
        for (n, v) in xattrs {
            set_xattr(&mut node.xattrs, &n, &v);
        }
    }

    /// Finishes the tree: inode numbers, link counts, and the overlayfs metadata the
    /// rules ask for. Returns the inodes; those no entry reaches any more are left in
    /// place, unreferenced.
    pub(crate) fn finish(mut self) -> Vec<Inode> {
        let n = self.inodes.len();
        let mut links = vec![0u64; n];
        let mut stack = vec![0usize];
        links[0] = 1;
        while let Some(d) = stack.pop() {
            let strip = self.rules.ovlfs_strip && self.inodes[d].whiteouts;
            let mut whiteouts = Vec::new();
            if let What::Dir(kids) = &self.inodes[d].what {
                for (name, &k) in kids {
                    let is_wh = {
                        let m = &self.inodes[k].meta;
                        m.mode & libc::S_IFMT == libc::S_IFCHR && m.rdev == 0
                    };
                    if strip && is_wh {
                        whiteouts.push(name.clone());
                        continue;
                    }
                    links[k] += 1;
                    if matches!(self.inodes[k].what, What::Dir(_)) {
                        stack.push(k);
                    }
                }
            }
            for w in whiteouts {
                self.kids_mut(d).remove(&w);
            }
        }
        for (i, node) in self.inodes.iter_mut().enumerate() {
            node.meta.ino = i as u64 + 1;
            node.meta.nlink = links[i].max(1);
            if self.rules.ovlfs_strip {
                node.xattrs.retain(|(n, _)| n != OPAQUE);
            } else if node.whiteouts {
                set_xattr(&mut node.xattrs, ORIGIN, b"");
            }
        }
        self.inodes
    }
}

/// Sets xattr `name`, replacing one of the same name.
fn set_xattr(x: &mut Xattrs, name: &[u8], value: &[u8]) {
    match x.iter_mut().find(|(n, _)| n == name) {
        Some(slot) => slot.1 = value.to_vec(),
        None => x.push((name.to_vec(), value.to_vec())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(mode: u32) -> Meta {
        Meta {
            mode,
            ..Meta::default()
        }
    }

    fn entry(path: &str, mode: u32, what: What) -> Entry {
        Entry {
            path: path.as_bytes().to_vec(),
            meta: meta(mode),
            xattrs: Vec::new(),
            what,
            link: None,
        }
    }

    fn file(path: &str) -> Entry {
        entry(path, libc::S_IFREG | 0o644, What::File(Data::default()))
    }

    fn lookup(nodes: &[Inode], path: &str) -> Option<usize> {
        let mut d = 0;
        for c in path.split('/') {
            let What::Dir(k) = &nodes[d].what else {
                return None;
            };
            d = *k.get(c.as_bytes())?;
        }
        Some(d)
    }

    #[test]
    fn implied_dirs_links_replacement_and_dotdot() {
        let mut b = Build::new(meta(libc::S_IFDIR | 0o775), Rules::default());
        b.add(file("a/b/f")).unwrap();
        b.add(file("../../x/./y")).unwrap();
        let mut l = file("a/link");
        l.link = Some(b"a/b/f".to_vec());
        l.what = What::Special;
        b.add(l).unwrap();
        b.add(entry(
            "a",
            libc::S_IFDIR | 0o700,
            What::Dir(BTreeMap::new()),
        ))
        .unwrap();
        b.add(entry(
            "x/y",
            libc::S_IFLNK | 0o777,
            What::Symlink(b"t".to_vec()),
        ))
        .unwrap();
        let mut bad = file("z");
        bad.link = Some(b"nope".to_vec());
        assert!(b.add(bad).is_err());
        assert!(b.add(file("a/b/f/g")).is_err());
        let nodes = b.finish();
        let f = lookup(&nodes, "a/b/f").unwrap();
        assert_eq!(lookup(&nodes, "a/link"), Some(f));
        assert_eq!(nodes[f].meta.nlink, 2);
        let ab = lookup(&nodes, "a/b").unwrap();
        assert_eq!(nodes[ab].meta.mode, libc::S_IFDIR | 0o775);
        let a = lookup(&nodes, "a").unwrap();
        assert_eq!(nodes[a].meta.mode, libc::S_IFDIR | 0o700);
        let y = lookup(&nodes, "x/y").unwrap();
        assert!(matches!(nodes[y].what, What::Symlink(_)));
    }

    #[test]
    fn aufs_whiteouts() {
        for strip in [false, true] {
            let rules = Rules {
                aufs: true,
                ovlfs_strip: strip,
            };
            let mut b = Build::new(meta(libc::S_IFDIR | 0o755), rules);
            b.add(entry(
                "d",
                libc::S_IFDIR | 0o755,
                What::Dir(BTreeMap::new()),
            ))
            .unwrap();
            b.add(file("d/.wh..wh..opq")).unwrap();
            b.add(file("d/.wh.gone")).unwrap();
            b.add(file("d/kept")).unwrap();
            assert!(b.add(file(".wh..wh..opq")).is_err());
            let nodes = b.finish();
            let d = lookup(&nodes, "d").unwrap();
            let has = |n: &[u8]| nodes[d].xattrs.iter().any(|(m, _)| m == n);
            assert_eq!(has(OPAQUE), !strip);
            assert_eq!(has(ORIGIN), !strip);
            assert_eq!(lookup(&nodes, "d/gone").is_some(), !strip);
            if let Some(g) = lookup(&nodes, "d/gone") {
                assert_eq!(nodes[g].meta.mode & libc::S_IFMT, libc::S_IFCHR);
            }
            assert!(lookup(&nodes, "d/kept").is_some());
        }
    }
}
