//! A log as a file, so a recording made in one process (a `usfs mount -o rw` server)
//! can be checked in another (the test).
//!
//! Format (little-endian): the magic `USFSRLOG`, a u32 version (1), then one record per
//! event: a tag byte, 1 = write followed by a u64 device offset, a u64 length and that
//! many bytes, 2 = flush. Loading checks every length against what is left of the file,
//! so a damaged file is an error, never a huge allocation.

use super::{Event, Log, Store};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"USFSRLOG";
const VERSION: u32 = 1;
const TAG_WRITE: u8 = 1;
const TAG_FLUSH: u8 = 2;

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("crash log: {what}"))
}

impl Log {
    /// Writes the log to `path` (created or truncated).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let mut w = BufWriter::new(File::create(path)?);
        w.write_all(MAGIC)?;
        w.write_all(&VERSION.to_le_bytes())?;
        for (i, e) in self.events().iter().enumerate() {
            match *e {
                Event::Write { offset, len, .. } => {
                    w.write_all(&[TAG_WRITE])?;
                    w.write_all(&offset.to_le_bytes())?;
                    w.write_all(&len.to_le_bytes())?;
                    w.write_all(&self.data(i)?)?;
                }
                Event::Flush => w.write_all(&[TAG_FLUSH])?,
            }
        }
        w.into_inner().map_err(|e| e.into_error())?.sync_all()
    }

    /// Reads a log written by [`Log::save`], keeping the payloads in `store`.
    pub fn load(path: &Path, store: Store) -> io::Result<Log> {
        let f = File::open(path)?;
        let left = f.metadata()?.len();
        let mut r = Bounded {
            r: BufReader::new(f),
            left,
        };
        let head = r.take(12)?;
        if &head[..8] != MAGIC {
            return Err(bad("not a usfs crash log (bad magic)".into()));
        }
        let version = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
        if version != VERSION {
            return Err(bad(format!(
                "version {version}, this build reads {VERSION}"
            )));
        }
        let mut events = Vec::new();
        let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        while r.left > 0 {
            match r.take(1)?[0] {
                TAG_FLUSH => events.push(Event::Flush),
                TAG_WRITE => {
                    let h = r.take(16)?;
                    let (offset, len) = (u64_at(&h[..8]), u64_at(&h[8..]));
                    let data = r.take(len)?;
                    let pos = store.append(&data)?;
                    events.push(Event::Write { offset, len, pos });
                }
                t => {
                    return Err(bad(format!(
                        "unknown record tag {t} after {} events",
                        events.len()
                    )))
                }
            }
        }
        Ok(Log {
            events,
            store: Arc::new(store),
        })
    }
}

/// A reader that knows how many bytes the file has left.
struct Bounded {
    r: BufReader<File>,
    left: u64,
}

impl Bounded {
    /// The next `n` bytes; an error (before allocating) if the file has fewer.
    fn take(&mut self, n: u64) -> io::Result<Vec<u8>> {
        if n > self.left {
            return Err(bad(format!(
                "{n} bytes wanted, {} left in the file",
                self.left
            )));
        }
        self.left -= n;
        let mut v = vec![0u8; n as usize];
        self.r.read_exact(&mut v)?;
        Ok(v)
    }
}
