//! POSIX pax extended headers ('x' for the next entry, 'g' for all that follow): records
//! `LEN KEY=VALUE\n`. Understood: path, linkpath, size, uid, gid, mtime (with a
//! fraction, negative too), xattrs (`SCHILY.xattr.NAME` raw, `LIBARCHIVE.xattr.NAME`
//! URL-encoded name and base64 value) and GNU's sparse keys (`GNU.sparse.*`, formats
//! 0.0, 0.1 and 1.0). uname, gname, atime, ctime and unknown keys are ignored, as
//! mkfs.erofs ignores them. An empty value unsets a key.

use crate::entry::Xattrs;

/// What pax records said about the next entry (or, global, about all that follow).
#[derive(Clone, Debug, Default)]
pub(crate) struct Pax {
    /// `path`.
    pub(crate) path: Option<Vec<u8>>,
    /// `linkpath`.
    pub(crate) linkpath: Option<Vec<u8>>,
    /// `size`: the data size in the archive.
    pub(crate) size: Option<u64>,
    /// `uid`.
    pub(crate) uid: Option<u32>,
    /// `gid`.
    pub(crate) gid: Option<u32>,
    /// `mtime`: seconds and nanoseconds.
    pub(crate) mtime: Option<(i64, u32)>,
    /// Extended attributes, in record order (a later record of a name replaces it).
    pub(crate) xattrs: Xattrs,
    /// GNU sparse keys.
    pub(crate) sparse: SparseKeys,
}

/// GNU's sparse records in a pax header.
#[derive(Clone, Debug, Default)]
pub(crate) struct SparseKeys {
    /// `GNU.sparse.major` / `minor` (1.0: the map is in the data area).
    pub(crate) version: Option<(u32, u32)>,
    /// `GNU.sparse.name`: the real name (overrides `path`).
    pub(crate) name: Option<Vec<u8>>,
    /// `GNU.sparse.realsize` (1.0) or `GNU.sparse.size` (0.x): the file's size.
    pub(crate) realsize: Option<u64>,
    /// The map of 0.0 (`offset`/`numbytes` pairs) or 0.1 (`map`): offset, length, ...
    pub(crate) map: Vec<u64>,
    /// A 0.x map was given (even an empty one).
    pub(crate) has_map: bool,
}

impl Pax {
    /// Whether the entry is a GNU sparse file described in pax records.
    pub(crate) fn is_sparse(&self) -> bool {
        self.sparse.version.is_some() || self.sparse.has_map
    }

    /// Sets xattr `name` to `value`, replacing an earlier one of the same name.
    fn set_xattr(&mut self, name: Vec<u8>, value: Vec<u8>) {
        match self.xattrs.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.xattrs.push((name, value)),
        }
    }

    /// Entry values over global ones: `self` is the global header; `local` wins.
    pub(crate) fn overlay(&self, local: Pax) -> Pax {
        let mut xattrs = self.xattrs.clone();
        let mut out = Pax {
            path: local.path.or_else(|| self.path.clone()),
            linkpath: local.linkpath.or_else(|| self.linkpath.clone()),
            size: local.size.or(self.size),
            uid: local.uid.or(self.uid),
            gid: local.gid.or(self.gid),
            mtime: local.mtime.or(self.mtime),
            xattrs: Vec::new(),
            sparse: local.sparse,
        };
        for (n, v) in local.xattrs {
            match xattrs.iter_mut().find(|(m, _)| *m == n) {
                Some(slot) => slot.1 = v,
                None => xattrs.push((n, v)),
            }
        }
        out.xattrs = xattrs;
        out
    }
}

/// Parses the records of one pax header into `pax` (over what it already holds).
pub(crate) fn parse(data: &[u8], pax: &mut Pax) -> Result<(), &'static str> {
    let mut rest = data;
    while !rest.is_empty() {
        // Trailing NUL padding some writers leave.
        if rest.iter().all(|&b| b == 0) {
            break;
        }
        let sp = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or("pax record without a length")?;
        let len: usize = std::str::from_utf8(&rest[..sp])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("bad pax record length")?;
        if len <= sp + 1 || len > rest.len() || rest[len - 1] != b'\n' {
            return Err("bad pax record length");
        }
        let kv = &rest[sp + 1..len - 1];
        rest = &rest[len..];
        let eq = kv
            .iter()
            .position(|&b| b == b'=')
            .ok_or("pax record without '='")?;
        record(&kv[..eq], &kv[eq + 1..], pax)?;
    }
    Ok(())
}

/// Applies one record.
fn record(key: &[u8], v: &[u8], pax: &mut Pax) -> Result<(), &'static str> {
    let some = |v: &[u8]| (!v.is_empty()).then(|| v.to_vec());
    match key {
        b"path" => pax.path = some(v),
        b"linkpath" => pax.linkpath = some(v),
        b"size" => pax.size = opt(v, unsigned).ok_or("bad pax size")?,
        b"uid" => pax.uid = opt(v, id).ok_or("bad pax uid")?,
        b"gid" => pax.gid = opt(v, id).ok_or("bad pax gid")?,
        b"mtime" => pax.mtime = opt(v, time).ok_or("bad pax mtime")?,
        b"GNU.sparse.major" | b"GNU.sparse.minor" => {
            let n = id(v).ok_or("bad GNU.sparse version")?;
            let (mut ma, mut mi) = pax.sparse.version.unwrap_or((0, 0));
            if key == b"GNU.sparse.major" {
                ma = n;
            } else {
                mi = n;
            }
            pax.sparse.version = Some((ma, mi));
        }
        b"GNU.sparse.name" => pax.sparse.name = some(v),
        b"GNU.sparse.realsize" | b"GNU.sparse.size" => {
            pax.sparse.realsize = Some(unsigned(v).ok_or("bad GNU.sparse size")?)
        }
        b"GNU.sparse.numblocks" => {
            unsigned(v).ok_or("bad GNU.sparse.numblocks")?;
            pax.sparse.has_map = true;
        }
        b"GNU.sparse.offset" | b"GNU.sparse.numbytes" => {
            // 0.0: pairs in order, offset first.
            let n = unsigned(v).ok_or("bad GNU.sparse offset")?;
            let want_offset = pax.sparse.map.len().is_multiple_of(2);
            if want_offset != (key == b"GNU.sparse.offset") {
                return Err("GNU.sparse offset/numbytes out of order");
            }
            pax.sparse.map.push(n);
            pax.sparse.has_map = true;
        }
        b"GNU.sparse.map" => {
            pax.sparse.map.clear();
            if !v.is_empty() {
                for n in v.split(|&b| b == b',') {
                    pax.sparse
                        .map
                        .push(unsigned(n).ok_or("bad GNU.sparse.map")?);
                }
            }
            pax.sparse.has_map = true;
        }
        _ => {
            if let Some(name) = key.strip_prefix(b"SCHILY.xattr.") {
                pax.set_xattr(name.to_vec(), v.to_vec());
            } else if let Some(name) = key.strip_prefix(b"LIBARCHIVE.xattr.") {
                let name = url_decode(name).ok_or("bad LIBARCHIVE.xattr name")?;
                let value = base64(v).ok_or("bad LIBARCHIVE.xattr value (base64)")?;
                pax.set_xattr(name, value);
            }
        }
    }
    Ok(())
}

/// `None` (unset) for an empty value, else `f`'s parse; the outer `None` is an error.
fn opt<T>(v: &[u8], f: fn(&[u8]) -> Option<T>) -> Option<Option<T>> {
    if v.is_empty() {
        Some(None)
    } else {
        f(v).map(Some)
    }
}

/// A decimal number without sign.
fn unsigned(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// A decimal id that fits 32 bits.
fn id(v: &[u8]) -> Option<u32> {
    u32::try_from(unsigned(v)?).ok()
}

/// A time `[-]SECONDS[.FRACTION]`: seconds and nanoseconds (a negative time with a
/// fraction counts back from the second before: -1.25 is -2 s + 750000000 ns).
fn time(v: &[u8]) -> Option<(i64, u32)> {
    let (neg, v) = match v.strip_prefix(b"-") {
        Some(r) => (true, r),
        None => (false, v),
    };
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(dot) => (&v[..dot], Some(&v[dot + 1..])),
        None => (v, None),
    };
    let sec = i64::try_from(unsigned(int)?).ok()?;
    let mut ns = 0u32;
    if let Some(f) = frac {
        if f.is_empty() || !f.iter().all(u8::is_ascii_digit) {
            return None;
        }
        for i in 0..9 {
            ns = ns * 10 + f.get(i).map_or(0, |d| u32::from(d - b'0'));
        }
    }
    if !neg {
        return Some((sec, ns));
    }
    if ns == 0 {
        Some((-sec, 0))
    } else {
        Some((-sec - 1, 1_000_000_000 - ns))
    }
}

/// Decodes `%XX` escapes (libarchive encodes '=', '%' and bytes outside printable
/// ASCII in xattr names).
fn url_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            let h = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(h, 16).ok()?);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Decodes standard base64 (padding optional).
fn base64(s: &[u8]) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = match s.iter().position(|&c| c == b'=') {
        Some(p) if s[p..].iter().all(|&c| c == b'=') && s.len() - p <= 2 => &s[..p],
        Some(_) => return None,
        None => s,
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(k: &str, v: &[u8]) -> Vec<u8> {
        let body = [k.as_bytes(), b"=", v, b"\n"].concat();
        let mut n = body.len() + 2;
        loop {
            let s = format!("{n} ");
            if s.len() + body.len() == n {
                return [s.as_bytes(), &body].concat();
            }
            n = s.len() + body.len();
        }
    }

    #[test]
    fn records() {
        let data = [
            rec("path", b"a/very/long/name"),
            rec("mtime", b"1700000000.5"),
            rec("uid", b"123456"),
            rec("uname", b"someone"),
            rec("SCHILY.xattr.user.x", b"v\nwith newline"),
            rec("LIBARCHIVE.xattr.user.%3Dy", b"aGVsbG8="),
            rec("size", b""),
        ]
        .concat();
        let mut p = Pax {
            size: Some(5),
            ..Pax::default()
        };
        parse(&data, &mut p).unwrap();
        assert_eq!(p.path.as_deref(), Some(&b"a/very/long/name"[..]));
        assert_eq!(p.mtime, Some((1_700_000_000, 500_000_000)));
        assert_eq!(p.uid, Some(123456));
        assert_eq!(p.size, None);
        assert_eq!(
            p.xattrs,
            [
                (b"user.x".to_vec(), b"v\nwith newline".to_vec()),
                (b"user.=y".to_vec(), b"hello".to_vec())
            ]
        );
        assert!(parse(b"5 a=b\n", &mut Pax::default()).is_err()); // length 6
        assert!(parse(b"99 a=b\n", &mut Pax::default()).is_err());
        assert!(parse(b"x a=b\n", &mut Pax::default()).is_err());
        assert!(parse(&rec("mtime", b"1.x"), &mut Pax::default()).is_err());
    }

    #[test]
    fn times_and_base64() {
        assert_eq!(time(b"-1.25"), Some((-2, 750_000_000)));
        assert_eq!(time(b"-3"), Some((-3, 0)));
        assert_eq!(time(b"7.1234567891"), Some((7, 123_456_789)));
        assert_eq!(base64(b"aGVsbG8"), Some(b"hello".to_vec()));
        assert_eq!(base64(b"YQ=="), Some(b"a".to_vec()));
        assert_eq!(base64(b"Y"), None);
        assert_eq!(base64(b"a=b="), None);
    }
}
