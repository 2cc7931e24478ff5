//! A decompressed-data cache shared by every process reading the same image: one file per
//! (image, inode) in a per-user directory on /dev/shm, holding the file's bytes as the back
//! end produced them (decompressed EROFS data), filled chunk by chunk by whichever process
//! needs a chunk first and read by memcpy from a shared mapping afterwards. It plays the
//! part the kernel page cache plays for squashfuse: a program started later reads warm
//! data without decompressing it again.
//!
//! Layout of a cache file: a header page ([`Header`]: magic, version, the file's size,
//! the chunk size, the chunk count), a bitmap of filled chunks (one bit per chunk, u64
//! words, set atomically), then from [`data_offset`] the file's bytes at their file
//! offsets.
//!
//! Correctness:
//! - Keyed by image identity: the name holds the image's device, inode, size, mtime and
//!   ctime (nanoseconds) and the file's inode number, so a rewritten image gets new cache
//!   files; a file whose header or size does not match what we expect is not used.
//! - Chunks are written with pwrite (a full /dev/shm fails with ENOSPC instead of a SIGBUS
//!   through a mapping), then their bit is set with release ordering; readers copy a
//!   chunk only after seeing its bit (acquire). Two processes filling the same chunk write
//!   the same bytes (the image is read-only), so a reader never sees a partial or foreign
//!   chunk.
//! - Files are created under a temporary name, completed (header, size), then linked into
//!   place, so nobody opens a half-made one; the directory is the user's own (mode 0700,
//!   owner checked) and files are 0600.
//! - Bounded: files larger than half the budget are not cached; before a new cache
//!   file is made, the oldest files (by last fill) are removed until the directory's
//!   allocated bytes plus the new file fit the budget (`USFS_SHARED_CACHE_MB`, default
//!   1024; 0 turns the cache off). Removing a file other processes have mapped is safe:
//!   they keep their mapping, later processes start a fresh file.

use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes per chunk (aligned in the file): the unit of filling and of the bitmap.
pub const CHUNK: u64 = 64 << 10;
/// Magic number at the start of a cache file ("usfszc01").
const MAGIC: u64 = u64::from_le_bytes(*b"usfszc01");
/// Layout version.
const VERSION: u64 = 1;
/// Header bytes before the bitmap.
const HEADER: usize = 64;
/// Where the cache directory lives.
const SHM: &str = "/dev/shm";

/// The header at the start of a cache file (little-endian u64 fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    /// [`MAGIC`].
    magic: u64,
    /// [`VERSION`].
    version: u64,
    /// The cached file's size in bytes.
    size: u64,
    /// Bytes per chunk ([`CHUNK`]).
    chunk: u64,
    /// Number of chunks: `size.div_ceil(chunk)`.
    chunks: u64,
}

impl Header {
    fn new(size: u64) -> Header {
        Header {
            magic: MAGIC,
            version: VERSION,
            size,
            chunk: CHUNK,
            chunks: size.div_ceil(CHUNK),
        }
    }

    fn to_bytes(self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        for (i, v) in [self.magic, self.version, self.size, self.chunk, self.chunks]
            .iter()
            .enumerate()
        {
            b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    fn from_bytes(b: &[u8]) -> Header {
        let f = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Header {
            magic: f(0),
            version: f(1),
            size: f(2),
            chunk: f(3),
            chunks: f(4),
        }
    }
}

/// Where the file's bytes start in a cache file for a file of `size` bytes: after the
/// header and the bitmap, page aligned.
pub fn data_offset(size: u64) -> u64 {
    let words = size.div_ceil(CHUNK).div_ceil(64);
    (HEADER as u64 + words * 8).next_multiple_of(4096)
}

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
fn fnv1a(data: &[u8]) -> u64 {
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

    fn file_name(&self, file_ino: u64) -> String {
        format!(
            "{:x}-{:x}-{:x}-{:x}-{:x}-{:x}.{:x}",
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
}

impl CacheDir {
    /// The default: /dev/shm/usfs-cache-UID (or `USFS_SHARED_CACHE_DIR`), budget from
    /// `USFS_SHARED_CACHE_MB` (default 1024 MiB); `None` when turned off or /dev/shm is
    /// not there.
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
                if !std::path::Path::new(SHM).is_dir() {
                    return None;
                }
                // SAFETY: geteuid has no preconditions.
                let uid = unsafe { libc::geteuid() };
                std::path::Path::new(SHM).join(format!("usfs-cache-{uid}"))
            }
        };
        Some(CacheDir {
            path,
            budget: mb << 20,
        })
    }

    /// Creates the directory if needed and checks it is ours (a directory, not a
    /// symbolic link, owned by us, no access for others).
    fn ensure(&self) -> Option<()> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&self.path);
        let m = std::fs::symlink_metadata(&self.path).ok()?;
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        (m.is_dir() && m.uid() == uid && m.permissions().mode() & 0o077 == 0).then_some(())
    }

    /// Removes the oldest files until `need` more bytes fit the budget; false if they
    /// cannot fit.
    fn make_room(&self, need: u64) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Ok(rd) = std::fs::read_dir(&self.path) else {
            return false;
        };
        let mut files: Vec<(i64, u64, std::path::PathBuf)> = rd
            .filter_map(|e| {
                let e = e.ok()?;
                let m = e.metadata().ok()?;
                m.is_file().then(|| (m.mtime(), m.blocks() * 512, e.path()))
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

/// The shared cache of one file, mapped in this process. No descriptor is kept: a
/// program may close or reuse any descriptor number (daemons close them all), and a
/// number we kept could then name one of the program's files; a fill opens the cache
/// file by name and checks it is the one mapped.
pub struct SharedFile {
    /// Path of the cache file.
    path: std::path::PathBuf,
    /// Its (st_dev, st_ino) when mapped.
    id: (u64, u64),
    /// The mapping of the whole cache file (written only through the bitmap's atomics).
    base: *const u8,
    /// Its length.
    map_len: usize,
    /// The cached file's size.
    size: u64,
    /// Where the file's bytes start.
    data_off: u64,
}

// SAFETY: the mapping lives as long as the value; the bitmap words in it are only
// accessed atomically, the file bytes only read; everything else is plain data.
unsafe impl Send for SharedFile {}
// SAFETY: as above.
unsafe impl Sync for SharedFile {}

impl Drop for SharedFile {
    fn drop(&mut self) {
        // SAFETY: unmapping what `open` mapped; nothing borrows the mapping past `self`.
        unsafe { libc::syscall(libc::SYS_munmap, self.base, self.map_len) };
    }
}

/// Raw open (no libc hook of the preload library involved).
fn sys_open(path: &std::path::Path, flags: i32, mode: u32) -> Option<i32> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: openat with a NUL-terminated path.
    let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, c.as_ptr(), flags, mode) };
    (fd >= 0).then_some(fd as i32)
}

fn sys_close(fd: i32) {
    // SAFETY: closing a descriptor we opened.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// (st_dev, st_ino) of a descriptor.
fn fstat_id(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: plain old data; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat into a local struct.
    let r = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) };
    (r == 0).then_some((st.st_dev, st.st_ino))
}

/// pwrite all of `buf` at `off`.
fn pwrite_all(fd: i32, buf: &[u8], off: u64) -> bool {
    crate::sysio::pwrite_full(fd, buf, off) == buf.len()
}

/// pread all of `buf` at `off`.
fn pread_all(fd: i32, buf: &mut [u8], off: u64) -> bool {
    crate::sysio::pread_full(fd, buf, off) == buf.len()
}

impl SharedFile {
    /// The cache file of inode `file_ino` (of `size` bytes) of image `id` in `dir`: opened
    /// if some process made it, else made. `None` when the file should not or cannot be
    /// cached (too large for the budget, no room, a file that does not match, errors):
    /// the caller reads without the cache.
    pub fn open(dir: &CacheDir, id: &ImageId, file_ino: u64, size: u64) -> Option<SharedFile> {
        if size == 0 || size > dir.budget / 2 {
            return None;
        }
        dir.ensure()?;
        let path = dir.path.join(id.file_name(file_ino));
        let total = data_offset(size) + size;
        let fd = match sys_open(&path, libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW, 0) {
            Some(fd) => fd,
            None => Self::create(dir, &path, size)?,
        };
        let f = Self::map(fd, &path, size, total);
        sys_close(fd);
        f
    }

    /// Makes a cache file under a temporary name and links it into place; if another
    /// process got there first, opens theirs.
    fn create(dir: &CacheDir, path: &std::path::Path, size: u64) -> Option<i32> {
        let total = data_offset(size) + size;
        if !dir.make_room(total.min(dir.budget)) {
            return None;
        }
        // SAFETY: getpid and gettid have no preconditions.
        let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let tmp = dir.path.join(format!(".tmp-{pid}-{tid}-{nanos:x}"));
        let fd = sys_open(
            &tmp,
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o600,
        )?;
        // The header and bitmap pages are written out (allocated) here, so that setting
        // bits through the mapping never needs a new page (which a full /dev/shm would
        // answer with SIGBUS).
        let mut head = vec![0u8; data_offset(size) as usize];
        head[..HEADER].copy_from_slice(&Header::new(size).to_bytes());
        // SAFETY: ftruncate on the descriptor just made.
        let ok = unsafe { libc::syscall(libc::SYS_ftruncate, fd, total as i64) } == 0
            && pwrite_all(fd, &head, 0);
        let linked = ok && std::fs::hard_link(&tmp, path).is_ok();
        let _ = std::fs::remove_file(&tmp);
        if linked {
            return Some(fd);
        }
        sys_close(fd);
        // Someone else linked theirs first (or we failed): use theirs if it is there.
        sys_open(path, libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW, 0)
    }

    /// Checks the cache file behind `fd` and maps it.
    fn map(fd: i32, path: &std::path::Path, size: u64, total: u64) -> Option<SharedFile> {
        // SAFETY: plain old data; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat into a local struct.
        if unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) } != 0 {
            return None;
        }
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG
            || st.st_uid != uid
            || st.st_mode & 0o077 != 0
            || st.st_size as u64 != total
        {
            return None;
        }
        let mut h = [0u8; HEADER];
        if !pread_all(fd, &mut h, 0) || Header::from_bytes(&h) != Header::new(size) {
            return None;
        }
        // SAFETY: a shared mapping of the whole file (its size checked above), writable
        // for the bitmap's atomic updates (file bytes are only ever written with
        // pwrite); the result is checked for failure.
        let p = unsafe {
            libc::syscall(
                libc::SYS_mmap,
                std::ptr::null_mut::<libc::c_void>(),
                total as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0i64,
            )
        };
        if p < 0 && p > -4096 {
            return None;
        }
        Some(SharedFile {
            path: path.to_path_buf(),
            id: (st.st_dev, st.st_ino),
            base: p as usize as *const u8,
            map_len: total as usize,
            size,
            data_off: data_offset(size),
        })
    }

    /// The bitmap word holding chunk `k`'s bit.
    fn word(&self, k: u64) -> &AtomicU64 {
        let at = HEADER + (k / 64) as usize * 8;
        // SAFETY: `at` is 8-aligned (HEADER is) inside the bitmap, inside the live
        // mapping (k < chunks, checked by callers); bitmap words are only ever accessed
        // atomically, by every process.
        unsafe { AtomicU64::from_ptr(self.base.add(at) as *mut u64) }
    }

    /// True when chunk `k` is filled.
    pub fn filled(&self, k: u64) -> bool {
        k < self.size.div_ceil(CHUNK) && self.word(k).load(Ordering::Acquire) & (1 << (k % 64)) != 0
    }

    /// The file bytes of chunk `k` (filled: check [`filled`](Self::filled) first).
    fn chunk_bytes(&self, k: u64) -> &[u8] {
        let start = k * CHUNK;
        let len = (self.size - start).min(CHUNK) as usize;
        // SAFETY: the chunk lies inside the mapping (data_off + size is its length); it
        // is filled, so its bytes are final (every writer writes the same bytes).
        unsafe { std::slice::from_raw_parts(self.base.add((self.data_off + start) as usize), len) }
    }

    /// Copies file bytes from `pos` into `dst` out of filled chunks; returns how many
    /// (0 when the chunk at `pos` is not filled). Always memcpy from the mapping: pread
    /// on the cache file is slower even for large reads (measured, 1 MiB sequential
    /// 6.9 vs 5.6-6.0 GB/s; 64 KiB random 8.4-9.3 vs 5.1-6.3).
    pub fn read(&self, pos: u64, dst: &mut [u8]) -> usize {
        let mut done = 0;
        while done < dst.len() && pos + (done as u64) < self.size {
            let p = pos + done as u64;
            let k = p / CHUNK;
            if !self.filled(k) {
                break;
            }
            let src = &self.chunk_bytes(k)[(p - k * CHUNK) as usize..];
            let n = src.len().min(dst.len() - done);
            dst[done..done + n].copy_from_slice(&src[..n]);
            done += n;
        }
        done
    }

    /// Stores the bytes of chunk `k` (`data`: all of them) and marks it filled; false if
    /// they could not be stored (the chunk stays unfilled).
    pub fn fill(&self, k: u64, data: &[u8]) -> bool {
        let start = k * CHUNK;
        if start >= self.size || data.len() as u64 != (self.size - start).min(CHUNK) {
            return false;
        }
        let Some(fd) = sys_open(
            &self.path,
            libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0,
        ) else {
            return false;
        };
        // Only into the file we mapped (another process may have removed it to make room
        // and made a new one under the name: its bitmap is not ours).
        let ok = fstat_id(fd) == Some(self.id) && pwrite_all(fd, data, self.data_off + start);
        sys_close(fd);
        if !ok {
            return false;
        }
        self.word(k).fetch_or(1 << (k % 64), Ordering::Release);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(budget: u64) -> (CacheDir, std::path::PathBuf) {
        let base = std::env::temp_dir().join(format!(
            "usfs-shared-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        let path = base.join("cache");
        (CacheDir { path, budget }, base)
    }

    fn id(n: u64) -> ImageId {
        ImageId {
            dev: 1,
            ino: n,
            size: 1000,
            mtime_ns: 5,
            ctime_ns: 6,
            head_hash: fnv1a(b"head"),
        }
    }

    fn bytes(size: usize, seed: u8) -> Vec<u8> {
        (0..size)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn filled_by_one_read_by_another() {
        let (d, base) = dir(64 << 20);
        let size = 3 * CHUNK + 1000;
        let data = bytes(size as usize, 1);
        let a = SharedFile::open(&d, &id(1), 12, size).unwrap();
        let b = SharedFile::open(&d, &id(1), 12, size).unwrap();
        let mut out = vec![0u8; 5000];
        assert_eq!(b.read(CHUNK - 10, &mut out), 0);
        assert!(a.fill(0, &data[..CHUNK as usize]));
        assert!(a.fill(1, &data[CHUNK as usize..2 * CHUNK as usize]));
        // Across the boundary of two filled chunks, through the other "process".
        assert_eq!(b.read(CHUNK - 10, &mut out), 5000);
        assert_eq!(
            &out[..],
            &data[(CHUNK - 10) as usize..(CHUNK - 10) as usize + 5000]
        );
        // Stops at an unfilled chunk.
        let mut big = vec![0u8; 3 * CHUNK as usize];
        assert_eq!(b.read(0, &mut big), 2 * CHUNK as usize);
        // The short last chunk; a wrong length is refused.
        assert!(!a.fill(3, &data[..10]));
        assert!(a.fill(3, &data[3 * CHUNK as usize..]));
        assert!(a.fill(2, &data[2 * CHUNK as usize..3 * CHUNK as usize]));
        let mut all = vec![0u8; size as usize + 10];
        assert_eq!(b.read(0, &mut all), size as usize);
        assert_eq!(&all[..size as usize], &data[..]);
        // A third opener sees it all too.
        let c = SharedFile::open(&d, &id(1), 12, size).unwrap();
        assert_eq!(c.read(3 * CHUNK + 999, &mut out[..5]), 1);
        drop((a, b, c));
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn other_images_and_sizes_do_not_share() {
        let (d, base) = dir(64 << 20);
        let a = SharedFile::open(&d, &id(1), 12, CHUNK).unwrap();
        assert!(a.fill(0, &bytes(CHUNK as usize, 3)));
        // Another image identity: its own file, empty.
        let b = SharedFile::open(&d, &id(2), 12, CHUNK).unwrap();
        assert!(!b.filled(0));
        // Same name but a different size than the file was made for: not used.
        assert!(SharedFile::open(&d, &id(1), 12, CHUNK + 1).is_none());
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_replaced_file_is_never_filled_by_the_old_mapping() {
        let (d, base) = dir(64 << 20);
        let a = SharedFile::open(&d, &id(1), 9, 2 * CHUNK).unwrap();
        // Another process removes it (to make room) and starts a new one.
        std::fs::remove_file(d.path.join(id(1).file_name(9))).unwrap();
        let b = SharedFile::open(&d, &id(1), 9, 2 * CHUNK).unwrap();
        // The old mapping cannot fill: its file is gone from the name.
        assert!(!a.fill(0, &bytes(CHUNK as usize, 1)));
        assert!(!a.filled(0) && !b.filled(0));
        // The new one fills and reads normally.
        assert!(b.fill(1, &bytes(CHUNK as usize, 2)));
        let mut out = vec![0u8; 10];
        assert_eq!(b.read(CHUNK, &mut out), 10);
        assert_eq!(&out[..], &bytes(CHUNK as usize, 2)[..10]);
        assert_eq!(a.read(CHUNK, &mut out), 0);
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn damaged_files_are_not_used() {
        let (d, base) = dir(64 << 20);
        let a = SharedFile::open(&d, &id(1), 7, CHUNK).unwrap();
        drop(a);
        let path = d.path.join(id(1).file_name(7));
        let mut raw = std::fs::read(&path).unwrap();
        raw[0] ^= 1;
        std::fs::write(&path, &raw).unwrap();
        assert!(SharedFile::open(&d, &id(1), 7, CHUNK).is_none());
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn budget_bounds_the_directory() {
        let budget = 16 * CHUNK + 3 * 4096;
        let (d, base) = dir(budget);
        // Larger than half the budget: never cached.
        assert!(SharedFile::open(&d, &id(1), 1, 9 * CHUNK).is_none());
        // Fill files of 4 chunks one after another: old ones make room for new ones.
        for ino in 0..10 {
            let f = SharedFile::open(&d, &id(1), ino, 4 * CHUNK).unwrap();
            for k in 0..4 {
                assert!(f.fill(k, &bytes(CHUNK as usize, ino as u8)));
            }
        }
        use std::os::unix::fs::MetadataExt;
        let used: u64 = std::fs::read_dir(&d.path)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().blocks() * 512)
            .sum();
        assert!(used <= budget + 4 * CHUNK + 4096, "{used} > {budget}");
        std::fs::remove_dir_all(base).unwrap();
    }
}
