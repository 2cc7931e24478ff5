# bench/lib/fsck-images.sh: the set-up and the kernel-made ext4 images of bench/fsck and
# bench/fsck-repair (sourced from the repository's root, after $inodes and $cache are
# set). Sets $work (a scratch directory under $TMPROOT, /tmp by default), $mnt, $usfs (a
# private copy of the binary: other work may rebuild target/ meanwhile) and the cleanup
# trap (unmount, remove a half-built image and $work); builds usfs unless USFS_BIN names
# one. Defines shape_dirs, build_image SHAPE IMG and fsck_images_ready CACHE SHAPES...
# (builds the missing ones).

[ -n "${USFS_BIN:-}" ] || cargo build --release -q -p usfs-cli
work=$(mktemp -d "${TMPROOT:-/tmp}/usfs-bench-fsck.XXXXXX")
mnt=$work/mnt
mkdir -p "$mnt" "$cache"
cp "${USFS_BIN:-target/release/usfs}" "$work/usfs"
usfs=$work/usfs
building=
cleanup() {
    if mountpoint -q "$mnt"; then umount "$mnt" || umount -l "$mnt"; fi
    [ -n "$building" ] && rm -f "$building"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The tree generator: creates NDIRS-1 directories below ROOT (directory 0 is ROOT itself) in
# breadth-first order with FANOUT subdirectories each, and NFILES files spread evenly over
# all directories; files are 10% empty, 70% 100 B..4 KiB, 20% 4..12 KiB (seeded). WORKERS
# processes create the files, each over a contiguous range of directories.
cat >"$work/gen.c" <<'EOF'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
static char **path;
static void die(const char *what, const char *p) { perror(what); fprintf(stderr, "%s\n", p); exit(1); }
static unsigned long mix(unsigned long x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdUL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53UL; x ^= x >> 33;
    return x;
}
int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: gen ROOT NDIRS NFILES FANOUT WORKERS\n"); return 2; }
    const char *root = argv[1];
    long ndirs = atol(argv[2]), nfiles = atol(argv[3]), fanout = atol(argv[4]), workers = atol(argv[5]);
    static char buf[12288];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = 'a' + i % 26;
    path = calloc(ndirs, sizeof *path);
    path[0] = strdup(root);
    char p[4096];
    for (long i = 1; i < ndirs; i++) {
        snprintf(p, sizeof p, "%s/d%ld", path[(i - 1) / fanout], i);
        if (mkdir(p, 0755)) die("mkdir", p);
        path[i] = strdup(p);
    }
    for (long w = 0; w < workers; w++) {
        pid_t pid = fork();
        if (pid < 0) die("fork", "");
        if (pid) continue;
        long d0 = ndirs * w / workers, d1 = ndirs * (w + 1) / workers;
        for (long d = d0; d < d1; d++) {
            long f0 = nfiles * d / ndirs, f1 = nfiles * (d + 1) / ndirs;
            for (long f = f0; f < f1; f++) {
                snprintf(p, sizeof p, "%s/f%ld", path[d], f);
                int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
                if (fd < 0) die("open", p);
                unsigned long h = mix(f * 2654435761UL + 12345), k = h % 10, size = 0;
                if (k >= 1 && k <= 7) size = 100 + (h >> 8) % 3997;
                else if (k >= 8) size = 4097 + (h >> 8) % 8192;
                if (size && write(fd, buf, size) != (ssize_t)size) die("write", p);
                if (close(fd)) die("close", p);
            }
        }
        _exit(0);
    }
    int st, bad = 0;
    while (wait(&st) > 0) bad |= !WIFEXITED(st) || WEXITSTATUS(st);
    return bad;
}
EOF

shape_dirs() { # SHAPE -> number of directories (the root included)
    case $1 in
    files) echo $((inodes / 100)) ;;
    dir25) echo $((inodes / 4)) ;;
    dir50) echo $((inodes / 2)) ;;
    esac
}

build_image() { # SHAPE IMG
    [ -x "$work/gen" ] || cc -O2 -o "$work/gen" "$work/gen.c"
    local shape=$1 img=$2 ndirs nfiles size t0 t1 t2 t3
    ndirs=$(shape_dirs "$shape")
    nfiles=$((inodes - ndirs))
    size=$(((inodes * 8192 + (1 << 30) - 1) / (1 << 30)))
    [ "$size" -lt 1 ] && size=1
    echo "building $img: $((ndirs - 1)) directories + $nfiles files, ${size}G sparse, -N $((inodes * 11 / 10))"
    building=$img.tmp
    rm -f "$building"
    t0=$EPOCHREALTIME
    truncate -s "${size}G" "$building"
    mke2fs -q -F -t ext4 -N $((inodes * 11 / 10)) -L "usfs-$shape" "$building" "${size}G"
    mount -o loop,noatime "$building" "$mnt"
    t1=$EPOCHREALTIME
    "$work/gen" "$mnt" "$ndirs" "$nfiles" 100 2
    t2=$EPOCHREALTIME
    umount "$mnt"
    t3=$EPOCHREALTIME
    printf '  built in %.1f s (mke2fs+mount %.1f s, create %.1f s, umount %.1f s)\n' \
        "$(echo "$t3 - $t0" | bc -l)" "$(echo "$t1 - $t0" | bc -l)" \
        "$(echo "$t2 - $t1" | bc -l)" "$(echo "$t3 - $t2" | bc -l)"
    if ! e2fsck -fn "$building" >"$work/check.out" 2>&1; then
        cat "$work/check.out"
        echo "bench/fsck: e2fsck -fn does not pass on the new image of shape $shape" >&2
        exit 1
    fi
    echo "  e2fsck -fn: $(tail -1 "$work/check.out")"
    mv "$building" "$img"
    building=
}


fsck_images_ready() { # CACHE SHAPE... -> every $CACHE/ext4-SHAPE-$inodes.img exists
    local cache=$1 shape img
    shift
    for shape in "$@"; do
        img=$cache/ext4-$shape-$inodes.img
        if [ -f "$img" ]; then echo "reusing $img"; else build_image "$shape" "$img"; fi
    done
}
