//! A decompressed-data cache shared by every process reading the same image: one file per
//! (image, inode) in a per-user directory ([`CacheDir`]: /var/tmp/usfs-cache-UID by
//! default), holding the file's bytes as the back end produced them (decompressed EROFS
//! data), filled piece by piece or chunk by chunk by whichever process needs them first
//! and read by memcpy from a shared mapping afterwards. It plays the part the kernel page cache plays
//! for squashfuse: a program started later reads warm data without decompressing it again.
//!
//! Layout of a cache file: a header (`Header`: magic, version, the file's size, the
//! piece size, the piece count), a bitmap of filled pieces (one bit per 64 KiB piece, u64
//! words), then from [`data_offset`] (a chunk boundary) the file's bytes at their file
//! offsets. A fill writes a whole 2 MiB chunk with one pwrite when the read that needs it
//! is sequential or large, so the page cache holds the chunk in one 2 MiB folio (on file
//! systems with large folios, such as ext4 and xfs), and the data is mapped 2 MiB
//! aligned, so a process maps a whole chunk with one fault (module `dir` has the
//! measurements); a small random read fills only its 64 KiB piece (producing 2 MiB for
//! it would cost a cold random reader 32 times the decompression).
//!
//! Correctness:
//! - Keyed by image identity: the name holds the boot, the image's device, inode, size,
//!   mtime and ctime (nanoseconds), a hash of its first bytes and the file's inode number,
//!   so a rewritten image gets new cache files; a file whose header or size does not
//!   match what we expect is not used.
//! - Pieces are written with pwrite, then their bits are set by a pwrite of their bitmap
//!   word under an open-file-description lock of that word (so concurrent fillers never
//!   lose each other's bits); readers copy a piece only after seeing its bit (acquire load
//!   from the mapping, which shows the same page cache). Two processes filling the same
//!   piece write the same bytes (the image is read-only), so a reader never sees a
//!   partial or foreign piece. The mapping is read-only: nothing is ever written through it, so a
//!   full or failing file system answers a write with an error, never a SIGBUS.
//! - Files are created under a temporary name, completed (header, size), then linked into
//!   place, so nobody opens a half-made one; the directory is the user's own (mode 0700,
//!   owner checked) and files are 0600.
//! - Bounded: files larger than half the budget are not cached; before a new cache
//!   file is made, files of earlier boots are removed, then the oldest files (by last
//!   fill) until the directory's allocated bytes plus the new file fit the budget
//!   (`USFS_SHARED_CACHE_MB`, default 1024; 0 turns the cache off). Removing a file other
//!   processes have mapped is safe: they keep their mapping, later processes start a
//!   fresh file.
//! - A process whose fill fails (the file was replaced under it, or the file system is
//!   full) stops filling that file: its reads of unfilled pieces go back to the per-file
//!   chunk cache, never to producing a whole piece or chunk for each small read.

mod dir;
mod os;

pub use dir::{boot_tag, CacheDir, ImageId, HEAD_HASHED};

use os::{fstat_id, pread_all, pwrite_all, sys_close, sys_open};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes per chunk (aligned in the file): the unit of sequential and large fills, and the
/// size of a huge page.
pub const CHUNK: u64 = 2 << 20;
/// Bytes per piece: the unit of the bitmap and of small random fills.
pub const PIECE: u64 = 64 << 10;
/// Pieces per chunk (a divisor of 64: a chunk's bits lie in one bitmap word).
const PIECES_PER_CHUNK: u64 = CHUNK / PIECE;
/// Files smaller than this are not cached (the per-file chunk cache serves them).
pub const MIN_FILE: u64 = 64 << 10;
/// Magic number at the start of a cache file ("usfszc01").
const MAGIC: u64 = u64::from_le_bytes(*b"usfszc01");
/// Layout version (2: 64 KiB pieces, data at a 2 MiB boundary).
const VERSION: u64 = 2;
/// Header bytes before the bitmap.
const HEADER: usize = 64;
/// Page size the header and bitmap are written in.
const PAGE: u64 = 4096;

/// The header at the start of a cache file (little-endian u64 fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    /// [`MAGIC`].
    magic: u64,
    /// [`VERSION`].
    version: u64,
    /// The cached file's size in bytes.
    size: u64,
    /// Bytes per piece, one bitmap bit each ([`PIECE`]).
    piece: u64,
    /// Number of pieces: `size.div_ceil(piece)`.
    pieces: u64,
}

impl Header {
    fn new(size: u64) -> Header {
        Header {
            magic: MAGIC,
            version: VERSION,
            size,
            piece: PIECE,
            pieces: size.div_ceil(PIECE),
        }
    }

    fn to_bytes(self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        for (i, v) in [self.magic, self.version, self.size, self.piece, self.pieces]
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
            piece: f(3),
            pieces: f(4),
        }
    }
}

/// Where the file's bytes start in a cache file for a file of `size` bytes: after the
/// header and the bitmap, at a chunk boundary (so that each chunk is one 2 MiB folio of
/// the page cache and one huge-page mapping; the rest of the first chunk is a hole).
pub fn data_offset(size: u64) -> u64 {
    let words = size.div_ceil(PIECE).div_ceil(64);
    (HEADER as u64 + words * 8).next_multiple_of(CHUNK)
}

/// Bytes of a cache file written when it is made: the header and the bitmap, whole pages.
fn head_len(size: u64) -> u64 {
    let words = size.div_ceil(PIECE).div_ceil(64);
    (HEADER as u64 + words * 8).next_multiple_of(PAGE)
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
    /// The read-only mapping of the whole cache file, 2 MiB aligned.
    map: os::Mapping,
    /// The cached file's size.
    size: u64,
    /// Where the file's bytes start.
    data_off: u64,
    /// Set when a fill failed: this process fills no more pieces of this file.
    broken: AtomicBool,
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
        let path = dir.path.join(id.file_name(&dir.boot, file_ino));
        let fd = match sys_open(
            &path,
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0,
        ) {
            Some(fd) => fd,
            None => Self::create(dir, &path, size)?,
        };
        let f = Self::map(fd, &path, size);
        sys_close(fd);
        f
    }

    /// Makes a cache file under a temporary name and links it into place; if another
    /// process got there first, opens theirs.
    fn create(dir: &CacheDir, path: &std::path::Path, size: u64) -> Option<i32> {
        let total = data_offset(size) + size;
        if !dir.make_room((head_len(size) + size).min(dir.budget)) {
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
        // The header and bitmap pages are written (allocated) here; the rest of the
        // first chunk stays a hole.
        let mut head = vec![0u8; head_len(size) as usize];
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
        sys_open(path, libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW, 0)
    }

    /// Checks the cache file behind `fd` and maps it.
    fn map(fd: i32, path: &std::path::Path, size: u64) -> Option<SharedFile> {
        let total = data_offset(size) + size;
        let st = os::fstat(fd)?;
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
        let data_off = data_offset(size);
        let map = os::Mapping::new(fd, total as usize, CHUNK as usize, data_off as usize)?;
        Some(SharedFile {
            path: path.to_path_buf(),
            id: (st.st_dev, st.st_ino),
            map,
            size,
            data_off,
            broken: AtomicBool::new(false),
        })
    }

    /// Bitmap word `w`.
    #[inline]
    fn word(&self, w: u64) -> u64 {
        let at = HEADER + w as usize * 8;
        // SAFETY: `at` is 8-aligned (HEADER is, the mapping is page aligned) inside the
        // bitmap, inside the live mapping (w covers a piece below `pieces`, checked by
        // callers). Bitmap words are only loaded here (atomically, never stored through
        // the mapping: it is read-only); other processes change them with pwrite.
        let a = unsafe { AtomicU64::from_ptr(self.map.base().add(at) as *mut u64) };
        u64::from_le(a.load(Ordering::Acquire))
    }

    /// True when piece `i` is filled.
    #[inline]
    fn piece_filled(&self, i: u64) -> bool {
        i < self.size.div_ceil(PIECE) && self.word(i / 64) & (1 << (i % 64)) != 0
    }

    /// True when every piece of chunk `k` is filled.
    pub fn filled(&self, k: u64) -> bool {
        let first = k * PIECES_PER_CHUNK;
        let end = ((k + 1) * PIECES_PER_CHUNK).min(self.size.div_ceil(PIECE));
        first < end && (first..end).all(|i| self.piece_filled(i))
    }

    /// True when this process no longer fills this file (a fill failed).
    pub fn broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// Copies file bytes from `pos` into `dst` out of filled pieces; returns how many
    /// (0 when the piece at `pos` is not filled, or `pos` is at or past the end).
    #[inline]
    pub fn read(&self, pos: u64, dst: &mut [u8]) -> usize {
        if pos >= self.size || dst.is_empty() {
            return 0;
        }
        let want = (pos + dst.len() as u64).min(self.size);
        // The filled bytes from `pos` on, as far as the read needs.
        let mut end = pos;
        while end < want && self.piece_filled(end / PIECE) {
            end = ((end / PIECE + 1) * PIECE).min(want);
        }
        let n = (end - pos) as usize;
        // SAFETY: `pos..end` lies inside the file (`end <= size`) and so inside the
        // mapping (data_off + size is its length); its pieces are filled, so its bytes
        // are final (every writer writes the same bytes).
        let src = unsafe {
            std::slice::from_raw_parts(self.map.base().add((self.data_off + pos) as usize), n)
        };
        crate::data::copy::copy(&mut dst[..n], src);
        n
    }

    /// The file range a fill for a read at `pos` produces: the whole chunk holding `pos`
    /// when `whole_chunk`, else its piece (each cut at the end of the file).
    pub fn fill_range(&self, pos: u64, whole_chunk: bool) -> std::ops::Range<u64> {
        let unit = if whole_chunk { CHUNK } else { PIECE };
        let start = pos / unit * unit;
        start..(start + unit).min(self.size)
    }

    /// Stores the bytes of chunk `k` (`data`: all of them) and marks it filled; see
    /// [`fill_at`](Self::fill_at).
    pub fn fill(&self, k: u64, data: &[u8]) -> bool {
        self.fill_at(k * CHUNK, data)
    }

    /// Stores `data`, the file's bytes from `start`, and marks their pieces filled:
    /// `start` is a piece boundary, the bytes end at a piece boundary or the end of the
    /// file, within one chunk. False if they could not be stored (they stay unfilled, and
    /// if the file system refused them this process fills no more pieces of the file: see
    /// [`broken`](Self::broken)).
    pub fn fill_at(&self, start: u64, data: &[u8]) -> bool {
        let end = start + data.len() as u64;
        if data.is_empty()
            || !start.is_multiple_of(PIECE)
            || end > self.size
            || (!end.is_multiple_of(PIECE) && end != self.size)
            || start / CHUNK != (end - 1) / CHUNK
        {
            return false;
        }
        let ok = !self.broken() && self.store(start, data);
        if !ok {
            self.broken.store(true, Ordering::Relaxed);
        }
        ok
    }

    fn store(&self, start: u64, data: &[u8]) -> bool {
        let Some(fd) = sys_open(
            &self.path,
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0,
        ) else {
            return false;
        };
        // Pieces `first..last` (one chunk: one bitmap word).
        let first = start / PIECE;
        let last = (start + data.len() as u64).div_ceil(PIECE);
        let mask = (u64::MAX >> (64 - (last - first))) << (first % 64);
        // Only into the file we mapped (another process may have removed it to make room
        // and made a new one under the name: its bitmap is not ours).
        let ok = fstat_id(fd) == Some(self.id)
            && pwrite_all(fd, data, self.data_off + start)
            && set_bits(fd, first / 64, mask);
        sys_close(fd);
        ok
    }
}

/// Sets the bits `mask` of bitmap word `w` of the cache file open at `fd`: read, or and
/// write the word under a write lock of its bytes (an open-file-description lock, so
/// fillers in other processes and threads wait for each other and none loses a bit).
/// The lock is not waited for without end: a holder stopped by a signal costs this fill
/// its bits (the pieces are filled again later), never a hang.
fn set_bits(fd: i32, w: u64, mask: u64) -> bool {
    let at = HEADER as u64 + w * 8;
    let Some(_lock) = os::WordLock::try_new(fd, at) else {
        return false;
    };
    let mut b = [0u8; 8];
    if !pread_all(fd, &mut b, at) {
        return false;
    }
    let v = u64::from_le_bytes(b) | mask;
    pwrite_all(fd, &v.to_le_bytes(), at)
}

#[cfg(test)]
mod tests {
    use super::dir::fnv1a;
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
        (
            CacheDir {
                path,
                budget,
                boot: boot_tag().unwrap(),
            },
            base,
        )
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
        std::fs::remove_file(d.path.join(id(1).file_name(&d.boot, 9))).unwrap();
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
        let path = d.path.join(id(1).file_name(&d.boot, 7));
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
    #[test]
    fn data_is_mapped_on_huge_page_boundaries() {
        let (d, base) = dir(64 << 20);
        let f = SharedFile::open(&d, &id(1), 3, 2 * CHUNK + 5).unwrap();
        assert_eq!(f.data_off % CHUNK, 0);
        assert_eq!(
            (f.map.base() as usize + f.data_off as usize) % CHUNK as usize,
            0
        );
        // Only the header page is allocated: the rest of the first chunk is a hole.
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(d.path.join(id(1).file_name(&d.boot, 3))).unwrap();
        assert_eq!(m.size(), CHUNK + 2 * CHUNK + 5);
        assert!(
            m.blocks() * 512 <= 64 << 10,
            "{} bytes allocated",
            m.blocks() * 512
        );
        drop(f);
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn concurrent_fillers_of_one_bitmap_word_keep_every_bit() {
        let (d, base) = dir(256 << 20);
        let chunks = 24u64;
        let size = chunks * CHUNK - 77;
        let data = bytes(size as usize, 9);
        // Each thread has its own mapping (as a process would) and fills every third
        // chunk from its own start; all chunks share one bitmap word.
        std::thread::scope(|sc| {
            for t in 0..3u64 {
                let (d, data) = (&d, &data);
                sc.spawn(move || {
                    let f = SharedFile::open(d, &id(1), 5, size).unwrap();
                    for k in (t..chunks).step_by(3) {
                        let s = (k * CHUNK) as usize;
                        let e = ((k + 1) * CHUNK).min(size) as usize;
                        assert!(f.fill(k, &data[s..e]));
                    }
                });
            }
        });
        let f = SharedFile::open(&d, &id(1), 5, size).unwrap();
        assert!((0..chunks).all(|k| f.filled(k)));
        let mut all = vec![0u8; size as usize];
        assert_eq!(f.read(0, &mut all), size as usize);
        assert!(all == data);
        // At the end of the file: nothing.
        assert_eq!(f.read(size, &mut all[..10]), 0);
        assert_eq!(f.read(size - 3, &mut all[..10]), 3);
        assert_eq!(&all[..3], &data[size as usize - 3..]);
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn a_failed_fill_stops_this_process_filling() {
        let (d, base) = dir(64 << 20);
        let a = SharedFile::open(&d, &id(1), 4, 2 * CHUNK).unwrap();
        std::fs::remove_file(d.path.join(id(1).file_name(&d.boot, 4))).unwrap();
        assert!(!a.broken());
        assert!(!a.fill(0, &bytes(CHUNK as usize, 1)));
        assert!(a.broken());
        // Even once the name holds a file again, this mapping fills no more.
        let b = SharedFile::open(&d, &id(1), 4, 2 * CHUNK).unwrap();
        assert!(!a.fill(1, &bytes(CHUNK as usize, 1)));
        assert!(b.fill(1, &bytes(CHUNK as usize, 1)));
        assert!(!a.filled(1) && b.filled(1));
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn files_of_other_boots_are_never_used_and_removed_when_room_is_made() {
        let (d, base) = dir(64 << 20);
        let old = CacheDir {
            boot: "b0123456789abcdef".into(),
            ..d.clone()
        };
        // A file of the same image and inode filled during another boot.
        let o = SharedFile::open(&old, &id(1), 8, CHUNK).unwrap();
        assert!(o.fill(0, &bytes(CHUNK as usize, 4)));
        drop(o);
        let stale = d.path.join(id(1).file_name(&old.boot, 8));
        assert!(stale.exists());
        // This boot: a file of its own, not filled; making it removed the other boot's.
        let a = SharedFile::open(&d, &id(1), 8, CHUNK).unwrap();
        assert!(!a.filled(0));
        assert!(!stale.exists());
        assert!(a.fill(0, &bytes(CHUNK as usize, 5)));
        // Making another file of this boot keeps this boot's files.
        let _n = SharedFile::open(&d, &id(2), 8, CHUNK).unwrap();
        assert!(d.path.join(id(1).file_name(&d.boot, 8)).exists());
        std::fs::remove_dir_all(base).unwrap();
    }
    #[test]
    fn pieces_fill_and_read_alone_and_complete_their_chunk() {
        let (d, base) = dir(64 << 20);
        let size = CHUNK + 3 * PIECE + 100;
        let data = bytes(size as usize, 6);
        let f = SharedFile::open(&d, &id(1), 6, size).unwrap();
        let piece = |i: u64| &data[(i * PIECE) as usize..((i + 1) * PIECE).min(size) as usize];
        // Small random reads fill pieces, sequential or large ones whole chunks.
        assert_eq!(f.fill_range(PIECE + 5, false), PIECE..2 * PIECE);
        assert_eq!(f.fill_range(PIECE + 5, true), 0..CHUNK);
        assert_eq!(
            f.fill_range(CHUNK + 3 * PIECE, false),
            CHUNK + 3 * PIECE..size
        );
        assert_eq!(f.fill_range(size - 1, true), CHUNK..size);
        // Refused: not at a piece boundary, not ending at one (nor at the end of the
        // file), crossing a chunk boundary, past the end.
        assert!(!f.fill_at(1, &data[1..PIECE as usize + 1]));
        assert!(!f.fill_at(0, &data[..PIECE as usize - 1]));
        assert!(!f.fill_at(
            CHUNK - PIECE,
            &data[(CHUNK - PIECE) as usize..(CHUNK + PIECE) as usize]
        ));
        assert!(!f.fill_at(size - 100, &data[..200]));
        assert!(
            !f.broken(),
            "refused arguments are not a failing file system"
        );
        // One piece: readable alone; a read running into an unfilled piece stops there.
        assert!(f.fill_at(PIECE, piece(1)));
        let mut out = vec![0u8; 3 * PIECE as usize];
        assert_eq!(f.read(PIECE - 1, &mut out), 0);
        assert_eq!(f.read(PIECE + 7, &mut out), PIECE as usize - 7);
        assert_eq!(&out[..PIECE as usize - 7], &piece(1)[7..]);
        assert!(!f.filled(0));
        // Its neighbour: one read spans both.
        assert!(f.fill_at(2 * PIECE, piece(2)));
        assert_eq!(f.read(PIECE, &mut out), 2 * PIECE as usize);
        assert_eq!(
            &out[..2 * PIECE as usize],
            &data[PIECE as usize..3 * PIECE as usize]
        );
        // The short last piece, then the rest of the last chunk: filled, to the end.
        assert!(f.fill_at(CHUNK + 3 * PIECE, piece(CHUNK / PIECE + 3)));
        assert!(!f.filled(1));
        assert!(f.fill(1, &data[CHUNK as usize..]));
        assert!(f.filled(1));
        assert_eq!(f.read(size - 10, &mut out), 10);
        assert_eq!(&out[..10], &data[size as usize - 10..]);
        // The whole first chunk over the pieces already there.
        assert!(f.fill(0, &data[..CHUNK as usize]));
        assert!(f.filled(0));
        let mut all = vec![0u8; size as usize];
        assert_eq!(f.read(0, &mut all), size as usize);
        assert!(all == data);
        std::fs::remove_dir_all(base).unwrap();
    }
    #[test]
    fn the_boot_tag_is_stable_and_names_every_file() {
        let t = boot_tag().unwrap();
        assert_eq!(t.len(), 17);
        assert!(t.starts_with('b') && t[1..].bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(boot_tag().unwrap(), t);
        assert!(id(3).file_name(&t, 9).starts_with(&format!("{t}-")));
        assert_ne!(id(3).file_name(&t, 9), id(3).file_name("b0", 9));
    }
}
