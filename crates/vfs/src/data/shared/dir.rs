//! Where shared cache files live ([`CacheDir`]: the directory, its budget, the boot it
//! belongs to) and what names them ([`ImageId`]: the image's identity).
//!
//! The default directory is on a disk-backed file system (`/var/tmp/usfs-cache-UID`),
//! not tmpfs: a cache file filled with 2 MiB writes there is held in 2 MiB page-cache
//! folios, which a process maps with one fault each (and the kernel copies from in large
//! pieces), while /dev/shm (tmpfs without `huge=`, which an unprivileged user cannot
//! change) holds 4 KiB pages only, mapped 16 at a time by fault-around (measured on this
//! kernel, a fresh process reading a warm 256 MiB cache file: 1 MiB reads 25-30 GB/s
//! from 2 MiB folios vs 7-8 GB/s from tmpfs, by memcpy from the mapping or pread alike;
//! 4 KiB reads by memcpy 13-20 vs 5 GB/s). The page cache is coherent for the life of
//! the kernel, and file names carry the boot's id, so bytes a crash left half written
//! back to disk are never read after the reboot (such files are removed when room is
//! made).

/// What identifies an image file's contents: if any of these change, cached bytes of it
/// are not used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageId {
    /// st_dev of the image file.
    pub dev: u64,
    /// st_ino of the image file.
    pub ino: u64,
    /// Its size.
    pub size: u64,
    /// Modification time, nanoseconds.
    pub mtime_ns: i128,
    /// Status change time, nanoseconds.
    pub ctime_ns: i128,
    /// FNV-1a hash of the image's first [`HEAD_HASHED`] bytes (superblock and the start
    /// of the metadata): tells apart two images that reuse an inode number with the
    /// same size within one timestamp tick.
    pub head_hash: u64,
}

/// Bytes at the start of the image that [`ImageId::head_hash`] covers.
pub const HEAD_HASHED: usize = 8192;

/// FNV-1a, 64 bits.
pub(super) fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl ImageId {
    /// The identity of the image at `path` now, whose first bytes are `head` (up to
    /// [`HEAD_HASHED`] of them are hashed).
    pub fn of(path: &std::path::Path, head: &[u8]) -> Option<ImageId> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(ImageId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
            head_hash: fnv1a(&head[..head.len().min(HEAD_HASHED)]),
        })
    }

    /// The name of the cache file of inode `file_ino` during boot `boot` (a
    /// [`CacheDir::boot`] tag).
    pub(super) fn file_name(&self, boot: &str, file_ino: u64) -> String {
        format!(
            "{boot}-{:x}-{:x}-{:x}-{:x}-{:x}-{:x}.{:x}",
            self.dev, self.ino, self.size, self.mtime_ns, self.ctime_ns, self.head_hash, file_ino
        )
    }
}

/// Where cache files go and how much they may take.
#[derive(Clone, Debug)]
pub struct CacheDir {
    /// The directory (the user's own).
    pub path: std::path::PathBuf,
    /// Most bytes the directory's files may take.
    pub budget: u64,
    /// This boot's tag (`b` and 16 hex digits of a hash of the kernel's boot id), the
    /// first part of every cache file name made during this boot.
    pub boot: String,
}

/// The parent directories tried for the default cache directory, in order.
const DEFAULT_PARENTS: [&str; 2] = ["/var/tmp", "/dev/shm"];

/// The tag of this boot: a hash of /proc/sys/kernel/random/boot_id.
pub fn boot_tag() -> Option<String> {
    let id = std::fs::read("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim_ascii();
    (!id.is_empty()).then(|| format!("b{:016x}", fnv1a(id)))
}

impl CacheDir {
    /// The default: /var/tmp/usfs-cache-UID (/dev/shm/usfs-cache-UID when there is no
    /// /var/tmp), or `USFS_SHARED_CACHE_DIR`; budget from `USFS_SHARED_CACHE_MB`
    /// (default 1024 MiB); `None` when turned off, when neither directory is there, or
    /// when the boot id cannot be read (no /proc).
    pub fn default_for_user() -> Option<CacheDir> {
        let mb: u64 = std::env::var("USFS_SHARED_CACHE_MB")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1024);
        if mb == 0 {
            return None;
        }
        let path = match std::env::var_os("USFS_SHARED_CACHE_DIR") {
            Some(p) if !p.is_empty() => std::path::PathBuf::from(p),
            _ => {
                let parent = DEFAULT_PARENTS
                    .iter()
                    .map(std::path::Path::new)
                    .find(|p| p.is_dir())?;
                // SAFETY: geteuid has no preconditions.
                let uid = unsafe { libc::geteuid() };
                parent.join(format!("usfs-cache-{uid}"))
            }
        };
        Some(CacheDir {
            path,
            budget: mb.checked_mul(1 << 20)?,
            boot: boot_tag()?,
        })
    }

    /// Creates the directory if needed and checks it is ours (a directory, not a
    /// symbolic link, owned by us, no access for others).
    pub(super) fn ensure(&self) -> Option<()> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&self.path);
        let m = std::fs::symlink_metadata(&self.path).ok()?;
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        (m.is_dir() && m.uid() == uid && m.permissions().mode() & 0o077 == 0).then_some(())
    }

    /// Removes the files of other boots, then the oldest files until `need` more bytes
    /// fit the budget; false if they cannot fit.
    pub(super) fn make_room(&self, need: u64) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(rd) = std::fs::read_dir(&self.path) else {
            return false;
        };
        let ours = format!("{}-", self.boot);
        let mut files: Vec<(i64, u64, std::path::PathBuf)> = rd
            .filter_map(|e| {
                let e = e.ok()?;
                let m = e.metadata().ok()?;
                if !m.is_file() {
                    return None;
                }
                let name = e.file_name();
                let name = name.as_encoded_bytes();
                if !name.starts_with(ours.as_bytes()) && !name.starts_with(b".tmp-") {
                    // Made during another boot: what it holds may not all have reached
                    // the disk before that boot ended.
                    let _ = std::fs::remove_file(e.path());
                    return None;
                }
                Some((m.mtime(), m.blocks() * 512, e.path()))
            })
            .collect();
        let mut used: u64 = files.iter().map(|f| f.1).sum();
        files.sort();
        let mut oldest = files.into_iter();
        while used + need > self.budget {
            match oldest.next() {
                Some((_, bytes, path)) => {
                    if std::fs::remove_file(&path).is_ok() {
                        used = used.saturating_sub(bytes);
                    }
                }
                None => return false,
            }
        }
        true
    }
}
