//! Moving requests and replies between the kernel and [`Server::dispatch`]: over the
//! /dev/fuse descriptor (read a request, writev the reply), and where INIT agreed to it
//! over io_uring too ([`uring`]). Until every io_uring queue is registered, and for
//! FORGET and INTERRUPT always, requests keep coming through /dev/fuse, so its readers run
//! in both cases.

mod dev;
mod uring;

use crate::init::Negotiated;
use crate::{Options, Server};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

/// Serves `session`'s mount until it is unmounted.
pub(crate) fn run(
    session: &impl AsFd,
    server: Arc<Server>,
    opts: &Options,
    n: Negotiated,
) -> std::io::Result<()> {
    let fd = session.as_fd().as_raw_fd();
    let rings = if n.uring {
        Some(uring::start(fd, server.clone())?)
    } else {
        None
    };
    // With io_uring, /dev/fuse carries little after setup: one reader is enough.
    let readers = if rings.is_some() {
        1
    } else {
        opts.threads.max(1)
    };
    let mut threads = Vec::new();
    for _ in 1..readers {
        let fd = clone_dev(fd)?;
        let s = server.clone();
        threads.push(std::thread::spawn(move || {
            dev::serve(fd.as_raw_fd(), &s, false)
        }));
    }
    let r = dev::serve(fd, &server, rings.is_some());
    for t in threads {
        let _ = t.join();
    }
    if let Some(rings) = rings {
        rings.stop();
    }
    r
}

/// A second /dev/fuse descriptor reading the same connection's requests
/// (FUSE_DEV_IOC_CLONE), so several threads can wait for requests at once.
fn clone_dev(fd: i32) -> std::io::Result<OwnedFd> {
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")?;
    let new: OwnedFd = dev.into();
    let mut src = fd as u32;
    // FUSE_DEV_IOC_CLONE: _IOR(229, 0, uint32_t).
    const FUSE_DEV_IOC_CLONE: libc::c_ulong = 0x8004_e500;
    // SAFETY: the ioctl reads one u32 (the descriptor to clone) from a live local.
    let r = unsafe { libc::ioctl(new.as_raw_fd(), FUSE_DEV_IOC_CLONE, &mut src) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(new)
}
