#!/usr/bin/env bash
# bench/read-paths: the libplfs seed's fs_test-style read experiment on one image.
# One file of SIZE_MB (default 256) MiB is read with pread(2) in blocks of 1K 4K 16K 64K
# 256K 1M, sequentially and at random aligned offsets, by 1 and 4 threads, on two images:
#   ext4   random bytes, mke2fs -d                anchor: fuse2fs -o ro
#   erofs  compressible text, usfs mkfs.erofs -zlz4hc   anchor: squashfuse (squashfs,
#          mksquashfs -comp lz4 -Xhc: the same codec)
# through:
#   kernel       kernel mount (ro,noatime)
#   fuse-cache   usfs mount -o cache       (kernel page cache, long TTLs)
#   fuse-direct  usfs mount -o direct_io   (every read is a FUSE request)
#   run          usfs run                  (LD_PRELOAD: memcpy from the image mapping for
#                                           stored data; EROFS data decompressed once into
#                                           a cache shared by all processes, a file per
#                                           inode in /var/tmp filled in 2 MiB chunks)
#   anchor       fuse2fs / squashfuse
#   bare         no file system: the file's bytes (a plain copy on the host, in the page
#                cache) memcpy'd out of a 2 MiB-aligned MADV_HUGEPAGE mapping the way usfs
#                run copies: the ceiling of any read path that delivers the bytes into the
#                caller's buffer. Where twice the anchor is above it, 2x the anchor is out
#                of reach of any implementation on this machine, and the bench says so.
# Every method starts from the same state and reads the whole file once before measuring
# (warm caches): before each method the image is written back and dropped from the page
# cache (an image as it sits on disk), so each method's own warm-up read fills the cache
# (the folio sizes that fill leaves matter: 2 MiB folios are mapped by one fault, small
# ones by a fault per 16 pages; no method inherits another's). Each case reads for SECS
# (default 0.25) seconds; each thread times itself (first start to last end; a busy
# machine delaying the main thread cannot shorten the interval); each case is the best of
# REPS (default 3) runs, as the machine may be shared. Prints MB/s per case, the ratios
# the issue sets targets for, and whether each target is met.
# Running DAMON page-out kdamonds are paused meanwhile (bench/damon.sh; KEEP_DAMON=1).
# Usage: bench/read-paths.sh   (root: mounts; env SIZE_MB, KINDS, METHODS, REPS, SECS, BENCH_DIR,
# USFS_BIN: another usfs binary, with its libusfs_preload.so beside it, to compare builds)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/read-paths needs root (loop and FUSE mounts)" >&2; exit 1; }
size_mb=${SIZE_MB:-256}
kinds=${KINDS:-"ext4 erofs"}
reps=${REPS:-3}
bss="1024 4096 16384 65536 262144 1048576"
nice -n 10 cargo build --release -q -p usfs-cli -p usfs-preload
usfs=${USFS_BIN:-$PWD/target/release/usfs}
work=${BENCH_DIR:-$(mktemp -d /tmp/usfs-bench-read-paths.XXXXXX)}
mnt=$work/mnt
mkdir -p "$mnt" "$work/src"
# usfs run's decompressed-data cache shared between processes (what the page cache is to
# the kernel and squashfuse): a fresh one for this run, filled by the warm-up read, on the
# file system of the default one (/var/tmp: 2 MiB page-cache folios; tmpfs has 4 KiB).
export USFS_SHARED_CACHE_DIR=/var/tmp/usfs-bench-cache-$$
export USFS_SHARED_CACHE_MB=$((size_mb * 4 > 1024 ? size_mb * 4 : 1024))
rm -rf "$USFS_SHARED_CACHE_DIR"
. bench/damon.sh
cleanup() {
    mountpoint -q "$mnt" && umount "$mnt"
    rm -rf "$work" "$USFS_SHARED_CACHE_DIR"
    damon_restore
}
trap cleanup EXIT
damon_pause

# The reader (bench/reader.c): T threads read BS-byte blocks with pread for SECS seconds,
# sequentially or at random offsets; prints MB/s (MiB/s) over the wall time of all threads.
gcc -O2 -pthread -o "$work/reader" bench/reader.c

# Seconds each case reads for (env SECS): long enough that start-up (threads, a process's
# first touch of a mapping) is noise, short enough for the whole grid in a few minutes.
secs=${SECS:-0.25}
drop_cached() { # file: written back, then out of the page cache
    sync -- "$1"
    dd if="$1" iflag=nocache count=0 status=none
}

mount_method() { # kind method
    case $2 in
        kernel) mount -t "$1" -o ro,noatime "$img" "$mnt" ;;
        fuse-cache) "$usfs" mount -o cache,threads=4 "$img" "$mnt" ;;
        fuse-direct) "$usfs" mount -o direct_io,threads=4 "$img" "$mnt" ;;
        fuse2fs) fuse2fs -o ro "$img" "$mnt" >/dev/null ;;
        squashfuse) squashfuse "$work/squash.img" "$mnt" ;;
        run | bare) ;;
    esac
}

unmount_method() {
    case $1 in run | bare) return ;; esac
    for _ in 1 2 3 4 5 6 7 8 9 10; do umount "$mnt" 2>/dev/null && return; sleep 0.3; done
    umount -l "$mnt"
}

read_with() { # method bs pattern threads seconds -> MB/s
    local m=$1; shift
    if [ "$m" = run ]; then
        "$usfs" run --mount "$mnt=$img" -- "$work/reader" "$mnt/data" "$@"
    elif [ "$m" = bare ]; then
        "$work/reader" "$work/src/data" "$@" mmap
    else
        "$work/reader" "$mnt/data" "$@"
    fi
}

ratio() { # a b -> a/b
    if [ -n "${1:-}" ] && [ -n "${2:-}" ] && [ "${2:-}" != 0 ]; then echo "scale=2; $1 / $2" | bc -l; else echo -; fi
}

fails=0
beyond=0 # missed targets that ask for more than the bare copy delivers
declare -A mbs
measure_kind() { # kind anchor
    local kind=$1 anchor=$2 methods="kernel fuse-cache fuse-direct run $2 bare"
    [ -n "${METHODS:-}" ] && methods=$METHODS
    for m in $methods; do
        if [ "$m" = "$anchor" ] && ! command -v "$anchor" >/dev/null; then
            echo "$anchor not installed: skipped"; continue
        fi
        # Each method starts from a cold image and warms it with its own read: what fills
        # the page cache decides its folio sizes (readahead through a loop device or FUSE
        # server, or faults on a MADV_HUGEPAGE mapping), so no method inherits another's.
        drop_cached "$img"
        [ -f "$work/squash.img" ] && drop_cached "$work/squash.img"
        drop_cached "$work/src/data"
        mount_method "$kind" "$m"
        read_with "$m" 1048576 seq 1 0 >/dev/null # warm: one pass
        for pat in seq rand; do
            for t in 1 4; do
                for bs in $bss; do
                    best=0
                    for _ in $(seq "$reps"); do
                        r=$(read_with "$m" "$bs" "$pat" "$t" "$secs")
                        best=$(echo "if ($r > $best) $r else $best" | bc -l)
                    done
                    mbs[$kind,$m,$pat,$t,$bs]=$best
                done
            done
        done
        unmount_method "$m"
        # usfs run's shared cache is its own state: gone before the next method (its pages,
        # and their write-back to disk, are not left to compete with the next method's).
        [ "$m" = run ] && rm -rf "$USFS_SHARED_CACHE_DIR"
        echo "measured: $kind $m"
    done
    printf '\n%s: MB/s (MiB/s; warm; best of %s)\n' "$kind" "$reps"
    printf '%-5s %-2s %8s' pat thr bs
    for m in $methods; do printf ' %11s' "$m"; done
    printf ' | %10s %10s %9s %9s %9s\n' run/direct "run/$anchor" run/kern run/bare cache/dir
    for pat in seq rand; do
        for t in 1 4; do
            for bs in $bss; do
                printf '%-5s %-2s %8s' "$pat" "$t" "$bs"
                for m in $methods; do printf ' %11s' "${mbs[$kind,$m,$pat,$t,$bs]:--}"; done
                local run=${mbs[$kind,run,$pat,$t,$bs]:-}
                local rd ra rk rb cd_ anc bare
                anc=${mbs[$kind,$anchor,$pat,$t,$bs]:-}
                bare=${mbs[$kind,bare,$pat,$t,$bs]:-}
                rd=$(ratio "$run" "${mbs[$kind,fuse-direct,$pat,$t,$bs]:-}")
                ra=$(ratio "$run" "${mbs[$kind,$anchor,$pat,$t,$bs]:-}")
                rk=$(ratio "$run" "${mbs[$kind,kernel,$pat,$t,$bs]:-}")
                rb=$(ratio "$run" "$bare")
                cd_=$(ratio "${mbs[$kind,fuse-cache,$pat,$t,$bs]:-}" "${mbs[$kind,fuse-direct,$pat,$t,$bs]:-}")
                printf ' | %10s %10s %9s %9s %9s\n' "$rd" "$ra" "$rk" "$rb" "$cd_"
                # The issue's targets: run >= 2.3x fuse-direct at >= 64K; >= 2x the
                # user-space anchor everywhere; not slower than the kernel for warm 4K.
                if [ "$bs" -ge 65536 ] && [ "$rd" != - ] && [ "$(echo "$rd < 2.3" | bc)" = 1 ]; then
                    echo "  target missed: run/fuse-direct $rd < 2.3"; fails=$((fails + 1))
                fi
                if [ "$ra" != - ] && [ "$(echo "$ra < 2" | bc)" = 1 ]; then
                    echo -n "  target missed: run/$anchor $ra < 2"; fails=$((fails + 1))
                    if [ -n "$bare" ] && [ "$(echo "2 * $anc > $bare" | bc)" = 1 ]; then
                        echo "; out of reach: 2 x $anchor = $(echo "2 * $anc" | bc) MB/s > bare copy $bare MB/s"
                        beyond=$((beyond + 1))
                    else
                        echo
                    fi
                fi
                if [ "$bs" = 4096 ] && [ "$rk" != - ] && [ "$(echo "$rk < 1" | bc)" = 1 ]; then
                    echo "  target missed: run/kernel $rk < 1 at 4K"; fails=$((fails + 1))
                fi
            done
        done
    done
}

for kind in $kinds; do
    case $kind in
        ext4)
            echo "ext4: ${size_mb} MiB file of random bytes (mke2fs -d, 4 KiB blocks)"
            rm -rf "$work/src"; mkdir -p "$work/src"
            dd if=/dev/urandom of="$work/src/data" bs=1M count="$size_mb" status=none
            img=$work/ext4.img
            mke2fs -q -F -t ext4 -b 4096 -d "$work/src" "$img" "$((size_mb + 128))M"
            drop_cached "$img"
            measure_kind ext4 fuse2fs
            ;;
        erofs)
            echo "erofs: ${size_mb} MiB of compressible text (usfs mkfs.erofs -zlz4hc; squashfs -comp lz4 -Xhc for squashfuse)"
            rm -rf "$work/src"; mkdir -p "$work/src"
            python3 -c '
import random, sys
random.seed(7)
words = ["".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(random.randint(2, 9))) for _ in range(300)]
out = sys.stdout.buffer
left = int(sys.argv[1]) << 20
while left > 0:
    chunk = (" ".join(random.choices(words, k=20000)) + "\n").encode()[:left]
    out.write(chunk)
    left -= len(chunk)
' "$size_mb" >"$work/src/data"
            img=$work/erofs.img
            if ! "$usfs" mkfs.erofs --quiet -zlz4hc "$img" "$work/src" 2>/dev/null; then
                echo "erofs: usfs cannot build EROFS images here: skipped"; continue
            fi
            mksquashfs "$work/src" "$work/squash.img" -comp lz4 -Xhc -noappend -quiet >/dev/null
            drop_cached "$img"
            drop_cached "$work/squash.img"
            echo "  sizes: erofs $(stat -c %s "$img"), squashfs $(stat -c %s "$work/squash.img") bytes"
            measure_kind erofs squashfuse
            ;;
    esac
done
echo "targets missed: $fails ($beyond of them ask for more than a bare memcpy from the page cache delivers)"
