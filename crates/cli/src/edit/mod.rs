//! Editing commands in the spirit of e2tools and mtools: `usfs cp`, `mkdir`, `rm`, `mv`,
//! `ln`, `chmod`, `chown` on `IMAGE:PATH` arguments, with no FUSE and no root. Each
//! command opens the image read-write through the journaled volume
//! ([`usfs_ext4::rw::Ext4Rw`]), holding the image's writer lock, and closes it cleanly.

pub(crate) mod cp;
pub(crate) mod simple;

use crate::image::{CliError, CliResult};
use std::path::{Path, PathBuf};
use usfs_ext4::rw::Ext4Rw;
use usfs_fs::{Error, FileSystem, Ino};

/// An argument naming a place inside an image (`IMAGE:PATH`) or on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// A path inside an image.
    Image {
        /// The image file.
        image: PathBuf,
        /// The path inside it (absolute; `/` when empty).
        path: String,
    },
    /// A host path.
    Host(PathBuf),
}

/// Splits `IMAGE:PATH`: the part before the first `:` must name an existing file (an
/// image); anything else is a host path.
pub(crate) fn parse_place(arg: &str) -> Place {
    if let Some((img, path)) = arg.split_once(':') {
        let p = Path::new(img);
        if !img.is_empty() && p.metadata().is_ok_and(|m| !m.is_dir()) {
            let path = if path.starts_with('/') {
                path.to_string()
            } else {
                format!("/{path}")
            };
            return Place::Image {
                image: p.to_path_buf(),
                path,
            };
        }
    }
    Place::Host(PathBuf::from(arg))
}

/// An image open for changes, with its writer lock held until it is closed.
pub(crate) struct Editor {
    /// The image file.
    pub image: PathBuf,
    /// The volume.
    pub fs: std::sync::Arc<Ext4Rw>,
    owned: usfs_vfs::owner::Owned,
}

impl Editor {
    /// Opens `image` for changes as its only writer ([`usfs_vfs::owner::open_rw`]).
    pub(crate) fn open(image: &Path) -> CliResult<Editor> {
        let owned =
            usfs_vfs::owner::open_rw(image).map_err(|e| CliError::at(image.display(), e))?;
        Ok(Editor {
            image: image.to_path_buf(),
            fs: owned.fs.clone(),
            owned,
        })
    }

    /// Commits and closes the image cleanly.
    pub(crate) fn close(self) -> CliResult<()> {
        let r = self.fs.shutdown();
        drop(self.owned);
        r.map_err(|e| CliError::at(self.image.display(), e))
    }

    /// An error about `path` inside this image.
    pub(crate) fn err(&self, path: &str, e: impl std::fmt::Display) -> CliError {
        CliError(format!("{}:{path}: {e}", self.image.display()))
    }

    /// Resolves `path` (following symlinks on the way; the last one when `follow`).
    pub(crate) fn resolve(&self, path: &str, follow: bool) -> Result<Ino, Error> {
        usfs_fs::path::resolve(&*self.fs, path.as_bytes(), follow)
    }

    /// The directory holding `path` and the last component's name.
    pub(crate) fn parent(&self, path: &str) -> CliResult<(Ino, Vec<u8>)> {
        let trimmed = path.trim_end_matches('/');
        let (dir, name) = match trimmed.rfind('/') {
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => ("", trimmed),
        };
        if name.is_empty() || name == "." || name == ".." {
            return Err(self.err(path, "invalid name"));
        }
        let dir = if dir.is_empty() { "/" } else { dir };
        let d = self.resolve(dir, true).map_err(|e| self.err(dir, e))?;
        Ok((d, name.as_bytes().to_vec()))
    }

    /// Is `ino` a directory?
    pub(crate) fn is_dir(&self, ino: Ino) -> bool {
        self.fs
            .getattr(ino)
            .is_ok_and(|m| m.file_type == usfs_fs::FileType::Directory)
    }
}

/// The caller's umask (read without changing it for good).
pub(crate) fn umask() -> u32 {
    // SAFETY: umask swaps the process's mask; it is put back at once.
    unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m as u32
    }
}

/// The caller's effective uid and gid (owners of what the commands create).
pub(crate) fn creator() -> (u32, u32) {
    // SAFETY: plain system calls without arguments.
    unsafe { (libc::geteuid(), libc::getegid()) }
}
