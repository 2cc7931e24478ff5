#!/usr/bin/env bash
# bench/erofs: usfs mkfs.erofs vs mkfs.erofs 1.5 and mksquashfs on a source tree plus a
# large text file (real text: decompressed changelogs, docs and man pages concatenated) and
# a large binary (/usr/lib ELF files concatenated). Warm cache. Prints the four figures of
# issue 5:
#  1. image size vs mkfs.erofs with the same options, and usfs -zlz4hc
#     -Efragments,ztailpacking vs mksquashfs -comp lz4 -Xhc -b 4K and -b 128K;
#  2. build time (median of RUNS, usfs and mkfs.erofs interleaved) vs mkfs.erofs and
#     mksquashfs (-processors 2), usfs with --workers 2;
#  3. read amplification (bytes read from the image / bytes requested) of the usfs reader
#     (its I/O counters) for sequential, random (4 KiB at random offsets, 1/8 of the file)
#     and strided (first 4 KiB of every 128 KiB) reads of the large text and binary files,
#     beside squashfs -b 128K mounted by the kernel, measured from the loop device's
#     sectors read (/sys/block/loopN/stat) with the same patterns;
#  4. peak RSS above idle while reading a 256 MiB file sequentially through the reader.
# Usage: bench/erofs.sh [SOURCE_DIR] [RUNS] [LARGE_MIB]
#   defaults /usr/share, 3, 64 (the size of each of large.txt and large.bin). A smaller
#   run: bench/erofs.sh /usr/share/doc 3 32. Needs mkfs.erofs, mksquashfs, python3; root
#   for the squashfs loop-device figures. USFS_BIN=DIR uses prebuilt binaries
#   (DIR/usfs, DIR/examples/erofs_read) instead of building target/release.
set -euo pipefail
cd "$(dirname "$0")/.."
src_dir=${1:-/usr/share}
runs=${2:-3}
large_mib=${3:-64}
if [ -n "${USFS_BIN:-}" ]; then
    bin=$USFS_BIN
else
    cargo build --release -q -p usfs-cli -p usfs-erofs --examples
    bin=$PWD/target/release
fi
work=$(mktemp -d /tmp/usfs-bench-erofs.XXXXXX)
cleanup() {
    if mountpoint -q "$work/mnt" 2>/dev/null; then umount "$work/mnt"; fi
    if [ -n "${loop:-}" ]; then losetup -d "$loop" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
src=$work/src
mkdir -p "$src"
echo "copying $src_dir and making large.txt / large.bin ($large_mib MiB each)..."
cp -a "$src_dir" "$src/tree"
python3 - "$src" "$large_mib" <<'PY'
import glob, gzip, os, sys
d, lim = sys.argv[1], int(sys.argv[2]) << 20
# Real text: decompressed changelogs, then other compressed docs and man pages, then
# plain-text docs; repeated from the start only if the machine has too little.
texts = sorted(glob.glob('/usr/share/doc/*/changelog*.gz'))
texts += sorted(set(glob.glob('/usr/share/doc/*/*.gz')) - set(texts))
texts += sorted(glob.glob('/usr/share/man/man*/*.gz'))
plain = sorted(f for f in glob.glob('/usr/share/doc/*/*') if os.path.isfile(f) and not f.endswith('.gz'))
def chunks():
    for f in texts:
        try:
            yield gzip.open(f).read()
        except Exception:
            pass
    for f in plain:
        try:
            yield open(f, 'rb').read()
        except Exception:
            pass
def fill(path, gen):
    n = 0
    with open(path, 'wb') as out:
        while n < lim:
            got = 0
            for c in gen():
                c = c[:lim - n]; out.write(c); n += len(c); got += len(c)
                if n >= lim:
                    break
            if got == 0:
                break
    return n
def elves():
    for root in ('/usr/lib', '/usr/lib64', '/usr/libexec'):
        for dp, _, fs in sorted(os.walk(root)):
            for f in sorted(fs):
                p = os.path.join(dp, f)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                try:
                    with open(p, 'rb') as h:
                        if h.read(4) != b'\x7fELF':
                            continue
                        h.seek(0); yield h.read()
                except OSError:
                    pass
print('large.txt', fill(d + '/large.txt', chunks), 'bytes; large.bin', fill(d + '/large.bin', elves), 'bytes')
PY
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
wall() { # wall seconds of one run of "$@"
    local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}
size() { stat -c %s "$1"; }
ratio() { echo "scale=4; $1 / $2" | bc; }
# The option sets; the first two are timed RUNS times (interleaved), the others once.
sets=("-zlz4hc" "-zlz4hc -Eztailpacking" "" "-zlz4" "-zlz4hc -C65536" "-zlz4 -Elegacy-compress")
echo
echo "== 1+2. image size and build time (usfs --workers 2; median of the runs) =="
printf "%-26s %12s %12s %7s %5s %9s %9s %7s\n" options usfs_bytes mkfs_bytes size_r runs usfs_s mkfs_s time_r
for k in "${!sets[@]}"; do
    opts=${sets[$k]}
    n=1; if [ "$k" -lt 2 ]; then n=$runs; fi
    tus=(); tms=()
    for _ in $(seq "$n"); do
        # shellcheck disable=SC2086
        tus+=("$(wall "$bin/usfs" mkfs.erofs --quiet --workers 2 $opts "$work/u.img" "$src")")
        # shellcheck disable=SC2086
        tms+=("$(wall mkfs.erofs $opts "$work/m.img" "$src")")
    done
    tu=$(printf "%s\n" "${tus[@]}" | median); tm=$(printf "%s\n" "${tms[@]}" | median)
    su=$(size "$work/u.img"); sm=$(size "$work/m.img")
    printf "%-26s %12d %12d %7.4f %5d %9.2f %9.2f %7.3f\n" "[$opts]" "$su" "$sm" "$(ratio "$su" "$sm")" "$n" "$tu" "$tm" "$(ratio "$tu" "$tm")"
    if [ "$n" -gt 1 ]; then echo "    usfs runs: ${tus[*]}  mkfs.erofs runs: ${tms[*]}"; fi
done
tf=$(wall "$bin/usfs" mkfs.erofs --quiet --workers 2 -zlz4hc -Efragments,ztailpacking "$work/f.img" "$src")
sf=$(size "$work/f.img")
for b in 4K 128K; do
    tq=$(wall mksquashfs "$src" "$work/q-$b.img" -noappend -comp lz4 -Xhc -b $b -processors 2)
    sq=$(size "$work/q-$b.img")
    printf "usfs -zlz4hc -Efragments,ztailpacking %d bytes (%.2f s) vs mksquashfs -comp lz4 -Xhc -b %s %d bytes (%.2f s): size ratio %.4f\n" \
        "$sf" "$tf" "$b" "$sq" "$tq" "$(ratio "$sf" "$sq")"
done
rm -f "$work/q-4K.img" "$work/f.img" "$work/m.img"

echo
echo "== 3. read amplification (bytes read from the image / bytes requested) =="
"$bin/usfs" mkfs.erofs --quiet -zlz4hc "$work/r.img" "$src"
"$bin/usfs" mkfs.erofs --quiet -zlz4hc -C65536 "$work/r64.img" "$src"
for f in large.txt large.bin; do
    for p in seq random strided; do
        echo "usfs -zlz4hc (4 KiB pclusters) $f $p: $("$bin/examples/erofs_read" "$work/r.img" /$f $p)"
    done
    echo "usfs -zlz4hc -C65536 $f strided: $("$bin/examples/erofs_read" "$work/r64.img" /$f strided)"
done
if [ "$(id -u)" = 0 ]; then
    loop=$(losetup -f --show -r "$work/q-128K.img"); mkdir -p "$work/mnt"
    mount -t squashfs -o ro "$loop" "$work/mnt"
    dev=$(basename "$loop")
    for f in large.txt large.bin; do
        for p in seq random strided; do
            sync; echo 3 > /proc/sys/vm/drop_caches
            before=$(awk '{print $3}' "/sys/block/$dev/stat")
            req=$(python3 - "$work/mnt/$f" "$p" <<'PY'
import os, sys
path, p = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDONLY); size = os.fstat(fd).st_size; req = 0
if p == 'seq':
    off = 0
    while off < size:
        n = len(os.pread(fd, 128 << 10, off)); req += n; off += n
else:
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    if p == 'strided':
        for off in range(0, size, 128 << 10):
            req += len(os.pread(fd, 4096, off))
    else:  # the same xorshift sequence as examples/erofs_read.rs
        M = (1 << 64) - 1; x = 0x9e3779b97f4a7c15; blocks = (size + 4095) // 4096
        for _ in range(max(size // 4096 // 8, 1)):
            x ^= (x << 13) & M; x ^= x >> 7; x ^= (x << 17) & M
            req += len(os.pread(fd, 4096, (x % blocks) * 4096))
print(req)
PY
)
            after=$(awk '{print $3}' "/sys/block/$dev/stat")
            rd=$(( (after - before) * 512 ))
            echo "squashfs -b 128K (kernel, loop sectors read) $f $p: requested $req read $rd amplification $(ratio "$rd" "$req")"
        done
    done
    umount "$work/mnt"; losetup -d "$loop"; loop=
else
    echo "squashfs -b 128K: (needs root for the loop device)"
fi
rm -f "$work/r.img" "$work/r64.img" "$work/q-128K.img"

echo
echo "== 4. peak RSS while reading a 256 MiB file through the reader =="
mkdir -p "$work/rss"
python3 - "$src/large.txt" "$work/rss/big.txt" <<'PY2'
import sys
t = open(sys.argv[1], 'rb').read(); lim = 256 << 20; n = 0
with open(sys.argv[2], 'wb') as out:
    while n < lim:
        c = t[:lim - n]; out.write(c); n += len(c)
PY2
"$bin/usfs" mkfs.erofs --quiet -zlz4hc "$work/rss.img" "$work/rss"
echo "usfs -zlz4hc big.txt ($(size "$work/rss/big.txt") bytes) seq: $("$bin/examples/erofs_read" "$work/rss.img" /big.txt seq)"
"$bin/usfs" mkfs.erofs --quiet -zlz4hc -C65536 "$work/rss64.img" "$work/rss"
echo "usfs -zlz4hc -C65536 big.txt seq: $("$bin/examples/erofs_read" "$work/rss64.img" /big.txt seq)"
