//! Test support for usfs: a seeded generator of directory trees that exercise what
//! ext4 and EROFS images must preserve, and a comparator that reports the first
//! difference between two trees. Both are also binaries: `usfs-gentree` and
//! `usfs-treecmp`.
//!
//! For crash consistency and write paths: [`crash`] rebuilds the images a crash could
//! leave from a log recorded by `usfs_dev::Recorder` and checks each (e2fsck, file
//! contents); [`exercise`] runs seeded random file operations on any directory against
//! an in-memory model (the `usfs-exercise` binary).
//!
//! ```no_run
//! use usfs_testkit::{compare, generate, CmpOptions, GenOptions, Profile};
//! let opts = GenOptions::new(Profile::Small, 42);
//! let a = usfs_testkit::TempDir::new("doc").unwrap();
//! let report = generate(&a.path().join("src"), &opts).unwrap();
//! println!("{report}");
//! // ... build an image from the tree, mount or extract it at `out` ...
//! # let out = a.path().join("src");
//! let stats = compare(&a.path().join("src"), &out, &CmpOptions::default()).unwrap();
//! println!("{stats}");
//! ```

mod cmp;
mod content;
pub mod corpus;
pub mod crash;
pub mod exercise;
mod gen;
pub mod names;
pub mod rng;
pub mod sys;
mod tmp;
pub mod xattr;

pub use cmp::{compare, CmpOptions, CmpStats, DiffKind, Difference, TimeGranularity};
pub use content::Content;
pub use gen::{generate, GenOptions, GenReport, Profile};
pub use sys::Timespec;
pub use tmp::TempDir;

/// Shows raw name bytes on one line: valid UTF-8 as text, with `\\`, `\n`, `\t`, `\r`
/// and other control characters and invalid bytes escaped (`\xNN`).
pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                '\r' => s.push_str("\\r"),
                c if c.is_control() => s.push_str(&format!("\\u{{{:x}}}", c as u32)),
                c => s.push(c),
            }
        }
        for b in chunk.invalid() {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn escape_is_one_line_and_unambiguous() {
        assert_eq!(
            super::escape(b"a b\\n\n\xff\x01\xc3\xa9"),
            "a b\\\\n\\n\\xff\\u{1}\u{e9}"
        );
    }
}
