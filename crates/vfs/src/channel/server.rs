//! The owner's side: one thread per connected process, each request answered with one call
//! of the volume. The volume serialises its own transactions; the owner adds only what a
//! request needs beyond one call (an append reads the size and writes there atomically
//! against other appends) and remembers each connection's opens, so a process that dies
//! without closing its files does not keep them (or their orphaned inodes) forever.

use super::frame;
use super::proto::Req;
use super::wire::Enc;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use usfs_fs::{Error, FileSystemWrite, Ino, Result};

/// What a write by `by` (uid, gid) takes away first, as the kernel's file_remove_privs:
/// capabilities, and setuid/setgid unless the writer is root (CAP_FSETID).
fn before_write(fs: &dyn FileSystemWrite, ino: Ino, by: (u32, u32)) -> Result<()> {
    let c = crate::attrs::Caller {
        uid: by.0,
        gid: by.1,
    };
    crate::attrs::before_write(fs, ino, c, by.0 != 0)
}

/// Entries per readdir reply, at most.
const DIR_BATCH: usize = 512;

/// Serves one image to the processes that connect.
pub struct Owner {
    fs: Arc<dyn FileSystemWrite>,
    /// The socket it listens at (the mirrors of shared mappings lie beside it).
    socket: PathBuf,
    /// Every change is made durable before its reply (`usfs run --mode sync`).
    durable: bool,
    /// Held across an append's size lookup and write.
    appends: Mutex<()>,
    /// Connections open now.
    live: Mutex<usize>,
    idle: Condvar,
}

impl Owner {
    /// An owner of the volume `fs`; `durable`: every change is committed before it is
    /// answered (else at fsync, sync, and when the volume closes).
    pub fn new(fs: Arc<dyn FileSystemWrite>, durable: bool, socket: &Path) -> Arc<Owner> {
        Arc::new(Owner {
            fs,
            socket: socket.to_path_buf(),
            durable,
            appends: Mutex::new(()),
            live: Mutex::new(0),
            idle: Condvar::new(),
        })
    }

    /// Accepts connections on `listener` in a thread of its own, each served by a thread.
    pub fn listen(self: &Arc<Self>, listener: UnixListener) {
        let me = Arc::clone(self);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else {
                    // Out of descriptors or memory: let the clients finish, then retry.
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                };
                *me.live.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                let me = Arc::clone(&me);
                std::thread::spawn(move || me.connection(conn.into()));
            }
        });
    }

    /// Waits until no process is connected.
    pub fn wait_idle(&self) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        while *live > 0 {
            live = self.idle.wait(live).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Serves one process until it disconnects (or sends something malformed); then
    /// releases what it left open.
    fn connection(&self, fd: OwnedFd) {
        // Counted out even if serving it panics, so the owner still closes the image.
        let _live = Live(self);
        let mut opens: HashMap<Ino, u32> = HashMap::new();
        while let Ok(Some(msg)) = frame::recv(fd.as_raw_fd()) {
            let Some(req) = Req::decode(&msg) else { break };
            let reply = match self.answer(req, &mut opens) {
                Ok(mut e) => {
                    e.0.insert(0, 0);
                    e.0
                }
                Err(err) => {
                    let mut e = Enc::default();
                    e.u8(1)
                        .u32(err.errno() as u32)
                        .bytes(err.to_string().as_bytes());
                    e.0
                }
            };
            if frame::send(fd.as_raw_fd(), &reply).is_err() {
                break;
            }
        }
        for (ino, n) in opens {
            for _ in 0..n {
                let _ = self.fs.release_file(ino);
            }
        }
    }

    /// The reply payload of one request.
    fn answer(&self, req: Req<'_>, opens: &mut HashMap<Ino, u32>) -> Result<Enc> {
        let fs = &*self.fs;
        let mut e = Enc::default();
        match req {
            Req::Hello => {
                e.u64(fs.root()).bytes(fs.format_name().as_bytes());
            }
            Req::Lookup { dir, name } => {
                e.u64(fs.lookup(dir, name)?);
            }
            Req::Getattr { ino } => {
                e.meta(&fs.getattr(ino)?);
            }
            Req::Step { dir, name } => {
                let s = fs.step_attrs(dir, name, true)?;
                e.meta(&s.dir);
                match s.found {
                    None => {
                        e.u8(0);
                    }
                    Some(Ok((ino, m))) => {
                        let m = match m {
                            Some(m) => m,
                            None => fs.getattr(ino)?,
                        };
                        e.u8(1).u64(ino).meta(&m);
                    }
                    Some(Err(err)) => {
                        e.u8(2)
                            .u32(err.errno() as u32)
                            .bytes(err.to_string().as_bytes());
                    }
                }
            }
            Req::Readdir { dir, pos, dots } => self.readdir(dir, pos, dots, &mut e)?,
            Req::Read { ino, off, len } => {
                let mut buf = vec![0u8; (len as usize).min(super::CHUNK)];
                let n = fs.read_at(ino, off, &mut buf)?;
                e.bytes(&buf[..n]);
            }
            Req::Readlink { ino } => {
                e.bytes(&fs.readlink(ino)?);
            }
            Req::ListXattrs { ino } => {
                let names = fs.list_xattrs(ino)?;
                e.u32(names.len() as u32);
                for n in &names {
                    e.bytes(n);
                }
            }
            Req::GetXattr { ino, name } => {
                e.bytes(&fs.get_xattr(ino, name)?);
            }
            Req::NextData { ino, off } => match fs.next_data(ino, off)? {
                Some(r) => {
                    e.u8(1).u64(r.start).u64(r.end);
                }
                None => {
                    e.u8(0);
                }
            },
            Req::Statfs => {
                e.statfs(&fs.statfs()?);
            }
            Req::Describe => {
                let d = fs.describe();
                e.u32(d.len() as u32);
                for (k, v) in &d {
                    e.bytes(k.as_bytes()).bytes(v.as_bytes());
                }
            }
            req => return self.change(req, opens),
        }
        Ok(e)
    }

    /// The reply payload of a request that changes the image.
    fn change(&self, req: Req<'_>, opens: &mut HashMap<Ino, u32>) -> Result<Enc> {
        let fs = &*self.fs;
        let mut e = Enc::default();
        match req {
            Req::Create { dir, name, node } => {
                e.meta(&fs.create(dir, name, node)?);
            }
            Req::Mkdir { dir, name, node } => {
                e.meta(&fs.mkdir(dir, name, node)?);
            }
            Req::Symlink {
                dir,
                name,
                target,
                uid,
                gid,
            } => {
                e.meta(&fs.symlink(dir, name, target, uid, gid)?);
            }
            Req::Link { ino, dir, name } => {
                e.meta(&fs.link(ino, dir, name)?);
            }
            Req::Unlink { dir, name } => {
                let gone = fs.lookup(dir, name).ok();
                fs.unlink(dir, name)?;
                self.forget_mirror(gone);
            }
            Req::Rmdir { dir, name } => fs.rmdir(dir, name)?,
            Req::Rename {
                dir,
                name,
                new_dir,
                new_name,
                flags,
            } => {
                let replaced = fs.lookup(new_dir, new_name).ok();
                fs.rename(dir, name, new_dir, new_name, flags)?;
                if !flags.exchange {
                    self.forget_mirror(replaced);
                }
            }
            Req::Write { ino, off, data, by } => {
                before_write(fs, ino, by)?;
                let n = fs.write_at(ino, off, data)?;
                self.mirror(ino, |m| m.write(off, &data[..n]));
                e.u64(n as u64);
            }
            Req::Append { ino, data, by } => {
                before_write(fs, ino, by)?;
                let _g = self.appends.lock().unwrap_or_else(|p| p.into_inner());
                let at = fs.getattr(ino)?.size;
                let n = fs.write_at(ino, at, data)?;
                self.mirror(ino, |m| m.write(at, &data[..n]));
                e.u64(at).u64(n as u64);
            }
            Req::Setattr { ino, attr } => {
                e.meta(&fs.setattr(ino, attr)?);
                if let Some(size) = attr.size {
                    self.mirror(ino, |m| m.cut(size));
                }
            }
            Req::Fallocate {
                ino,
                mode,
                off,
                len,
            } => {
                fs.fallocate(ino, mode, off, len)?;
                if !matches!(mode, usfs_fs::Fallocate::Allocate { .. }) {
                    self.mirror(ino, |m| m.write(off, &vec![0u8; len.min(m.len()) as usize]));
                }
            }
            Req::SetXattr { ino, name, value } => fs.set_xattr(ino, name, value)?,
            Req::RemoveXattr { ino, name } => fs.remove_xattr(ino, name)?,
            Req::Fsync { ino, datasync } => fs.fsync(ino, datasync)?,
            Req::Sync => fs.sync()?,
            Req::Open { ino } => {
                fs.open_file(ino)?;
                *opens.entry(ino).or_default() += 1;
            }
            Req::Release { ino } => {
                // Only what this connection opened: a forked child closing descriptors it
                // inherited does not release its parent's opens.
                if let Some(n) = opens.get_mut(&ino).filter(|n| **n > 0) {
                    *n -= 1;
                    fs.release_file(ino)?;
                }
            }
            _ => return Err(Error::Invalid),
        }
        if self.durable {
            fs.sync()?;
        }
        Ok(e)
    }

    /// Keeps the mirror of a shared mapping of `ino`, if processes made one, in step with
    /// a change of the file (`f` gets it open).
    fn mirror(&self, ino: Ino, f: impl FnOnce(&Mirror)) {
        if let Ok(file) = std::fs::File::options()
            .read(true)
            .write(true)
            .open(super::mirror_path(&self.socket, ino))
        {
            f(&Mirror(file));
        }
    }

    /// A name of `ino` went: once the file has no name left, its mirror goes too (the
    /// inode number may come back as another file; mappings made keep the old mirror).
    fn forget_mirror(&self, ino: Option<Ino>) {
        let Some(ino) = ino else { return };
        if self.fs.getattr(ino).map_or(true, |m| m.nlink == 0) {
            let _ = std::fs::remove_file(super::mirror_path(&self.socket, ino));
        }
    }

    /// A batch of directory entries from `pos`: (entry, next position) pairs, then whether
    /// more follow.
    fn readdir(&self, dir: Ino, pos: u64, dots: bool, e: &mut Enc) -> Result<()> {
        let mut list = Vec::new();
        let mut more = false;
        let mut take = |ent: usfs_fs::DirEntry, next: u64| {
            if list.len() == DIR_BATCH {
                more = true;
                return false;
            }
            list.push((ent, next));
            true
        };
        if dots {
            self.fs.readdir_with_dots(dir, pos, &mut take)?;
        } else {
            self.fs.readdir(dir, pos, &mut take)?;
        }
        e.u32(list.len() as u32);
        for (ent, next) in &list {
            e.entry(ent).u64(*next);
        }
        e.u8(more as u8);
        Ok(())
    }
}

/// A connection being served: counted out of [`Owner::live`] when dropped.
struct Live<'a>(&'a Owner);

impl Drop for Live<'_> {
    fn drop(&mut self) {
        let mut live = self.0.live.lock().unwrap_or_else(|p| p.into_inner());
        *live -= 1;
        if *live == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// The mirror file of a shared mapping: it holds the file's first `len()` bytes.
struct Mirror(std::fs::File);

impl Mirror {
    fn len(&self) -> u64 {
        self.0.metadata().map_or(0, |m| m.len())
    }

    /// The file's bytes at `off` changed to `data`: the part the mirror holds follows.
    fn write(&self, off: u64, data: &[u8]) {
        use std::os::unix::fs::FileExt;
        let len = self.len();
        if off < len {
            let n = ((len - off) as usize).min(data.len());
            let _ = self.0.write_all_at(&data[..n], off);
        }
    }

    /// The file was cut to `size`: so is the mirror (mapped bytes past the end are gone,
    /// as the kernel drops them).
    fn cut(&self, size: u64) {
        if self.len() > size {
            let _ = self.0.set_len(size);
        }
    }
}
