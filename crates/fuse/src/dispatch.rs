//! One request in, one reply out: the operation's arguments are taken from its header and
//! payload and handed to the handler (read.rs, write.rs). Both transports call
//! [`Server::dispatch`]; neither knows an opcode beyond FORGET needing no reply.

use crate::abi::{self, op, Args, InHeader};
use crate::write::Make;
use crate::Server;

/// What a request came to.
pub(crate) enum Outcome<'a> {
    /// Success; the reply body is in the output buffer.
    Reply,
    /// Success; the reply body is this slice of the image mapping (a READ).
    Mapped(&'a [u8]),
    /// The operation failed with this errno.
    Error(i32),
    /// No reply is sent (FORGET, BATCH_FORGET, INTERRUPT).
    None,
}

impl From<Result<(), i32>> for Outcome<'_> {
    fn from(r: Result<(), i32>) -> Self {
        match r {
            Ok(()) => Outcome::Reply,
            Err(e) => Outcome::Error(e),
        }
    }
}

/// The `N` names at the front of a payload, or EINVAL.
fn names<const N: usize>(payload: &[u8]) -> Result<([&[u8]; N], &[u8]), i32> {
    abi::names(payload).ok_or(libc::EINVAL)
}

/// The one name at the front of a payload, or EINVAL.
fn name(payload: &[u8]) -> Result<&[u8], i32> {
    names::<1>(payload).map(|([n], _)| n)
}

impl Server {
    /// Serves one request: `opa` is the operation header, `payload` what follows it.
    /// The reply body is appended to `out` (empty on entry).
    pub(crate) fn dispatch<'s>(
        &'s self,
        h: &InHeader,
        opa: &[u8],
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Outcome<'s> {
        match abi::op_header_len(h.opcode) {
            Some(n) if opa.len() >= n => {}
            Some(_) => return Outcome::Error(libc::EINVAL),
            None => return Outcome::Error(libc::ENOSYS),
        }
        let a = Args(opa);
        let node = h.nodeid;
        match h.opcode {
            op::FORGET | op::BATCH_FORGET | op::INTERRUPT => Outcome::None,
            op::DESTROY => Outcome::Reply,
            op::LOOKUP => {
                let r = name(payload).and_then(|n| self.lookup(node, n, out));
                r.into()
            }
            op::GETATTR => self.getattr(node, out).into(),
            op::READLINK => self.readlink(node, out).into(),
            op::OPEN => self.open(node, a.u32(0), out).into(),
            op::OPENDIR => self.opendir(out).into(),
            op::RELEASE => self.release(node, a.u64(0)).into(),
            op::RELEASEDIR => Outcome::Reply,
            // Nothing to do at close (data and metadata reach the volume with each
            // request): ENOSYS tells the kernel so, and it stops sending FLUSH.
            op::FLUSH => Outcome::Error(libc::ENOSYS),
            op::FSYNC | op::FSYNCDIR => self.fsync(node, a.u32(8) & 1 != 0).into(),
            op::READ => self.read(node, a.u64(8), a.u32(16), out),
            op::READDIR => self.readdir(node, a.u64(8), a.u32(16), out).into(),
            op::READDIRPLUS => self.readdirplus(node, a.u64(8), a.u32(16), out).into(),
            op::STATFS => self.statfs(out).into(),
            op::GETXATTR => {
                let r = name(payload).and_then(|n| self.getxattr(node, n, a.u32(0), out));
                r.into()
            }
            op::LISTXATTR => self.listxattr(node, a.u32(0), out).into(),
            op::ACCESS => self.access(node, a.u32(0)).into(),
            op::LSEEK => self
                .lseek(node, a.u64(8) as i64, a.u32(16) as i32, out)
                .into(),
            _ => self.dispatch_write(h, a, payload, out).into(),
        }
    }

    /// The modifying operations.
    fn dispatch_write(
        &self,
        h: &InHeader,
        a: Args,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), i32> {
        let node = h.nodeid;
        let c = Self::caller(h);
        match h.opcode {
            op::WRITE => {
                let size = (a.u32(16) as usize).min(payload.len());
                self.write(
                    node,
                    a.u64(8),
                    &payload[..size],
                    a.u32(20),
                    a.u32(32),
                    c,
                    out,
                )
            }
            op::SETATTR => self.setattr(node, a, c, out),
            // fuse_create_in: flags, mode, umask; fuse_mknod_in: mode, rdev, umask;
            // fuse_mkdir_in: mode, umask.
            op::CREATE => self.make(node, name(payload)?, Make::File, a.u32(4), a.u32(8), c, out),
            op::MKNOD => {
                let kind = Make::Node { rdev: a.u32(4) };
                self.make(node, name(payload)?, kind, a.u32(0), a.u32(8), c, out)
            }
            op::MKDIR => self.make(node, name(payload)?, Make::Dir, a.u32(0), a.u32(4), c, out),
            op::SYMLINK => {
                let (n, _) = names::<2>(payload)?;
                self.symlink(node, n[0], n[1], c, out)
            }
            op::LINK => {
                let n = name(payload)?;
                self.link(a.u64(0), node, n, out)
            }
            op::UNLINK => self.unlink(node, name(payload)?),
            op::RMDIR => self.rmdir(node, name(payload)?),
            op::RENAME | op::RENAME2 => {
                let flags = if h.opcode == op::RENAME2 { a.u32(8) } else { 0 };
                let (n, _) = names::<2>(payload)?;
                self.rename(node, n[0], a.u64(0), n[1], flags)
            }
            op::FALLOCATE => self.fallocate(node, a.u64(8), a.u64(16), a.u32(24) as i32),
            op::SETXATTR => {
                let ([n], rest) = names::<1>(payload)?;
                let size = (a.u32(0) as usize).min(rest.len());
                self.setxattr(node, n, &rest[..size], a.u32(4) as i32)
            }
            op::REMOVEXATTR => self.removexattr(node, name(payload)?),
            _ => Err(libc::ENOSYS),
        }
    }
}
