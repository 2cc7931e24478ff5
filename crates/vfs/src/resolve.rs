//! Path resolution across the host and the mounted images.
//!
//! A path is walked component by component from its start (the host root for absolute
//! paths, else the real or virtual working directory, or the directory of an `*at` call's
//! descriptor). Host components are handled lexically; on reaching a mount prefix the walk
//! continues inside that image with the back end's `lookup`.
//!
//! Inside an image, `..` pops the directories actually walked. A `..` written by the
//! caller at the image root leaves the mount to the prefix's parent, as on a kernel mount;
//! a `..` or absolute target coming from a symbolic link inside the image never leaves it
//! (absolute targets restart at the image root), so no link in an image can reach a host
//! file. More than [`MAX_SYMLINKS`] links gives ELOOP.

use crate::mounts::{normalize_abs, MountTable};
use usfs_fs::path::{self, Step};
use usfs_fs::{FileType, Ino};

pub use usfs_fs::path::MAX_SYMLINKS;

/// A place inside a mounted image, with the directories walked from the image root to it
/// (so `..`, `getcwd` and `realpath` work without parent pointers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VPath {
    /// Index of the mount in the [`MountTable`].
    pub mount: usize,
    /// `(inode, name)` from the root (`(root, "")`) to the place itself; never empty.
    pub stack: Vec<(Ino, Vec<u8>)>,
}

impl VPath {
    /// The root of mount `mount`.
    pub fn root(mount: usize, root: Ino) -> VPath {
        VPath {
            mount,
            stack: vec![(root, Vec::new())],
        }
    }

    /// The inode this path names.
    pub fn ino(&self) -> Ino {
        self.stack.last().expect("stack never empty").0
    }

    /// The path inside the image (`/` for the root).
    pub fn inner_path(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (_, name) in &self.stack[1..] {
            out.push(b'/');
            out.extend_from_slice(name);
        }
        if out.is_empty() {
            out.push(b'/');
        }
        out
    }

    /// The host path of this place: the mount prefix and the path inside.
    pub fn host_path(&self, table: &MountTable) -> Vec<u8> {
        let mut out = table.get(self.mount).spec.prefix.clone();
        for (_, name) in &self.stack[1..] {
            out.push(b'/');
            out.extend_from_slice(name);
        }
        out
    }
}

/// Where a path leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// Outside every mount: the normalised absolute host path.
    Host(Vec<u8>),
    /// Outside every mount, but the walk went through one (`PREFIX/..`): the kernel
    /// cannot walk the caller's path (the prefix need not exist on the host), so callers
    /// use this normalised absolute host path instead.
    HostViaMount(Vec<u8>),
    /// Inside a mount.
    Virtual(VPath),
}

/// Where a relative path starts.
#[derive(Clone, Copy, Debug)]
pub enum Start<'a> {
    /// A host directory, as an absolute path.
    Host(&'a [u8]),
    /// A directory inside a mount.
    Virtual(&'a VPath),
}

/// What went wrong, as an errno. Only paths that reach a mount fail: host paths are
/// resolved lexically and left to the kernel.
pub type Errno = i32;

/// One component still to walk; `derived` when it came from a symbolic link's target.
struct Token {
    name: Vec<u8>,
    derived: bool,
}

enum Here {
    Host(Vec<u8>),
    Virt(VPath),
}

/// Resolves `path` from `start` (ignored for absolute paths). The last component is
/// followed if it is a symbolic link only when `follow_last` is set or the path ends in
/// `/` (which also requires a directory). An empty path is ENOENT.
pub fn resolve(
    table: &MountTable,
    start: Start<'_>,
    path: &[u8],
    follow_last: bool,
) -> Result<Resolved, Errno> {
    resolve_as(table, start, path, follow_last, None)
}

/// [`resolve`] for a caller with `creds`: walking through a directory inside a mount
/// needs search permission on it (EACCES otherwise), as on a kernel mount. `None` checks
/// nothing (root, or the FUSE server, where the kernel checks).
pub fn resolve_as(
    table: &MountTable,
    start: Start<'_>,
    path: &[u8],
    follow_last: bool,
    creds: Option<&crate::Creds>,
) -> Result<Resolved, Errno> {
    if path.is_empty() {
        return Err(libc::ENOENT);
    }
    let must_dir = path.ends_with(b"/");
    let follow_last = follow_last || must_dir;
    let mut todo: Vec<Token> = Vec::new();
    push_tokens(&mut todo, path, false);
    let mut here = if path[0] == b'/' {
        Here::Host(b"/".to_vec())
    } else {
        match start {
            Start::Host(dir) => Here::Host(normalize_abs(dir)),
            Start::Virtual(vp) => Here::Virt(vp.clone()),
        }
    };
    // A host start inside a prefix (the process began with its cwd there): walk from the
    // mount root instead.
    if let Here::Host(h) = &here {
        if let Some(i) =
            (0..table.len()).find(|&i| crate::mounts::is_under(h, &table.get(i).spec.prefix))
        {
            let rest = h[table.get(i).spec.prefix.len()..].to_vec();
            push_tokens(&mut todo, &rest, false);
            here = Here::Virt(VPath::root(i, root_of(table, i)?));
        }
    }
    let mut links = 0usize;
    let mut touched = matches!(here, Here::Virt(_));
    while let Some(tok) = todo.pop() {
        let last = todo.is_empty();
        match &mut here {
            Here::Host(cur) => {
                match tok.name.as_slice() {
                    b"." => {}
                    b".." => pop_host(cur),
                    name => {
                        if cur.len() > 1 {
                            cur.push(b'/');
                        }
                        cur.extend_from_slice(name);
                    }
                }
                if let Some(i) = table.exact(cur) {
                    here = Here::Virt(VPath::root(i, root_of(table, i)?));
                    touched = true;
                }
            }
            Here::Virt(vp) => match tok.name.as_slice() {
                b"." => {}
                b".." => {
                    if vp.stack.len() > 1 {
                        vp.stack.pop();
                    } else if !tok.derived {
                        let mut up = table.get(vp.mount).spec.prefix.clone();
                        pop_host(&mut up);
                        here = Here::Host(up);
                    }
                }
                name => {
                    let fs = fs_of(table, vp.mount)?;
                    let may_search = |m: &usfs_fs::Metadata| {
                        creds.is_none_or(|c| c.may(m, crate::creds::MAY_EXEC))
                    };
                    let follow = !last || follow_last;
                    match path::step(fs.as_ref(), vp.ino(), name, follow, &mut links, &may_search)
                        .map_err(|e| e.errno())?
                    {
                        Step::Node(ino) => vp.stack.push((ino, name.to_vec())),
                        Step::Link(target) => {
                            if target[0] == b'/' {
                                vp.stack.truncate(1);
                            }
                            push_tokens(&mut todo, &target, true);
                        }
                    }
                }
            },
        }
    }
    match here {
        Here::Host(h) if touched => Ok(Resolved::HostViaMount(h)),
        Here::Host(h) => Ok(Resolved::Host(h)),
        Here::Virt(vp) => {
            if must_dir {
                let fs = fs_of(table, vp.mount)?;
                let meta = fs.getattr(vp.ino()).map_err(|e| e.errno())?;
                if meta.file_type != FileType::Directory {
                    return Err(libc::ENOTDIR);
                }
            }
            Ok(Resolved::Virtual(vp))
        }
    }
}

/// Pushes the components of `path` so that the first one is popped next.
fn push_tokens(todo: &mut Vec<Token>, path: &[u8], derived: bool) {
    let comps: Vec<&[u8]> = path::components(path).collect();
    todo.extend(comps.into_iter().rev().map(|c| Token {
        name: c.to_vec(),
        derived,
    }));
}

/// Lexical `..` on an absolute host path (`/..` is `/`).
fn pop_host(cur: &mut Vec<u8>) {
    match cur.iter().rposition(|&b| b == b'/') {
        Some(0) | None => cur.truncate(1),
        Some(i) => cur.truncate(i),
    }
}

fn fs_of(table: &MountTable, i: usize) -> Result<&std::sync::Arc<dyn usfs_fs::FileSystem>, Errno> {
    table.get(i).fs().map_err(|(errno, _)| errno)
}

fn root_of(table: &MountTable, i: usize) -> Result<Ino, Errno> {
    Ok(fs_of(table, i)?.root())
}
