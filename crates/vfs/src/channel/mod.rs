//! The channel between the image's owner and the processes of `usfs run --rw` (SplitFS's
//! split, in user space: DESIGN.md "The image owner"). The owner ([`Owner`]) is the one
//! process holding the image read-write (the volume, its allocator and journal); every
//! other process reaches the image through a [`Remote`], a file system whose calls are
//! requests over a Unix stream socket.
//!
//! - `wire.rs`: the byte encoding (never panics on malformed input);
//! - `proto.rs`: the requests, one per file-system call;
//! - `frame.rs`: length-prefixed frames over raw socket system calls;
//! - `server.rs` and `client.rs`: the two ends;
//! - `locks.rs`: record locks between the clients, kept by the kernel in a lock file.
//!
//! In this first form file data crosses the channel too: reads and writes are requests
//! of at most [`CHUNK`] bytes each. Data by memcpy through the image mapping, staging
//! extents and relinking (the rest of SplitFS's design) replace that later.

mod client;
mod frame;
mod locks;
mod proto;
mod server;
mod wire;

pub use client::Remote;
pub use locks::{lock_path, LockFile};
pub use server::Owner;

/// The most file data one request or reply carries.
pub const CHUNK: usize = 1 << 20;

/// The mirror through which the processes of the owner at `socket` share writable
/// mappings of file `ino` (made by the preload library; the owner keeps it in step with
/// writes, truncates and punches of the file).
pub fn mirror_path(socket: &std::path::Path, ino: usfs_fs::Ino) -> std::path::PathBuf {
    let mut p = socket.as_os_str().to_owned();
    p.push(format!(".map-{ino}"));
    std::path::PathBuf::from(p)
}

#[cfg(test)]
mod tests;
