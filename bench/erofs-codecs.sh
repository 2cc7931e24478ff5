#!/usr/bin/env bash
# bench/erofs-codecs: usfs mkfs.erofs vs mkfs.erofs (the newest available: MKFS_EROFS, by
# default the one on PATH) with LZMA, DEFLATE and Zstandard (and lz4hc for reference), on
# a copy of SOURCE, both with 2 workers (mkfs.erofs's --workers=2 when it has it; a build
# without multithreading runs single-threaded and the line says so). Warm cache; runs
# interleaved; prints image sizes, median wall times and the ratios (targets: size <= 1.00x,
# time <= 0.75x). An algorithm the anchor was built without is skipped.
# Usage: bench/erofs-codecs.sh [SOURCE] [RUNS]   (defaults /usr/share/doc, 3)
#   env MKFS_EROFS=path of the anchor; SETS="-zlzma;-zzstd -C65536" to choose option sets
#   (separated by ';'); USFS_BIN=DIR uses DIR/usfs instead of building target/release.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/damon.sh
. bench/damon.sh
src_dir=${1:-/usr/share/doc}
runs=${2:-3}
anchor=${MKFS_EROFS:-mkfs.erofs}
if [ -n "${USFS_BIN:-}" ]; then
    bin=$USFS_BIN
else
    cargo build --release -q -p usfs-cli
    bin=$PWD/target/release
fi
work=$(mktemp -d /tmp/usfs-bench-erofs-codecs.XXXXXX)
cleanup() { rm -rf "$work"; damon_restore; }
trap cleanup EXIT
damon_pause
cp -a "$src_dir" "$work/src"
src=$work/src
help=$("$anchor" --help 2>&1 || true)
version=$("$anchor" -V 2>&1 | head -1 || true)
aw=()
if grep -q -- '--workers' <<<"$help"; then aw=(--workers=2); fi
echo "source: $src_dir ($(du -sh "$src" | cut -f1), $(find "$src" | wc -l) entries); anchor: $anchor ($version)${aw[*]:+, }${aw[*]:-, single-threaded (built without --workers)}"
IFS=';' read -r -a sets <<<"${SETS:--zlz4hc;-zlzma;-zlzma -C65536 -Eztailpacking,fragments;-zdeflate;-zdeflate -C65536;-zzstd;-zzstd -C65536}"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
wall() { # wall seconds of one run of "$@"
    local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
ratio() { echo "scale=4; $1 / $2" | bc; }
# Warm the cache.
cat $(find "$src" -type f) >/dev/null 2>&1 || true
printf "%-42s %11s %11s %7s %8s %8s %7s\n" options usfs_bytes anchor_bytes size_r usfs_s anchor_s time_r
for opts in "${sets[@]}"; do
    alg=${opts%% *}; alg=${alg#-z}; alg=${alg%%,*}
    if ! grep -qE "^ +$alg\$" <<<"$help"; then
        echo "[$opts]: skipped ($anchor has no $alg)"
        continue
    fi
    tus=(); tms=()
    for _ in $(seq "$runs"); do
        # shellcheck disable=SC2086
        tus+=("$(wall "$bin/usfs" mkfs.erofs --quiet --workers 2 $opts "$work/u.img" "$src")")
        # shellcheck disable=SC2086
        tms+=("$(wall "$anchor" --quiet "${aw[@]}" $opts "$work/m.img" "$src")")
    done
    tu=$(printf "%s\n" "${tus[@]}" | median); tm=$(printf "%s\n" "${tms[@]}" | median)
    su=$(stat -c %s "$work/u.img"); sm=$(stat -c %s "$work/m.img")
    printf "%-42s %11d %11d %7.4f %8.2f %8.2f %7.3f\n" "[$opts]" "$su" "$sm" "$(ratio "$su" "$sm")" "$tu" "$tm" "$(ratio "$tu" "$tm")"
    echo "    usfs runs: ${tus[*]}  anchor runs: ${tms[*]}"
done
