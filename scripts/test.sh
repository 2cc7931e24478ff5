#!/usr/bin/env bash
# The whole usfs test suite, as CI runs it (.ci/run calls exactly this).
# On a fresh Debian machine it first installs what the tests need (as root: apt packages;
# crates come through cargo). Then: format check, clippy with warnings as errors, release
# build, every test. Tests that mount images need root; as root they run, otherwise they
# print SKIP lines.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
for tool_pkg in mke2fs:e2fsprogs debugfs:e2fsprogs mount:mount losetup:mount mkfs.erofs:erofs-utils fsck.erofs:erofs-utils \
    sqlite3:sqlite3 git:git python3:python3 fusermount3:fuse3 gcc:gcc make:make tar:tar setfacl:acl \
    gzip:gzip bzip2:bzip2 zstd:zstd bsdtar:libarchive-tools; do
    tool=${tool_pkg%%:*}; pkg=${tool_pkg#*:}
    command -v "$tool" >/dev/null 2>&1 || need_pkgs+=("$pkg")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "installing: ${need_pkgs[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}"
    else
        echo "missing tools (${need_pkgs[*]}) and not root: tests needing them will skip" >&2
    fi
fi
# Loop mounts in the tests need the loop module where it is not built in.
[ "$(id -u)" = 0 ] && modprobe loop 2>/dev/null || true

# Say up front what will be skipped (cargo hides the output of passing tests).
corpus=${USFS_E2FSPROGS_CORPUS:-../shared/corpus/e2fsprogs-1.47.0-tests}
[ -d "$corpus" ] || echo "SKIP: e2fsprogs test corpus not found at $corpus: the checker's fidelity test over it skips"
[ "$(id -u)" = 0 ] || echo "SKIP: not root: tests that mount images, mknod or chown skip"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
cargo build --workspace --release
cargo test --workspace --release -- --test-threads=2
