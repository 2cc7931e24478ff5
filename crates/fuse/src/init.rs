//! Mounting and the INIT handshake, done by the fuser crate: it knows the mount(2) and
//! fusermount3 ways in and the version negotiation. Its session is then only kept for its
//! descriptor and its unmount-on-drop; requests after INIT are served by [`crate::transport`].

use crate::{CacheMode, Options};
use fuser::{Filesystem, InitFlags, KernelConfig, Request};
use std::sync::{Arc, Mutex};

/// Largest WRITE (and READ) the kernel may send: 1 MiB, what its default page limit
/// (fs.fuse.max_pages_limit, 256 pages) allows anyway. It sizes the request buffers: one
/// per /dev/fuse thread and one per io_uring queue entry.
pub(crate) const MAX_WRITE: usize = 1 << 20;

/// What INIT settled that the transports need.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Negotiated {
    /// The kernel agreed to take requests over io_uring.
    pub uring: bool,
}

/// The capabilities this server asks for, given to fuser's handshake.
struct Init {
    rw: bool,
    cache: CacheMode,
    uring: bool,
    /// Filled in by `init`.
    out: Arc<Mutex<Negotiated>>,
}

impl Filesystem for Init {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_WRITE as u32);
        // Large reads in one request where the kernel allows them.
        let _ = config.set_max_readahead(MAX_WRITE as u32);
        // Every directory listing as READDIRPLUS: an entry's attributes cost the server
        // an inode read, a separate LOOKUP costs a round trip (the kernel's adaptive mode
        // falls back to READDIR after a directory's first batch, and `rm -r`, which
        // lists first and stats after, then pays a LOOKUP per name).
        let _ = config.add_capabilities(InitFlags::FUSE_DO_READDIRPLUS);
        if self.rw {
            // The kernel enforces POSIX ACLs and sends the umask apart from the mode: a
            // new inode in a directory with a default ACL takes that ACL, not the umask
            // (attrs::umask_for).
            let _ = config.add_capabilities(InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK);
            // The server takes away setuid/setgid and file capabilities on write, chown
            // and truncate (attrs::before_write, attrs::setattr); in return the kernel
            // stops asking for security.capability before every write(2) (SB_NOSEC: once
            // per inode), a request per write that halved small-write throughput.
            let _ = config.add_capabilities(InitFlags::FUSE_HANDLE_KILLPRIV_V2);
            // With `-o cache` the kernel gathers small writes in its page cache and sends
            // them in large requests at writeback, fsync and close (safe: this mount is
            // the image's only writer; fsync still reaches usfs after the data).
            if self.cache == CacheMode::Cache {
                let _ = config.add_capabilities(InitFlags::FUSE_WRITEBACK_CACHE);
            }
        }
        // Requests over io_uring, one queue per CPU, when the kernel offers it (fuse's
        // enable_uring parameter): see transport::uring.
        let uring = self.uring
            && config
                .capabilities()
                .contains(InitFlags::FUSE_OVER_IO_URING)
            && config
                .add_capabilities(InitFlags::FUSE_OVER_IO_URING)
                .is_ok();
        if let Ok(mut n) = self.out.lock() {
            n.uring = uring;
        }
        Ok(())
    }
}

/// Mounts at `mountpoint` and completes INIT.
pub(crate) fn mount(
    mountpoint: &std::path::Path,
    opts: &Options,
    rw: bool,
) -> std::io::Result<(fuser::Session<impl Filesystem>, Negotiated)> {
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        if rw {
            fuser::MountOption::RW
        } else {
            fuser::MountOption::RO
        },
        fuser::MountOption::FSName(opts.fsname.clone()),
        fuser::MountOption::Subtype("usfs".into()),
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::NoAtime,
    ];
    if opts.allow_other {
        config.acl = fuser::SessionACL::All;
    }
    let out = Arc::new(Mutex::new(Negotiated::default()));
    let init = Init {
        rw,
        cache: opts.cache,
        uring: opts.uring,
        out: out.clone(),
    };
    let session = fuser::Session::new(init, mountpoint, &config)?;
    let n = out.lock().map(|n| *n).unwrap_or_default();
    Ok((session, n))
}
