//! A push-only list kept in fixed-size chunks, for what the workers collect by the
//! hundred thousand (entries naming directories, `..` entries, deferred directory
//! blocks): a growing `Vec` holds up to twice what it needs and, while it moves, two
//! copies; chunks hold at most one chunk more than the items, and are read in order by
//! merging the chunks, each sorted in place, never joined into a second copy.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Bytes per chunk.
const CHUNK_BYTES: usize = 256 << 10;

/// The list.
pub(crate) struct Chunked<T> {
    /// Full chunks, then the one being filled (each allocated at its final size).
    chunks: Vec<Vec<T>>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { chunks: Vec::new() }
    }
}

impl<T> Chunked<T> {
    /// Appends `x`.
    pub(crate) fn push(&mut self, x: T) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < c.capacity() => c.push(x),
            _ => {
                let per = (CHUNK_BYTES / std::mem::size_of::<T>().max(1)).max(1);
                let mut c = Vec::with_capacity(per);
                c.push(x);
                self.chunks.push(c);
            }
        }
    }

    /// The number of items.
    pub(crate) fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    /// Is the list empty?
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves `other`'s items onto the end of this list (its chunks, no item copied).
    pub(crate) fn append(&mut self, other: &mut Chunked<T>) {
        self.chunks.append(&mut other.chunks);
    }

    /// The items in ascending order of `key` (items of equal keys in no set order):
    /// each chunk sorted in place, then merged as they are read.
    pub(crate) fn into_sorted_by_key<K: Ord>(mut self, key: fn(&T) -> K) -> Sorted<T, K> {
        let mut heap = BinaryHeap::with_capacity(self.chunks.len());
        for (i, c) in self.chunks.iter_mut().enumerate() {
            c.sort_unstable_by_key(key);
            if let Some(first) = c.first() {
                heap.push(Reverse((key(first), i)));
            }
        }
        Sorted {
            pos: vec![0; self.chunks.len()],
            chunks: self.chunks,
            heap,
            key,
        }
    }
}

/// The items of a [`Chunked`] list in order (see [`Chunked::into_sorted_by_key`]).
pub(crate) struct Sorted<T, K> {
    chunks: Vec<Vec<T>>,
    /// The next item of each chunk: position in it.
    pos: Vec<usize>,
    /// The next unread item's key of each chunk that has one.
    heap: BinaryHeap<Reverse<(K, usize)>>,
    key: fn(&T) -> K,
}

impl<T: Copy, K: Ord> Iterator for Sorted<T, K> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let Reverse((_, i)) = self.heap.pop()?;
        let item = self.chunks[i][self.pos[i]];
        self.pos[i] += 1;
        if let Some(next) = self.chunks[i].get(self.pos[i]) {
            self.heap.push(Reverse(((self.key)(next), i)));
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::Chunked;

    #[test]
    fn chunks_are_allocated_once_and_read_back_sorted() {
        let mut a = Chunked::default();
        let mut b = Chunked::default();
        // Several chunks of 8-byte items (32768 per chunk), scrambled, with repeats.
        let scrambled = |i: u64| (i * 7919) % 50_000;
        (0..100_000u64).for_each(|i| a.push(scrambled(i)));
        (0..10u64).for_each(|i| b.push(i * 10_000));
        assert_eq!(a.chunks.len(), 4);
        assert!(a.chunks.iter().all(|c| c.capacity() == 32768));
        a.append(&mut b);
        assert!(b.is_empty());
        assert_eq!(a.len(), 100_010);
        let got: Vec<u64> = a.into_sorted_by_key(|&x| x).collect();
        let mut want: Vec<u64> = (0..100_000).map(scrambled).collect();
        want.extend((0..10).map(|i| i * 10_000));
        want.sort_unstable();
        assert_eq!(got, want);
    }
}
