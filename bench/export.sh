#!/usr/bin/env bash
# bench/export: `usfs export` vs `debugfs -R "rdump / DIR"` on the same image of a
# generated 50k-file tree (mke2fs -d), warm cache, best of N runs each. Prints raw times
# and the ratio. Usage: bench/export.sh [FILES] [RUNS]   (defaults 50000, 3)
# As root, each run extracts into a fresh tmpfs, so the figures measure the tools rather
# than the host file system's inode allocator (/tmp on ext4 slows down after mass
# create/delete cycles); otherwise into $BENCH_DIR (default a new /tmp directory).
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-50000}
runs=${2:-3}
cargo build --release -q --workspace
bin=$PWD/target/release
work=${BENCH_DIR:-$(mktemp -d /tmp/usfs-bench-export.XXXXXX)}
dst=$work/dst
mkdir -p "$dst"
cleanup() { mountpoint -q "$dst" && umount "$dst"; rm -rf "$work"; }
trap cleanup EXIT
fresh_dst() { # an empty destination for one run
    if [ "$(id -u)" = 0 ]; then
        mountpoint -q "$dst" && umount "$dst"
        mount -t tmpfs -o size=16g tmpfs "$dst"
    else
        rm -rf "$dst"; mkdir -p "$dst"
    fi
}
echo "generating a $files-file tree..."
$bin/usfs-gentree --seed 50 --profile medium --files "$files" --no-sparse-huge "$work/src" >/dev/null
echo "building the image with mke2fs -d..."
mke2fs -q -F -t ext4 -d "$work/src" "$work/img" 4G

best() { sort -n | head -1; }
timeit() { # command... -> seconds
    local s e
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    echo "$e - $s" | bc -l
}
t_usfs=(); t_debugfs=()
for i in $(seq "$runs"); do
    fresh_dst; mkdir "$dst/b"
    t_debugfs+=("$(timeit debugfs -R "rdump / $dst/b" "$work/img")")
    fresh_dst
    t_usfs+=("$(timeit "$bin/usfs" export "$work/img" "$dst/a")")
done
u=$(printf '%s\n' "${t_usfs[@]}" | best)
d=$(printf '%s\n' "${t_debugfs[@]}" | best)
n=$(find "$dst/a" | wc -l)
printf 'entries exported:        %d\n' "$n"
printf 'usfs export   (best of %d): %.3f s   runs: %s\n' "$runs" "$u" "${t_usfs[*]}"
printf 'debugfs rdump (best of %d): %.3f s   runs: %s\n' "$runs" "$d" "${t_debugfs[*]}"
printf 'ratio debugfs/usfs: %.1fx (target >= 5x)\n' "$(echo "$d / $u" | bc -l)"
