//! The checksums ext4 uses: CRC32C without final inversion, and the old CRC16.

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78) with start register `seed` and no
/// final xor, as ext4 and jbd2 use it: `crc32c_raw(crc32c_raw(s, a), b) ==
/// crc32c_raw(s, a || b)`.
#[inline]
pub fn crc32c_raw(seed: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, data)
}

/// CRC16 (polynomial 0x8005, reflected as 0xA001), the group-descriptor checksum without
/// metadata_csum (the gdt_csum / uninit_bg feature). Start register `crc`, no final xor.
pub fn crc16(mut crc: u16, data: &[u8]) -> u16 {
    for &b in data {
        crc = (crc >> 8) ^ CRC16_TABLE[((crc ^ b as u16) & 0xFF) as usize];
    }
    crc
}

/// CRC32 (polynomial 0x04C11DB7, most significant bit first) with start register `crc` and
/// no final xor: the kernel's `crc32_be`, which jbd2's COMPAT_CHECKSUM commit blocks use
/// (start ~0, over every descriptor and logged block of the transaction).
pub fn crc32_be(mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        crc = (crc << 8) ^ CRC32_BE_TABLE[((crc >> 24) as u8 ^ b) as usize];
    }
    crc
}

const CRC32_BE_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u32) << 24;
        let mut k = 0;
        while k < 8 {
            c = if c & 0x8000_0000 != 0 {
                (c << 1) ^ 0x04C1_1DB7
            } else {
                c << 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

const CRC16_TABLE: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u16;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xA001
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_raw_chains() {
        let a = b"hello ";
        let b = b"world";
        assert_eq!(
            crc32c_raw(crc32c_raw(!0, a), b),
            crc32c_raw(!0, b"hello world")
        );
        // Standard CRC32C check value: crc32c("123456789") = 0xE3069283 (with inversions).
        assert_eq!(!crc32c_raw(!0, b"123456789"), 0xE306_9283);
    }

    #[test]
    fn crc32_be_check_value() {
        // CRC-32/BZIP2 check value (init ~0, final xor ~0): 0xFC891918.
        assert_eq!(!crc32_be(!0, b"123456789"), 0xFC89_1918);
    }

    #[test]
    fn crc16_check_value() {
        // CRC-16/ARC check value (init 0, reflected 0x8005): 0xBB3D.
        assert_eq!(crc16(0, b"123456789"), 0xBB3D);
    }
}
