//! The CRC32C EROFS uses (the kernel's `crc32c()`: start register given, no final xor).

/// CRC32C of `data` with start register `seed` and no final inversion.
pub fn crc32c_raw(seed: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, data)
}

#[cfg(test)]
mod tests {
    #[test]
    fn raw_composes() {
        let a = super::crc32c_raw(!0, b"hello ");
        assert_eq!(
            super::crc32c_raw(a, b"world"),
            super::crc32c_raw(!0, b"hello world")
        );
    }
}
