//! The tar stream and where file data is kept for reading later.
//!
//! The input is a file or standard input, possibly gzip- or zstd-compressed (found by
//! its magic bytes). An uncompressed regular file is read in place: headers are read
//! through a buffer, data is skipped with a seek and later read at its offset in the
//! file. Anything else (a pipe, a compressed stream) may not be read twice: file data
//! is copied to a spool file (created in a given directory and unlinked at once) and
//! read there later. Every read is checked against the stream's end: a size in a
//! header never makes an allocation, only a copy that stops where the input does.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

/// gzip's magic.
const GZIP: &[u8] = &[0x1f, 0x8b];
/// zstd's frame magic.
const ZSTD: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
/// xz's magic (not supported: named in the error).
const XZ: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0];
/// bzip2's magic (not supported).
const BZIP2: &[u8] = b"BZh";

/// Buffer size for reading the stream.
const BUF: usize = 1 << 20;

/// How the stream reaches us.
enum Stream {
    /// An uncompressed regular file: data stays where it is.
    File(BufReader<File>),
    /// Anything else: data is spooled.
    Pipe(Box<dyn BufRead + Send>),
}

/// The tar stream being parsed.
pub(crate) struct Input {
    stream: Stream,
    /// Bytes of the (decompressed) stream consumed so far.
    pub(crate) pos: u64,
    /// Where data is read later: the tar file itself, or the spool.
    store: File,
    /// The input file's size (in-place data must lie within it).
    file_len: u64,
    /// Bytes written to the spool so far.
    spooled: u64,
    /// Compression found ("gzip", "zstd"), for messages.
    pub(crate) layer: Option<&'static str>,
}

/// An unlinked scratch file in `dir`.
fn spool_file(dir: &Path) -> io::Result<File> {
    for i in 0..100u32 {
        let p = dir.join(format!(".usfs-tar-spool-{}-{i}", std::process::id()));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
        {
            Ok(f) => {
                std::fs::remove_file(&p)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no spool file name free"))
}

/// The compression layer `head` (the stream's first bytes) starts, if any.
fn layer(head: &[u8]) -> io::Result<Option<&'static str>> {
    if head.starts_with(GZIP) {
        return Ok(Some("gzip"));
    }
    if head.starts_with(ZSTD) {
        return Ok(Some("zstd"));
    }
    if head.starts_with(XZ) || head.starts_with(BZIP2) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "xz- and bzip2-compressed tars are not supported (gzip and zstd are)",
        ));
    }
    Ok(None)
}

/// `r` with its compression layer removed.
fn decompress<R: BufRead + Send + 'static>(
    r: R,
    kind: &'static str,
) -> io::Result<Box<dyn BufRead + Send>> {
    Ok(match kind {
        "gzip" => Box::new(BufReader::with_capacity(
            BUF,
            flate2::bufread::MultiGzDecoder::new(r),
        )),
        _ => Box::new(BufReader::with_capacity(
            BUF,
            zstd::stream::read::Decoder::with_buffer(r)?,
        )),
    })
}

impl Input {
    /// Opens `path` (`-`: standard input), spooling to `spool_dir` if it must.
    pub(crate) fn open(path: &Path, spool_dir: &Path) -> io::Result<Input> {
        let spool = || spool_file(spool_dir);
        if path == Path::new("-") {
            return Input::stream(Box::new(io::stdin()), spool_dir);
        }
        let f = File::open(path)?;
        let md = f.metadata()?;
        if md.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a directory, not a tar file",
            ));
        }
        let mut r = BufReader::with_capacity(BUF, f);
        let l = layer(r.fill_buf()?)?;
        match l {
            None if md.is_file() => {
                let store = r.get_ref().try_clone()?;
                Ok(Input {
                    stream: Stream::File(r),
                    pos: 0,
                    store,
                    file_len: md.len(),
                    spooled: 0,
                    layer: None,
                })
            }
            None => Ok(Input::pipe(Box::new(r), spool()?, None)),
            Some(k) => Ok(Input::pipe(decompress(r, k)?, spool()?, l)),
        }
    }

    /// A stream read once (standard input, bytes in memory), spooled to `spool_dir`.
    pub(crate) fn stream(r: Box<dyn Read + Send>, spool_dir: &Path) -> io::Result<Input> {
        let mut r = BufReader::with_capacity(BUF, r);
        let l = layer(r.fill_buf()?)?;
        let stream: Box<dyn BufRead + Send> = match l {
            Some(k) => decompress(r, k)?,
            None => Box::new(r),
        };
        Ok(Input::pipe(stream, spool_file(spool_dir)?, l))
    }

    /// A stream whose data goes to `store`.
    fn pipe(r: Box<dyn BufRead + Send>, store: File, layer: Option<&'static str>) -> Input {
        Input {
            stream: Stream::Pipe(r),
            pos: 0,
            store,
            file_len: 0,
            spooled: 0,
            layer,
        }
    }

    fn reader(&mut self) -> &mut dyn BufRead {
        match &mut self.stream {
            Stream::File(f) => f,
            Stream::Pipe(p) => p,
        }
    }

    /// Fills `buf` from the stream; `Ok(false)` at the end of the stream before any
    /// byte, an error when it ends part way.
    pub(crate) fn block(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        let mut got = 0;
        while got < buf.len() {
            let n = match self.reader().read(&mut buf[got..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                if got == 0 {
                    return Ok(false);
                }
                return Err(truncated());
            }
            got += n;
        }
        self.pos += got as u64;
        Ok(true)
    }

    /// Reads `n` bytes (the caller bounds `n`) into a new vector.
    pub(crate) fn bytes(&mut self, n: usize) -> io::Result<Vec<u8>> {
        let mut v = Vec::new();
        let got = self.reader().take(n as u64).read_to_end(&mut v)?;
        self.pos += got as u64;
        if got != n {
            return Err(truncated());
        }
        Ok(v)
    }

    /// Skips `n` bytes.
    pub(crate) fn skip(&mut self, n: u64) -> io::Result<()> {
        match &mut self.stream {
            Stream::File(f) => {
                if self.pos.checked_add(n).is_none_or(|e| e > self.file_len) {
                    return Err(truncated());
                }
                f.seek_relative(i64::try_from(n).map_err(|_| truncated())?)?;
            }
            Stream::Pipe(p) => {
                let got = io::copy(&mut p.take(n), &mut io::sink())?;
                if got != n {
                    return Err(truncated());
                }
            }
        }
        self.pos += n;
        Ok(())
    }

    /// Skips to the next block boundary.
    pub(crate) fn align(&mut self) -> io::Result<()> {
        let rem = self.pos % 512;
        if rem != 0 {
            self.skip(512 - rem)?;
        }
        Ok(())
    }

    /// Takes `n` bytes of file data: returns where they can be read later in
    /// [`Input::store`].
    pub(crate) fn data(&mut self, n: u64) -> io::Result<u64> {
        match &mut self.stream {
            Stream::File(_) => {
                let at = self.pos;
                self.skip(n)?;
                Ok(at)
            }
            Stream::Pipe(p) => {
                let at = self.spooled;
                let mut w = io::BufWriter::with_capacity(BUF, &self.store);
                let got = io::copy(&mut p.take(n), &mut w)?;
                w.flush()?;
                self.spooled += got;
                self.pos += got;
                if got != n {
                    return Err(truncated());
                }
                Ok(at)
            }
        }
    }

    /// The file data is read from once parsing is done.
    pub(crate) fn into_store(self) -> File {
        self.store
    }

    /// Whether data is read in place from the tar file (not spooled).
    pub(crate) fn in_place(&self) -> bool {
        matches!(self.stream, Stream::File(_))
    }
}

/// The error for a stream that ends inside an entry.
pub(crate) fn truncated() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "truncated tar (unexpected end of input)",
    )
}

/// Where to spool by default: `$TMPDIR` (or /tmp).
pub(crate) fn default_spool_dir() -> PathBuf {
    std::env::temp_dir()
}
