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
# Every method starts from the same state and reads the whole file once before measuring
# (warm caches): before each method the image is written back and dropped from the page
# cache (an image as it sits on disk), so each method's own warm-up read fills the cache
# (the folio sizes that fill leaves matter: 2 MiB folios are mapped by one fault, small
# ones by a fault per 16 pages; no method inherits another's). Each thread times itself (first start to last end; a busy machine delaying the
# main thread cannot shorten the interval); each case is the best of REPS (default 3)
# runs, as the machine may be shared. Prints MB/s per case, the
# ratios the issue sets targets for, and whether each target is met.
# Running DAMON page-out kdamonds are paused meanwhile (bench/damon.sh; KEEP_DAMON=1).
# Usage: bench/read-paths.sh   (root: mounts; env SIZE_MB, KINDS, METHODS, REPS, BENCH_DIR,
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

# The reader: T threads, each opens the file and preads BS-byte blocks; sequential
# threads each read their own slice in order, random ones pick aligned offsets over the
# whole file (xorshift). Prints MB/s (MiB/s) over the wall time of all threads.
cat >"$work/reader.c" <<'EOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *path;
static size_t bs;
static int rnd;
static int nthreads;
static uint64_t per_thread, fsize;
static pthread_barrier_t start;
static double t_start[64], t_end[64];

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *worker(void *arg) {
    long t = (long)arg;
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror("open"); exit(1); }
    char *buf = malloc(bs);
    uint64_t blocks = fsize / bs, slice = blocks / nthreads, x = 0x9E3779B97F4A7C15ull * (t + 1);
    uint64_t first = slice * t, i = 0, done = 0;
    pthread_barrier_wait(&start);
    t_start[t] = now();
    while (done < per_thread) {
        uint64_t b;
        if (rnd) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; b = x % blocks; }
        else { b = first + (i++ % (slice ? slice : 1)); }
        ssize_t n = pread(fd, buf, bs, (off_t)(b * bs));
        if (n != (ssize_t)bs) { fprintf(stderr, "short read %zd\n", n); exit(1); }
        done += n;
    }
    t_end[t] = now();
    close(fd);
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "reader PATH BS seq|rand THREADS TOTAL\n"); return 2; }
    path = argv[1]; bs = strtoull(argv[2], 0, 10); rnd = !strcmp(argv[3], "rand");
    nthreads = atoi(argv[4]);
    uint64_t total = strtoull(argv[5], 0, 10);
    struct stat st;
    if (stat(path, &st)) { perror("stat"); return 1; }
    fsize = st.st_size;
    per_thread = total / nthreads / bs * bs;
    if (nthreads < 1 || nthreads > 64) return 2;
    pthread_t th[64];
    pthread_barrier_init(&start, NULL, nthreads);
    for (long t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    /* Wall time from the first thread's start to the last one's end (each thread takes
       its own times, so a busy machine delaying the main thread cannot shorten it). */
    double a = t_start[0], b = t_end[0];
    for (int t = 1; t < nthreads; t++) {
        if (t_start[t] < a) a = t_start[t];
        if (t_end[t] > b) b = t_end[t];
    }
    printf("%.1f\n", (double)(per_thread * nthreads) / (b - a) / 1048576.0);
    return 0;
}
EOF
gcc -O2 -pthread -o "$work/reader" "$work/reader.c"

# Bytes read per case: enough to run well past start-up, few enough for 1K FUSE requests.
total_for() { # bs -> bytes
    case $1 in
        1024) echo $((16 << 20)) ;;
        4096 | 16384) echo $((64 << 20)) ;;
        *) echo $((256 << 20)) ;;
    esac
}

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
        run) ;;
    esac
}

unmount_method() {
    [ "$1" = run ] && return
    for _ in 1 2 3 4 5 6 7 8 9 10; do umount "$mnt" 2>/dev/null && return; sleep 0.3; done
    umount -l "$mnt"
}

read_with() { # method bs pattern threads total -> MB/s
    local m=$1; shift
    if [ "$m" = run ]; then
        "$usfs" run --mount "$mnt=$img" -- "$work/reader" "$mnt/data" "$@"
    else
        "$work/reader" "$mnt/data" "$@"
    fi
}

ratio() { # a b -> a/b
    if [ -n "${1:-}" ] && [ -n "${2:-}" ] && [ "${2:-}" != 0 ]; then echo "scale=2; $1 / $2" | bc -l; else echo -; fi
}

fails=0
declare -A mbs
measure_kind() { # kind anchor
    local kind=$1 anchor=$2 methods="kernel fuse-cache fuse-direct run $2"
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
        mount_method "$kind" "$m"
        read_with "$m" 1048576 seq 1 "$((size_mb << 20))" >/dev/null # warm
        for pat in seq rand; do
            for t in 1 4; do
                for bs in $bss; do
                    best=0
                    for _ in $(seq "$reps"); do
                        r=$(read_with "$m" "$bs" "$pat" "$t" "$(total_for "$bs")")
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
    printf ' | %10s %10s %9s %9s\n' run/direct "run/$anchor" run/kern cache/dir
    for pat in seq rand; do
        for t in 1 4; do
            for bs in $bss; do
                printf '%-5s %-2s %8s' "$pat" "$t" "$bs"
                for m in $methods; do printf ' %11s' "${mbs[$kind,$m,$pat,$t,$bs]:--}"; done
                local run=${mbs[$kind,run,$pat,$t,$bs]:-}
                local rd ra rk cd_
                rd=$(ratio "$run" "${mbs[$kind,fuse-direct,$pat,$t,$bs]:-}")
                ra=$(ratio "$run" "${mbs[$kind,$anchor,$pat,$t,$bs]:-}")
                rk=$(ratio "$run" "${mbs[$kind,kernel,$pat,$t,$bs]:-}")
                cd_=$(ratio "${mbs[$kind,fuse-cache,$pat,$t,$bs]:-}" "${mbs[$kind,fuse-direct,$pat,$t,$bs]:-}")
                printf ' | %10s %10s %9s %9s\n' "$rd" "$ra" "$rk" "$cd_"
                # The issue's targets: run >= 2.3x fuse-direct at >= 64K; >= 2x the
                # user-space anchor everywhere; not slower than the kernel for warm 4K.
                if [ "$bs" -ge 65536 ] && [ "$rd" != - ] && [ "$(echo "$rd < 2.3" | bc)" = 1 ]; then
                    echo "  target missed: run/fuse-direct $rd < 2.3"; fails=$((fails + 1))
                fi
                if [ "$ra" != - ] && [ "$(echo "$ra < 2" | bc)" = 1 ]; then
                    echo "  target missed: run/$anchor $ra < 2"; fails=$((fails + 1))
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
echo "targets missed: $fails"
