//! Declaring on-disk structures once: a field table becomes a typed view over bytes.
//!
//! [`layout!`](crate::layout) turns a list of `getter / setter: type @ offset` fields,
//! each with its doc comment, into a struct wrapping a byte buffer with a getter and a
//! setter per field. The bytes stay the single source of truth: parsing and writing are the
//! same table, unknown fields round-trip untouched, and a view can sit on a borrowed block
//! buffer without copying. Types: `u8`, `u16`, `u32`, `u64` (little-endian), `be16`,
//! `be32`, `be64` (big-endian), `[N]` (a byte array).
//!
//! Both method names are written out (`macro_rules!` cannot build identifiers), so a
//! `grep` for a setter finds its declaration. The setter of `name` must be `set_name`: the
//! macro checks this at compile time.
//!
//! ```
//! usfs_fs::layout! {
//!     /// A toy header.
//!     pub struct Header[8] {
//!         /// Magic number.
//!         magic / set_magic: u32 @ 0,
//!         /// A big-endian count.
//!         count / set_count: be16 @ 4,
//!         /// Two spare bytes.
//!         spare / set_spare: [2] @ 6,
//!     }
//! }
//! let mut h = Header::new(vec![0u8; 8]).unwrap();
//! h.set_magic(0xE0F5E1E2);
//! h.set_count(3);
//! assert_eq!(h.bytes()[..6], [0xE2, 0xE1, 0xF5, 0xE0, 0, 3]);
//! assert_eq!(h.count(), 3);
//! ```
//!
//! A setter named otherwise does not compile:
//!
//! ```compile_fail,E0080
//! usfs_fs::layout! {
//!     /// A toy header.
//!     pub struct Header[4] {
//!         /// Magic number.
//!         magic / store_magic: u32 @ 0,
//!     }
//! }
//! ```

/// Reads little/big-endian integers from a byte slice at a fixed offset. Callers guarantee
/// the bounds (views are checked once, at construction).
#[doc(hidden)]
pub mod rd {
    #[inline]
    pub fn u8(b: &[u8], o: usize) -> u8 {
        b[o]
    }
    #[inline]
    pub fn u16(b: &[u8], o: usize) -> u16 {
        u16::from_le_bytes([b[o], b[o + 1]])
    }
    #[inline]
    pub fn u32(b: &[u8], o: usize) -> u32 {
        u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
    }
    #[inline]
    pub fn u64(b: &[u8], o: usize) -> u64 {
        u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
    }
    #[inline]
    pub fn be16(b: &[u8], o: usize) -> u16 {
        u16::from_be_bytes([b[o], b[o + 1]])
    }
    #[inline]
    pub fn be32(b: &[u8], o: usize) -> u32 {
        u32::from_be_bytes(b[o..o + 4].try_into().unwrap())
    }
    #[inline]
    pub fn be64(b: &[u8], o: usize) -> u64 {
        u64::from_be_bytes(b[o..o + 8].try_into().unwrap())
    }
}

/// Writes little/big-endian integers into a byte slice at a fixed offset.
#[doc(hidden)]
pub mod wr {
    #[inline]
    pub fn u8(b: &mut [u8], o: usize, v: u8) {
        b[o] = v;
    }
    #[inline]
    pub fn u16(b: &mut [u8], o: usize, v: u16) {
        b[o..o + 2].copy_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn u32(b: &mut [u8], o: usize, v: u32) {
        b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn u64(b: &mut [u8], o: usize, v: u64) {
        b[o..o + 8].copy_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn be16(b: &mut [u8], o: usize, v: u16) {
        b[o..o + 2].copy_from_slice(&v.to_be_bytes());
    }
    #[inline]
    pub fn be32(b: &mut [u8], o: usize, v: u32) {
        b[o..o + 4].copy_from_slice(&v.to_be_bytes());
    }
    #[inline]
    pub fn be64(b: &mut [u8], o: usize, v: u64) {
        b[o..o + 8].copy_from_slice(&v.to_be_bytes());
    }
}

/// Whether `setter` is `set_` followed by `getter`: the naming rule of
/// [`layout!`](crate::layout), checked at compile time.
#[doc(hidden)]
pub const fn is_setter_of(getter: &str, setter: &str) -> bool {
    let (g, s) = (getter.as_bytes(), setter.as_bytes());
    if s.len() != 4 + g.len() || s[0] != b's' || s[1] != b'e' || s[2] != b't' || s[3] != b'_' {
        return false;
    }
    let mut i = 0;
    while i < g.len() {
        if s[4 + i] != g[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Declares an on-disk structure as a typed view over bytes; see the [module](self) docs.
#[macro_export]
macro_rules! layout {
    (
        $(#[$smeta:meta])*
        $vis:vis struct $name:ident [$size:expr] {
            $(
                $(#[$fmeta:meta])*
                $field:ident / $setter:ident : $ty:tt @ $off:expr,
            )*
        }
    ) => {
        const _: () = {
            $(
                assert!(
                    $crate::layout::is_setter_of(stringify!($field), stringify!($setter)),
                    concat!(
                        "layout!: the setter of `", stringify!($field),
                        "` must be named `set_", stringify!($field), "`"
                    ),
                );
            )*
        };

        $(#[$smeta])*
        #[derive(Clone, PartialEq, Eq)]
        $vis struct $name<B = ::std::vec::Vec<u8>>(B);

        impl<B: AsRef<[u8]>> $name<B> {
            /// Size of the structure on disk, in bytes.
            pub const SIZE: usize = $size;

            /// A view over `bytes`, or `None` if it is shorter than [`Self::SIZE`].
            pub fn new(bytes: B) -> Option<Self> {
                if bytes.as_ref().len() >= $size { Some(Self(bytes)) } else { None }
            }

            /// The underlying bytes (possibly longer than [`Self::SIZE`]).
            pub fn bytes(&self) -> &[u8] {
                self.0.as_ref()
            }

            /// Gives back the buffer.
            pub fn into_inner(self) -> B {
                self.0
            }

            $(
                $crate::layout!(@get $(#[$fmeta])* $field $ty $off);
            )*
        }

        impl<B: AsRef<[u8]> + AsMut<[u8]>> $name<B> {
            /// The underlying bytes, writable.
            pub fn bytes_mut(&mut self) -> &mut [u8] {
                self.0.as_mut()
            }

            $(
                $crate::layout!(@set $field $setter $ty $off);
            )*
        }

        impl<B: AsRef<[u8]>> ::std::fmt::Debug for $name<B> {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let mut d = f.debug_struct(stringify!($name));
                $( $crate::layout!(@dbg d self $field $ty); )*
                d.finish()
            }
        }
    };

    (@get $(#[$fmeta:meta])* $field:ident [$n:expr] $off:expr) => {
        $(#[$fmeta])*
        #[inline]
        pub fn $field(&self) -> &[u8; $n] {
            self.0.as_ref()[$off..$off + $n].try_into().unwrap()
        }
    };
    (@get $(#[$fmeta:meta])* $field:ident $ty:ident $off:expr) => {
        $(#[$fmeta])*
        #[inline]
        pub fn $field(&self) -> $crate::layout!(@rust $ty) {
            $crate::layout::rd::$ty(self.0.as_ref(), $off)
        }
    };
    (@set $field:ident $setter:ident [$n:expr] $off:expr) => {
        #[doc = concat!("Sets [`Self::", stringify!($field), "`].")]
        #[inline]
        pub fn $setter(&mut self, v: &[u8; $n]) {
            self.0.as_mut()[$off..$off + $n].copy_from_slice(v);
        }
    };
    (@set $field:ident $setter:ident $ty:ident $off:expr) => {
        #[doc = concat!("Sets [`Self::", stringify!($field), "`].")]
        #[inline]
        pub fn $setter(&mut self, v: $crate::layout!(@rust $ty)) {
            $crate::layout::wr::$ty(self.0.as_mut(), $off, v)
        }
    };
    (@dbg $d:ident $s:ident $field:ident [$n:expr]) => {
        $d.field(stringify!($field), &&$s.$field()[..]);
    };
    (@dbg $d:ident $s:ident $field:ident $ty:ident) => {
        $d.field(stringify!($field), &$s.$field());
    };
    (@rust u8) => { u8 };
    (@rust u16) => { u16 };
    (@rust u32) => { u32 };
    (@rust u64) => { u64 };
    (@rust be16) => { u16 };
    (@rust be32) => { u32 };
    (@rust be64) => { u64 };
}

#[cfg(test)]
mod tests {
    use super::is_setter_of;

    #[test]
    fn setter_names() {
        assert!(is_setter_of("magic", "set_magic"));
        assert!(is_setter_of("s_magic", "set_s_magic"));
        assert!(!is_setter_of("magic", "set_magi"));
        assert!(!is_setter_of("magic", "set_magics"));
        assert!(!is_setter_of("magic", "get_magic"));
        assert!(!is_setter_of("magic", "magic"));
    }
}
