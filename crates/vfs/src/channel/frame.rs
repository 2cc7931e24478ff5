//! Frames on a Unix stream socket: a u32 little-endian length, then that many bytes.
//! Raw system calls (sendto with MSG_NOSIGNAL, so a closed peer is EPIPE and never
//! SIGPIPE; recvfrom), so no libc hook of the preload library is re-entered.

use crate::resolve::Errno;

/// The largest frame either side accepts: a request or reply bigger than this is a
/// broken peer (clients split reads and writes into [`super::CHUNK`]-sized pieces).
pub(crate) const MAX_FRAME: usize = 16 << 20;

/// Sends one frame.
pub(crate) fn send(fd: i32, payload: &[u8]) -> Result<(), Errno> {
    let mut buf = Vec::with_capacity(4 + payload.len());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: sendto reads `buf.len() - done` bytes of our buffer; no address.
        let n = unsafe {
            libc::syscall(
                libc::SYS_sendto,
                fd,
                buf.as_ptr().add(done),
                buf.len() - done,
                libc::MSG_NOSIGNAL,
                std::ptr::null::<libc::sockaddr>(),
                0,
            )
        };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// Receives one frame; `Ok(None)` when the peer closed the connection between frames.
pub(crate) fn recv(fd: i32) -> Result<Option<Vec<u8>>, Errno> {
    let mut len = [0u8; 4];
    if !fill(fd, &mut len, true)? {
        return Ok(None);
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(libc::EPROTO);
    }
    let mut buf = vec![0u8; len];
    fill(fd, &mut buf, false)?;
    Ok(Some(buf))
}

/// Fills `buf`; false when the peer closed before the first byte and `eof_ok`.
fn fill(fd: i32, buf: &mut [u8], eof_ok: bool) -> Result<bool, Errno> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: recvfrom writes at most `buf.len() - done` bytes into our buffer.
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvfrom,
                fd,
                buf.as_mut_ptr().add(done),
                buf.len() - done,
                0,
                std::ptr::null_mut::<libc::sockaddr>(),
                std::ptr::null_mut::<libc::socklen_t>(),
            )
        };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return if done == 0 && eof_ok {
                Ok(false)
            } else {
                Err(libc::ECONNRESET)
            };
        }
        done += n as usize;
    }
    Ok(true)
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn frames_cross_a_socket_and_a_closed_peer_is_seen() {
        let (a, b) = UnixStream::pair().unwrap();
        send(a.as_raw_fd(), b"hello").unwrap();
        send(a.as_raw_fd(), b"").unwrap();
        assert_eq!(recv(b.as_raw_fd()).unwrap().unwrap(), b"hello");
        assert_eq!(recv(b.as_raw_fd()).unwrap().unwrap(), b"");
        drop(a);
        assert_eq!(recv(b.as_raw_fd()).unwrap(), None);
        assert_eq!(send(b.as_raw_fd(), b"x"), Err(libc::EPIPE));
    }

    #[test]
    fn an_oversized_frame_is_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        use std::io::Write;
        (&a).write_all(&(MAX_FRAME as u32 + 1).to_le_bytes())
            .unwrap();
        assert_eq!(recv(b.as_raw_fd()), Err(libc::EPROTO));
    }
}
