#!/usr/bin/env bash
# bench/fsck-repair: `usfs fsck -fy -j2` vs `e2fsck -fy` on the kernel-made images of
# bench/fsck (three shapes of ~INODES inodes, built and cached as bench/fsck does) with
# 1k, 10k and 100k injected problems of mixed kinds (COUNTS to choose others).
#
# The problems, on targets a seeded shuffle picks from the image's inventory (`find` on a
# read-only loop mount of the clean image), in turn:
#   links   a file's or directory's link count set to 7            (pass 4)
#   size    i_size of a file of more than one block set to 1        (pass 1)
#   dtime   dtime set on an inode in use                            (pass 1)
#   blocks  i_blocks set to 999                                     (pass 1)
#   freei   an inode in use marked free in its group's bitmap       (pass 5)
# made with `debugfs -w -f SCRIPT` (which keeps inode checksums right) on a copy of the
# image, once per shape and count; `e2fsck -fn` must find the copy damaged.
#
# Each run copies the damaged image afresh for each tool and writes the copy out
# (`sync FILE`: neither the copy nor its writeback is timed; unsynced, a tool's flush at
# its end waited for gigabytes of the copy's dirty pages, run to run unlike), tools
# interleaved run by run; after each repair `e2fsck -fn` must find the image clean and
# the tool must have exited 1 (errors corrected). Prints wall time and peak RSS (GNU
# time's %M), medians and raw runs, the ratio e2fsck/usfs (time; target >= 3x) and
# usfs/e2fsck (RSS; target <= 1), and whether every repair ended clean.
#
# Usage: bench/fsck-repair.sh [INODES] [RUNS]   (defaults 1000000, 3). Environment:
# COUNTS ("1000 10000 100000"), SHAPES ("files dir25 dir50"), USFS_BIN (measure that
# binary), USFS_BENCH_CACHE (image cache, default /var/tmp/usfs-bench-fsck). Needs root,
# e2fsprogs (debugfs, e2fsck), cc and GNU time; room for three copies of an image.
set -euo pipefail
cd "$(dirname "$0")/.."
inodes=${1:-1000000}
runs=${2:-3}
cache=${USFS_BENCH_CACHE:-/var/tmp/usfs-bench-fsck}
read -r -a counts <<<"${COUNTS:-1000 10000 100000}"
read -r -a shapes <<<"${SHAPES:-files dir25 dir50}"
[ "$(id -u)" = 0 ] || { echo "bench/fsck-repair: needs root (loop mounts)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench/fsck-repair: needs GNU time at /usr/bin/time" >&2; exit 1; }

# The copies of 8 GiB images go to /var/tmp (on disk), not /tmp.
TMPROOT=/var/tmp
# shellcheck source=bench/lib/fsck-images.sh
. bench/lib/fsck-images.sh

inventory() { # IMG OUT -> lines "INO SIZE TYPE" of every file and directory but the root
    mount -o ro,loop,noload "$1" "$mnt"
    find "$mnt" -mindepth 1 -printf '%i %s %y\n' >"$2"
    umount "$mnt"
}

inject() { # IMG INVENTORY COUNT -> damages IMG with COUNT problems (see the header)
    local img=$1 inv=$2 count=$3 per=$(($3 / 5))
    local seed="usfs-bench-fsck-repair-$count"
    pick() { # AWK_FILTER N -> N distinct inode numbers
        awk "$1 {print \$1}" "$inv" | shuf -n "$2" --random-source=<(yes "$seed$1")
    }
    {
        # Distinct targets per kind; a target may carry several kinds.
        pick '$3 == "f" || $3 == "d"' $((count - 4 * per)) | sed 's/.*/sif <&> links_count 7/'
        pick '$3 == "f" && $2 > 4096' "$per" | sed 's/.*/sif <&> size 1/'
        pick '$3 == "f"' "$per" | sed 's/.*/sif <&> dtime 12345/'
        pick '$3 == "f" && $2 > 0' "$per" | sed 's/.*/sif <&> blocks 999/'
        pick '$3 == "f"' "$per" | sed 's/.*/freei <&>/'
    } >"$work/inject.cmd"
    debugfs -w -f "$work/inject.cmd" "$img" >/dev/null 2>"$work/inject.err" || {
        cat "$work/inject.err" >&2
        return 1
    }
    if e2fsck -fn "$img" >/dev/null 2>&1; then
        echo "bench/fsck-repair: e2fsck -fn finds $img clean after injecting $count problems" >&2
        return 1
    fi
}

tool_names=("e2fsck -fy" "usfs -fy -j2")
measure() { # INDEX IMG -> "seconds rss_kib exit clean"
    local cmd s e rc=0 clean=yes
    case $1 in
    0) cmd=(e2fsck -fy "$2") ;;
    1) cmd=("$usfs" fsck -fy -j2 "$2") ;;
    esac
    s=$EPOCHREALTIME
    /usr/bin/time -f "%e %M" -o "$work/time" "${cmd[@]}" >"$work/out.$1" 2>"$work/err.$1" || rc=$?
    e=$EPOCHREALTIME
    e2fsck -fn "$2" >"$work/after.$1" 2>&1 || clean=no
    printf '%.3f %s %s %s\n' "$(echo "$e - $s" | bc -l)" "$(tail -1 "$work/time" | cut -d' ' -f2)" "$rc" "$clean"
}
median() { # numbers on stdin -> median
    sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

echo "bench/fsck-repair: $inodes inodes, counts ${counts[*]}, $runs runs; $(nproc) CPUs; $(e2fsck -V 2>&1 | head -1)"
echo "usfs: ${USFS_BIN:-$(git describe --always --dirty 2>/dev/null || echo '?')}"
fsck_images_ready "$cache" "${shapes[@]}"

warn=()
rows=()
for shape in "${shapes[@]}"; do
    img=$cache/ext4-$shape-$inodes.img
    inv=$cache/ext4-$shape-$inodes.inv
    [ -s "$inv" ] || inventory "$img" "$inv"
    for count in "${counts[@]}"; do
        echo
        echo "=== $shape, $count problems; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
        damaged=$work/damaged.img
        cp --sparse=always "$img" "$damaged"
        inject "$damaged" "$inv" "$count"
        declare -A T=() R=()
        for i in $(seq "$runs"); do
            for t in 0 1; do
                cp --sparse=always "$damaged" "$work/run.img"
                sync "$work/run.img"
                read -r s m rc clean < <(measure $t "$work/run.img")
                printf '  run %s %-13s %8.3f s %8s KiB exit %s clean %s\n' "$i" "${tool_names[$t]}" "$s" "$m" "$rc" "$clean"
                [ "$rc" = 1 ] || warn+=("$shape $count: ${tool_names[$t]} exited $rc (run $i)")
                [ "$clean" = yes ] || warn+=("$shape $count: e2fsck -fn not clean after ${tool_names[$t]} (run $i)")
                T[$t]+="$s "
                R[$t]+="$m "
            done
        done
        rm -f "$work/run.img" "$damaged"
        # shellcheck disable=SC2086
        {
            te=$(printf '%s\n' ${T[0]} | median); tu=$(printf '%s\n' ${T[1]} | median)
            re=$(printf '%s\n' ${R[0]} | median); ru=$(printf '%s\n' ${R[1]} | median)
        }
        rows+=("$(printf '%-6s %7s %9.3f s %9.3f s %6.2fx %9.1f MiB %9.1f MiB %5.2f' "$shape" "$count" \
            "$te" "$tu" "$(echo "$te / $tu" | bc -l)" "$(echo "$re / 1024" | bc -l)" \
            "$(echo "$ru / 1024" | bc -l)" "$(echo "$ru / $re" | bc -l)")")
        unset T R
    done
done

echo
echo "=== summary (medians of $runs; target: time e2fsck/usfs >= 3x, RSS usfs/e2fsck <= 1, clean every time)"
printf '%-6s %7s %11s %11s %7s %13s %13s %5s\n' shape errors "e2fsck -fy" "usfs -fy" ratio "e2fsck RSS" "usfs RSS" ratio
printf '%s\n' "${rows[@]}"
if [ ${#warn[@]} -gt 0 ]; then
    echo
    for w in "${warn[@]}"; do echo "WARNING: $w"; done
else
    echo "every repair exited 1 and left an image e2fsck -fn finds clean"
fi
