//! The mount table: which host path prefix shows which image.
//!
//! `usfs run` passes the table to its children in the environment variable
//! [`MountTable::ENV`], one `PREFIX=IMAGE` line per mount (absolute paths; a prefix holds
//! no `=` and neither path a newline). Images are opened on first use, so a process that
//! never touches a mount pays nothing but parsing the variable.
//!
//! A read-write mount (`usfs run --rw`) is one whose image has an owner: the variable
//! [`MountTable::OWNERS_ENV`] holds `PREFIX=SOCKET` lines, and such a mount's file system
//! is a [`Remote`] of the owner listening at SOCKET instead of the image opened here.

use crate::channel::Remote;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use usfs_fs::FileSystem;

/// One requested mount: a host path prefix and the image to show there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountSpec {
    /// Absolute, lexically normalised host path without a trailing slash (never `/`).
    pub prefix: Vec<u8>,
    /// Absolute path of the image file.
    pub image: PathBuf,
    /// The socket of the image's owner, for a read-write mount.
    pub owner: Option<PathBuf>,
}

impl MountSpec {
    /// Parses `PREFIX=IMAGE`; both must be absolute.
    pub fn parse(s: &str) -> Result<MountSpec, String> {
        let (prefix, image) = s
            .split_once('=')
            .ok_or_else(|| format!("mount `{s}`: expected PREFIX=IMAGE"))?;
        if !prefix.starts_with('/') || !image.starts_with('/') {
            return Err(format!(
                "mount `{s}`: PREFIX and IMAGE must be absolute paths"
            ));
        }
        if image.contains('\n') {
            return Err(format!("mount `{s}`: paths must not contain newlines"));
        }
        let prefix = normalize_abs(prefix.as_bytes());
        if prefix == b"/" {
            return Err(format!("mount `{s}`: cannot mount over /"));
        }
        Ok(MountSpec {
            prefix,
            image: PathBuf::from(image),
            owner: None,
        })
    }

    /// The `PREFIX=IMAGE` form.
    pub fn to_env(&self) -> String {
        format!(
            "{}={}",
            String::from_utf8_lossy(&self.prefix),
            self.image.display()
        )
    }
}

/// A mount: its spec and the back end, opened on first use.
pub struct Mount {
    /// What was asked for.
    pub spec: MountSpec,
    /// The opened file system, or the errno and message of why it could not be opened.
    fs: OnceLock<Result<Arc<dyn FileSystem>, (i32, String)>>,
    /// pread access to the image for large reads (set when the image is opened mapped).
    bulk: OnceLock<Option<Arc<crate::data::bulk::BulkImage>>>,
    /// The connection to the owner of a read-write mount, once made.
    remote: OnceLock<Arc<Remote>>,
}

impl Mount {
    /// A mount not yet opened.
    pub fn new(spec: MountSpec) -> Mount {
        Mount {
            spec,
            fs: OnceLock::new(),
            bulk: OnceLock::new(),
            remote: OnceLock::new(),
        }
    }

    /// A mount of an already opened file system.
    pub fn with_fs(spec: MountSpec, fs: Arc<dyn FileSystem>) -> Mount {
        let m = Mount::new(spec);
        let _ = m.fs.set(Ok(fs));
        m
    }

    /// The file system, opening the image on first use. An image that cannot be opened
    /// (missing, corrupt, unsupported) gives EIO (or the open's own errno) for every
    /// path under the prefix, and the message for whoever wants to report it.
    pub fn fs(&self) -> Result<&Arc<dyn FileSystem>, (i32, &str)> {
        let r = self.fs.get_or_init(|| {
            if let Some(sock) = &self.spec.owner {
                return match Remote::connect(sock) {
                    Ok(r) => {
                        let r = Arc::new(r);
                        let _ = self.bulk.set(None);
                        let _ = self.remote.set(Arc::clone(&r));
                        Ok(r as Arc<dyn FileSystem>)
                    }
                    Err(e) => Err((libc::EIO, format!("{}: {e}", self.spec.image.display()))),
                };
            }
            match crate::open_image_mapped(&self.spec.image) {
                Ok((fs, map)) => {
                    let bulk = map.and_then(|(base, len)| {
                        crate::data::bulk::BulkImage::new(&self.spec.image, base, len).map(Arc::new)
                    });
                    let _ = self.bulk.set(bulk);
                    Ok(fs)
                }
                Err(e) => {
                    // Not `e.errno()` for every error, on purpose: this errno answers every
                    // path under the prefix, so it says "the mount failed", as a dead disk
                    // would (EIO), not what failed inside it (an unsupported feature would
                    // make every stat EOPNOTSUPP). Only an OS error opening the image file
                    // keeps its own errno, through the workspace's one mapping.
                    let errno = match &e {
                        usfs_fs::Error::Io(_) => e.errno(),
                        _ => libc::EIO,
                    };
                    Err((errno, format!("{}: {e}", self.spec.image.display())))
                }
            }
        });
        match r {
            Ok(fs) => Ok(fs),
            Err((errno, msg)) => Err((*errno, msg.as_str())),
        }
    }

    /// pread access to the image for large reads, once the image is open.
    pub fn bulk(&self) -> Option<Arc<crate::data::bulk::BulkImage>> {
        self.bulk.get().cloned().flatten()
    }

    /// True for a read-write mount (one with an owner).
    pub fn writable(&self) -> bool {
        self.spec.owner.is_some()
    }

    /// The owner's connection of a read-write mount (`None`: read-only, or not opened
    /// yet: [`Self::fs`] opens it).
    pub fn remote(&self) -> Option<&Arc<Remote>> {
        self.remote.get()
    }
}

/// All mounts of a process. Prefixes never nest.
#[derive(Default)]
pub struct MountTable {
    mounts: Vec<Mount>,
}

impl MountTable {
    /// The environment variable `usfs run` passes the table in.
    pub const ENV: &'static str = "USFS_MOUNTS";

    /// The environment variable naming the owners of read-write mounts: one
    /// `PREFIX=SOCKET` per line.
    pub const OWNERS_ENV: &'static str = "USFS_OWNERS";

    /// Builds a table; rejects nested or duplicate prefixes.
    pub fn new(mounts: Vec<Mount>) -> Result<MountTable, String> {
        for (i, a) in mounts.iter().enumerate() {
            for b in &mounts[i + 1..] {
                if is_under(&a.spec.prefix, &b.spec.prefix)
                    || is_under(&b.spec.prefix, &a.spec.prefix)
                {
                    return Err(format!(
                        "mount prefixes {} and {} overlap",
                        String::from_utf8_lossy(&a.spec.prefix),
                        String::from_utf8_lossy(&b.spec.prefix)
                    ));
                }
            }
        }
        Ok(MountTable { mounts })
    }

    /// Parses the [`ENV`](Self::ENV) form: one `PREFIX=IMAGE` per line.
    pub fn parse(s: &str) -> Result<MountTable, String> {
        MountTable::parse_with_owners(s, "")
    }

    /// Parses the [`ENV`](Self::ENV) and [`OWNERS_ENV`](Self::OWNERS_ENV) forms.
    pub fn parse_with_owners(s: &str, owners: &str) -> Result<MountTable, String> {
        let mut specs = s
            .lines()
            .filter(|l| !l.is_empty())
            .map(MountSpec::parse)
            .collect::<Result<Vec<_>, _>>()?;
        for l in owners.lines().filter(|l| !l.is_empty()) {
            let (prefix, sock) = l
                .split_once('=')
                .ok_or_else(|| format!("owner `{l}`: expected PREFIX=SOCKET"))?;
            let prefix = normalize_abs(prefix.as_bytes());
            let spec = specs
                .iter_mut()
                .find(|s| s.prefix == prefix)
                .ok_or_else(|| format!("owner `{l}`: no such mount"))?;
            spec.owner = Some(PathBuf::from(sock));
        }
        MountTable::new(specs.into_iter().map(Mount::new).collect())
    }

    /// The [`OWNERS_ENV`](Self::OWNERS_ENV) form of a list of specs.
    pub fn owners_value(specs: &[MountSpec]) -> String {
        specs
            .iter()
            .filter_map(|s| {
                let o = s.owner.as_ref()?;
                Some(format!(
                    "{}={}",
                    String::from_utf8_lossy(&s.prefix),
                    o.display()
                ))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The [`ENV`](Self::ENV) form of a list of specs.
    pub fn env_value(specs: &[MountSpec]) -> String {
        specs
            .iter()
            .map(MountSpec::to_env)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// True when there are no mounts.
    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty()
    }

    /// The mount with index `i`.
    pub fn get(&self, i: usize) -> &Mount {
        &self.mounts[i]
    }

    /// The number of mounts.
    pub fn len(&self) -> usize {
        self.mounts.len()
    }

    /// The mount whose prefix is exactly `path` (normalised).
    pub fn exact(&self, path: &[u8]) -> Option<usize> {
        self.mounts.iter().position(|m| m.spec.prefix == path)
    }

    /// True when the absolute `path` might name something inside a mount: it lies under a
    /// prefix, or holds a `..` that could lead into one. Cheap; used to send ordinary
    /// paths straight to libc.
    pub fn may_touch(&self, path: &[u8]) -> bool {
        if self.mounts.is_empty() {
            return false;
        }
        if path.windows(3).any(|w| w == b"/..") || path.windows(2).any(|w| w == b"//") {
            return true;
        }
        self.mounts.iter().any(|m| is_under(path, &m.spec.prefix))
    }
}

/// True when `path` is `prefix` or lies below it.
pub(crate) fn is_under(path: &[u8], prefix: &[u8]) -> bool {
    path.starts_with(prefix) && (path.len() == prefix.len() || path[prefix.len()] == b'/')
}

/// Lexical normalisation of an absolute path: no `.`, `..`, empty components or trailing
/// slash (`..` of `/` is `/`).
pub(crate) fn normalize_abs(path: &[u8]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = Vec::new();
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = Vec::with_capacity(path.len());
    for p in parts {
        out.push(b'/');
        out.extend_from_slice(p);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_round_trip() {
        let s = MountSpec::parse("/mnt/a/./b/=/img/x=y.img").unwrap();
        assert_eq!(s.prefix, b"/mnt/a/b");
        assert_eq!(s.image, PathBuf::from("/img/x=y.img"));
        assert_eq!(MountSpec::parse(&s.to_env()).unwrap(), s);
        assert!(MountSpec::parse("rel=/x").is_err());
        assert!(MountSpec::parse("/=/x").is_err());
        assert!(MountSpec::parse("/a").is_err());
    }

    #[test]
    fn nested_prefixes_are_rejected() {
        assert!(MountTable::parse("/a=/i1\n/a/b=/i2").is_err());
        assert!(MountTable::parse("/a=/i1\n/ab=/i2").is_ok());
    }

    #[test]
    fn owners_make_mounts_writable() {
        let t = MountTable::parse_with_owners("/a=/i1\n/b=/i2", "/b/=/run/s").unwrap();
        assert!(!t.get(0).writable());
        assert!(t.get(1).writable());
        assert_eq!(t.get(1).spec.owner, Some(PathBuf::from("/run/s")));
        assert!(MountTable::parse_with_owners("/a=/i1", "/c=/s").is_err());
        let mut specs = vec![t.get(0).spec.clone(), t.get(1).spec.clone()];
        assert_eq!(MountTable::owners_value(&specs), "/b=/run/s");
        specs[1].owner = None;
        assert_eq!(MountTable::owners_value(&specs), "");
    }

    #[test]
    fn may_touch() {
        let t = MountTable::parse("/mnt/img=/i").unwrap();
        assert!(t.may_touch(b"/mnt/img"));
        assert!(t.may_touch(b"/mnt/img/x"));
        assert!(!t.may_touch(b"/mnt/imgx"));
        assert!(!t.may_touch(b"/etc/passwd"));
        assert!(t.may_touch(b"/mnt/x/../img"));
        assert_eq!(normalize_abs(b"/../a//b/./c/.."), b"/a/b");
    }
}
