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
/// A small frame takes one system call: the first read asks for up to 4 KiB, header and
/// payload together. That never takes bytes of a next frame, because the channel keeps
/// at most one frame in flight each way (a request, then its reply).
pub(crate) fn recv(fd: i32) -> Result<Option<Vec<u8>>, Errno> {
    let mut head = [0u8; 4096];
    let mut got = read_some(fd, &mut head)?;
    if got == 0 {
        return Ok(None);
    }
    while got < 4 {
        let n = read_some(fd, &mut head[got..4])?;
        if n == 0 {
            return Err(libc::ECONNRESET);
        }
        got += n;
    }
    let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
    if len > MAX_FRAME || got > 4 + len {
        return Err(libc::EPROTO);
    }
    let mut buf = vec![0u8; len];
    buf[..got - 4].copy_from_slice(&head[4..got]);
    fill(fd, &mut buf[got - 4..], false)?;
    Ok(Some(buf))
}

/// One recvfrom into `buf`: the bytes read (0: the peer closed).
fn read_some(fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
    loop {
        // SAFETY: recvfrom writes at most `buf.len()` bytes into our buffer.
        let n = unsafe {
            libc::syscall(
                libc::SYS_recvfrom,
                fd,
                buf.as_mut_ptr(),
                buf.len(),
                0,
                std::ptr::null_mut::<libc::sockaddr>(),
                std::ptr::null_mut::<libc::socklen_t>(),
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = errno();
        if e != libc::EINTR {
            return Err(e);
        }
    }
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
        // One frame in flight at a time, as the channel keeps it.
        send(a.as_raw_fd(), b"hello").unwrap();
        assert_eq!(recv(b.as_raw_fd()).unwrap().unwrap(), b"hello");
        send(a.as_raw_fd(), b"").unwrap();
        assert_eq!(recv(b.as_raw_fd()).unwrap().unwrap(), b"");
        let big: Vec<u8> = (0..100_000).map(|i| i as u8).collect();
        let t = std::thread::spawn(move || {
            send(a.as_raw_fd(), &big).unwrap();
            a
        });
        let got = recv(b.as_raw_fd()).unwrap().unwrap();
        assert!(got.len() == 100_000 && got.iter().enumerate().all(|(i, &x)| x == i as u8));
        let a = t.join().unwrap();
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
