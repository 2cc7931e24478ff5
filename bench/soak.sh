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
#   usfs-rw [IMAGE] the same through `usfs mount -o rw,threads=USFS_THREADS` (root): per
#                  seed mount, run, `usfs umount` (waits until the volume is committed
#                  and closed), `e2fsck -fn` clean required, then the kernel mounts the
#                  image read-only at the same place and the exerciser, still holding its
#                  model, compares the tree the kernel sees with it again
#                  (--reverify-when); `find | wc -l` of the kernel's view is printed.
#                  XATTRS=0 leaves extended attributes out.
# Environment: SEEDS ("1 2 3"), SECS per seed (60), THREADS (4), OPS per thread (0: until
# SECS), SIZE_MB (1536: room for THREADS * MAX_NODES * MAX_FILE_SIZE), MAX_FILE_SIZE
# (1048576), MAX_NODES (128), MKFS_OPTS (added to mke2fs -t ext4), USFS_THREADS (2),
# USFS_BIN (another usfs binary); KEEP=1 keeps the temporary image and the exerciser's
# log after a failure (its path is printed).
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
[ "$mode" = usfs-rw ] && [ -z "${USFS_BIN:-}" ] && cargo build --release -q -p usfs-cli
usfs=${USFS_BIN:-$PWD/target/release/usfs}
mkfs_opts=${MKFS_OPTS:-}
work=$(mktemp -d /tmp/usfs-soak.XXXXXX)
cp target/release/usfs-exercise "$work/usfs-exercise"
mnt=$work/mnt
loopdev=
failed=
ex_pid=
cleanup() {
    [ -n "$ex_pid" ] && kill "$ex_pid" 2>/dev/null || true
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
    count_ops "$out"
}

# Adds the figures of an exerciser report ("... N ops in S s (R ops/s) ...") to the totals.
count_ops() {
    local n s
    n=$(sed -n 's/.*: \([0-9]*\) ops in \([0-9.]*\) s.*/\1/p' <<<"$1")
    s=$(sed -n 's/.*: \([0-9]*\) ops in \([0-9.]*\) s.*/\2/p' <<<"$1")
    total_ops=$((total_ops + n))
    total_secs=$(echo "$total_secs + $s" | bc -l)
}

fsck_clean() { # image seed what
    if ! e2fsck -fn "$1" >"$work/fsck.out" 2>&1; then
        failed=1
        cat "$work/fsck.out" >&2
        echo "bench/soak: e2fsck -fn found errors after seed $2 ($3)" >&2
        exit 1
    fi
}

# One seed through `usfs mount -o rw`: the exerciser runs and checks on the usfs mount,
# waits; usfs umount, e2fsck; the kernel mounts the image read-only at the same place and
# the exerciser compares that tree with its model again.
soak_usfs_rw_one() {
    local img=$1 seed=$2 dir=$mnt/soak-$2 flag=$work/reverify-$2 log=$work/exercise-$2.log
    local xattrs=()
    [ "${XATTRS:-1}" = 0 ] && xattrs=(--no-xattrs)
    "$usfs" mount -o "rw,threads=${USFS_THREADS:-2}" "$img" "$mnt"
    mkdir "$dir"
    : >"$log"
    "$work/usfs-exercise" --seed "$seed" --threads "$threads" --ops "$ops" \
        --duration "$secs" --max-file-size "$max_file" --max-nodes "$max_nodes" \
        "${xattrs[@]}" --reverify-when "$flag" "$dir" >"$log" 2>&1 &
    ex_pid=$!
    # The run is over (and checked on the usfs mount) when the report is printed.
    while kill -0 "$ex_pid" 2>/dev/null && ! grep -q ' ops in ' "$log"; do sleep 0.2; done
    if ! grep -q ' ops in ' "$log"; then
        wait "$ex_pid" || true
        ex_pid=
        failed=1
        cat "$log" >&2
        echo "bench/soak: seed $seed failed on the usfs mount (log: $log)" >&2
        exit 1
    fi
    cat "$log"
    "$usfs" umount "$mnt"
    fsck_clean "$img" "$seed" "after usfs umount"
    echo "  e2fsck -fn clean after seed $seed (usfs mount -o rw)"
    mount -t ext4 -o ro "$img" "$mnt"
    touch "$flag"
    if ! wait "$ex_pid"; then
        ex_pid=
        failed=1
        cat "$log" >&2
        echo "bench/soak: seed $seed: the kernel's view of the usfs-written image differs from the model (log: $log)" >&2
        exit 1
    fi
    ex_pid=
    tail -n 1 "$log" | sed 's/^/  kernel mount: /'
    echo "  kernel mount: $(find "$mnt" | wc -l) names under the mount"
    umount "$mnt"
    count_ops "$(cat "$log")"
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
    # shellcheck disable=SC2086 # MKFS_OPTS is a list of options
    mke2fs -q -F -t ext4 $mkfs_opts "$img"
    mkdir -p "$mnt"
    for seed in $seeds; do
        kernel_mount "$img"
        soak_one "$mnt/soak-$seed" "$seed"
        kernel_unmount_check "$img" "$seed"
        echo "  e2fsck -fn clean after seed $seed"
    done
    ;;
usfs-rw)
    [ "$(id -u)" = 0 ] || { echo "bench/soak: usfs-rw mode needs root (FUSE and kernel mounts)" >&2; exit 2; }
    img=${target:-$work/soak.img}
    rm -f "$img"
    truncate -s "${size_mb}M" "$img"
    # shellcheck disable=SC2086 # MKFS_OPTS is a list of options
    mke2fs -q -F -t ext4 $mkfs_opts "$img"
    mkdir -p "$mnt"
    for seed in $seeds; do soak_usfs_rw_one "$img" "$seed"; done
    ;;
*) usage ;;
esac
printf 'soak %s: %d ops in %.1f s: %.0f ops/s (threads %s, seeds %s)\n' "$mode" "$total_ops" \
    "$total_secs" "$(echo "$total_ops / ($total_secs + 0.000001)" | bc -l)" "$threads" "$seeds"
