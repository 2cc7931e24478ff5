//! MicroLZMA through liblzma (built by liblzma-sys). MicroLZMA is a raw LZMA stream whose
//! first byte is the bitwise NOT of the lc/lp/pb properties byte (so it is never zero, and
//! EROFS's leading zero padding stays unambiguous); the encoder stops when the output is
//! full and reports how much input it took: fixed-size output natively. The decoder needs
//! the compressed size exactly (the reader has it: the pcluster minus its zero padding)
//! and the uncompressed size at most.

use liblzma_sys as sys;
use std::cell::RefCell;

/// A MicroLZMA encoder: its options and a stream liblzma re-initialises per pcluster
/// (keeping its buffers).
pub(super) struct Encoder {
    opt: sys::lzma_options_lzma,
    strm: Stream,
}

/// An `lzma_stream` that is ended when dropped.
struct Stream(sys::lzma_stream);

impl Stream {
    fn new() -> Stream {
        // SAFETY: LZMA_STREAM_INIT is all zeros (null pointers, zero counters); a zeroed
        // lzma_stream is the documented initial state.
        Stream(unsafe { std::mem::zeroed() })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: the stream was zero-initialised and only used through liblzma;
        // lzma_end frees whatever liblzma allocated (nothing if never initialised).
        unsafe { sys::lzma_end(&mut self.0) };
    }
}

// SAFETY: the stream's pointers refer to liblzma's own allocations (and to caller
// buffers only during a call); nothing is shared between threads.
unsafe impl Send for Stream {}
// SAFETY: `opt` holds only a null preset dictionary pointer.
unsafe impl Send for Encoder {}

impl Encoder {
    /// An encoder at `level` (0..=9, or 100..=109 for the extreme presets) with a
    /// `dict`-byte dictionary.
    pub(super) fn new(level: u32, dict: u32) -> Encoder {
        let preset = if level >= 100 {
            (level - 100) | sys::LZMA_PRESET_EXTREME
        } else {
            level
        };
        // SAFETY: all-zero options are a valid value to be filled in by lzma_lzma_preset
        // (null preset dictionary, plain integers and enums whose zero is valid).
        let mut opt: sys::lzma_options_lzma = unsafe { std::mem::zeroed() };
        // SAFETY: `opt` is a valid, writable options struct.
        let bad = unsafe { sys::lzma_lzma_preset(&mut opt, preset) };
        assert!(bad == 0, "LZMA preset {level} refused");
        opt.dict_size = dict;
        Encoder {
            opt,
            strm: Stream::new(),
        }
    }

    /// Compresses a prefix of `src` into at most `dst.len()` bytes: (input taken, output
    /// bytes).
    pub(super) fn compress_dest_size(
        &mut self,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<(usize, usize)> {
        let s = &mut self.strm.0;
        // SAFETY: `s` is a live stream; `opt` is valid options (read during the call).
        if unsafe { sys::lzma_microlzma_encoder(s, &self.opt) } != sys::LZMA_OK {
            return None;
        }
        s.next_in = src.as_ptr();
        s.avail_in = src.len();
        s.next_out = dst.as_mut_ptr();
        s.avail_out = dst.len();
        // SAFETY: next_in/next_out point to buffers valid for avail_in/avail_out bytes for
        // the duration of the call; liblzma reads and writes only within them.
        let r = unsafe { sys::lzma_code(s, sys::LZMA_FINISH) };
        let (used, out) = (s.total_in as usize, s.total_out as usize);
        s.next_in = std::ptr::null();
        s.avail_in = 0;
        s.next_out = std::ptr::null_mut();
        s.avail_out = 0;
        (r == sys::LZMA_STREAM_END).then_some((used, out))
    }
}

thread_local! {
    /// Per-thread decoder stream: liblzma keeps its dictionary buffer between pclusters.
    static DECODER: RefCell<Stream> = RefCell::new(Stream::new());
}

/// Decodes the MicroLZMA stream `src` (exactly the compressed bytes) into `dst`; `exact`:
/// the stream must give exactly `dst.len()` bytes. Returns the bytes written.
pub(super) fn decompress(src: &[u8], dst: &mut [u8], dict: u32, exact: bool) -> Option<usize> {
    if src.is_empty() {
        return None;
    }
    DECODER.with(|d| {
        let mut d = d.borrow_mut();
        let s = &mut d.0;
        // SAFETY: `s` is a live stream owned by this thread.
        let r = unsafe {
            sys::lzma_microlzma_decoder(
                s,
                src.len() as u64,
                dst.len() as u64,
                u8::from(exact),
                dict.max(4096),
            )
        };
        if r != sys::LZMA_OK {
            return None;
        }
        s.next_in = src.as_ptr();
        s.avail_in = src.len();
        s.next_out = dst.as_mut_ptr();
        s.avail_out = dst.len();
        // SAFETY: as in the encoder: both buffers are valid for the lengths given.
        let r = unsafe { sys::lzma_code(s, sys::LZMA_FINISH) };
        let out = s.total_out as usize;
        let used = s.total_in as usize;
        s.next_in = std::ptr::null();
        s.avail_in = 0;
        s.next_out = std::ptr::null_mut();
        s.avail_out = 0;
        let done = r == sys::LZMA_STREAM_END && out == dst.len();
        (done && (!exact || used == src.len())).then_some(out)
    })
}
