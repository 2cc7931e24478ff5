//! fts(3) walks that start inside a mount: glibc's fts reads directories with its internal
//! calls (which never reach our hooks), so when any root path of `fts_open` leads into a
//! mount the whole walk is done here, through our own opendir/readdir/stat/lstat hooks
//! (outside the reentrancy guard, so host roots of the same walk work too). Other walks go
//! to glibc untouched.
//!
//! Our walks never change the working directory (as with FTS_NOCHDIR): `fts_accpath` is
//! always the full path, which is valid for callers that asked for chdir too. Order and
//! flags follow glibc: preorder FTS_D, then the children (sorted by the caller's compare
//! function, else in directory order), then postorder FTS_DP; FTS_SKIP gives the
//! directory's FTS_DP at once; FTS_AGAIN returns an entry again; FTS_FOLLOW re-stats a
//! link through it; an unreadable directory comes back as FTS_DNR; a directory that is
//! its own ancestor is FTS_DC; FTS_XDEV, FTS_SEEDOT, FTS_NOSTAT and FTS_COMFOLLOW are
//! honoured. fts64_* are the same functions (x86-64 has one `struct stat`).

use crate::h_dir::{closedir, opendir, readdir};
use crate::h_stat::{lstat, stat};
use crate::h_walk::is_virtual;
use crate::sys::{call_real, set_errno};
use libc::{c_char, c_int, c_long, c_short, c_ushort, c_void};
use std::ffi::CStr;
use std::ptr::null_mut;

const FTS_COMFOLLOW: c_int = 0x1;
const FTS_LOGICAL: c_int = 0x2;
const FTS_NOSTAT: c_int = 0x8;
const FTS_SEEDOT: c_int = 0x20;
const FTS_XDEV: c_int = 0x40;
const FTS_OPTIONMASK: c_int = 0xff;

const FTS_D: c_ushort = 1;
const FTS_DC: c_ushort = 2;
const FTS_DEFAULT: c_ushort = 3;
const FTS_DNR: c_ushort = 4;
const FTS_DOT: c_ushort = 5;
const FTS_DP: c_ushort = 6;
const FTS_F: c_ushort = 8;
const FTS_NS: c_ushort = 10;
const FTS_NSOK: c_ushort = 11;
const FTS_SL: c_ushort = 12;
const FTS_SLNONE: c_ushort = 13;

const FTS_AGAIN: c_ushort = 1;
const FTS_FOLLOW: c_ushort = 2;
const FTS_NOINSTR: c_ushort = 3;
const FTS_SKIP: c_ushort = 4;

/// `fts_rfd` of our handles. glibc's is a descriptor (>= 0) or 0, so a negative value
/// tells our handles from glibc's without any table.
const OURS: c_int = -0x7573_6673;

/// The compare function fts_open takes.
type Compar = unsafe extern "C" fn(*const *const FtsEnt, *const *const FtsEnt) -> c_int;

/// glibc's FTSENT (fts.h), the part before the name.
#[repr(C)]
pub(crate) struct FtsEnt {
    cycle: *mut FtsEnt,
    parent: *mut FtsEnt,
    link: *mut FtsEnt,
    number: c_long,
    pointer: *mut c_void,
    accpath: *mut c_char,
    path: *mut c_char,
    errno: c_int,
    symfd: c_int,
    pathlen: c_ushort,
    namelen: c_ushort,
    ino: libc::ino_t,
    dev: libc::dev_t,
    nlink: libc::nlink_t,
    level: c_short,
    info: c_ushort,
    flags: c_ushort,
    instr: c_ushort,
    statp: *mut libc::stat,
    name: [c_char; 1],
}

/// glibc's FTS (fts.h).
#[repr(C)]
pub(crate) struct FtsHead {
    cur: *mut FtsEnt,
    child: *mut FtsEnt,
    array: *mut *mut FtsEnt,
    dev: libc::dev_t,
    path: *mut c_char,
    rfd: c_int,
    pathlen: c_int,
    nitems: c_int,
    compar: Option<Compar>,
    options: c_int,
}

/// A directory being walked: its entry and its children.
struct Frame {
    dir: *mut FtsEnt,
    children: Vec<*mut FtsEnt>,
    next: usize,
}

/// Our handle: glibc's FTS first (callers read its fields), then the walk.
#[repr(C)]
struct Handle {
    head: FtsHead,
    walk: Walk,
}

struct Walk {
    options: c_int,
    compar: Option<Compar>,
    /// The root entries, freed at fts_close; `root_parent` is their parent (level -1).
    roots: Vec<*mut FtsEnt>,
    next_root: usize,
    root_parent: *mut FtsEnt,
    /// The device of the root being walked (FTS_XDEV).
    root_dev: libc::dev_t,
    stack: Vec<Frame>,
    /// The entry fts_read returned last.
    cur: *mut FtsEnt,
    /// Children of `cur` read by fts_children, used by the next fts_read.
    pending: Option<Vec<*mut FtsEnt>>,
}

/// Allocates an entry named `name` at `path` (both without NUL).
fn new_ent(name: &[u8], path: &[u8], parent: *mut FtsEnt, level: c_short) -> *mut FtsEnt {
    let size = std::mem::size_of::<FtsEnt>() + name.len();
    // SAFETY: calloc of a size that covers the header and the name with its NUL.
    let p = unsafe { libc::calloc(1, size) }.cast::<FtsEnt>();
    if p.is_null() {
        return p;
    }
    let cpath = {
        let mut v = Vec::with_capacity(path.len() + 1);
        v.extend_from_slice(path);
        v.push(0);
        // SAFETY: one allocation of path + NUL, released in free_ent.
        let c = unsafe { libc::malloc(v.len()) }.cast::<c_char>();
        if !c.is_null() {
            // SAFETY: `c` holds v.len() bytes.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr().cast(), c, v.len()) };
        }
        c
    };
    // SAFETY: `p` is a zeroed entry with room for the name; writing its fields.
    unsafe {
        let e = &mut *p;
        e.parent = parent;
        e.level = level;
        e.path = cpath;
        e.accpath = cpath;
        e.pathlen = path.len().min(usize::from(c_ushort::MAX)) as c_ushort;
        e.namelen = name.len().min(usize::from(c_ushort::MAX)) as c_ushort;
        e.instr = FTS_NOINSTR;
        let dst = std::ptr::addr_of_mut!(e.name).cast::<u8>();
        std::ptr::copy_nonoverlapping(name.as_ptr(), dst, name.len());
        *dst.add(name.len()) = 0;
        e.statp = libc::calloc(1, std::mem::size_of::<libc::stat>()).cast();
    }
    p
}

fn free_ent(p: *mut FtsEnt) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` came from new_ent and is freed once.
    unsafe {
        libc::free((*p).path.cast());
        libc::free((*p).statp.cast());
        libc::free(p.cast());
    }
}

/// The path of an entry, without NUL.
fn path_of(p: *mut FtsEnt) -> Vec<u8> {
    // SAFETY: entries carry a NUL-terminated path (possibly null after a failed malloc).
    unsafe {
        if (*p).path.is_null() {
            return Vec::new();
        }
        CStr::from_ptr((*p).path).to_bytes().to_vec()
    }
}

impl Walk {
    /// Fills the attributes and `info` of `p`, following a symbolic link when `follow`.
    fn fill(&self, p: *mut FtsEnt, follow: bool) {
        // SAFETY: `p` is a live entry with a statp buffer (or null, checked).
        let e = unsafe { &mut *p };
        if e.path.is_null() || e.statp.is_null() {
            e.info = FTS_NS;
            e.errno = libc::ENOMEM;
            return;
        }
        // SAFETY: our stat hooks with a valid path and buffer.
        let mut ok = unsafe {
            if follow {
                stat(e.path, e.statp)
            } else {
                lstat(e.path, e.statp)
            }
        } == 0;
        let mut err = crate::sys::errno();
        let mut dangling = false;
        if !ok && follow {
            // SAFETY: as above.
            if unsafe { lstat(e.path, e.statp) } == 0 {
                ok = true;
                dangling = true;
                err = 0;
            }
        }
        if !ok {
            // SAFETY: the buffer is ours.
            unsafe { std::ptr::write_bytes(e.statp, 0, 1) };
            e.info = FTS_NS;
            e.errno = err;
            return;
        }
        e.errno = 0;
        // SAFETY: filled by stat above.
        let sb = unsafe { &*e.statp };
        e.ino = sb.st_ino;
        e.dev = sb.st_dev;
        e.nlink = sb.st_nlink;
        e.cycle = null_mut();
        e.info = match sb.st_mode & libc::S_IFMT {
            libc::S_IFDIR => {
                // SAFETY: the name was written NUL-terminated.
                let name = unsafe { CStr::from_ptr(e.name.as_ptr()) }.to_bytes();
                if e.level > 0 && (name == b"." || name == b"..") {
                    FTS_DOT
                } else if let Some(a) = ancestor_with(e.parent, sb.st_dev, sb.st_ino) {
                    e.cycle = a;
                    FTS_DC
                } else {
                    FTS_D
                }
            }
            libc::S_IFLNK if dangling => FTS_SLNONE,
            libc::S_IFLNK => FTS_SL,
            libc::S_IFREG => FTS_F,
            _ => FTS_DEFAULT,
        };
    }

    /// Reads the children of directory entry `p`: Err(errno) when it cannot be read.
    fn build(&self, p: *mut FtsEnt) -> Result<Vec<*mut FtsEnt>, c_int> {
        // SAFETY: `p` is a live entry.
        let (dir_path, level) = unsafe { ((*p).path, (*p).level) };
        if dir_path.is_null() {
            return Err(libc::ENOMEM);
        }
        // SAFETY: our opendir hook with a valid path.
        let d = unsafe { opendir(dir_path) };
        if d.is_null() {
            return Err(crate::sys::errno());
        }
        let base = path_of(p);
        let mut out = Vec::new();
        loop {
            // SAFETY: `d` is open.
            let de = unsafe { readdir(d) };
            if de.is_null() {
                break;
            }
            // SAFETY: readdir returns a valid entry with a NUL-terminated name.
            let (name, dtype) = unsafe {
                (
                    CStr::from_ptr((*de).d_name.as_ptr()).to_bytes().to_vec(),
                    (*de).d_type,
                )
            };
            if (name == b"." || name == b"..") && self.options & FTS_SEEDOT == 0 {
                continue;
            }
            let mut path = base.clone();
            if !path.ends_with(b"/") {
                path.push(b'/');
            }
            path.extend_from_slice(&name);
            let c = new_ent(&name, &path, p, level + 1);
            if c.is_null() {
                continue;
            }
            let logical = self.options & FTS_LOGICAL != 0;
            let skip_stat = self.options & FTS_NOSTAT != 0
                && dtype != libc::DT_DIR
                && dtype != libc::DT_UNKNOWN
                && !(logical && dtype == libc::DT_LNK);
            if skip_stat {
                // SAFETY: a live entry.
                unsafe { (*c).info = FTS_NSOK };
            } else {
                self.fill(c, logical);
            }
            out.push(c);
        }
        // SAFETY: closing what we opened.
        unsafe { closedir(d) };
        self.sort(&mut out);
        link(&out);
        Ok(out)
    }

    fn sort(&self, v: &mut [*mut FtsEnt]) {
        if let Some(cmp) = self.compar {
            v.sort_by(|a, b| {
                let (pa, pb): (*const FtsEnt, *const FtsEnt) = (*a, *b);
                // SAFETY: the caller's compare function with pointers to two entries.
                unsafe { cmp(&pa, &pb) }.cmp(&0)
            });
        }
    }

    /// fts_read.
    fn read(&mut self) -> *mut FtsEnt {
        let p = self.cur;
        if !p.is_null() {
            // SAFETY: `cur` is live until its frame is popped, which happens below.
            let e = unsafe { &mut *p };
            let instr = std::mem::replace(&mut e.instr, FTS_NOINSTR);
            if instr == FTS_AGAIN {
                self.pending = None;
                self.fill(p, self.follows(p));
                return p;
            }
            if instr == FTS_FOLLOW && (e.info == FTS_SL || e.info == FTS_SLNONE) {
                self.fill(p, true);
                return p;
            }
            if e.info == FTS_D {
                let crosses = self.options & FTS_XDEV != 0 && e.dev != self.root_dev;
                if instr == FTS_SKIP || crosses {
                    self.free_pending();
                    e.info = FTS_DP;
                    return p;
                }
                let children = match self.pending.take() {
                    Some(c) => Ok(c),
                    None => self.build(p),
                };
                match children {
                    Ok(children) => self.stack.push(Frame {
                        dir: p,
                        children,
                        next: 0,
                    }),
                    Err(errno) => {
                        e.info = FTS_DNR;
                        e.errno = errno;
                        return p;
                    }
                }
            }
        }
        self.free_pending();
        if let Some(top) = self.stack.last_mut() {
            if top.next < top.children.len() {
                let c = top.children[top.next];
                top.next += 1;
                self.cur = c;
                return c;
            }
            let f = self.stack.pop().expect("a frame");
            for c in f.children {
                free_ent(c);
            }
            // SAFETY: the directory's entry outlives its frame.
            unsafe { (*f.dir).info = FTS_DP };
            self.cur = f.dir;
            return f.dir;
        }
        if self.next_root < self.roots.len() {
            let r = self.roots[self.next_root];
            self.next_root += 1;
            // SAFETY: a live root entry.
            self.root_dev = unsafe { (*r).dev };
            self.cur = r;
            return r;
        }
        self.cur = null_mut();
        set_errno(0);
        null_mut()
    }

    /// Whether entry `p` is stat'ed through symbolic links.
    fn follows(&self, p: *mut FtsEnt) -> bool {
        // SAFETY: a live entry.
        let level = unsafe { (*p).level };
        self.options & FTS_LOGICAL != 0 || (level == 0 && self.options & FTS_COMFOLLOW != 0)
    }

    /// fts_children: the children of the current directory (the roots before the first
    /// fts_read), linked by `fts_link`.
    fn children(&mut self) -> *mut FtsEnt {
        if self.cur.is_null() {
            if self.next_root == 0 {
                return self.roots.first().copied().unwrap_or(null_mut());
            }
            set_errno(0);
            return null_mut();
        }
        // SAFETY: a live entry.
        if unsafe { (*self.cur).info } != FTS_D {
            set_errno(0);
            return null_mut();
        }
        if self.pending.is_none() {
            match self.build(self.cur) {
                Ok(c) => self.pending = Some(c),
                Err(e) => {
                    set_errno(e);
                    return null_mut();
                }
            }
        }
        set_errno(0);
        self.pending
            .as_ref()
            .and_then(|c| c.first().copied())
            .unwrap_or(null_mut())
    }

    fn free_pending(&mut self) {
        for c in self.pending.take().unwrap_or_default() {
            free_ent(c);
        }
    }
}

/// The nearest ancestor of `p` (inclusive) with this device and inode.
fn ancestor_with(mut p: *mut FtsEnt, dev: libc::dev_t, ino: libc::ino_t) -> Option<*mut FtsEnt> {
    // SAFETY: parents of live entries are live (frames pop children first).
    unsafe {
        while !p.is_null() && (*p).level >= 0 {
            if (*p).dev == dev && (*p).ino == ino && (*p).info != FTS_NS {
                return Some(p);
            }
            p = (*p).parent;
        }
    }
    None
}

/// Links entries by `fts_link` in order.
fn link(v: &[*mut FtsEnt]) {
    for (i, &p) in v.iter().enumerate() {
        // SAFETY: live entries.
        unsafe { (*p).link = v.get(i + 1).copied().unwrap_or(null_mut()) };
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        self.free_pending();
        for f in std::mem::take(&mut self.stack) {
            for c in f.children {
                free_ent(c);
            }
        }
        for r in std::mem::take(&mut self.roots) {
            free_ent(r);
        }
        free_ent(self.root_parent);
    }
}

/// Our fts_open for `argv` (a NULL-terminated list of paths).
fn open(argv: *const *mut c_char, options: c_int, compar: Option<Compar>) -> *mut FtsHead {
    if options & !FTS_OPTIONMASK != 0 {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    let root_parent = new_ent(b"", b"", null_mut(), -1);
    let mut walk = Walk {
        options,
        compar,
        roots: Vec::new(),
        next_root: 0,
        root_parent,
        root_dev: 0,
        stack: Vec::new(),
        cur: null_mut(),
        pending: None,
    };
    // SAFETY: the caller's NULL-terminated array of paths.
    for a in unsafe { crate::sys::c_array(argv.cast()) } {
        // SAFETY: a NUL-terminated path.
        let path = unsafe { CStr::from_ptr(a) }.to_bytes();
        if path.is_empty() {
            set_errno(libc::ENOENT);
            return null_mut();
        }
        let r = new_ent(path, path, root_parent, 0);
        if r.is_null() {
            set_errno(libc::ENOMEM);
            return null_mut();
        }
        walk.fill(r, options & (FTS_COMFOLLOW | FTS_LOGICAL) != 0);
        walk.roots.push(r);
    }
    let mut roots = std::mem::take(&mut walk.roots);
    walk.sort(&mut roots);
    link(&roots);
    walk.roots = roots;
    let h = Box::new(Handle {
        head: FtsHead {
            cur: null_mut(),
            child: null_mut(),
            array: null_mut(),
            dev: 0,
            path: null_mut(),
            rfd: OURS,
            pathlen: 0,
            nitems: 0,
            compar,
            options,
        },
        walk,
    });
    Box::into_raw(h).cast()
}

/// Our handle behind `fts`, if it is one.
fn ours<'a>(fts: *mut FtsHead) -> Option<&'a mut Handle> {
    // SAFETY: `fts` is an FTS from fts_open (ours or glibc's): reading its rfd is valid
    // for both; only ours carry OURS, and they are Handles.
    unsafe { (!fts.is_null() && (*fts).rfd == OURS).then(|| &mut *fts.cast::<Handle>()) }
}

/// Runs `f` behind a panic barrier (a panic becomes EIO and `fail`).
fn guarded<R>(fail: R, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        set_errno(libc::EIO);
        fail
    })
}

type OpenFn = unsafe extern "C" fn(*const *mut c_char, c_int, Option<Compar>) -> *mut FtsHead;

macro_rules! fts_hooks {
    ($open:ident, $read:ident, $children:ident, $set:ident, $close:ident) => {
        /// fts_open(3): ours when a root path leads into a mount, else glibc's.
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $open(argv: *const *mut c_char, options: c_int, compar: Option<Compar>) -> *mut FtsHead {
            // SAFETY: the caller's NULL-terminated array of paths.
            let virt = unsafe { crate::sys::c_array(argv.cast()) }.any(is_virtual);
            if virt {
                return guarded(null_mut(), || open(argv, options, compar));
            }
            call_real!($open: OpenFn, null_mut(); argv, options, compar)
        }

        /// fts_read(3).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $read(fts: *mut FtsHead) -> *mut FtsEnt {
            match ours(fts) {
                Some(h) => guarded(null_mut(), || {
                    let p = h.walk.read();
                    h.head.cur = p;
                    p
                }),
                None => call_real!($read: unsafe extern "C" fn(*mut FtsHead) -> *mut FtsEnt, null_mut(); fts),
            }
        }

        /// fts_children(3).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $children(fts: *mut FtsHead, instr: c_int) -> *mut FtsEnt {
            match ours(fts) {
                Some(h) => guarded(null_mut(), || {
                    let c = h.walk.children();
                    h.head.child = c;
                    c
                }),
                None => call_real!($children: unsafe extern "C" fn(*mut FtsHead, c_int) -> *mut FtsEnt, null_mut(); fts, instr),
            }
        }

        /// fts_set(3).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $set(fts: *mut FtsHead, p: *mut FtsEnt, instr: c_int) -> c_int {
            if ours(fts).is_none() {
                return call_real!($set: unsafe extern "C" fn(*mut FtsHead, *mut FtsEnt, c_int) -> c_int, -1; fts, p, instr);
            }
            let valid = [0, FTS_AGAIN, FTS_FOLLOW, FTS_NOINSTR, FTS_SKIP];
            match c_ushort::try_from(instr) {
                Ok(i) if valid.contains(&i) && !p.is_null() => {
                    // SAFETY: an entry of this walk.
                    unsafe { (*p).instr = if i == 0 { FTS_NOINSTR } else { i } };
                    0
                }
                _ => {
                    set_errno(libc::EINVAL);
                    -1
                }
            }
        }

        /// fts_close(3).
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $close(fts: *mut FtsHead) -> c_int {
            if ours(fts).is_some() {
                // SAFETY: our handle, made by Box::into_raw in open, freed once.
                return guarded(-1, || { drop(unsafe { Box::from_raw(fts.cast::<Handle>()) }); 0 });
            }
            call_real!($close: unsafe extern "C" fn(*mut FtsHead) -> c_int, -1; fts)
        }
    };
}
fts_hooks!(fts_open, fts_read, fts_children, fts_set, fts_close);
fts_hooks!(
    fts64_open,
    fts64_read,
    fts64_children,
    fts64_set,
    fts64_close
);
