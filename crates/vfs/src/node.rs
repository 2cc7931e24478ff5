//! The path table: one shared object per open file, however many times and under however
//! many names it is open (libplfs's path_table; keyed by mount and inode, so hard links
//! share too). Open-file descriptions hold a strong reference; the table holds weak ones,
//! so a file's object lives exactly as long as something has it open.
//!
//! Read-only today; per-file write state (staging, size, dirty ranges) will live in
//! [`Node`] so every descriptor of a file sees the same data.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use usfs_fs::{FileSystem, Ino, Metadata};

/// One open file, shared by every open-file description of it.
pub struct Node {
    /// Index of the mount in the mount table.
    pub mount: usize,
    /// The inode.
    pub ino: Ino,
    /// Its file system.
    pub fs: Arc<dyn FileSystem>,
    /// Attributes at first open (the image is read-only, so they stay true).
    pub meta: Metadata,
    /// Bytes the back end produced for small reads (decompressed data and the like).
    pub chunks: crate::ChunkCache,
    /// pread access to the image for large reads of stored data.
    pub bulk: Option<Arc<crate::bulk::BulkImage>>,
    /// Where the file's bytes lie in the image mapping, as far as reads have asked.
    pub runs: crate::runs::RunMap,
    /// The cache of this file's produced (decompressed) bytes shared with other
    /// processes, opened on the first read that needs it; `None` if not cached.
    shared: std::sync::OnceLock<Option<crate::shared::SharedFile>>,
}

/// How far one `mapped_data` call may reach: a whole extent at once (the run is recorded,
/// not copied).
const LOOKUP_MAX: usize = 1 << 40;

impl Node {
    /// The shared cache of this file's produced bytes: files of at least
    /// [`MIN_FILE`](crate::shared::MIN_FILE) bytes on a mounted (mapped) image, when the
    /// cache is on.
    ///
    /// Made outside the once-cell and then offered to it (a thread that loses the race
    /// drops its copy), so no thread ever waits on another's initialisation: a fork in
    /// the middle of one cannot leave the child waiting forever.
    pub fn shared(&self) -> Option<&crate::shared::SharedFile> {
        if let Some(s) = self.shared.get() {
            return s.as_ref();
        }
        let made = (|| {
            if self.meta.size < crate::shared::MIN_FILE {
                return None;
            }
            let (dir, id) = self.bulk.as_ref()?.shared_key()?;
            crate::shared::SharedFile::open(dir, id, self.ino, self.meta.size)
        })();
        let _ = self.shared.set(made);
        self.shared.get().and_then(Option::as_ref)
    }

    /// The run of file bytes holding `pos` (`pos < size`): from the run map, or asked of
    /// the back end and recorded. A run with address 0 is not in the mapping (hole,
    /// inline or compressed data; read through the back end).
    pub fn run_at(&self, pos: u64) -> Result<crate::runs::Run, crate::resolve::Errno> {
        if let Some(r) = self.runs.find(pos) {
            return Ok(r);
        }
        let run = match self
            .fs
            .mapped_data(self.ino, pos, LOOKUP_MAX)
            .map_err(|e| e.errno())?
        {
            Some(s) if !s.is_empty() => crate::runs::Run {
                start: pos,
                len: s.len() as u64,
                addr: s.as_ptr() as usize,
                hole: false,
            },
            _ => {
                // Not in the mapping from `pos`: up to the next data if `pos` is in a
                // hole, else to the end of this stretch of data (compressed or inline
                // data is that way throughout).
                let (end, hole) = match self.fs.next_data(self.ino, pos).map_err(|e| e.errno())? {
                    Some(r) if r.start > pos => (r.start, true),
                    Some(r) => (r.end, false),
                    None => (self.meta.size, true),
                };
                crate::runs::Run {
                    start: pos,
                    len: end.max(pos + 1) - pos,
                    addr: 0,
                    hole,
                }
            }
        };
        Ok(self.runs.insert(run))
    }
}

/// All open files of a process, by (mount, inode).
#[derive(Default)]
pub struct PathTable {
    map: Mutex<HashMap<(usize, Ino), Weak<Node>>>,
}

impl PathTable {
    /// The shared object for `ino` on mount `mount`, made (with `meta` and the mount's
    /// `bulk` reader) if nobody has the file open.
    pub fn get_or_insert(
        &self,
        mount: usize,
        ino: Ino,
        fs: &Arc<dyn FileSystem>,
        meta: Metadata,
        bulk: Option<Arc<crate::bulk::BulkImage>>,
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
        let node = Arc::new(Node {
            mount,
            ino,
            fs: Arc::clone(fs),
            meta,
            chunks: crate::ChunkCache::default(),
            bulk,
            runs: crate::runs::RunMap::default(),
            shared: std::sync::OnceLock::new(),
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
