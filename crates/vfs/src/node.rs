//! The path table: one shared object per open file, however many times and under however
//! many names it is open (libplfs's path_table; keyed by mount and inode, so hard links
//! share too). Open-file descriptions hold a strong reference; the table holds weak ones,
//! so a file's object lives exactly as long as something has it open.
//!
//! A file of a read-write mount has a writer: the owner's connection. Its object tells
//! the owner the file is open (so an unlink keeps it until the last close) and asks it
//! for attributes each time, as other processes change them. Per-file write state
//! (staging, dirty ranges) will live here too, so every descriptor of a file sees the
//! same data.

use crate::channel::Remote;
use crate::data::bulk::BulkImage;
use crate::data::DataPath;
use crate::resolve::Errno;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use usfs_fs::{FileSystem, FileSystemWrite, Ino, Metadata};

/// One open file, shared by every open-file description of it.
pub struct Node {
    /// Index of the mount in the mount table.
    pub mount: usize,
    /// The inode.
    pub ino: Ino,
    /// Its file system.
    pub fs: Arc<dyn FileSystem>,
    /// Attributes at first open: true for as long as it is open on a read-only mount;
    /// on a read-write one only its type stays true ([`Node::attrs`] asks).
    pub meta: Metadata,
    /// How reads of the file get their bytes (runs in the image mapping, caches).
    pub data: DataPath,
    /// The owner of a read-write mount, which takes the file's changes.
    pub writer: Option<Arc<Remote>>,
}

impl Node {
    /// The file's attributes now.
    pub fn attrs(&self) -> Result<Metadata, Errno> {
        match &self.writer {
            Some(w) => w.getattr(self.ino).map_err(|e| e.errno()),
            None => Ok(self.meta.clone()),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(w) = &self.writer {
            let _ = w.release_file(self.ino);
        }
    }
}

/// All open files of a process, by (mount, inode).
#[derive(Default)]
pub struct PathTable {
    map: Mutex<HashMap<(usize, Ino), Weak<Node>>>,
}

impl PathTable {
    /// The shared object for `ino` on mount `mount`, made (with `meta`, the mount's
    /// `bulk` reader and its `writer`) if nobody has the file open.
    pub fn get_or_insert(
        &self,
        mount: usize,
        ino: Ino,
        fs: &Arc<dyn FileSystem>,
        meta: Metadata,
        bulk: Option<Arc<BulkImage>>,
        writer: Option<Arc<Remote>>,
    ) -> Arc<Node> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get(&(mount, ino)).and_then(Weak::upgrade) {
            return n;
        }
        // Drop entries of closed files now and then, so the table stays the size of what
        // is open.
        if map.len() >= 64 && map.len().is_power_of_two() {
            map.retain(|_, w| w.strong_count() > 0);
        }
        let writer = writer.filter(|w| w.open_file(ino).is_ok());
        let node = Arc::new(Node {
            mount,
            ino,
            fs: Arc::clone(fs),
            data: DataPath::new(Arc::clone(fs), ino, meta.size, bulk),
            meta,
            writer,
        });
        map.insert((mount, ino), Arc::downgrade(&node));
        node
    }

    /// Holds the table locked (around fork, so the child never inherits the lock held by
    /// a thread that does not exist there).
    pub fn lock_all(&self) -> std::sync::MutexGuard<'_, HashMap<(usize, Ino), Weak<Node>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many distinct files are open.
    pub fn open_files(&self) -> usize {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.values().filter(|w| w.strong_count() > 0).count()
    }
}
