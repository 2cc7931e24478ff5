//! The /dev/fuse transport: read(2) returns one whole request, writev(2) sends one whole
//! reply (header, then body).

use crate::abi::{self, InHeader, IN_HEADER_LEN};
use crate::dispatch::Outcome;
use crate::init::MAX_WRITE;
use crate::Server;

/// How long the reader waits after a FORGET when requests come over io_uring: the
/// kernel queues the FORGETs of the next inodes meanwhile and hands them over as one
/// BATCH_FORGET, instead of waking this thread for each (an `rm -rf` of 5,000 entries
/// took 0.39 s with a wake-up per FORGET, 0.34 s with them batched).
const FORGET_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

/// Reads and answers requests on `fd` until the connection ends (ENODEV after unmount).
/// `batch_forgets`: only FORGET and INTERRUPT come this way (io_uring carries the rest),
/// so FORGETs may wait to be batched.
pub(super) fn serve(fd: i32, server: &Server, batch_forgets: bool) -> std::io::Result<()> {
    // The largest request: a WRITE of MAX_WRITE bytes after its headers.
    let mut buf = vec![0u8; MAX_WRITE + 4096];
    let mut out = Vec::with_capacity(64 * 1024);
    loop {
        // SAFETY: read(2) into a buffer we own, at most its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                // Interrupted, or a request that was interrupted before we read it.
                Some(libc::EINTR | libc::EAGAIN | libc::ENOENT) => continue,
                Some(libc::ENODEV) => return Ok(()),
                _ => return Err(e),
            }
        }
        let req = &buf[..n as usize];
        let Some(h) = InHeader::parse(req) else {
            continue;
        };
        let body = &req[IN_HEADER_LEN.min(req.len())..];
        let split = abi::op_header_len(h.opcode).unwrap_or(0).min(body.len());
        let (opa, payload) = body.split_at(split);
        out.clear();
        let outcome = server.dispatch(&h, opa, payload, &mut out);
        let forget = matches!(outcome, Outcome::None);
        send(fd, h.unique, outcome, &out);
        if forget && batch_forgets {
            std::thread::sleep(FORGET_PAUSE);
        }
    }
}

/// Writes the reply to request `unique`. A failed write means the request was
/// interrupted or the connection is gone: nothing to do either way.
fn send(fd: i32, unique: u64, outcome: Outcome, out: &[u8]) {
    let (err, body): (i32, &[u8]) = match outcome {
        Outcome::None => return,
        Outcome::Reply => (0, out),
        Outcome::Mapped(s) => (0, s),
        Outcome::Error(e) => (-e, &[]),
    };
    let hdr = abi::out_header(abi::OUT_HEADER_LEN + body.len(), err, unique);
    let iov = [
        libc::iovec {
            iov_base: hdr.as_ptr() as *mut _,
            iov_len: hdr.len(),
        },
        libc::iovec {
            iov_base: body.as_ptr() as *mut _,
            iov_len: body.len(),
        },
    ];
    // SAFETY: both iovecs point at live buffers of the given lengths, only read.
    unsafe { libc::writev(fd, iov.as_ptr(), 2) };
}
