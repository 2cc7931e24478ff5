//! GNU sparse files: which byte ranges of a file hold data, the rest being holes. The
//! archive stores only the data ranges, one after another. Maps come from old GNU
//! headers (type 'S': four entries in the header, 21 in each extension block), from pax
//! records (formats 0.0 and 0.1, [`crate::tar::pax`]) or, in format 1.0, from decimal
//! lines at the start of the entry's data ([`MapText`]).

use super::header::{number, BLOCK};

/// Most map entries one file may have (a bound on memory for a hostile archive).
pub(crate) const MAX_ENTRIES: usize = 1 << 20;

/// A map: data ranges `(offset, length)` of the file, in the order they are stored.
pub(crate) type Map = Vec<(u64, u64)>;

/// Reads entries `(offset[12], numbytes[12])` from `area` into `map`, stopping at the
/// first empty one; an error for a field that is not a number.
fn entries(area: &[u8], map: &mut Map) -> Result<(), &'static str> {
    for e in area.chunks_exact(24) {
        if e[0] == 0 {
            break;
        }
        let off = number(&e[..12]).and_then(|n| u64::try_from(n).ok());
        let len = number(&e[12..]).and_then(|n| u64::try_from(n).ok());
        match (off, len) {
            (Some(o), Some(l)) => map.push((o, l)),
            _ => return Err("bad GNU sparse map entry"),
        }
    }
    Ok(())
}

/// An old GNU sparse header ('S'): its map entries, whether extension blocks follow, and
/// the file's real size.
pub(crate) fn old_gnu_header(h: &[u8; BLOCK], map: &mut Map) -> Result<(bool, u64), &'static str> {
    entries(&h[386..482], map)?;
    let realsize = number(&h[483..495])
        .and_then(|n| u64::try_from(n).ok())
        .ok_or("bad GNU sparse real size")?;
    Ok((h[482] != 0, realsize))
}

/// An old GNU sparse extension block: adds its entries; whether another follows.
pub(crate) fn old_gnu_extension(b: &[u8; BLOCK], map: &mut Map) -> Result<bool, &'static str> {
    entries(&b[..504], map)?;
    if map.len() > MAX_ENTRIES {
        return Err("GNU sparse map too large");
    }
    Ok(b[504] != 0)
}

/// A 0.x pax map (`offset, length, ...`) as pairs.
pub(crate) fn pairs(flat: &[u64]) -> Result<Map, &'static str> {
    if !flat.len().is_multiple_of(2) {
        return Err("GNU.sparse map with an odd count of numbers");
    }
    if flat.len() / 2 > MAX_ENTRIES {
        return Err("GNU sparse map too large");
    }
    Ok(flat.chunks_exact(2).map(|c| (c[0], c[1])).collect())
}

/// Checks a map against the file's size and the bytes stored: ranges in order, not
/// overlapping, inside the file, and their lengths adding up to what is stored.
pub(crate) fn check(map: &Map, realsize: u64, stored: u64) -> Result<(), &'static str> {
    let mut end = 0u64;
    let mut sum = 0u64;
    for &(o, l) in map {
        let e = o.checked_add(l).ok_or("GNU sparse map out of range")?;
        if o < end || e > realsize {
            return Err("GNU sparse map out of order or past the file's size");
        }
        end = e;
        sum += l;
    }
    if sum != stored {
        return Err("GNU sparse map does not match the data stored");
    }
    Ok(())
}

/// The format 1.0 map at the start of an entry's data, fed block by block: the count
/// of entries, then offset and length of each, each number on its own line; padded to
/// a whole block.
#[derive(Default)]
pub(crate) struct MapText {
    nums: Vec<u64>,
    cur: Option<u64>,
}

impl MapText {
    /// Takes one block; `Some(map)` once the map is complete (the rest of the block is
    /// padding).
    pub(crate) fn feed(&mut self, b: &[u8]) -> Result<Option<Map>, &'static str> {
        for &c in b {
            match c {
                b'0'..=b'9' => {
                    let v = self.cur.unwrap_or(0);
                    let v = v
                        .checked_mul(10)
                        .and_then(|v| v.checked_add(u64::from(c - b'0')))
                        .ok_or("GNU sparse map number too large")?;
                    self.cur = Some(v);
                }
                b'\n' => {
                    let v = self.cur.take().ok_or("empty line in GNU sparse map")?;
                    self.nums.push(v);
                    let want = self.nums[0];
                    if want > MAX_ENTRIES as u64 {
                        return Err("GNU sparse map too large");
                    }
                    if self.nums.len() as u64 == 1 + 2 * want {
                        return pairs(&self.nums[1..]).map(Some);
                    }
                }
                _ => return Err("bad character in GNU sparse map"),
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_text_across_blocks() {
        // The map text may end in a later block than it starts in.
        let mut t = MapText::default();
        assert_eq!(t.feed(b"2\n0\n4096\n").unwrap(), None);
        assert_eq!(
            t.feed(b"8192\n10\n").unwrap(),
            Some(vec![(0, 4096), (8192, 10)])
        );
        assert!(MapText::default().feed(b"1\nx\n").is_err());
        assert!(check(&vec![(0, 10), (5, 10)], 100, 20).is_err());
        assert!(check(&vec![(0, 10), (50, 10)], 100, 20).is_ok());
        assert!(check(&vec![(0, 10), (95, 10)], 100, 20).is_err());
        assert!(check(&vec![(0, 10)], 100, 11).is_err());
    }
}
