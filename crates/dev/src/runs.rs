//! Writing many blocks at scattered places with few system calls: runs of blocks that
//! lie one after the other on the device go out as one vectored write.

use crate::Device;
use std::io;

/// Pieces in one vectored write (below every system's IOV_MAX).
const MAX_PIECES: usize = 512;

/// Writes each `(offset, bytes)` of `writes` (in any order; offsets in bytes), joining
/// pieces that follow each other on the device into one [`Device::write_vectored`].
pub fn write_runs<'a>(
    dev: &dyn Device,
    writes: impl IntoIterator<Item = (u64, &'a [u8])>,
) -> io::Result<()> {
    let mut run: Vec<&[u8]> = Vec::new();
    let (mut start, mut end) = (0u64, 0u64);
    for (off, bytes) in writes {
        if !run.is_empty() && (off != end || run.len() == MAX_PIECES) {
            dev.write_vectored(&run, start)?;
            run.clear();
        }
        if run.is_empty() {
            start = off;
            end = off;
        }
        run.push(bytes);
        end += bytes.len() as u64;
    }
    if !run.is_empty() {
        dev.write_vectored(&run, start)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::write_runs;
    use crate::{Device, MemDevice};

    #[test]
    fn runs_and_gaps_land_where_they_belong() {
        let dev = MemDevice::new(vec![0u8; 64], true);
        let (a, b, c, d) = ([1u8; 8], [2u8; 8], [3u8; 8], [4u8; 8]);
        write_runs(&dev, [(8, &a[..]), (16, &b[..]), (40, &c[..]), (0, &d[..])]).unwrap();
        let mut out = [0u8; 64];
        dev.read_at(&mut out, 0).unwrap();
        let mut want = [0u8; 64];
        want[..8].fill(4);
        want[8..16].fill(1);
        want[16..24].fill(2);
        want[40..48].fill(3);
        assert_eq!(out, want);
    }
}
