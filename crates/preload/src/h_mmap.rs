//! Shared writable mappings of files in a read-write mount (mmap with MAP_SHARED and
//! PROT_WRITE, as sqlite's WAL index and programs that edit files in place use them).
//!
//! Every process that maps a file maps one mirror of it: a file beside the owner's socket
//! (`Remote::mirror_path`), filled from the image the first time a range is mapped. So
//! processes see each other's stores at once, as with the kernel's page cache. What a
//! process changed reaches the image at msync, at munmap and when the process exits:
//! only the bytes that differ from what the mapping held when it was made (or last
//! written back), and only below the end of the file, so bytes other processes wrote
//! meanwhile are not overwritten with old ones. Not kept coherent: a write(2) to the
//! file is not seen in mappings made before it (they show the mirror).

use crate::state::{lock, State};
use crate::sys::{call_real, hooked, set_errno};
use libc::{c_int, c_void, off_t, size_t};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use usfs_fs::{FileSystem, Ino};
use usfs_vfs::OpenFile;

/// The largest shared writable mapping made (and mirror growth at once): its bytes are
/// copied to tell what changed.
const MAX_MAP: usize = 1 << 30;

/// A shared writable mapping of ours.
pub(crate) struct SharedMap {
    addr: usize,
    len: usize,
    mount: usize,
    ino: Ino,
    /// File offset of `addr`.
    off: u64,
    /// The bytes as last written back (or as mapped).
    shadow: Vec<u8>,
}

fn errno() -> i32 {
    crate::sys::errno()
}

/// mmap(MAP_SHARED, PROT_WRITE) of virtual file `f`: EACCES unless it is open for
/// reading and writing in a read-write mount.
pub(crate) fn map_shared(
    st: &State,
    f: &OpenFile,
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    off: off_t,
) -> *mut c_void {
    let fail = |e| {
        set_errno(e);
        libc::MAP_FAILED
    };
    let Some(w) = f.node.writer.as_ref() else {
        return fail(libc::EACCES);
    };
    if f.flags() & libc::O_ACCMODE != libc::O_RDWR {
        return fail(libc::EACCES);
    }
    let Ok(path) = CString::new(w.mirror_path(f.ino()).as_os_str().as_bytes()) else {
        return fail(libc::EINVAL);
    };
    // SAFETY: raw system calls on a path we own and the descriptor they make.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
            0o666,
        )
    } as c_int;
    if fd < 0 {
        return fail(errno());
    }
    let r = fill_and_map(f, fd, addr, len, prot, flags, off as u64);
    // SAFETY: closing the descriptor we opened (the mapping keeps the file).
    unsafe { libc::syscall(libc::SYS_close, fd) };
    match r {
        Ok((p, shadow)) => {
            lock(&st.shared_maps).push(SharedMap {
                addr: p as usize,
                len,
                mount: f.node.mount,
                ino: f.ino(),
                off: off as u64,
                shadow,
            });
            p
        }
        Err(e) => fail(e),
    }
}

/// Extends the mirror `fd` with the file's bytes up to the end of the range, under an
/// exclusive lock (one process fills, the others wait), maps it, and returns the mapping
/// with a copy of its bytes.
fn fill_and_map(
    f: &OpenFile,
    fd: c_int,
    addr: *mut c_void,
    len: usize,
    prot: c_int,
    flags: c_int,
    off: u64,
) -> Result<(*mut c_void, Vec<u8>), i32> {
    // SAFETY: flock, fstat, pwrite and pread system calls on our descriptor and buffers.
    unsafe {
        if libc::syscall(libc::SYS_flock, fd, libc::LOCK_EX) != 0 {
            return Err(errno());
        }
        let mut sb: libc::stat = std::mem::zeroed();
        if libc::syscall(libc::SYS_fstat, fd, &mut sb as *mut libc::stat) != 0 {
            return Err(errno());
        }
        let have = sb.st_size as u64;
        let need = off.checked_add(len as u64).ok_or(libc::EOVERFLOW)?;
        // The mirror is filled and the mapping copied in memory: bounded.
        if len > MAX_MAP || need.saturating_sub(have) > MAX_MAP as u64 {
            libc::syscall(libc::SYS_flock, fd, libc::LOCK_UN);
            return Err(libc::ENOMEM);
        }
        if have < need {
            let mut buf = vec![0u8; (need - have) as usize];
            let _ = f.node.fs.read_at(f.ino(), have, &mut buf);
            let n = libc::syscall(libc::SYS_pwrite64, fd, buf.as_ptr(), buf.len(), have);
            if n != buf.len() as i64 {
                return Err(errno());
            }
        }
    }
    let mut shadow = vec![0u8; len];
    // SAFETY: pread into our buffer and unlock of our descriptor.
    unsafe {
        libc::syscall(libc::SYS_pread64, fd, shadow.as_mut_ptr(), len, off);
        libc::syscall(libc::SYS_flock, fd, libc::LOCK_UN);
    }
    type MmapFn =
        unsafe extern "C" fn(*mut c_void, size_t, c_int, c_int, c_int, off_t) -> *mut c_void;
    let p = call_real!(mmap: MmapFn, libc::MAP_FAILED; addr, len, prot, flags, fd, off as off_t);
    if p == libc::MAP_FAILED {
        return Err(errno());
    }
    Ok((p, shadow))
}

/// Writes back what changed in `[from, to)` (addresses) of mapping `m`.
fn write_back(st: &State, m: &mut SharedMap, from: usize, to: usize) {
    let (from, to) = (from.max(m.addr), to.min(m.addr + m.len));
    if from >= to {
        return;
    }
    let Some(w) = st.table.get(m.mount).remote() else {
        return;
    };
    let size = w.getattr(m.ino).map_or(0, |a| a.size);
    let by = {
        let c = st.actor().caller;
        (c.uid, c.gid)
    };
    // SAFETY: [from, to) lies inside our live mapping.
    let now = unsafe { std::slice::from_raw_parts(from as *const u8, to - from) };
    let base = from - m.addr;
    let mut i = 0;
    while i < now.len() {
        if now[i] == m.shadow[base + i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < now.len() && now[i] != m.shadow[base + i] {
            i += 1;
        }
        let pos = m.off + (base + start) as u64;
        let end = (m.off + (base + i) as u64).min(size);
        if pos < end {
            let piece = &now[start..start + (end - pos) as usize];
            if w.write_by(m.ino, pos, piece, by).is_err() {
                // Not written: kept as changed, so a later msync or munmap tries again.
                continue;
            }
        }
        m.shadow[base + start..base + i].copy_from_slice(&now[start..i]);
    }
}

/// Writes back every tracked mapping overlapping `[addr, addr + len)`; with `forget`,
/// the range stops being tracked (munmap).
fn settle(st: &State, addr: usize, len: usize, forget: bool) {
    let end = addr.saturating_add(len);
    let mut maps = lock(&st.shared_maps);
    let mut kept = Vec::new();
    for mut m in maps.drain(..) {
        if m.addr + m.len <= addr || end <= m.addr {
            kept.push(m);
            continue;
        }
        write_back(st, &mut m, addr, end);
        if !forget {
            kept.push(m);
            continue;
        }
        // What stays mapped before and after the hole.
        if m.addr < addr {
            let n = addr - m.addr;
            kept.push(SharedMap {
                addr: m.addr,
                len: n,
                mount: m.mount,
                ino: m.ino,
                off: m.off,
                shadow: m.shadow[..n].to_vec(),
            });
        }
        if end < m.addr + m.len {
            let skip = end - m.addr;
            kept.push(SharedMap {
                addr: end,
                len: m.len - skip,
                mount: m.mount,
                ino: m.ino,
                off: m.off + skip as u64,
                shadow: m.shadow[skip..].to_vec(),
            });
        }
    }
    *maps = kept;
}

/// A new mapping replaces `[addr, addr + len)` (MAP_FIXED): our mappings there are
/// written back and forgotten.
pub(crate) fn replaced(addr: usize, len: usize) {
    let _ = hooked((), |st| {
        if !lock(&st.shared_maps).is_empty() {
            settle(st, addr, len, true);
        }
        None::<()>
    });
}

/// mremap(2): a mapping of ours that moves or changes size is written back and no longer
/// tracked (what changes in it afterwards stays in the mirror).
#[no_mangle]
pub(crate) unsafe extern "C" fn mremap(
    old: *mut c_void,
    old_len: size_t,
    new_len: size_t,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    replaced(old as usize, old_len);
    call_real!(mremap: unsafe extern "C" fn(*mut c_void, size_t, size_t, c_int, ...) -> *mut c_void, libc::MAP_FAILED; old, old_len, new_len, flags, new_addr)
}

/// Writes back every shared writable mapping (the process is exiting).
pub(crate) fn settle_all(st: &State) {
    settle(st, 0, usize::MAX, false);
}

/// munmap(2).
#[no_mangle]
pub(crate) unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    let _ = hooked((), |st| {
        if !lock(&st.shared_maps).is_empty() {
            settle(st, addr as usize, len, true);
        }
        None::<()>
    });
    call_real!(munmap: unsafe extern "C" fn(*mut c_void, size_t) -> c_int, -1; addr, len)
}

/// msync(2): also writes back what changed in our shared mappings (MS_SYNC: made durable
/// by the owner too).
#[no_mangle]
pub(crate) unsafe extern "C" fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    let _ = hooked((), |st| {
        let inos: Vec<(usize, Ino)> = lock(&st.shared_maps)
            .iter()
            .filter(|m| m.addr < addr as usize + len && addr as usize <= m.addr + m.len)
            .map(|m| (m.mount, m.ino))
            .collect();
        if inos.is_empty() {
            return None;
        }
        settle(st, addr as usize, len, false);
        if flags & libc::MS_SYNC != 0 {
            for (mount, ino) in inos {
                if let Some(w) = st.table.get(mount).remote() {
                    let _ = usfs_fs::FileSystemWrite::fsync(&**w, ino, true);
                }
            }
        }
        None::<()>
    });
    call_real!(msync: unsafe extern "C" fn(*mut c_void, size_t, c_int) -> c_int, -1; addr, len, flags)
}
