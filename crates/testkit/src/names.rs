//! File names for the generated trees: ordinary random names, hand-picked odd ones, names
//! that together contain every byte a name may hold, and 255-byte names.

use crate::rng::Rng;

/// The longest name Linux file systems accept, in bytes.
pub const NAME_MAX: usize = 255;

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// A random name of `lo..=hi` letters and digits (at least 1 byte, at most 255).
pub fn plain(rng: &mut Rng, lo: usize, hi: usize) -> Vec<u8> {
    let lo = lo.clamp(1, NAME_MAX);
    let hi = hi.clamp(lo, NAME_MAX);
    let len = rng.range(lo as u64, hi as u64) as usize;
    (0..len).map(|_| ALNUM[rng.index(ALNUM.len())]).collect()
}

/// A random name that now and then holds punctuation, spaces or high bytes.
pub fn mixed(rng: &mut Rng, lo: usize, hi: usize) -> Vec<u8> {
    let mut name = plain(rng, lo, hi);
    if rng.chance(1, 4) {
        const EXTRA: &[u8] = b" -_.,+=~@#%&()[]{}!'";
        let i = rng.index(name.len());
        name[i] = EXTRA[rng.index(EXTRA.len())];
    }
    if rng.chance(1, 10) {
        let i = rng.index(name.len());
        name[i] = rng.range(0x80, 0xff) as u8;
    }
    sanitize(name)
}

/// Makes `name` a valid single path component: drops NUL and `/`, refuses empty, `.`
/// and `..` (appending `_`), and cuts it to 255 bytes.
pub fn sanitize(mut name: Vec<u8>) -> Vec<u8> {
    name.retain(|&b| b != 0 && b != b'/');
    name.truncate(NAME_MAX);
    if name.is_empty() || name == b"." || name == b".." {
        name.push(b'_');
    }
    name
}

/// Hand-picked names that break careless code: spaces, newlines, leading dashes, glob and
/// shell characters, invalid and valid multi-byte UTF-8, dots.
pub fn odd() -> Vec<Vec<u8>> {
    let list: &[&[u8]] = &[
        b"with space",
        b" leading space",
        b"trailing space ",
        b"two  spaces",
        b"new\nline",
        b"\n",
        b"tab\tname",
        b"carriage\rreturn",
        b"-leading-dash",
        b"--double-dash",
        b"-",
        b"--",
        b"-rf",
        b".hidden",
        b"..dots",
        b"...",
        b"trailing.dot.",
        b"*",
        b"?",
        b"[abc]",
        b"{a,b}",
        b"$HOME",
        b"`cmd`",
        b"'single'",
        b"\"double\"",
        b"back\\slash",
        b"semi;colon",
        b"pipe|amp&",
        b"less<greater>",
        b"colon:name",
        b"#hash",
        b"~tilde",
        b"\xff\xfe",
        b"bad\xc3\x28utf8",
        b"lone\x80cont",
        b"\xed\xa0\x80surrogate",
        "ünïcödé".as_bytes(),
        "日本語のファイル".as_bytes(),
        "emoji-😀".as_bytes(),
        "e\u{301}-combining".as_bytes(),
        "nfc-\u{e9}".as_bytes(),
        b"\x01\x02\x03ctrl",
        b"\x7fdel",
        b"Case",
        b"case",
        b"CASE",
        b"a",
        b"0",
        b"=",
    ];
    list.iter().map(|n| sanitize(n.to_vec())).collect()
}

/// Names that together contain every byte value 1..=255 except `/`, shuffled by `rng` and
/// cut into names of 1 to 24 bytes.
pub fn byte_cover(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut bytes: Vec<u8> = (1..=255u8).filter(|&b| b != b'/').collect();
    rng.shuffle(&mut bytes);
    let mut names = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let n = (rng.range(1, 24) as usize).min(rest.len());
        let (head, tail) = rest.split_at(n);
        let mut name = head.to_vec();
        if name == b"." || name == b".." {
            name.push(b'x');
        }
        names.push(name);
        rest = tail;
    }
    names
}

/// Names of exactly 255 bytes (ASCII, 2- and 3-byte UTF-8, high bytes) and one of 254.
pub fn long(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut out = vec![plain(rng, NAME_MAX, NAME_MAX)];
    let mut two = "é".repeat(127).into_bytes();
    two.push(b'x');
    out.push(two);
    out.push("日".repeat(85).into_bytes());
    out.push((0..NAME_MAX).map(|_| rng.range(0x80, 0xff) as u8).collect());
    out.push(plain(rng, NAME_MAX - 1, NAME_MAX - 1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cover_has_every_byte_but_slash() {
        let mut rng = Rng::new(3);
        let names = byte_cover(&mut rng);
        let mut seen = [false; 256];
        for n in &names {
            assert!(!n.is_empty() && n.len() <= NAME_MAX);
            assert!(n != b"." && n != b"..");
            for &b in n {
                seen[b as usize] = true;
            }
        }
        for (b, &s) in seen.iter().enumerate().skip(1) {
            assert_eq!(s, b != b'/' as usize, "byte {b}");
        }
        assert!(!seen[0]);
    }

    #[test]
    fn long_names_are_255() {
        let mut rng = Rng::new(1);
        let l = long(&mut rng);
        assert!(l[..4].iter().all(|n| n.len() == NAME_MAX));
        assert_eq!(sanitize(b"..".to_vec()), b".._");
        assert_eq!(sanitize(b"a/b\0".to_vec()), b"ab");
        assert!(odd().iter().all(|n| !n.contains(&b'/')));
    }
}
