//! The client's side: [`Remote`], a file system whose every call is a request to the
//! image's owner. One connection per process: a child made by fork never uses the
//! connection it inherited (its requests would interleave with its parent's) but opens
//! its own at its first call; exec closes it (close-on-exec). A connection the program
//! closed or replaced by number ([`Remote::forget_in`]) is made anew. A request is never
//! sent twice: if the owner does not answer, the call fails with EIO.

use super::frame;
use super::proto::Req;
use super::wire::Dec;
use super::CHUNK;
use crate::resolve::Errno;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use usfs_fs::{
    DirEntry, Error, Fallocate, FileSystem, FileSystemWrite, Ino, Metadata, NewNode, RenameFlags,
    Result, SetAttr, StatFs, StepAttrs,
};

/// The lowest descriptor number a connection uses, out of the way of the small numbers
/// programs dup onto.
const FD_FLOOR: i32 = 700;

/// A connection: its descriptor and the process that made it.
struct Conn {
    fd: i32,
    pid: i32,
}

/// A file system served by the owner listening at a socket.
pub struct Remote {
    socket: PathBuf,
    locks: super::LockFile,
    conn: Mutex<Option<Conn>>,
    root: Ino,
    format: &'static str,
}

fn proto_err() -> Error {
    Error::Io(std::io::Error::from_raw_os_error(libc::EIO))
}

impl Remote {
    /// Connects to the owner at `socket` and asks what it serves.
    pub fn connect(socket: &Path) -> Result<Remote> {
        let mut r = Remote {
            socket: socket.to_path_buf(),
            locks: super::LockFile::new(socket),
            conn: Mutex::new(None),
            root: 0,
            format: "ext4",
        };
        let b = r.call(&Req::Hello)?;
        let mut d = Dec(&b);
        r.root = d.u64().ok_or_else(proto_err)?;
        r.format = match d.bytes().ok_or_else(proto_err)? {
            b"ext2" => "ext2",
            b"ext3" => "ext3",
            _ => "ext4",
        };
        Ok(r)
    }

    /// The mirror through which processes share writable mappings of file `ino`.
    pub fn mirror_path(&self, ino: Ino) -> PathBuf {
        super::mirror_path(&self.socket, ino)
    }

    /// The record locks of the files this owner serves.
    pub fn locks(&self) -> &super::LockFile {
        &self.locks
    }

    /// Holds the connection's lock (around fork: a child never inherits it held by a
    /// thread that does not exist there).
    pub fn hold(&self) -> impl Drop + '_ {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The program closes or replaces descriptors `first..=last`: if the connection's is
    /// among them it is no longer ours (the next call connects again).
    pub fn forget_in(&self, first: u32, last: u32) {
        self.locks.forget_in(first, last);
        let mut g = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if g.as_ref()
            .is_some_and(|c| (c.fd as u32) >= first && (c.fd as u32) <= last)
        {
            *g = None;
        }
    }

    /// Sends `req` and returns the reply's payload (or the owner's error). errno is left
    /// as it was: the lock and the socket calls may set it (a contended lock's futex wait
    /// says EAGAIN), and callers such as readdir(3) must not change it on success.
    fn call(&self, req: &Req<'_>) -> Result<Vec<u8>> {
        // SAFETY: __errno_location returns this thread's errno slot.
        let errno = unsafe { libc::__errno_location() };
        // SAFETY: as above; reading and writing our own thread's slot.
        let saved = unsafe { *errno };
        let r = self.call_inner(req);
        // SAFETY: as above.
        unsafe { *errno = saved };
        r
    }

    fn call_inner(&self, req: &Req<'_>) -> Result<Vec<u8>> {
        let msg = req.encode();
        let mut g = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        if g.as_ref().is_some_and(|c| c.pid != pid) {
            // Inherited from the parent: ours to close, not to use.
            let c = g.take().expect("checked");
            // SAFETY: closing this process's copy of the descriptor.
            unsafe { libc::syscall(libc::SYS_close, c.fd) };
        }
        if g.is_none() {
            let fd = dial(&self.socket).map_err(|e| {
                Error::Io(std::io::Error::new(
                    std::io::Error::from_raw_os_error(e).kind(),
                    format!(
                        "image owner at {}: {}",
                        self.socket.display(),
                        errno_text(e)
                    ),
                ))
            })?;
            *g = Some(Conn { fd, pid });
        }
        let fd = g.as_ref().expect("connected").fd;
        let reply = frame::send(fd, &msg).and_then(|()| frame::recv(fd));
        let reply = match reply {
            Ok(Some(r)) => r,
            _ => {
                // The owner went away (or the stream broke mid-reply): the next call
                // tries a new connection; this one fails.
                // SAFETY: closing our own descriptor.
                unsafe { libc::syscall(libc::SYS_close, fd) };
                *g = None;
                return Err(proto_err());
            }
        };
        drop(g);
        let mut d = Dec(&reply);
        match d.u8() {
            Some(0) => Ok(reply[1..].to_vec()),
            Some(1) => {
                let errno = d.u32().ok_or_else(proto_err)? as i32;
                let msg = d.bytes().unwrap_or_default();
                Err(Error::from_errno(errno, &String::from_utf8_lossy(msg)))
            }
            _ => Err(proto_err()),
        }
    }

    fn meta_of(&self, req: &Req<'_>) -> Result<Metadata> {
        Dec(&self.call(req)?).meta().ok_or_else(proto_err)
    }

    fn unit(&self, req: &Req<'_>) -> Result<()> {
        self.call(req).map(|_| ())
    }

    /// Lists a directory in batches (`dots`: as readdir_with_dots).
    fn list(
        &self,
        dir: Ino,
        mut pos: u64,
        dots: bool,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        loop {
            let b = self.call(&Req::Readdir { dir, pos, dots })?;
            let mut d = Dec(&b);
            let n = d.u32().ok_or_else(proto_err)?;
            for _ in 0..n {
                let e = d.entry().ok_or_else(proto_err)?;
                pos = d.u64().ok_or_else(proto_err)?;
                if !f(e, pos) {
                    return Ok(());
                }
            }
            if d.u8().ok_or_else(proto_err)? == 0 {
                return Ok(());
            }
        }
    }

    /// Writes `data` at `offset` as the caller `by` (uid, gid): a write by anyone but root
    /// clears setuid/setgid, as the kernel's does.
    pub fn write_by(&self, ino: Ino, offset: u64, data: &[u8], by: (u32, u32)) -> Result<usize> {
        let mut done = 0;
        for piece in data.chunks(CHUNK) {
            let b = self.call(&Req::Write {
                ino,
                off: offset + done as u64,
                data: piece,
                by,
            })?;
            let n = Dec(&b).u64().ok_or_else(proto_err)? as usize;
            done += n;
            if n < piece.len() {
                break;
            }
        }
        Ok(done)
    }

    /// Writes `data` at the end of the file, atomically against other appends (O_APPEND);
    /// returns where it landed and how much was written.
    pub fn append(&self, ino: Ino, data: &[u8], by: (u32, u32)) -> Result<(u64, usize)> {
        let mut first = None;
        let mut done = 0;
        for piece in data.chunks(CHUNK) {
            let b = self.call(&Req::Append {
                ino,
                data: piece,
                by,
            })?;
            let mut d = Dec(&b);
            let at = d.u64().ok_or_else(proto_err)?;
            let n = d.u64().ok_or_else(proto_err)? as usize;
            first.get_or_insert(at);
            done += n;
            if n < piece.len() {
                break;
            }
        }
        Ok((first.unwrap_or(0), done))
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let g = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        if let Some(c) = g.take().filter(|c| c.pid == pid) {
            // SAFETY: the descriptor is this process's own connection.
            unsafe { libc::syscall(libc::SYS_close, c.fd) };
        }
    }
}

/// A new connection to `socket`, its descriptor moved to [`FD_FLOOR`] or above.
fn dial(socket: &Path) -> std::result::Result<i32, Errno> {
    use std::os::unix::ffi::OsStrExt;
    let path = socket.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; zeroed is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if path.len() >= addr.sun_path.len() {
        return Err(libc::ENAMETOOLONG);
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    let last = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    // SAFETY: plain system calls on a descriptor we create and own; `addr` outlives them.
    unsafe {
        let fd = libc::syscall(
            libc::SYS_socket,
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
        ) as i32;
        if fd < 0 {
            return Err(last());
        }
        let r = libc::syscall(
            libc::SYS_connect,
            fd,
            &addr as *const libc::sockaddr_un,
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        );
        if r != 0 {
            let e = last();
            libc::syscall(libc::SYS_close, fd);
            return Err(e);
        }
        let high = libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, FD_FLOOR) as i32;
        if high >= 0 {
            libc::syscall(libc::SYS_close, fd);
            return Ok(high);
        }
        Ok(fd)
    }
}

fn errno_text(e: Errno) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

impl FileSystem for Remote {
    fn format_name(&self) -> &'static str {
        self.format
    }

    fn root(&self) -> Ino {
        self.root
    }

    fn lookup(&self, dir: Ino, name: &[u8]) -> Result<Ino> {
        Dec(&self.call(&Req::Lookup { dir, name })?)
            .u64()
            .ok_or_else(proto_err)
    }

    fn getattr(&self, ino: Ino) -> Result<Metadata> {
        self.meta_of(&Req::Getattr { ino })
    }

    fn step_attrs(&self, dir: Ino, name: &[u8], _child_attrs: bool) -> Result<StepAttrs> {
        let b = self.call(&Req::Step { dir, name })?;
        let mut d = Dec(&b);
        let dir = d.meta().ok_or_else(proto_err)?;
        let found = match d.u8().ok_or_else(proto_err)? {
            0 => None,
            1 => {
                let ino = d.u64().ok_or_else(proto_err)?;
                Some(Ok((ino, Some(d.meta().ok_or_else(proto_err)?))))
            }
            _ => {
                let errno = d.u32().ok_or_else(proto_err)? as i32;
                let msg = String::from_utf8_lossy(d.bytes().unwrap_or_default()).into_owned();
                Some(Err(Error::from_errno(errno, &msg)))
            }
        };
        Ok(StepAttrs { dir, found })
    }

    fn readdir(
        &self,
        dir: Ino,
        cookie: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        self.list(dir, cookie, false, f)
    }

    fn readdir_with_dots(
        &self,
        dir: Ino,
        pos: u64,
        f: &mut dyn FnMut(DirEntry, u64) -> bool,
    ) -> Result<()> {
        self.list(dir, pos, true, f)
    }

    fn read_at(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let len = (buf.len() - done).min(CHUNK) as u32;
            let b = self.call(&Req::Read {
                ino,
                off: offset + done as u64,
                len,
            })?;
            let data = Dec(&b).bytes().ok_or_else(proto_err)?;
            let n = data.len().min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&data[..n]);
            done += n;
            if n < len as usize {
                break;
            }
        }
        Ok(done)
    }

    fn readlink(&self, ino: Ino) -> Result<Vec<u8>> {
        let b = self.call(&Req::Readlink { ino })?;
        Ok(Dec(&b).bytes().ok_or_else(proto_err)?.to_vec())
    }

    fn list_xattrs(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        let b = self.call(&Req::ListXattrs { ino })?;
        let mut d = Dec(&b);
        let n = d.u32().ok_or_else(proto_err)?;
        (0..n)
            .map(|_| d.bytes().map(<[u8]>::to_vec).ok_or_else(proto_err))
            .collect()
    }

    fn get_xattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        let b = self.call(&Req::GetXattr { ino, name })?;
        Ok(Dec(&b).bytes().ok_or_else(proto_err)?.to_vec())
    }

    fn next_data(&self, ino: Ino, offset: u64) -> Result<Option<Range<u64>>> {
        let b = self.call(&Req::NextData { ino, off: offset })?;
        let mut d = Dec(&b);
        match d.u8().ok_or_else(proto_err)? {
            0 => Ok(None),
            _ => {
                let s = d.u64().ok_or_else(proto_err)?;
                Ok(Some(s..d.u64().ok_or_else(proto_err)?))
            }
        }
    }

    fn statfs(&self) -> Result<StatFs> {
        Dec(&self.call(&Req::Statfs)?)
            .statfs()
            .ok_or_else(proto_err)
    }

    fn io_stats(&self) -> usfs_dev::IoSnapshot {
        usfs_dev::IoSnapshot::default()
    }

    fn describe(&self) -> Vec<(String, String)> {
        let Ok(b) = self.call(&Req::Describe) else {
            return Vec::new();
        };
        let mut d = Dec(&b);
        let n = d.u32().unwrap_or(0);
        let mut out = Vec::new();
        for _ in 0..n {
            let (Some(k), Some(v)) = (d.bytes(), d.bytes()) else {
                break;
            };
            out.push((
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
        }
        out
    }
}

impl FileSystemWrite for Remote {
    fn create(&self, dir: Ino, name: &[u8], node: NewNode) -> Result<Metadata> {
        self.meta_of(&Req::Create { dir, name, node })
    }

    fn mkdir(&self, dir: Ino, name: &[u8], node: NewNode) -> Result<Metadata> {
        self.meta_of(&Req::Mkdir { dir, name, node })
    }

    fn symlink(
        &self,
        dir: Ino,
        name: &[u8],
        target: &[u8],
        uid: u32,
        gid: u32,
    ) -> Result<Metadata> {
        self.meta_of(&Req::Symlink {
            dir,
            name,
            target,
            uid,
            gid,
        })
    }

    fn link(&self, ino: Ino, dir: Ino, name: &[u8]) -> Result<Metadata> {
        self.meta_of(&Req::Link { ino, dir, name })
    }

    fn unlink(&self, dir: Ino, name: &[u8]) -> Result<()> {
        self.unit(&Req::Unlink { dir, name })
    }

    fn rmdir(&self, dir: Ino, name: &[u8]) -> Result<()> {
        self.unit(&Req::Rmdir { dir, name })
    }

    fn rename(
        &self,
        dir: Ino,
        name: &[u8],
        new_dir: Ino,
        new_name: &[u8],
        flags: RenameFlags,
    ) -> Result<()> {
        self.unit(&Req::Rename {
            dir,
            name,
            new_dir,
            new_name,
            flags,
        })
    }

    fn write_at(&self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize> {
        self.write_by(ino, offset, data, (0, 0))
    }

    fn setattr(&self, ino: Ino, attr: SetAttr) -> Result<Metadata> {
        self.meta_of(&Req::Setattr { ino, attr })
    }

    fn fallocate(&self, ino: Ino, mode: Fallocate, offset: u64, len: u64) -> Result<()> {
        self.unit(&Req::Fallocate {
            ino,
            mode,
            off: offset,
            len,
        })
    }

    fn set_xattr(&self, ino: Ino, name: &[u8], value: &[u8]) -> Result<()> {
        self.unit(&Req::SetXattr { ino, name, value })
    }

    fn remove_xattr(&self, ino: Ino, name: &[u8]) -> Result<()> {
        self.unit(&Req::RemoveXattr { ino, name })
    }

    fn fsync(&self, ino: Ino, datasync: bool) -> Result<()> {
        self.unit(&Req::Fsync { ino, datasync })
    }

    fn sync(&self) -> Result<()> {
        self.unit(&Req::Sync)
    }

    fn open_file(&self, ino: Ino) -> Result<()> {
        self.unit(&Req::Open { ino })
    }

    fn release_file(&self, ino: Ino) -> Result<()> {
        self.unit(&Req::Release { ino })
    }
}
