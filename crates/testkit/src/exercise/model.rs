//! The in-memory model of one worker's subtree: inodes (file bytes, directory entries,
//! symlink targets, permissions, user xattrs, a known mtime) and the namespace over them,
//! with the POSIX outcome of each namespace change, so every real result can be
//! predicted and checked.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Index of a node in the model.
pub(super) type Id = usize;

/// What a node is.
#[derive(Clone, Debug)]
pub(super) enum Kind {
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A directory: name -> node.
    Dir(BTreeMap<Vec<u8>, Id>),
    /// A symbolic link and its target.
    Symlink(Vec<u8>),
}

/// One inode of the model.
#[derive(Clone, Debug)]
pub(super) struct Node {
    /// Its kind and contents.
    pub kind: Kind,
    /// Permission bits (mode & 0o7777).
    pub perm: u32,
    /// `user.*` extended attributes.
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Directory entries naming it (files and symlinks; directories have one).
    pub links: u32,
    /// mtime set by utimens and not changed since: (seconds, nanoseconds).
    pub mtime: Option<(i64, u32)>,
}

/// An entry found by [`Tree::entries`].
#[derive(Clone, Debug)]
pub(super) struct Entry {
    /// Path relative to the subtree root.
    pub path: PathBuf,
    /// The directory holding it.
    pub parent: Id,
    /// Its name there.
    pub name: Vec<u8>,
    /// The node it names.
    pub id: Id,
}

/// A subtree: nodes (freed slots are `None`) and its root directory.
#[derive(Clone, Debug)]
pub(super) struct Tree {
    nodes: Vec<Option<Node>>,
    /// The root directory (the subtree's top, itself never changed by the worker).
    pub root: Id,
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::new()
    }
}

impl Tree {
    /// An empty directory as root (permissions 0o755).
    pub(super) fn new() -> Tree {
        Tree {
            nodes: vec![Some(Node::new(Kind::Dir(BTreeMap::new()), 0o755))],
            root: 0,
        }
    }

    /// The node `id` (which must be live).
    pub(super) fn node(&self, id: Id) -> &Node {
        self.nodes[id].as_ref().expect("live node")
    }

    /// The node `id`, to change.
    pub(super) fn node_mut(&mut self, id: Id) -> &mut Node {
        self.nodes[id].as_mut().expect("live node")
    }

    /// Live nodes.
    pub(super) fn live(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_some()).count()
    }

    /// The entries of directory `id`.
    pub(super) fn dir(&self, id: Id) -> &BTreeMap<Vec<u8>, Id> {
        match &self.node(id).kind {
            Kind::Dir(d) => d,
            _ => panic!("node {id} is not a directory"),
        }
    }

    fn dir_mut(&mut self, id: Id) -> &mut BTreeMap<Vec<u8>, Id> {
        match &mut self.node_mut(id).kind {
            Kind::Dir(d) => d,
            _ => panic!("node {id} is not a directory"),
        }
    }

    /// True when `id` is a directory.
    pub(super) fn is_dir(&self, id: Id) -> bool {
        matches!(self.node(id).kind, Kind::Dir(_))
    }

    /// Every entry below the root, parents before children.
    pub(super) fn entries(&self) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut stack = vec![(self.root, PathBuf::new())];
        while let Some((dir, path)) = stack.pop() {
            for (name, &id) in self.dir(dir) {
                let p = path.join(OsStr::from_bytes(name));
                if self.is_dir(id) {
                    stack.push((id, p.clone()));
                }
                out.push(Entry {
                    path: p,
                    parent: dir,
                    name: name.clone(),
                    id,
                });
            }
        }
        out
    }

    /// Every directory with its path (the root first, as the empty path).
    pub(super) fn dirs(&self) -> Vec<(PathBuf, Id)> {
        let mut v = vec![(PathBuf::new(), self.root)];
        v.extend(
            self.entries()
                .into_iter()
                .filter(|e| self.is_dir(e.id))
                .map(|e| (e.path, e.id)),
        );
        v
    }

    /// Adds a new node named `name` in `dir` (the name must be free).
    pub(super) fn add(&mut self, dir: Id, name: &[u8], kind: Kind, perm: u32) -> Id {
        let id = match self.nodes.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.nodes.push(None);
                self.nodes.len() - 1
            }
        };
        self.nodes[id] = Some(Node::new(kind, perm));
        self.dir_mut(dir).insert(name.to_vec(), id);
        self.touch_dir(dir);
        id
    }

    /// Adds a hard link to `id` named `name` in `dir`.
    pub(super) fn link(&mut self, id: Id, dir: Id, name: &[u8]) {
        self.dir_mut(dir).insert(name.to_vec(), id);
        self.node_mut(id).links += 1;
        self.touch_dir(dir);
    }

    /// Removes entry `name` of `dir`, freeing its node when no entry names it any more.
    pub(super) fn remove(&mut self, dir: Id, name: &[u8]) {
        let id = self.dir_mut(dir).remove(name).expect("entry exists");
        self.touch_dir(dir);
        let n = self.node_mut(id);
        n.links -= 1;
        if n.links == 0 {
            self.nodes[id] = None;
        }
    }

    /// Renames entry `from_name` of `from` to `to_name` of `to`, replacing what that names
    /// (the caller has checked that POSIX allows it).
    pub(super) fn rename(&mut self, from: Id, from_name: &[u8], to: Id, to_name: &[u8]) {
        let id = self.dir(from)[from_name];
        if self.dir(to).get(to_name) == Some(&id) {
            return; // Two links to one inode: rename does nothing.
        }
        if self.dir(to).contains_key(to_name) {
            self.remove(to, to_name);
        }
        self.dir_mut(from).remove(from_name);
        self.dir_mut(to).insert(to_name.to_vec(), id);
        self.touch_dir(from);
        self.touch_dir(to);
        if from != to && self.is_dir(id) {
            // Its ".." changed; whether that sets its mtime is the file system's business.
            self.node_mut(id).mtime = None;
        }
    }

    /// True when `id` is `anc` or lies below it.
    pub(super) fn is_within(&self, id: Id, anc: Id) -> bool {
        if id == anc {
            return true;
        }
        if !self.is_dir(anc) {
            return false;
        }
        self.dir(anc)
            .values()
            .any(|&c| self.is_dir(c) && self.is_within(id, c))
    }

    /// Bytes of the longest relative path below `id` ("/name/name..."; 0 for a leaf).
    pub(super) fn deepest(&self, id: Id) -> usize {
        match &self.node(id).kind {
            Kind::Dir(d) => d
                .iter()
                .map(|(n, &c)| 1 + n.len() + self.deepest(c))
                .max()
                .unwrap_or(0),
            _ => 0,
        }
    }

    /// Subdirectories of directory `id` (its link count is 2 + this).
    pub(super) fn subdirs(&self, id: Id) -> u32 {
        self.dir(id).values().filter(|&&c| self.is_dir(c)).count() as u32
    }

    fn touch_dir(&mut self, dir: Id) {
        self.node_mut(dir).mtime = None;
    }
}

impl Node {
    fn new(kind: Kind, perm: u32) -> Node {
        Node {
            kind,
            perm,
            xattrs: BTreeMap::new(),
            links: 1,
            mtime: None,
        }
    }

    /// The file's bytes (panics for other kinds).
    pub(super) fn data_mut(&mut self) -> &mut Vec<u8> {
        self.mtime = None;
        match &mut self.kind {
            Kind::File(d) => d,
            _ => panic!("not a file"),
        }
    }
}

/// Joins `rel` to `base` (an empty `rel` is `base` itself).
pub(super) fn under(base: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        base.to_path_buf()
    } else {
        base.join(rel)
    }
}
