//! dlopen and dlmopen of shared objects stored in an image. glibc's loader opens files
//! with its internal open, which never reaches our hooks, so a library in a mount is
//! copied into a sealed memfd named after it (`usfs-dl:MOUNT:INODE`) and the real dlopen
//! loads `/proc/self/fd/N`. The memfd stays open (close-on-exec) for the life of the
//! process: the loader's name for the library must keep naming it, and a later dlopen of
//! the same file finds the memfd by its name and passes the same `/proc/self/fd/N`, so
//! the loader hands back the library it already has (or loads it again after dlclose
//! from the same copy). At most one memfd per library file.
//!
//! The entry points are naked trampolines: a call that is not ours jumps to the real
//! function with the caller's return address, because glibc's dlopen looks at its
//! caller (whose RPATH/RUNPATH a name without `/` is searched in, whose namespace the
//! library joins). Only names containing `/` can lie in a mount: names without one are
//! searched by glibc (LD_LIBRARY_PATH, RUNPATH, the cache, the default directories),
//! which never sees mounts, so libraries found only through such a search, and `$ORIGIN`
//! in the RUNPATH of a library loaded from an image (its origin is `/proc/self/fd`), are
//! out of reach. A library's dependencies resolve when they are on the host or already
//! loaded (by soname). dlerror names `/proc/self/fd/N` for errors in a copied file; a
//! file a mount does not have gets glibc's own error for the path as given.

use crate::state::{sys_close, Target};
use crate::sys::{hooked, real};
use libc::{c_char, c_int, c_long, c_void};
use std::ffi::{CStr, CString};

type DlopenFn = unsafe extern "C" fn(*const c_char, c_int) -> *mut c_void;
type DlmopenFn = unsafe extern "C" fn(c_long, *const c_char, c_int) -> *mut c_void;

/// What to do with a dlopen call.
enum Plan {
    /// Not ours: the real function, with the caller's arguments and return address.
    Pass,
    /// Load this name instead; `fd` is a memfd made for this call, to close if loading
    /// fails (a memfd found again stays).
    Load { name: CString, fd: Option<c_int> },
}

/// dlopen(3): a library in a mount is loaded from a memfd copy; see the module doc.
///
/// # Safety
/// libc's dlopen contract.
#[unsafe(naked)]
#[no_mangle]
pub(crate) unsafe extern "C" fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
    // On entry rsp is 8 mod 16: two pushes and 24 bytes (an out slot at [rsp]) align it
    // for the call. `route` returns the function to jump to (the real dlopen, arguments
    // and return address untouched) or 0 with the result in the out slot.
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 24",
        "mov rdx, rsp",
        "call {route}",
        "mov r11, rax",
        "mov rax, [rsp]",
        "add rsp, 24",
        "pop rsi",
        "pop rdi",
        "test r11, r11",
        "jz 2f",
        "jmp r11",
        "2:",
        "ret",
        route = sym dlopen_route,
    )
}

/// dlmopen(3): as [`dlopen`], in namespace `lmid`.
///
/// # Safety
/// libc's dlmopen contract.
#[unsafe(naked)]
#[no_mangle]
pub(crate) unsafe extern "C" fn dlmopen(
    lmid: c_long,
    file: *const c_char,
    mode: c_int,
) -> *mut c_void {
    // Three pushes and 16 bytes (the out slot at [rsp]) align rsp for the call.
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "push rdx",
        "sub rsp, 16",
        "mov rcx, rsp",
        "call {route}",
        "mov r11, rax",
        "mov rax, [rsp]",
        "add rsp, 16",
        "pop rdx",
        "pop rsi",
        "pop rdi",
        "test r11, r11",
        "jz 2f",
        "jmp r11",
        "2:",
        "ret",
        route = sym dlmopen_route,
    )
}

/// The body of [`dlopen`]: 0 when the call was handled (its result in `*out`), otherwise
/// the address of the real dlopen.
extern "C" fn dlopen_route(file: *const c_char, mode: c_int, out: *mut *mut c_void) -> usize {
    let Some(real) = real!(dlopen: DlopenFn) else {
        // SAFETY: the trampoline's out slot.
        unsafe { *out = std::ptr::null_mut() };
        return 0;
    };
    match plan(file, mode) {
        Plan::Pass => real as usize,
        Plan::Load { name, fd } => {
            // SAFETY: the real dlopen with a NUL-terminated name and the caller's mode.
            let h = unsafe { real(name.as_ptr(), mode) };
            finish(h, fd, out)
        }
    }
}

/// The body of [`dlmopen`], as [`dlopen_route`].
extern "C" fn dlmopen_route(
    lmid: c_long,
    file: *const c_char,
    mode: c_int,
    out: *mut *mut c_void,
) -> usize {
    let Some(real) = real!(dlmopen: DlmopenFn) else {
        // SAFETY: the trampoline's out slot.
        unsafe { *out = std::ptr::null_mut() };
        return 0;
    };
    match plan(file, mode) {
        Plan::Pass => real as usize,
        Plan::Load { name, fd } => {
            // SAFETY: the real dlmopen with a NUL-terminated name and the caller's mode.
            let h = unsafe { real(lmid, name.as_ptr(), mode) };
            finish(h, fd, out)
        }
    }
}

/// Stores a handled call's result; a memfd made for a load that failed is closed.
fn finish(h: *mut c_void, fd: Option<c_int>, out: *mut *mut c_void) -> usize {
    if h.is_null() {
        if let Some(fd) = fd {
            sys_close(fd);
        }
    }
    // SAFETY: the trampoline's out slot.
    unsafe { *out = h };
    0
}

/// Decides a call. The real dlopen runs after this, outside the hook, so the library's
/// constructors see mounts.
fn plan(file: *const c_char, mode: c_int) -> Plan {
    if file.is_null() {
        return Plan::Pass;
    }
    // SAFETY: a non-null dlopen name is a NUL-terminated string.
    if !unsafe { CStr::from_ptr(file) }.to_bytes().contains(&b'/') {
        return Plan::Pass;
    }
    hooked(Plan::Pass, |st| {
        match st.classify(libc::AT_FDCWD, file, true) {
            Ok(Target::Pass) | Err(_) => None,
            Ok(Target::HostAbs(name)) => Some(Plan::Load { name, fd: None }),
            Ok(Target::Virt(vp)) => {
                let tag = format!("usfs-dl:{}:{}", vp.mount, vp.ino());
                if let Some(fd) = find_copy(&tag) {
                    return Some(Plan::Load {
                        name: fd_name(fd)?.1,
                        fd: None,
                    });
                }
                if mode & libc::RTLD_NOLOAD != 0 {
                    return None;
                }
                let name = CString::new(tag).ok()?;
                let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
                let fd = crate::copy::to_memfd(st, vp, &name, flags).ok()?;
                // fd_name may move the copy to another number (and closes it on failure).
                let (fd, name) = fd_name(fd)?;
                Some(Plan::Load { name, fd: Some(fd) })
            }
        }
    })
    .unwrap_or(Plan::Pass)
}

/// `/proc/self/fd/N` for memfd `fd`, moved first to a number whose name the loader does
/// not already use (a library loaded from a memfd the program has since closed keeps
/// its name, and the loader matches names before files): the number it has now and
/// the name. `None`: no such number found; the memfd is closed then.
fn fd_name(mut fd: c_int) -> Option<(c_int, CString)> {
    for _ in 0..64 {
        let Ok(name) = CString::new(format!("/proc/self/fd/{fd}")) else {
            sys_close(fd);
            return None;
        };
        if !loaded_as(&name) {
            return Some((fd, name));
        }
        // SAFETY: duplicating our own memfd to a higher free number.
        let new = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, fd + 1) };
        sys_close(fd);
        if new < 0 {
            return None;
        }
        fd = new as c_int;
    }
    sys_close(fd);
    None
}

/// True when a loaded object has the name `name`.
fn loaded_as(name: &CStr) -> bool {
    /// dl_iterate_phdr's callback: stops (1) at an object named `*data`.
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid info; `data` is the `&CStr` below.
        let (info, want) = unsafe { (&*info, &*(data as *const &CStr)) };
        if info.dlpi_name.is_null() {
            return 0;
        }
        // SAFETY: a loaded object's name is a NUL-terminated string.
        (unsafe { CStr::from_ptr(info.dlpi_name) } == *want) as c_int
    }
    let mut want: &CStr = name;
    // SAFETY: the callback only reads `want` during the call.
    unsafe { libc::dl_iterate_phdr(Some(visit), (&mut want as *mut &CStr).cast()) != 0 }
}

/// An open memfd of ours holding the library tagged `tag` (found by the memfd's name in
/// /proc/self/fd).
fn find_copy(tag: &str) -> Option<c_int> {
    let want = format!("/memfd:{tag} (deleted)");
    std::fs::read_dir("/proc/self/fd").ok()?.find_map(|e| {
        let e = e.ok()?;
        let link = std::fs::read_link(e.path()).ok()?;
        (link.as_os_str().as_encoded_bytes() == want.as_bytes())
            .then(|| e.file_name().to_str()?.parse().ok())
            .flatten()
    })
}
