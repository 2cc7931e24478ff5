//! The front-end core shared by `usfs run` (the LD_PRELOAD library), `usfs mount` (FUSE)
//! and the CLI: one image opener, one mount table, one path resolver, one model of open
//! files.
//!
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
//! Everything here is ordinary safe Rust and independent of libc interposition, so it is
//! unit-tested directly; the preload crate adds only the C ABI around it.

pub mod attrs;
pub mod bulk;
mod chunks;
mod copy;
pub mod creds;
mod fdtable;
mod file;
mod mounts;
mod node;
mod open;
pub mod owner;
pub mod resolve;
pub mod runs;
pub mod shared;
mod sysio;

pub use chunks::ChunkCache;
pub use creds::Creds;
pub use fdtable::FdTable;
pub use file::{list_dir, read_file, DirCursor, DirSink, FileKind, OpenFile};
pub use mounts::{Mount, MountSpec, MountTable};
pub use node::{Node, PathTable};
pub use open::{open_image, open_image_mapped, open_image_with};
pub use resolve::{Resolved, VPath};
