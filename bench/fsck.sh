#!/usr/bin/env bash
# bench/fsck: `usfs fsck -n -j1` and `-j2` vs `e2fsck -fn` on kernel-populated ext4 images of
# ~INODES inodes in three shapes:
#   files  file-intensive: 99% files, 1% directories (~100 files per directory)
#   dir25  25% directories (3 files per directory)
#   dir50  50% directories (one file per directory)
# Each tool runs RUNS times warm (after one untimed warm-up run) and RUNS times cold
# (`sync; echo 3 > /proc/sys/vm/drop_caches` before each run), tools interleaved run by run.
# Prints medians, raw runs and the ratios e2fsck/usfs (time) and usfs/e2fsck (peak RSS), and
# checks that every run exits 0 and that the tools print the same summary line.
# Usage: bench/fsck.sh [INODES] [RUNS]   (defaults 1000000, 5). Needs root (loop mounts,
# drop_caches), e2fsprogs, cc and GNU time (/usr/bin/time).
# Images are built once by the kernel (mke2fs, mount -o loop, a small C program creates the
# tree, umount), checked once with `e2fsck -fn` and cached in $USFS_BENCH_CACHE (default
# /var/tmp/usfs-bench-fsck) as ext4-SHAPE-INODES.img; delete them to rebuild.
# Wall time is measured around each run with bash's $EPOCHREALTIME (ms resolution; GNU
# time's %e only has 10 ms), peak RSS is GNU time's %M (KiB).
# USFS_BIN=PATH measures that usfs binary instead of building this tree (e.g. a build of a
# given commit while the working tree has changes in progress).
set -euo pipefail
cd "$(dirname "$0")/.."
inodes=${1:-1000000}
runs=${2:-5}
cache=${USFS_BENCH_CACHE:-/var/tmp/usfs-bench-fsck}
shapes=(files dir25 dir50)
[ "$(id -u)" = 0 ] || { echo "bench/fsck: needs root (loop mounts, drop_caches)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/fsck: needs GNU time at /usr/bin/time" >&2; exit 1; }

# shellcheck source=bench/lib/fsck-images.sh
. bench/lib/fsck-images.sh

tool_names=("e2fsck -fn" "usfs -n -j1" "usfs -n -j2")
measure() { # INDEX IMG -> "seconds rss_kib exit"  (the tool's stdout in $work/out)
    local cmd s e rc=0
    case $1 in
    0) cmd=(e2fsck -fn "$2") ;;
    1) cmd=("$usfs" fsck -n -j1 "$2") ;;
    2) cmd=("$usfs" fsck -n -j2 "$2") ;;
    esac
    s=$EPOCHREALTIME
    /usr/bin/time -f "%e %M" -o "$work/time" "${cmd[@]}" >"$work/out" 2>"$work/err" || rc=$?
    e=$EPOCHREALTIME
    # GNU time writes "Command exited with non-zero status N" before the figures then.
    printf '%.3f %s %s\n' "$(echo "$e - $s" | bc -l)" "$(tail -1 "$work/time" | cut -d' ' -f2)" "$rc"
}
median() { # numbers on stdin -> median
    sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

echo "bench/fsck: $inodes inodes, $runs runs; $(nproc) CPUs; $(e2fsck -V 2>&1 | head -1)"
if [ -n "${USFS_BIN:-}" ]; then
    echo "usfs: $USFS_BIN ($("$usfs" --version 2>/dev/null))"
else
    echo "usfs: $(git describe --always --dirty 2>/dev/null || echo '?') ($(git status --porcelain -- crates | wc -l) files changed under crates/)"
fi
echo "cache: $cache"
fsck_images_ready "$cache" "${shapes[@]}"

warn=()
declare -A summary_table
for shape in "${shapes[@]}"; do
    img=$cache/ext4-$shape-$inodes.img
    echo
    echo "=== shape $shape: $img ($(du -h "$img" | cut -f1) allocated); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    declare -A T=() R=()
    # Summary lines and exit codes, one run each (this is also the warm-up run).
    lines=()
    for t in 0 1 2; do
        read -r _ _ rc < <(measure $t "$img")
        line=$(grep -v '^$' "$work/out" | tail -1)
        lines+=("$line")
        printf '  %-12s exit %s: %s\n' "${tool_names[$t]}" "$rc" "$line"
        [ "$rc" = 0 ] || warn+=("$shape: ${tool_names[$t]} exited $rc (warm-up)")
    done
    for t in 1 2; do
        [ "${lines[$t]}" = "${lines[0]}" ] || warn+=("$shape: ${tool_names[$t]} summary line differs from e2fsck's")
    done
    for mode in warm cold; do
        for i in $(seq "$runs"); do
            for t in 0 1 2; do
                [ $mode = cold ] && drop_caches
                read -r s m rc < <(measure $t "$img")
                [ "$rc" = 0 ] || warn+=("$shape: ${tool_names[$t]} exited $rc ($mode run $i)")
                T[$mode,$t]+="$s "
                R[$mode,$t]+="$m "
            done
        done
    done
    for mode in warm cold; do
        echo "  -- $mode cache (median of $runs; raw runs: seconds / peak RSS KiB)"
        for t in 0 1 2; do
            # shellcheck disable=SC2086
            mt=$(printf '%s\n' ${T[$mode,$t]} | median)
            # shellcheck disable=SC2086
            mr=$(printf '%s\n' ${R[$mode,$t]} | median)
            T[$mode,$t,med]=$mt
            R[$mode,$t,med]=$mr
            printf '  %-12s %8.3f s %9.0f KiB   runs: %s/ %s\n' "${tool_names[$t]}" "$mt" "$mr" \
                "${T[$mode,$t]}" "${R[$mode,$t]}"
        done
        for t in 1 2; do
            tr=$(echo "${T[$mode,0,med]} / ${T[$mode,$t,med]}" | bc -l)
            rr=$(echo "${R[$mode,$t,med]} / ${R[$mode,0,med]}" | bc -l)
            printf '  %-12s time e2fsck/usfs %5.2fx   RSS usfs/e2fsck %5.2f\n' "${tool_names[$t]}" "$tr" "$rr"
            summary_table[$shape,$mode,$t]=$(printf '%5.2fx  %5.2f' "$tr" "$rr")
        done
        summary_table[$shape,$mode,e2]=$(printf '%7.3f s %7.1f MiB' "${T[$mode,0,med]}" "$(echo "${R[$mode,0,med]} / 1024" | bc -l)")
        summary_table[$shape,$mode,u2]=$(printf '%7.3f s %7.1f MiB' "${T[$mode,2,med]}" "$(echo "${R[$mode,2,med]} / 1024" | bc -l)")
    done
    unset T R
done

echo
echo "=== summary (medians; ratios: time e2fsck/usfs, RSS usfs/e2fsck; target for -j2: time >= 3x warm, >= 2x cold, RSS <= 1)"
printf '%-6s %-5s %-22s %-22s %-15s %-15s\n' shape cache "e2fsck -fn" "usfs -j2" "-j1 time  RSS" "-j2 time  RSS"
for shape in "${shapes[@]}"; do
    for mode in warm cold; do
        printf '%-6s %-5s %-22s %-22s %-15s %-15s\n' "$shape" "$mode" "${summary_table[$shape,$mode,e2]}" \
            "${summary_table[$shape,$mode,u2]}" "${summary_table[$shape,$mode,1]}" "${summary_table[$shape,$mode,2]}"
    done
done
if [ ${#warn[@]} -gt 0 ]; then
    echo
    for w in "${warn[@]}"; do echo "WARNING: $w"; done
fi
