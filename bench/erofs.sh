#!/usr/bin/env bash
# bench/erofs: usfs mkfs.erofs vs mkfs.erofs 1.5 and mksquashfs on /usr/share plus a large
# text file and a large binary (warm cache). Prints the four figures of issue 5:
#  1. image size vs mkfs.erofs with the same options (and, with fragments+ztailpacking,
#     vs mksquashfs -comp lz4 -Xhc at -b 4K and -b 128K);
#  2. build time (best of RUNS) vs mkfs.erofs and mksquashfs, usfs with --workers 2;
#  3. read amplification of the usfs reader (I/O counters) for sequential, random and
#     strided reads of the large text file;
#  4. peak RSS above idle while reading a 256 MiB file through the reader.
# Usage: bench/erofs.sh [SOURCE_DIR] [RUNS]   (defaults /usr/share, 3). Needs root only
# for nothing; needs mkfs.erofs, mksquashfs.
set -euo pipefail
cd "$(dirname "$0")/.."
src_dir=${1:-/usr/share}
runs=${2:-3}
cargo build --release -q -p usfs-cli -p usfs-erofs --examples
bin=$PWD/target/release
work=$(mktemp -d /tmp/usfs-bench-erofs.XXXXXX)
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src"
echo "copying $src_dir and making the large files..."
cp -a "$src_dir" "$src/share"
python3 - "$src" <<'PY'
import sys, random
d = sys.argv[1]
r = random.Random(5)
words = [''.join(r.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(r.randint(2, 9))) for _ in range(5000)]
with open(d + '/large.txt', 'w') as f:
    n = 0
    while n < 256 << 20:
        line = ' '.join(r.choice(words) for _ in range(12)) + '\n'
        f.write(line); n += len(line)
PY
cat /usr/bin/* 2>/dev/null | head -c $((128 << 20)) > "$src/large.bin"
best() { # best wall time of $runs runs of "$@"
    local b=
    for _ in $(seq "$runs"); do
        local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
        local t; t=$(echo "$t1 - $t0" | bc); if [ -z "$b" ] || [ "$(echo "$t < $b" | bc)" = 1 ]; then b=$t; fi
    done
    echo "$b"
}
size() { stat -c %s "$1"; }
echo
echo "== 1+2. size and build time (usfs --workers 2) =="
printf "%-34s %12s %12s %7s %9s %9s %7s\n" options usfs_bytes mkfs_bytes ratio usfs_s mkfs_s ratio
for opts in "" "-zlz4" "-zlz4hc" "-zlz4hc -Eztailpacking" "-zlz4hc -C65536" "-zlz4 -Elegacy-compress"; do
    tu=$(best "$bin/usfs" mkfs.erofs --quiet --workers 2 $opts "$work/u.img" "$src")
    tm=$(best mkfs.erofs $opts "$work/m.img" "$src")
    su=$(size "$work/u.img"); sm=$(size "$work/m.img")
    printf "%-34s %12d %12d %7.4f %9.2f %9.2f %7.3f\n" "[$opts]" "$su" "$sm" "$(echo "$su/$sm" | bc -l)" "$tu" "$tm" "$(echo "$tu/$tm" | bc -l)"
done
tf=$(best "$bin/usfs" mkfs.erofs --quiet --workers 2 -zlz4hc -Efragments,ztailpacking "$work/f.img" "$src")
sf=$(size "$work/f.img")
for b in 4K 128K; do
    tq=$(best mksquashfs "$src" "$work/q-$b.img" -noappend -comp lz4 -Xhc -b $b -processors 2)
    sq=$(size "$work/q-$b.img")
    printf "usfs -zlz4hc -Efragments,ztailpacking %d bytes (%.2f s) vs mksquashfs lz4hc -b %s %d bytes (%.2f s): size ratio %.4f\n" \
        "$sf" "$tf" "$b" "$sq" "$tq" "$(echo "$sf/$sq" | bc -l)"
done
echo
echo "== 3+4. reader: amplification (bytes read from the image / bytes requested) and peak RSS =="
"$bin/usfs" mkfs.erofs --quiet -zlz4hc "$work/r.img" "$src"
for p in seq random strided; do
    echo "large.txt (256 MiB, 4 KiB pclusters) $p: $("$bin/examples/erofs_read" "$work/r.img" /large.txt $p)"
done
"$bin/usfs" mkfs.erofs --quiet -zlz4hc -C65536 "$work/r64.img" "$src"
echo "large.txt (64 KiB pclusters) strided: $("$bin/examples/erofs_read" "$work/r64.img" /large.txt strided)"
echo "squashfs -b 128K strided (loop device sectors read):"
if [ "$(id -u)" = 0 ]; then
    mksquashfs "$src" "$work/q.img" -noappend -comp lz4 -Xhc -b 128K >/dev/null
    sync; echo 3 > /proc/sys/vm/drop_caches
    loop=$(losetup -f --show -r "$work/q.img"); mkdir -p "$work/mnt"; mount -t squashfs "$loop" "$work/mnt"
    dev=$(basename "$loop"); before=$(awk '{print $3}' /sys/block/$dev/stat)
    python3 - "$work/mnt/large.txt" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); size = os.fstat(fd).st_size; req = 0
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
for off in range(0, size, 128 << 10): req += len(os.pread(fd, 4096, off))
print("requested", req)
PY
    after=$(awk '{print $3}' /sys/block/$dev/stat)
    echo "  bytes read from the device: $(( (after - before) * 512 ))"
    umount "$work/mnt"; losetup -d "$loop"
else
    echo "  (needs root)"
fi
