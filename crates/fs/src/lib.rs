//! The backend-neutral file-system interface of usfs.
//!
//! Every back end (ext4, EROFS, later PLFS) implements [`FileSystem`]; the CLI, the
//! LD_PRELOAD library and the FUSE server only ever talk to this trait, so each concept
//! (lookup, read, readdir, xattrs) has one code path above the back ends.

mod error;
mod exercise;
pub mod layout;
pub mod path;
mod types;
mod write;

pub use error::{Corruption, Error, Result, Structure};
pub use exercise::exercise;
pub use types::format_uuid;
pub use types::{DirEntry, FileType, Ino, Metadata, StatFs, Timestamp};
pub use write::{Fallocate, FileSystemWrite, NewNode, RenameFlags, SetAttr};

/// What [`FileSystem::step_attrs`] finds.
#[derive(Debug)]
pub struct StepAttrs {
    /// The directory's attributes.
    pub dir: Metadata,
    /// `None` when the directory is not one; else the lookup: the inode and, when asked
    /// for, its attributes.
    pub found: Option<Result<(Ino, Option<Metadata>)>>,
}

/// Read access to a mounted image. All methods take `&self` and may be called from many
/// threads at once.
///
/// Inodes are named by [`Ino`] numbers that stay valid for the life of the value. Names are
/// raw bytes (any byte but `/` and NUL), never assumed to be UTF-8.
pub trait FileSystem: Send + Sync {
    /// Short name of the on-disk format ("ext4", "ext3", "ext2", "erofs").
    fn format_name(&self) -> &'static str;

    /// The root directory.
    fn root(&self) -> Ino;

    /// Finds `name` in directory `dir`. `.` and `..` are resolved too.
    fn lookup(&self, dir: Ino, name: &[u8]) -> Result<Ino>;

    /// Attributes of an inode.
    fn getattr(&self, ino: Ino) -> Result<Metadata>;

    /// One step of a path walk in one call (one round trip for a file system served by
    /// another process): the attributes of `dir` and, when it is a directory, the lookup
    /// of `name` in it, with the attributes of what it names when `child_attrs` is set
    /// (or the back end has them at no cost). The default makes the separate calls.
    fn step_attrs(&self, dir: Ino, name: &[u8], child_attrs: bool) -> Result<StepAttrs> {
        let dir_meta = self.getattr(dir)?;
        if dir_meta.file_type != FileType::Directory {
            return Ok(StepAttrs {
                dir: dir_meta,
                found: None,
            });
        }
        let found = self.lookup(dir, name).and_then(|ino| {
            let m = if child_attrs {
                Some(self.getattr(ino)?)
            } else {
                None
            };
            Ok((ino, m))
        });
        Ok(StepAttrs {
            dir: dir_meta,
            found: Some(found),
        })
    }

    /// Lists directory `dir` from position `cookie` (0 = start), without `.` and `..`, in
    /// the order the kernel's driver for the format lists it. `f` receives each entry and
    /// the cookie of the position after it (pass that cookie back to resume there); it
    /// returns `false` to stop early.
    fn readdir(
        &self,
        dir: Ino,
        cookie: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()>;

    /// Lists directory `dir` as readdir(3) sees it on a kernel mount: every entry, `.` and
    /// `..` included where the kernel's driver puts them, from position `pos` (0 = start).
    /// `f` receives each entry and the position after it (its `d_off`: pass it back to
    /// resume there); it returns `false` to stop early. Positions are this method's own:
    /// they need not be [`readdir`](FileSystem::readdir)'s cookies. The default lists `.`
    /// (position 0) and `..` (position 1) first, then `readdir`'s entries at `2 + cookie`.
    fn readdir_with_dots(
        &self,
        dir: Ino,
        pos: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        let dot = |name: &[u8], ino| DirEntry {
            name: name.to_vec(),
            ino,
            file_type: Some(FileType::Directory),
        };
        if pos == 0 && !f(dot(b".", dir), 1) {
            return Ok(());
        }
        if pos <= 1 && !f(dot(b"..", self.lookup(dir, b"..")?), 2) {
            return Ok(());
        }
        let mut out_of_range = false;
        self.readdir(
            dir,
            pos.saturating_sub(2),
            &mut |e, next| match next.checked_add(2) {
                Some(n) => f(e, n),
                None => {
                    out_of_range = true;
                    false
                }
            },
        )?;
        if out_of_range {
            let msg = format!("directory {dir}: position past 2^64");
            return Err(Error::corrupt(Structure::Directory, msg).with_ino(dir));
        }
        Ok(())
    }

    /// Reads file data at byte `offset` into `buf`; returns the bytes read (0 at or past the
    /// end of the file). Holes and unwritten ranges read as zeros.
    fn read_at(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize>;

    /// The target of a symbolic link.
    fn readlink(&self, ino: Ino) -> Result<Vec<u8>>;

    /// Names of the extended attributes of an inode, with their namespace prefix
    /// (`user.`, `trusted.`, `security.`, `system.`).
    fn list_xattrs(&self, ino: Ino) -> Result<Vec<Vec<u8>>>;

    /// The value of one extended attribute ([`Error::NoData`] if absent).
    fn get_xattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>>;

    /// The first range of stored data at or after `offset` (SEEK_DATA), as
    /// `start..end` in file bytes, or `None` if only a hole remains. Unwritten extents
    /// count as holes. Back ends without holes return `offset..size`.
    fn next_data(&self, ino: Ino, offset: u64) -> Result<Option<std::ops::Range<u64>>>;

    /// The stored bytes of file `ino` from `offset` on, straight from the image, when the
    /// image is memory-mapped and the data is stored uncompressed and contiguously there:
    /// the longest such run, at most `max` bytes. `None` when the bytes must be read with
    /// [`read_at`](Self::read_at) (holes, inline or compressed data, unmapped images).
    /// This is the zero-copy data path (SplitFS's reads by memcpy from a mapping).
    fn mapped_data(&self, _ino: Ino, _offset: u64, _max: usize) -> Result<Option<&[u8]>> {
        Ok(None)
    }

    /// Space and inode totals.
    fn statfs(&self) -> Result<StatFs>;

    /// The I/O counters of the device under this file system (bytes and requests read
    /// from the image: I/O amplification is measured with these).
    fn io_stats(&self) -> usfs_dev::IoSnapshot;

    /// A human summary of the superblock (like `dumpe2fs -h`), as ordered key/value pairs.
    fn describe(&self) -> Vec<(String, String)>;
}
