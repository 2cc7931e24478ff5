//! A device shared between the writer and the copy workers while populate places and
//! copies at the same time: the writer's device moves behind an `Arc` and the writer
//! keeps a forwarding handle to it.

use std::io;
use std::sync::Arc;
use usfs_dev::{Device, IoStats};

/// A handle on a shared device; every call goes to it.
pub(super) struct SharedDevice(pub Arc<dyn Device>);

impl Device for SharedDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_at(buf, offset)
    }

    fn flush(&self) -> io::Result<()> {
        self.0.flush()
    }

    fn len(&self) -> u64 {
        self.0.len()
    }

    fn stats(&self) -> &IoStats {
        self.0.stats()
    }

    fn as_slice(&self) -> Option<&[u8]> {
        self.0.as_slice()
    }

    fn will_need(&self, offset: u64, len: u64) {
        self.0.will_need(offset, len)
    }

    fn start_writeback(&self, offset: u64, len: u64) {
        self.0.start_writeback(offset, len)
    }

    fn write_direct(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.0.write_direct(buf, offset)
    }

    fn write_vectored(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.0.write_vectored(bufs, offset)
    }
}

/// Makes `dev` shareable: returns the shared device, and leaves in `dev` a handle on it.
pub(super) fn share(dev: &mut Box<dyn Device>) -> Arc<dyn Device> {
    let placeholder: Box<dyn Device> = Box::new(usfs_dev::MemDevice::new(Vec::new(), false));
    let shared: Arc<dyn Device> = Arc::from(std::mem::replace(dev, placeholder));
    *dev = Box::new(SharedDevice(shared.clone()));
    shared
}
