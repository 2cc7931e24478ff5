//! libusfs_preload.so: the library behind `usfs run` (the libplfs seed's design: an
//! LD_PRELOAD library over libc's I/O calls; SplitFS's data path: file data by memcpy
//! from an mmap of the image).
//!
//! Calls on paths under a mount prefix (and on descriptors, DIR and FILE streams opened
//! there) are served in user space through usfs_vfs and the back end's FileSystem trait;
//! everything else goes to the next definition (dlsym RTLD_NEXT) after one atomic load or
//! a prefix comparison. Virtual descriptors are real kernel descriptors (O_PATH on
//! /dev/null) used as placeholders, so numbers stay unique and dup2 onto 0/1/2 works;
//! once fork or exec shares a regular file's description, its placeholders become dups of
//! one sealed memfd that keeps the offset for every process (h_exec).
//!
//! Never crashing the host: every hook body runs under `catch_unwind` (a panic becomes
//! EIO), panic messages are silenced, and a thread-local guard sends calls made from
//! inside a hook (Rust std calling `open64`, `statx`, `mmap`...) straight to libc. The
//! workspace's profiles cannot set panic=abort for one crate, so this is how the library
//! never unwinds into C; `extern "C"` functions abort rather than unwind on an escaped
//! panic as a last line.
//!
//! Modules: [`sys`] (the C boundary), [`state`] (the process state), and one per family
//! of calls: h_open, h_io, h_write (changes through descriptors), h_mmap (shared writable
//! mappings), h_stat, h_modify (path calls that change a mount, carried out by apply in a
//! read-write one), h_dir, h_cwd, h_stdio (with h_freopen), h_exec (with exec_path: PATH
//! lookups, and h_execl: the variadic execl family, whose bodies are C in csrc/execl.c),
//! h_shell (system, popen), h_walk (glob, nftw, ftw), h_fts, h_dl (dlopen).
//!
//! In a read-write mount (`usfs run --rw`) every change goes to the image's owner
//! (usfs_vfs::channel) after the POSIX checks of usfs_vfs::names and usfs_vfs::change.

// The hooks are the C ABI: their safety contract is libc's, documented by the functions
// they stand in for.
#![allow(clippy::missing_safety_doc)]

mod apply;
mod copy;
mod exec_path;
mod h_cwd;
mod h_dir;
// dlopen's trampolines are x86_64 assembly.
#[cfg(target_arch = "x86_64")]
mod h_dl;
mod h_exec;
mod h_execl;
mod h_freopen;
mod h_fts;
mod h_io;
mod h_mmap;
mod h_modify;
mod h_open;
mod h_shell;
mod h_stat;
mod h_stdio;
mod h_walk;
mod h_write;
mod state;
mod sys;

/// Runs when the library is loaded: silences panic messages, takes over descriptors and
/// the working directory handed over by exec, and makes stdin a stream of ours when
/// descriptor 0 is virtual (glibc's stdin reads through an internal read we cannot see).
extern "C" fn on_load() {
    sys::quiet_panics();
    let _ = sys::hooked((), |st| {
        h_exec::restore_handover(st);
        h_stdio::retarget_std(st, 1);
        h_stdio::retarget_std(st, 2);
        if st.fds.is_virtual(0) {
            let fp = h_stdio::cookie_file(st, 0, c"r".as_ptr());
            if !fp.is_null() {
                // SAFETY: replacing the process's stdin stream pointer at load time,
                // before the program runs.
                unsafe { stdin = fp };
            }
        }
        Some(())
    });
}

extern "C" {
    static mut stdin: *mut libc::FILE;
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

/// Runs when the process exits normally: what its shared writable mappings of files in
/// read-write mounts changed reaches the image (h_mmap).
extern "C" fn on_exit() {
    let _ = sys::hooked((), |st| {
        h_mmap::settle_all(st);
        Some(())
    });
}

#[used]
#[link_section = ".fini_array"]
static ON_EXIT: extern "C" fn() = on_exit;
