//! Reads a tar stream entry by entry (ustar, POSIX pax, GNU: long names and links,
//! sparse files, base-256 numbers) and hands each entry to the tree being built
//! ([`super::build`]). Header blocks are checked (checksum, magic) before anything in
//! them is used; metadata read into memory (pax records, long names, sparse maps) is
//! bounded; file data is never read into memory here, only located ([`Input::data`]).

use super::build::{Build, Data, Entry, What};
use super::header::{cstr, Header, BLOCK};
use super::input::Input;
use super::pax::{self, Pax};
use super::sparse::{self, Map, MapText};
use crate::entry::Meta;
use std::collections::BTreeMap;
use std::io;
use usfs_fs::Timestamp;

/// Largest pax header read (records with big xattr values fit).
const MAX_PAX: u64 = 8 << 20;
/// Largest GNU long name or link target (PATH_MAX, as mkfs.erofs).
const MAX_LONG: u64 = 4096;

/// An error at header offset `at`.
fn bad(at: u64, what: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("tar header @ {at}: {what}"),
    )
}

/// Metadata that applies to the next entry.
#[derive(Default)]
struct Pending {
    /// Records of 'x' headers since the last entry.
    local: Option<Pax>,
    /// A GNU 'L' name.
    long_name: Option<Vec<u8>>,
    /// A GNU 'K' link target.
    long_link: Option<Vec<u8>>,
}

/// Parses the whole stream into `build`; warnings (ignored entry types, a missing
/// end-of-archive marker) go to `warn`.
pub(crate) fn parse(
    input: &mut Input,
    build: &mut Build,
    warn: &mut Vec<String>,
) -> io::Result<()> {
    let mut global = Pax::default();
    let mut next = Pending::default();
    let mut blk = [0u8; BLOCK];
    loop {
        input.align()?;
        let at = input.pos;
        if !input.block(&mut blk)? {
            warn.push(format!("tar ends at {at} without an end-of-archive marker"));
            return Ok(());
        }
        let h = Header(&blk);
        if h.is_zero() {
            // The end-of-archive marker is two zero blocks: the second is taken too (the
            // stream's length then ends after it, as mkfs.erofs counts it).
            let _ = input.block(&mut blk);
            return Ok(());
        }
        h.check().map_err(|e| bad(at, e.0))?;
        if h.typeflag() == b'V' {
            // A GNU volume label: no entry.
            let size = h.size().map_err(|e| bad(at, e.0))?;
            input.skip(size)?;
            continue;
        }
        if !h.is_ustar() {
            return Err(bad(at, "not a ustar header (bad magic)"));
        }
        let tf = h.typeflag();
        match tf {
            b'x' | b'g' => {
                let size = h.size().map_err(|e| bad(at, e.0))?;
                if size > MAX_PAX {
                    return Err(bad(
                        at,
                        format!("pax header of {size} bytes (limit {MAX_PAX})"),
                    ));
                }
                let data = input.bytes(size as usize)?;
                let target = if tf == b'g' {
                    &mut global
                } else {
                    next.local.get_or_insert_with(Pax::default)
                };
                pax::parse(&data, target).map_err(|e| bad(at, e))?;
            }
            b'L' | b'K' => {
                let size = h.size().map_err(|e| bad(at, e.0))?;
                if size > MAX_LONG + 1 {
                    return Err(bad(at, format!("GNU long name of {size} bytes")));
                }
                let data = input.bytes(size as usize)?;
                let v = cstr(&data).to_vec();
                if tf == b'L' {
                    next.long_name = Some(v);
                } else {
                    next.long_link = Some(v);
                }
            }
            _ => {
                let pending = std::mem::take(&mut next);
                let pax = global.overlay(pending.local.unwrap_or_default());
                if let Some(e) = entry(
                    input,
                    &h,
                    at,
                    pax,
                    pending.long_name,
                    pending.long_link,
                    warn,
                )? {
                    let path = String::from_utf8_lossy(&e.path).into_owned();
                    build.add(e).map_err(|m| bad(at, format!("{path}: {m}")))?;
                }
            }
        }
    }
}

/// Reads the entry whose header is `h` (its data, or where its data is): `None` for
/// an entry type that makes no file (skipped, with a warning).
fn entry(
    input: &mut Input,
    h: &Header<'_>,
    at: u64,
    pax: Pax,
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    warn: &mut Vec<String>,
) -> io::Result<Option<Entry>> {
    let e = |f: super::header::BadField| bad(at, f.0);
    let tf = h.typeflag();
    let size = match pax.size {
        Some(s) => s,
        None => h.size().map_err(e)?,
    };
    let type_bits = match tf {
        b'0' | b'\0' | b'7' | b'S' | b'1' => libc::S_IFREG,
        b'2' => libc::S_IFLNK,
        b'3' => libc::S_IFCHR,
        b'4' => libc::S_IFBLK,
        b'5' => libc::S_IFDIR,
        b'6' => libc::S_IFIFO,
        _ => {
            warn.push(format!(
                "tar header @ {at}: unknown entry type {:?} ignored",
                tf as char
            ));
            input.skip(size)?;
            return Ok(None);
        }
    };
    let path = pax
        .sparse
        .name
        .clone()
        .or(pax.path.clone())
        .or(long_name)
        .unwrap_or_else(|| h.path());
    let (sec, nsec) = match pax.mtime {
        Some(t) => t,
        None => (h.mtime().map_err(e)?, 0),
    };
    let mtime = Timestamp { sec, nsec };
    let mut meta = Meta {
        mode: type_bits | h.mode().map_err(e)?,
        uid: pax.uid.map_or_else(|| h.uid(), Ok).map_err(e)?,
        gid: pax.gid.map_or_else(|| h.gid(), Ok).map_err(e)?,
        atime: mtime,
        mtime,
        ctime: mtime,
        ..Meta::default()
    };
    let linkname = || {
        pax.linkpath
            .clone()
            .or(long_link.clone())
            .unwrap_or_else(|| h.linkname())
    };
    let mut link = None;
    let what = match tf {
        b'1' => {
            link = Some(linkname());
            input.skip(size)?;
            What::Special
        }
        b'2' => {
            let t = linkname();
            meta.size = t.len() as u64;
            input.skip(size)?;
            What::Symlink(t)
        }
        b'3' | b'4' => {
            let (ma, mi) = h.device().map_err(e)?;
            meta.rdev = libc::makedev(ma, mi);
            input.skip(size)?;
            What::Special
        }
        b'5' => {
            input.skip(size)?;
            What::Dir(BTreeMap::new())
        }
        b'6' => {
            input.skip(size)?;
            What::Special
        }
        _ => {
            let (data, real) = file_data(input, h, at, &pax, size)?;
            meta.size = real;
            What::File(data)
        }
    };
    Ok(Some(Entry {
        path,
        meta,
        xattrs: pax.xattrs,
        what,
        link,
    }))
}

/// A regular file's data (`size` bytes in the archive): where its ranges are stored,
/// and its size (larger than `size` for a sparse file).
fn file_data(
    input: &mut Input,
    h: &Header<'_>,
    at: u64,
    pax: &Pax,
    size: u64,
) -> io::Result<(Data, u64)> {
    let (map, realsize, stored): (Map, u64, u64) = if h.typeflag() == b'S' {
        let mut map = Map::new();
        let (mut more, real) = sparse::old_gnu_header(h.0, &mut map).map_err(|m| bad(at, m))?;
        let mut blk = [0u8; BLOCK];
        while more {
            if !input.block(&mut blk)? {
                return Err(super::input::truncated());
            }
            more = sparse::old_gnu_extension(&blk, &mut map).map_err(|m| bad(at, m))?;
        }
        (map, pax.sparse.realsize.unwrap_or(real), size)
    } else if let Some((1, _)) = pax.sparse.version {
        let mut text = MapText::default();
        let mut blk = [0u8; BLOCK];
        let mut used = 0u64;
        let map = loop {
            if used >= size {
                return Err(bad(at, "GNU sparse 1.0 map runs past the entry's data"));
            }
            if !input.block(&mut blk)? {
                return Err(super::input::truncated());
            }
            used += BLOCK as u64;
            if let Some(m) = text.feed(&blk).map_err(|m| bad(at, m))? {
                break m;
            }
        };
        let real = pax
            .sparse
            .realsize
            .ok_or_else(|| bad(at, "GNU sparse 1.0 without realsize"))?;
        (map, real, size - used.min(size))
    } else if pax.is_sparse() {
        let map = sparse::pairs(&pax.sparse.map).map_err(|m| bad(at, m))?;
        let real = pax
            .sparse
            .realsize
            .ok_or_else(|| bad(at, "GNU sparse 0.x without size"))?;
        (map, real, size)
    } else {
        let mut segs = Vec::new();
        if size > 0 {
            segs.push((0, size, input.data(size)?));
        }
        return Ok((Data { segs }, size));
    };
    sparse::check(&map, realsize, stored).map_err(|m| bad(at, m))?;
    let mut store = input.data(stored)?;
    let mut segs = Vec::with_capacity(map.len());
    for (off, len) in map {
        if len > 0 {
            segs.push((off, len, store));
        }
        store += len;
    }
    Ok((Data { segs }, realsize))
}
