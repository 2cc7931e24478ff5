//! The front-end core shared by `usfs run` (the LD_PRELOAD library), `usfs mount` (FUSE)
//! and the CLI: one image opener, one mount table, one path resolver, one model of open
//! files, and one data path under it.
//!
//! The POSIX model (which file, whether a call may proceed, which errno, which offset):
//! - [`open_image`]: detect the format of an image by magic number and open its back end.
//! - [`MountTable`]: prefix -> image, parsed from the `usfs run` environment, images opened
//!   lazily on first use.
//! - [`Resolver`](resolve): host paths (absolute or relative to a real or virtual cwd) to
//!   either "not ours" or a place inside a mounted image; `.`, `..` and symbolic links with
//!   a loop limit, never escaping a mount through a symbolic link.
//! - [`PathTable`] / [`Node`]: one shared, reference-counted object per open file.
//! - [`OpenFile`]: an open file description (offset, flags, directory position) shared by
//!   every descriptor `dup` makes; [`FdTable`] maps descriptors to them.
//!
//! The data path ([`data`]: how a read's bytes reach the caller's buffer): one
//! [`DataPath`] per open file, which [`OpenFile::pread`] asks; it holds where the file's
//! bytes lie in the image mapping, the per-file cache of produced bytes, the pread reader
//! of large reads and the decompressed-data cache shared between processes.
//!
//! Independent of libc interposition, so it is unit-tested directly; the preload crate
//! adds only the C ABI around it. Mostly safe Rust; the unsafe code is at the OS boundary
//! and in the copy, every block with a SAFETY comment saying why it is sound:
//! - [`data`]: slices of the image mapping built from the addresses the back end returned
//!   (the copy from a recorded run; the image head hashed for the shared cache), the AVX2
//!   copy loop and its prefetches (`data/copy.rs`: glibc's memcpy is slower from the
//!   mapping), and the pread reader and the shared cache (`data/bulk.rs`, `data/shared/`):
//!   raw system calls (open, fstat, pread, pwrite, ftruncate, fcntl locks, mmap, munmap),
//!   the cache file's mapping, atomic loads of its fill bitmap and copies out of it;
//! - `sysio.rs`: raw positional I/O and lseek (raw, so no libc hook of the preload library
//!   is re-entered);
//! - `open.rs` (madvise of the image mapping) and [`owner`] (flock of an image opened for
//!   writing).

pub mod attrs;
pub mod change;
pub mod channel;
pub mod creds;
pub mod data;
mod fdtable;
mod file;
mod mounts;
pub mod names;
mod node;
mod open;
pub mod owner;
pub mod resolve;
mod sysio;

pub use creds::Creds;
pub use data::{read_file, ChunkCache, DataPath, ReadState};
pub use fdtable::FdTable;
pub use file::{list_dir, DirCursor, DirSink, FileKind, OpenFile};
pub use mounts::{Mount, MountSpec, MountTable};
pub use node::{Node, PathTable};
pub use open::{open_image, open_image_mapped, open_image_with, open_image_with_devices};
pub use resolve::{Resolved, VPath};
