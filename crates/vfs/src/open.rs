//! Opening an image: detect its format by magic number and hand back the back end. The
//! CLI, the preload library and the FUSE server all open images here (one code path), so a
//! new back end (EROFS) is one more probe in [`open_image_with`].

use std::path::Path;
use std::sync::Arc;
use usfs_dev::{Device, OpenMode};
use usfs_fs::{Error, FileSystem, Result};

/// Opens `path` read-only through a shared memory mapping (the zero-copy data path) and
/// picks the back end by magic number.
pub fn open_image(path: &Path) -> Result<Arc<dyn FileSystem>> {
    open_image_with(path, OpenMode::Mmap)
}

/// Where an image is mapped: address and length.
pub type MapSpan = (usize, usize);

/// [`open_image`], and where the image is mapped (address and length), for readers that
/// read large runs with pread instead ([`crate::bulk::BulkImage`]).
pub fn open_image_mapped(path: &Path) -> Result<(Arc<dyn FileSystem>, Option<MapSpan>)> {
    let dev = usfs_dev::open(path, OpenMode::Mmap, false)?;
    // The mapping stays where it is when the device moves into the back end.
    let map = dev.as_slice().map(|s| (s.as_ptr() as usize, s.len()));
    Ok((open_device(dev)?, map))
}

/// [`open_image`] with a chosen device kind.
pub fn open_image_with(path: &Path, mode: OpenMode) -> Result<Arc<dyn FileSystem>> {
    let dev = usfs_dev::open(path, mode, false)?;
    open_device(dev)
}

/// Picks the back end for an open device.
fn open_device(dev: Box<dyn Device>) -> Result<Arc<dyn FileSystem>> {
    if usfs_ext4::probe(&*dev) {
        return Ok(Arc::new(usfs_ext4::Ext4::open(dev)?));
    }
    if usfs_erofs::probe(&*dev) {
        return Ok(Arc::new(usfs_erofs::Erofs::open(dev)?));
    }
    Err(Error::incompatible(
        "not a recognised file-system image (no ext2/3/4 or EROFS superblock)",
    ))
}
