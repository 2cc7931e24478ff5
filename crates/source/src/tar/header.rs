//! One 512-byte tar header block: its fields (ustar, with GNU's variants), its checksum,
//! and numeric fields in octal or GNU's base-256. Nothing here trusts the block: every
//! parse returns an error for a field that is not a number, never panics.

/// Size of a tar block (headers, and the unit data is padded to).
pub(crate) const BLOCK: usize = 512;

/// A header block, as read.
pub(crate) struct Header<'a>(pub(crate) &'a [u8; BLOCK]);

/// Byte ranges of the header's fields (POSIX ustar; GNU's reuse of the prefix area is
/// read by [`crate::tar::sparse`]).
mod at {
    use std::ops::Range;
    /// Member name (NUL-terminated unless 100 bytes long).
    pub(super) const NAME: Range<usize> = 0..100;
    /// Permission bits, octal.
    pub(super) const MODE: Range<usize> = 100..108;
    /// Owner, octal or base-256.
    pub(super) const UID: Range<usize> = 108..116;
    /// Group, octal or base-256.
    pub(super) const GID: Range<usize> = 116..124;
    /// Size of the data that follows, octal or base-256.
    pub(super) const SIZE: Range<usize> = 124..136;
    /// Modification time (UNIX seconds), octal or base-256.
    pub(super) const MTIME: Range<usize> = 136..148;
    /// Header checksum, octal.
    pub(super) const CHKSUM: Range<usize> = 148..156;
    /// Entry type.
    pub(super) const TYPEFLAG: usize = 156;
    /// Target of a hard or symbolic link.
    pub(super) const LINKNAME: Range<usize> = 157..257;
    /// "ustar\0" (POSIX) or "ustar " (GNU).
    pub(super) const MAGIC: Range<usize> = 257..263;
    /// Device major number.
    pub(super) const DEVMAJOR: Range<usize> = 329..337;
    /// Device minor number.
    pub(super) const DEVMINOR: Range<usize> = 337..345;
    /// POSIX ustar: directory prefix of the name.
    pub(super) const PREFIX: Range<usize> = 345..500;
}

/// A field that is not what it should be.
#[derive(Debug)]
pub(crate) struct BadField(pub(crate) &'static str);

impl<'a> Header<'a> {
    /// Whether the block is all zeros (the end-of-archive marker).
    pub(crate) fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }

    /// Checks the checksum: the sum of the bytes with the checksum field taken as
    /// spaces, unsigned or (as some old tars made it) signed.
    pub(crate) fn check(&self) -> Result<(), BadField> {
        let stored = octal(&self.0[at::CHKSUM]).ok_or(BadField("checksum"))?;
        let (mut u, mut s) = (0i64, 0i64);
        for (i, &b) in self.0.iter().enumerate() {
            let b = if at::CHKSUM.contains(&i) { b' ' } else { b };
            u += i64::from(b);
            s += i64::from(b as i8);
        }
        if stored != u && stored != s {
            return Err(BadField("checksum mismatch"));
        }
        Ok(())
    }

    /// Whether the magic says ustar (POSIX or GNU).
    pub(crate) fn is_ustar(&self) -> bool {
        &self.0[257..262] == b"ustar"
    }

    /// Whether the magic is GNU's ("ustar  \0"), whose prefix area holds other fields.
    pub(crate) fn is_gnu(&self) -> bool {
        &self.0[at::MAGIC] == b"ustar "
    }

    /// The entry type byte.
    pub(crate) fn typeflag(&self) -> u8 {
        self.0[at::TYPEFLAG]
    }

    /// The name: POSIX ustar's prefix joined with a slash, then the name field.
    pub(crate) fn path(&self) -> Vec<u8> {
        let name = cstr(&self.0[at::NAME]);
        let prefix = if self.is_gnu() {
            &[][..]
        } else {
            cstr(&self.0[at::PREFIX])
        };
        let mut p = prefix.to_vec();
        if !p.is_empty() && !p.ends_with(b"/") {
            p.push(b'/');
        }
        p.extend_from_slice(name);
        p
    }

    /// The link target field.
    pub(crate) fn linkname(&self) -> Vec<u8> {
        cstr(&self.0[at::LINKNAME]).to_vec()
    }

    /// Permission bits (the file type bits are dropped: the type comes from the flag).
    pub(crate) fn mode(&self) -> Result<u32, BadField> {
        let m = number(&self.0[at::MODE]).ok_or(BadField("mode"))?;
        Ok((m & 0o7777) as u32)
    }

    /// Owner.
    pub(crate) fn uid(&self) -> Result<u32, BadField> {
        id(&self.0[at::UID]).ok_or(BadField("uid"))
    }

    /// Group.
    pub(crate) fn gid(&self) -> Result<u32, BadField> {
        id(&self.0[at::GID]).ok_or(BadField("gid"))
    }

    /// The size of the data that follows (never negative).
    pub(crate) fn size(&self) -> Result<u64, BadField> {
        let s = number(&self.0[at::SIZE]).ok_or(BadField("size"))?;
        u64::try_from(s).map_err(|_| BadField("negative size"))
    }

    /// Modification time in UNIX seconds.
    pub(crate) fn mtime(&self) -> Result<i64, BadField> {
        number(&self.0[at::MTIME]).ok_or(BadField("mtime"))
    }

    /// Device (major, minor) of a device node.
    pub(crate) fn device(&self) -> Result<(u32, u32), BadField> {
        let major = id(&self.0[at::DEVMAJOR]).ok_or(BadField("device major"))?;
        let minor = id(&self.0[at::DEVMINOR]).ok_or(BadField("device minor"))?;
        Ok((major, minor))
    }
}

/// The bytes before the first NUL.
pub(crate) fn cstr(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    &b[..end]
}

/// A numeric field: GNU base-256 when the first byte is 0x80 (positive) or 0xff
/// (negative, two's complement), else octal. `None` when it is neither, or does not fit
/// an i64.
pub(crate) fn number(f: &[u8]) -> Option<i64> {
    match f.first() {
        Some(0x80) | Some(0xff) => {
            // At most 11 bytes after the marker: 88 bits, which an i128 holds.
            if f.len() > 12 {
                return None;
            }
            let mut v: i128 = if f[0] == 0xff { -1 } else { 0 };
            for &b in &f[1..] {
                v = (v << 8) | i128::from(b);
            }
            i64::try_from(v).ok()
        }
        _ => octal(f),
    }
}

/// An octal field: leading spaces, digits, then spaces or NULs to the end. An empty
/// field (all NULs or spaces) is 0, as tars writing empty fields mean.
pub(crate) fn octal(f: &[u8]) -> Option<i64> {
    let mut i = 0;
    while i < f.len() && f[i] == b' ' {
        i += 1;
    }
    let mut v: i64 = 0;
    while i < f.len() && (b'0'..=b'7').contains(&f[i]) {
        v = v.checked_mul(8)?.checked_add(i64::from(f[i] - b'0'))?;
        i += 1;
    }
    f[i..].iter().all(|&c| c == b' ' || c == 0).then_some(v)
}

/// A numeric id field (uid, gid, device numbers) that fits 32 bits.
fn id(f: &[u8]) -> Option<u32> {
    u32::try_from(number(f)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(octal(b"0000644\0"), Some(0o644));
        assert_eq!(octal(b"   755 \0"), Some(0o755));
        assert_eq!(octal(b"\0\0\0\0"), Some(0));
        assert_eq!(octal(b"12a\0"), None);
        assert_eq!(octal(b"7777777777777777777777777"), None);
        let mut f = [0u8; 12];
        f[0] = 0x80;
        f[11] = 0x01;
        f[10] = 0x02;
        assert_eq!(number(&f), Some(0x201));
        let g = [0xffu8; 12];
        assert_eq!(number(&g), Some(-1));
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[2] = 1; // 2^72: too large
        assert_eq!(number(&big), None);
        let mut top = [0u8; 12];
        top[0] = 0x80;
        top[4] = 0x80; // 2^63: does not fit
        assert_eq!(number(&top), None);
    }

    #[test]
    fn checksum_and_path() {
        let mut b = [0u8; BLOCK];
        b[..5].copy_from_slice(b"a/b/c");
        b[345..348].copy_from_slice(b"pre");
        b[257..263].copy_from_slice(b"ustar\0");
        b[156] = b'0';
        let sum: u32 = b.iter().map(|&c| u32::from(c)).sum::<u32>() + 8 * 32;
        let s = format!("{sum:06o}\0 ");
        b[148..156].copy_from_slice(s.as_bytes());
        let h = Header(&b);
        assert!(h.check().is_ok());
        assert_eq!(h.path(), b"pre/a/b/c");
        b[0] = b'x';
        assert!(Header(&b).check().is_err());
    }
}
