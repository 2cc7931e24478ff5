#!/usr/bin/env bash
# bench/soak: long seeded usfs-exercise runs (random file operations checked against an
# in-memory model; crates/testkit/src/exercise) against a file system, printing ops/s per
# seed and in all. Not a test: no thresholds; a mismatch stops it with exit 1 and the
# exerciser's report (seed, thread, op number, last operations).
#
# Usage: bench/soak.sh MODE [TARGET]
#   dir DIR        run in DIR/soak-SEED (fresh subdirectories) on whatever DIR is
#   kernel [IMAGE] kernel ext4: mke2fs a fresh IMAGE (default a temporary file of SIZE_MB),
#                  loop-mount it, run each seed in its own subdirectory, unmount and
#                  require `e2fsck -fn` clean after each seed (root)
#   usfs-rw [IMAGE] the same through `usfs mount -o rw` — to be added when the read-write
#                  volume lands (it exits 2 until then)
# Environment: SEEDS ("1 2 3"), SECS per seed (60), THREADS (4), OPS per thread (0: until
# SECS), SIZE_MB (1536: room for THREADS * MAX_NODES * MAX_FILE_SIZE), MAX_FILE_SIZE
# (1048576), MAX_NODES (128); KEEP=1 keeps the temporary image after a failure (its path
# is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
target=${2:-}
seeds=${SEEDS:-1 2 3}
secs=${SECS:-60}
threads=${THREADS:-4}
ops=${OPS:-0}
size_mb=${SIZE_MB:-1536}
max_file=${MAX_FILE_SIZE:-1048576}
max_nodes=${MAX_NODES:-128}
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
[ -n "$mode" ] || usage

cargo build --release -q -p usfs-testkit --bin usfs-exercise
work=$(mktemp -d /tmp/usfs-soak.XXXXXX)
cp target/release/usfs-exercise "$work/usfs-exercise"
mnt=$work/mnt
loopdev=
failed=
cleanup() {
    if mountpoint -q "$mnt" 2>/dev/null; then umount "$mnt" || umount -l "$mnt"; fi
    [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null || true
    if [ -n "$failed" ] && [ "${KEEP:-0}" = 1 ]; then
        echo "kept: $work" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

total_ops=0
total_secs=0
# Runs one seed in directory $1; adds its figures to the totals.
soak_one() {
    local dir=$1 seed=$2 out
    mkdir -p "$dir"
    if ! out=$("$work/usfs-exercise" --seed "$seed" --threads "$threads" --ops "$ops" \
        --duration "$secs" --max-file-size "$max_file" --max-nodes "$max_nodes" "$dir" 2>&1); then
        failed=1
        echo "$out" >&2
        exit 1
    fi
    echo "$out"
    # "... N ops in S s (R ops/s) ..."
    local n s
    n=$(sed -n 's/.*: \([0-9]*\) ops in \([0-9.]*\) s.*/\1/p' <<<"$out")
    s=$(sed -n 's/.*: \([0-9]*\) ops in \([0-9.]*\) s.*/\2/p' <<<"$out")
    total_ops=$((total_ops + n))
    total_secs=$(echo "$total_secs + $s" | bc -l)
}

kernel_mount() {
    loopdev=$(losetup --find --show "$1")
    mount -t ext4 "$loopdev" "$mnt"
}

kernel_unmount_check() {
    umount "$mnt"
    losetup -d "$loopdev"
    loopdev=
    if ! e2fsck -fn "$1" >"$work/fsck.out" 2>&1; then
        failed=1
        cat "$work/fsck.out" >&2
        echo "bench/soak: e2fsck -fn found errors after seed $2" >&2
        exit 1
    fi
}

case $mode in
dir)
    [ -d "$target" ] || { echo "bench/soak: dir mode needs an existing directory" >&2; exit 2; }
    for seed in $seeds; do soak_one "$target/soak-$seed" "$seed"; done
    ;;
kernel)
    [ "$(id -u)" = 0 ] || { echo "bench/soak: kernel mode needs root (loop mount)" >&2; exit 2; }
    img=${target:-$work/soak.img}
    rm -f "$img"
    truncate -s "${size_mb}M" "$img"
    mke2fs -q -F -t ext4 "$img"
    mkdir -p "$mnt"
    for seed in $seeds; do
        kernel_mount "$img"
        soak_one "$mnt/soak-$seed" "$seed"
        kernel_unmount_check "$img" "$seed"
        echo "  e2fsck -fn clean after seed $seed"
    done
    ;;
usfs-rw)
    echo "bench/soak: usfs-rw mode comes with the read-write ext4 volume (usfs mount -o rw)" >&2
    exit 2
    ;;
*) usage ;;
esac
printf 'soak %s: %d ops in %.1f s: %.0f ops/s (threads %s, seeds %s)\n' "$mode" "$total_ops" \
    "$total_secs" "$(echo "$total_ops / ($total_secs + 0.000001)" | bc -l)" "$threads" "$seeds"
