#!/usr/bin/env bash
# bench/erofs-tar: `usfs mkfs.erofs --tar=f` vs mkfs.erofs's (MKFS_EROFS, default the one
# on PATH; 1.5 has no --tar, so point it at a local 1.9.3 build) on one tar of a source
# tree, plain and gzip-compressed input, uncompressed and -zlz4hc images. Warm cache;
# runs interleaved; prints per case the median wall time, peak RSS and image size of
# each tool and the ratios usfs/mkfs.erofs, and checks that the two images hold the same
# tree (kernel mounts, usfs-treecmp; roots left out: without a ./ entry both make the
# root at build time).
# Usage: bench/erofs-tar.sh [SOURCE_DIR] [RUNS]   (defaults /usr/share, 3; root for the
#   mounts). USFS_BIN=DIR uses prebuilt binaries (DIR/usfs, DIR/usfs-treecmp).
set -euo pipefail
cd "$(dirname "$0")/.."
src_dir=${1:-/usr/share}
runs=${2:-3}
mkfs=${MKFS_EROFS:-mkfs.erofs}
if [ -n "${USFS_BIN:-}" ]; then
    bin=$USFS_BIN
else
    cargo build --release -q -p usfs-cli -p usfs-testkit
    bin=$PWD/target/release
fi
"$mkfs" --help 2>&1 | grep -q -- '--tar' || { echo "$mkfs has no --tar (set MKFS_EROFS)"; exit 1; }
work=$(mktemp -d /tmp/usfs-bench-erofs-tar.XXXXXX)
cleanup() {
    for m in "$work/m1" "$work/m2"; do
        if mountpoint -q "$m" 2>/dev/null; then umount "$m"; fi
    done
    rm -rf "$work"
}
trap cleanup EXIT
echo "tar of $src_dir..."
tar --format=pax -C "$(dirname "$src_dir")" -cf "$work/t.tar" "$(basename "$src_dir")"
gzip -1 -c "$work/t.tar" > "$work/t.tgz"
ls -l "$work/t.tar" "$work/t.tgz" | awk '{print $5, $9}'
# One run: wall seconds and peak RSS (KiB) of a command, on one line.
measure() {
    /usr/bin/time -f '%e %M' "$@" 2>&1 >/dev/null | tail -1
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-14s %9s %9s %8s %8s %12s %12s %7s %7s\n' case usfs_s mkfs_s usfs_MB mkfs_MB usfs_bytes mkfs_bytes t_ratio size_r
for c in "plain:t.tar:" "lz4hc:t.tar:-zlz4hc" "gzip:t.tgz:" "gzip-lz4hc:t.tgz:-zlz4hc"; do
    IFS=: read -r name input zopt <<<"$c"
    extra=()
    [ "$input" = t.tgz ] && extra=(--ungzip)
    : > "$work/u.t"
    : > "$work/e.t"
    for _ in $(seq "$runs"); do
        # shellcheck disable=SC2086
        measure "$bin/usfs" mkfs.erofs --quiet $zopt --tar=f "$work/u.img" "$work/$input" >> "$work/u.t"
        # shellcheck disable=SC2086
        measure "$mkfs" --quiet $zopt --tar=f "${extra[@]}" "$work/e.img" "$work/$input" >> "$work/e.t"
    done
    ut=$(cut -d' ' -f1 "$work/u.t" | median)
    et=$(cut -d' ' -f1 "$work/e.t" | median)
    um=$(cut -d' ' -f2 "$work/u.t" | median)
    em=$(cut -d' ' -f2 "$work/e.t" | median)
    us=$(stat -c %s "$work/u.img")
    es=$(stat -c %s "$work/e.img")
    printf '%-14s %9s %9s %8d %8d %12d %12d %7.3f %7.4f\n' "$name" "$ut" "$et" $((um / 1024)) $((em / 1024)) "$us" "$es" \
        "$(echo "$ut / $et" | bc -l)" "$(echo "$us / $es" | bc -l)"
    if [ "$(id -u)" = 0 ]; then
        mkdir -p "$work/m1" "$work/m2"
        mount -t erofs -o ro "$work/u.img" "$work/m1"
        mount -t erofs -o ro "$work/e.img" "$work/m2"
        "$bin/usfs-treecmp" --ignore-root-attrs "$work/m2" "$work/m1" | sed "s/^/  $name: /"
        umount "$work/m1" "$work/m2"
    fi
done
