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
pub(crate) type MapSpan = (usize, usize);

/// [`open_image`], and where the image is mapped (address and length), for readers that
/// read large runs with pread instead ([`crate::data::bulk::BulkImage`]).
pub fn open_image_mapped(path: &Path) -> Result<(Arc<dyn FileSystem>, Option<MapSpan>)> {
    let dev = usfs_dev::open(path, OpenMode::Mmap, false)?;
    // The mapping stays where it is when the device moves into the back end.
    let map = dev.as_slice().map(|s| (s.as_ptr() as usize, s.len()));
    if let Some((base, len)) = map {
        advise_huge(base, len);
    }
    Ok((open_device(dev)?, map))
}

/// Asks the kernel to back the image mapping with huge pages where it can: page-cache
/// folios of 2 MiB are then mapped by one page fault each (a first touch of 4 KiB pages
/// costs a fault per 16 pages at best), and pages the mapping faults in from disk are
/// read ahead as 2 MiB folios, which later processes map the same cheap way. Advice only:
/// a kernel or file system that cannot do it ignores it.
fn advise_huge(base: usize, len: usize) {
    // SAFETY: madvise on the live mapping `base..base + len` (the device owns it); advice
    // does not change the contents or validity of the mapping.
    unsafe { libc::madvise(base as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
}

/// [`open_image`] with a chosen device kind.
pub fn open_image_with(path: &Path, mode: OpenMode) -> Result<Arc<dyn FileSystem>> {
    let dev = usfs_dev::open(path, mode, false)?;
    open_device(dev)
}

/// [`open_image`] of an EROFS image with extra devices (`devices`, in the order of its
/// device table: the tar of a `--tar=i` image), as `mount -o device=` names them. With
/// none, this is [`open_image`].
pub fn open_image_with_devices(
    path: &Path,
    devices: &[std::path::PathBuf],
) -> Result<Arc<dyn FileSystem>> {
    if devices.is_empty() {
        return open_image(path);
    }
    let dev = usfs_dev::open(path, OpenMode::Mmap, false)?;
    if !usfs_erofs::probe(&*dev) {
        return Err(Error::incompatible(
            "extra devices given for an image that is not EROFS",
        ));
    }
    let extra = devices
        .iter()
        .map(|p| usfs_dev::open(p, OpenMode::Mmap, false))
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok(Arc::new(usfs_erofs::Erofs::open_with_devices(dev, extra)?))
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
