//! The system calls the shared cache makes, raw (no libc hook of the preload library is
//! involved): open, close, fstat, positional I/O, an aligned read-only mapping and a
//! byte-range lock.

use std::ffi::CString;

/// Raw open.
pub(super) fn sys_open(path: &std::path::Path, flags: i32, mode: u32) -> Option<i32> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: openat with a NUL-terminated path.
    let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, c.as_ptr(), flags, mode) };
    (fd >= 0).then_some(fd as i32)
}

/// Raw close.
pub(super) fn sys_close(fd: i32) {
    // SAFETY: closing a descriptor we opened.
    unsafe { libc::syscall(libc::SYS_close, fd) };
}

/// fstat of a descriptor.
pub(super) fn fstat(fd: i32) -> Option<libc::stat> {
    // SAFETY: plain old data; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat into a local struct.
    let r = unsafe { libc::syscall(libc::SYS_fstat, fd, &mut st as *mut libc::stat) };
    (r == 0).then_some(st)
}

/// (st_dev, st_ino) of a descriptor.
pub(super) fn fstat_id(fd: i32) -> Option<(u64, u64)> {
    fstat(fd).map(|st| (st.st_dev, st.st_ino))
}

/// pwrite all of `buf` at `off`.
pub(super) fn pwrite_all(fd: i32, buf: &[u8], off: u64) -> bool {
    crate::sysio::pwrite_full(fd, buf, off) == buf.len()
}

/// pread all of `buf` at `off`.
pub(super) fn pread_all(fd: i32, buf: &mut [u8], off: u64) -> bool {
    crate::sysio::pread_full(fd, buf, off) == buf.len()
}

/// A read-only shared mapping of a whole file, placed so that file offset `aligned_off`
/// lands on an address that is a multiple of `align` (a 2 MiB folio of the file's page
/// cache there is then mapped by one page-table entry). Unmapped on drop.
pub(super) struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping lives as long as the value and is only read through it.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

/// mmap as a raw system call; `None` on failure.
///
/// # Safety
/// As mmap(2): with MAP_FIXED, `addr..addr + len` must be address space the caller owns.
unsafe fn sys_mmap(addr: usize, len: usize, prot: i32, flags: i32, fd: i32) -> Option<usize> {
    // SAFETY: the caller's contract.
    let p = unsafe { libc::syscall(libc::SYS_mmap, addr, len, prot, flags, fd, 0i64) };
    (!(-4095..0).contains(&p)).then_some(p as usize)
}

fn sys_munmap(addr: usize, len: usize) {
    if len > 0 {
        // SAFETY: callers unmap only address space they mapped and nobody borrows.
        unsafe { libc::syscall(libc::SYS_munmap, addr, len) };
    }
}

impl Mapping {
    /// Maps the `len` bytes of the file open at `fd` (`align` a power of two, a multiple
    /// of the page size; `aligned_off` a multiple of the page size).
    pub(super) fn new(fd: i32, len: usize, align: usize, aligned_off: usize) -> Option<Mapping> {
        let page = 4096;
        let mlen = len.next_multiple_of(page);
        let span = mlen.checked_add(align)?;
        // Reserve `align` more address space than needed, inaccessible, then map the
        // file over the part that puts `aligned_off` on an aligned address, and give back
        // the rest.
        // SAFETY: a fresh anonymous reservation (no MAP_FIXED).
        let res = unsafe {
            sys_mmap(
                0,
                span,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
            )?
        };
        let start = (res + aligned_off).next_multiple_of(align) - aligned_off;
        // SAFETY: `start..start + mlen` lies inside the reservation just made
        // (start - res < align), which nothing else uses.
        let p = unsafe {
            sys_mmap(
                start,
                mlen,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd,
            )
        };
        sys_munmap(res, start - res);
        sys_munmap(start + mlen, res + span - (start + mlen));
        if p != Some(start) {
            sys_munmap(start, mlen);
            return None;
        }
        // Huge-page mappings of file folios are allowed where THP is "madvise" only.
        // SAFETY: advice on our own mapping; failure is harmless.
        unsafe {
            libc::syscall(
                libc::SYS_madvise,
                start + aligned_off,
                mlen - aligned_off.min(mlen),
                libc::MADV_HUGEPAGE,
            )
        };
        Some(Mapping {
            base: start as *mut u8,
            len: mlen,
        })
    }

    /// The address of file offset 0.
    #[inline]
    pub(super) fn base(&self) -> *const u8 {
        self.base
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        sys_munmap(self.base as usize, self.len);
    }
}

/// A write lock of 8 bytes of a file (an open-file-description lock: it belongs to the
/// descriptor's open file, so threads of one process exclude each other too, and it goes
/// away when the descriptor is closed, even by a process that dies). Released on drop.
pub(super) struct WordLock {
    fd: i32,
    at: u64,
}

/// How long [`WordLock::try_new`] waits at most, in microseconds: a holder keeps the
/// lock for one 8-byte read and write, but a write may wait for the file system's
/// journal.
const LOCK_WAIT_US: u64 = 2_000_000;
impl WordLock {
    fn fcntl(fd: i32, at: u64, kind: i32) -> bool {
        // SAFETY: plain old data; the fields below set what F_OFD_SETLK reads.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = kind as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = at as libc::off_t;
        fl.l_len = 8;
        // SAFETY: fcntl with a pointer to a local flock.
        unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_OFD_SETLK, &mut fl as *mut _) == 0 }
    }

    /// Takes the lock of bytes `at..at + 8` of the file open (for writing) at `fd`,
    /// trying again after a yield, then after sleeps growing to 1 ms, for up to
    /// [`LOCK_WAIT_US`]; `None` if it stays taken or locks are not supported.
    pub(super) fn try_new(fd: i32, at: u64) -> Option<WordLock> {
        let (mut waited, mut tries) = (0u64, 0u32);
        loop {
            if Self::fcntl(fd, at, libc::F_WRLCK) {
                return Some(WordLock { fd, at });
            }
            let e = std::io::Error::last_os_error().raw_os_error();
            if e != Some(libc::EAGAIN) && e != Some(libc::EACCES) && e != Some(libc::EINTR) {
                return None;
            }
            tries += 1;
            if tries <= 16 {
                // SAFETY: sched_yield has no preconditions.
                unsafe { libc::syscall(libc::SYS_sched_yield) };
                continue;
            }
            if waited >= LOCK_WAIT_US {
                return None;
            }
            let us = (10u64 << (tries - 16).min(7)).min(1000);
            std::thread::sleep(std::time::Duration::from_micros(us));
            waited += us;
        }
    }
}

impl Drop for WordLock {
    fn drop(&mut self) {
        Self::fcntl(self.fd, self.at, libc::F_UNLCK);
    }
}
