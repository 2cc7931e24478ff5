//! A fixed-size bit set in 64-bit words. Bit `i` lives in byte `i / 8`, bit `i % 8` of the
//! little-endian byte image, which is exactly the on-disk bitmap layout of ext4.

/// A set of `len` bits, all clear at first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitSet {
    words: Vec<u64>,
    len: u32,
}

impl BitSet {
    /// `len` clear bits.
    pub fn new(len: u32) -> BitSet {
        BitSet {
            words: vec![0; (len as usize).div_ceil(64)],
            len,
        }
    }

    /// Number of bits.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// True for a set of no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Is bit `i` set?
    #[inline]
    pub fn get(&self, i: u32) -> bool {
        self.words[(i / 64) as usize] >> (i % 64) & 1 != 0
    }

    /// One past the highest set bit (0 if none).
    pub fn high_water(&self) -> u32 {
        (0..self.len())
            .rev()
            .find(|&i| self.get(i))
            .map_or(0, |i| i + 1)
    }

    /// Sets bit `i`.
    #[inline]
    pub fn set(&mut self, i: u32) {
        self.words[(i / 64) as usize] |= 1 << (i % 64);
    }

    /// Clears bit `i`.
    #[inline]
    pub fn clear(&mut self, i: u32) {
        self.words[(i / 64) as usize] &= !(1 << (i % 64));
    }

    /// Sets (`value`) or clears every bit in `start..end`.
    pub fn fill(&mut self, start: u32, end: u32, value: bool) {
        let mut i = start;
        while i < end {
            let w = (i / 64) as usize;
            let lo = i % 64;
            let n = (64 - lo).min(end - i);
            let mask = if n == 64 { !0 } else { ((1u64 << n) - 1) << lo };
            if value {
                self.words[w] |= mask;
            } else {
                self.words[w] &= !mask;
            }
            i += n;
        }
    }

    /// Number of set bits in `start..end`.
    pub fn count_ones(&self, start: u32, end: u32) -> u32 {
        let mut i = start;
        let mut c = 0;
        while i < end {
            let w = (i / 64) as usize;
            let lo = i % 64;
            let n = (64 - lo).min(end - i);
            let mask = if n == 64 { !0 } else { ((1u64 << n) - 1) << lo };
            c += (self.words[w] & mask).count_ones();
            i += n;
        }
        c
    }

    /// The first bit at or after `from` (and before `len`) equal to `value`.
    pub fn find(&self, from: u32, value: bool) -> Option<u32> {
        if from >= self.len {
            return None;
        }
        let mut w = (from / 64) as usize;
        let flip = if value { 0 } else { !0u64 };
        let mut word = (self.words[w] ^ flip) & (!0u64 << (from % 64));
        loop {
            if word != 0 {
                let i = w as u32 * 64 + word.trailing_zeros();
                return (i < self.len).then_some(i);
            }
            w += 1;
            if w >= self.words.len() {
                return None;
            }
            word = self.words[w] ^ flip;
        }
    }

    /// Length of the run of bits equal to `value` starting at `from`, at most `max`.
    pub fn run_len(&self, from: u32, value: bool, max: u32) -> u32 {
        let end = self.find(from, !value).unwrap_or(self.len);
        (end - from).min(max)
    }

    /// The on-disk image: `bytes` bytes (at least `len / 8`), bits past `len` set to
    /// `pad`.
    pub fn to_bytes(&self, bytes: usize, pad: bool) -> Vec<u8> {
        let mut out = vec![0u8; bytes];
        for (i, w) in self.words.iter().enumerate() {
            let b = w.to_le_bytes();
            let o = i * 8;
            if o >= bytes {
                break;
            }
            let n = 8.min(bytes - o);
            out[o..o + n].copy_from_slice(&b[..n]);
        }
        if pad {
            for i in self.len as usize..bytes * 8 {
                out[i / 8] |= 1 << (i % 8);
            }
        } else {
            for i in self.len as usize..(self.words.len() * 64).min(bytes * 8) {
                out[i / 8] &= !(1 << (i % 8));
            }
        }
        out
    }

    /// A set of `len` bits read from an on-disk bitmap.
    pub fn from_bytes(bytes: &[u8], len: u32) -> BitSet {
        let mut s = BitSet::new(len);
        for (i, w) in s.words.iter_mut().enumerate() {
            let mut b = [0u8; 8];
            let o = i * 8;
            let n = 8.min(bytes.len().saturating_sub(o));
            b[..n].copy_from_slice(&bytes[o..o + n]);
            *w = u64::from_le_bytes(b);
        }
        let tail = len % 64;
        if tail != 0 {
            if let Some(last) = s.words.last_mut() {
                *last &= (1u64 << tail) - 1;
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_search() {
        let mut b = BitSet::new(200);
        b.fill(3, 130, true);
        assert_eq!(b.count_ones(0, 200), 127);
        assert_eq!(b.find(0, true), Some(3));
        assert_eq!(b.find(3, false), Some(130));
        assert_eq!(b.run_len(3, true, 1000), 127);
        assert_eq!(b.find(130, true), None);
        b.fill(64, 128, false);
        assert_eq!(b.count_ones(0, 200), 63);
        assert_eq!(b.find(64, true), Some(128));
        let bytes = b.to_bytes(32, true);
        assert_eq!(bytes[31], 0xFF);
        let c = BitSet::from_bytes(&bytes, 200);
        assert_eq!(c, b);
    }
}
