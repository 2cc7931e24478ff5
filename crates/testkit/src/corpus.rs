//! Where e2fsprogs' own test images (tests/f_* of 1.47.0) are kept: outside the project,
//! in ../shared/corpus, or wherever $USFS_E2FSPROGS_CORPUS says.

use std::path::PathBuf;

/// The corpus directory, or `None` when it is absent (tests skip visibly then).
pub fn e2fsprogs_dir() -> Option<PathBuf> {
    let p = std::env::var_os("USFS_E2FSPROGS_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/corpus/e2fsprogs-1.47.0-tests")
        });
    p.is_dir().then_some(p)
}
