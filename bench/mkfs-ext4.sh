#!/usr/bin/env bash
# bench/mkfs-ext4: `mke2fs -t ext4 -d` vs `usfs mkfs.ext4 -d` on the same trees into
# same-size images: a copy of /usr/share and a generated tree of FILES small files
# (at most 8 KiB each).
# Prints wall times and their ratio, then allocation quality for both images:
# non-contiguous files and directories (e2fsck -fnv), extents per file (filefrag on a
# read-only mount, root only) and free-space fragments (e2freefrag), with ratios.
# Each run of each tool starts from the same state: the source read into the page cache
# just before, no image in the page cache (the other tool's is dropped from it).
# Running DAMON page-out kdamonds are paused meanwhile (bench/damon.sh; KEEP_DAMON=1).
# Usage: bench/mkfs-ext4.sh [FILES] [RUNS]   (defaults 200000, 1; best of RUNS)
# Environment: BENCH_DIR (work directory, default a new /tmp directory), USR_SHARE
# (the tree to copy, default /usr/share), TREES (default "usr-share gen"), KEEP_DAMON.
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-200000}
runs=${2:-1}
cargo build --release -q --workspace
bin=$PWD/target/release
work=${BENCH_DIR:-$(mktemp -d /tmp/usfs-bench-mkfs.XXXXXX)}
mnt=$work/mnt
mkdir -p "$mnt"
. bench/damon.sh
cleanup() {
    mountpoint -q "$mnt" && umount "$mnt"
    rm -rf "$work"
    damon_restore
}
trap cleanup EXIT
damon_pause

echo "copying ${USR_SHARE:-/usr/share}..."
cp -a "${USR_SHARE:-/usr/share}" "$work/usr-share"
echo "generating a $files-file tree..."
$bin/usfs-gentree --seed 77 --profile medium --files "$files" --no-sparse-huge \
    --max-file-size 8K "$work/gen" >/dev/null

timeit() { # command... -> seconds (output discarded); a failing command stops the run
    local s e
    s=$(date +%s.%N)
    if ! "$@" >/dev/null 2>"$work/err"; then
        echo "FAILED: $* : $(tail -3 "$work/err")" >&2
        kill -TERM $$
    fi
    e=$(date +%s.%N)
    echo "$e - $s" | bc -l
}
best() { sort -n | head -1; }
# Reads every file of the tree so each tool starts with the source in the page cache
# (`tar cf /dev/null` does not: GNU tar skips reading data when writing to /dev/null),
# right before each run: the machine may page out cache idle for ~30 s (DAMON reclaim).
warm() { find "$1" -type f -print0 | xargs -0 -r cat >/dev/null 2>&1 || true; }
# Drops a file's pages from the page cache, so the next tool does not run with the other
# tool's freshly written image cached (the kernel, and this machine's DAMON reclaim,
# would be busy evicting it during the run: same starting state for both tools).
evict() {
    [ -e "$1" ] || return 0
    sync "$1"
    python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}
# Image size: twice the data plus 1 GiB, in whole GiB, the same for both tools.
size_for() { echo "$(( ( $(du -sb "$1" | cut -f1) * 2 / 1073741824 ) + 1 ))G"; }

# quality IMG -> "noncontig_files noncontig_dirs extents_per_file extents_per_data_file free_extents"
# (extents per file over every non-empty file; per data file over those with at least one
# extent: mke2fs -d turns all-zero blocks into holes, so some files have none)
quality() {
    local img=$1 v nf nd epf epd fe ff
    v=$(e2fsck -fnv "$img" 2>&1 || true)
    nf=$(echo "$v" | awk '/non-contiguous files/ {print $1; exit}')
    nd=$(echo "$v" | awk '/non-contiguous directories/ {print $1; exit}')
    if [ "$(id -u)" = 0 ]; then
        mount -o loop,ro,noatime "$img" "$mnt"
        ff=$(find "$mnt" -type f -size +0 -print0 | xargs -0 -r filefrag 2>/dev/null |
            sed -n 's/.*: \([0-9]*\) extents\{0,1\} found$/\1/p')
        umount "$mnt"
        epf=$(echo "$ff" | awk '{ n++; e += $1 } END { if (n) printf "%.4f", e / n; else print "n/a" }')
        epd=$(echo "$ff" | awk '$1 > 0 { n++; e += $1 } END { if (n) printf "%.4f", e / n; else print "n/a" }')
    else
        epf=n/a; epd=n/a
    fi
    fe=$(e2freefrag "$img" 2>/dev/null | awk -F: '/Num. free extent/ {gsub(/ /, "", $2); print $2; exit}')
    echo "${nf:-0} ${nd:-0} $epf $epd ${fe:-0}"
}
ratio() { # a b -> a/b or n/a
    if [ "$2" = 0 ] || [ "$2" = n/a ] || [ "$1" = n/a ]; then echo n/a; else echo "scale=2; $1 / $2" | bc -l; fi
}

for tree in ${TREES:-usr-share gen}; do
    src=$work/$tree
    size=$(size_for "$src")
    n=$(find "$src" | wc -l)
    inodes=$(( n + n / 4 + 1000 )) # the same inode count for both tools
    echo
    echo "== $tree: $n entries, $(du -sh "$src" | cut -f1) on disk, images of $size with $inodes inodes =="
    t_mk=(); t_us=()
    for _ in $(seq "$runs"); do
        rm -f "$work/mke2fs.img" "$work/usfs.img"
        warm "$src"
        t_mk+=("$(timeit mke2fs -q -F -t ext4 -N "$inodes" -d "$src" "$work/mke2fs.img" "$size")")
        evict "$work/mke2fs.img"
        warm "$src"
        t_us+=("$(timeit "$bin/usfs" mkfs.ext4 -q -N "$inodes" -d "$src" "$work/usfs.img" "$size")")
    done
    mk=$(printf '%s\n' "${t_mk[@]}" | best)
    us=$(printf '%s\n' "${t_us[@]}" | best)
    printf 'mke2fs -d       : %8.2f s   runs: %s\n' "$mk" "${t_mk[*]}"
    printf 'usfs mkfs.ext4 -d: %8.2f s   runs: %s\n' "$us" "${t_us[*]}"
    printf 'speed-up mke2fs/usfs: %.1fx (target >= 10x)\n' "$(echo "$mk / $us" | bc -l)"
    for img in mke2fs usfs; do
        e2fsck -fn "$work/$img.img" >/dev/null 2>&1 || echo "WARNING: e2fsck -fn not clean on the $img image"
    done
    read -r mnf mnd mepf mepd mfe <<<"$(quality "$work/mke2fs.img")"
    read -r unf und uepf uepd ufe <<<"$(quality "$work/usfs.img")"
    printf '%-28s %12s %12s %10s\n' "allocation quality" mke2fs usfs "usfs/mke2fs"
    printf '%-28s %12s %12s %10s\n' "non-contiguous files" "$mnf" "$unf" "$(ratio "$unf" "$mnf")"
    printf '%-28s %12s %12s %10s\n' "non-contiguous directories" "$mnd" "$und" "$(ratio "$und" "$mnd")"
    printf '%-28s %12s %12s %10s\n' "extents per file (filefrag)" "$mepf" "$uepf" "$(ratio "$uepf" "$mepf")"
    printf '%-28s %12s %12s %10s\n' "extents per data file" "$mepd" "$uepd" "$(ratio "$uepd" "$mepd")"
    printf '%-28s %12s %12s %10s\n' "free extents (e2freefrag)" "$mfe" "$ufe" "$(ratio "$ufe" "$mfe")"
    echo "(lower is better for every quality figure; target: usfs/mke2fs <= 1)"
done
