#!/usr/bin/env bash
# bench/write-paths: writing into an ext4 image, usfs against the kernel and fuse2fs.
# Every method starts from a copy of the same fresh image (mke2fs -t ext4 with its
# defaults, MKFS_OPTS added; IMG_MB big), made again for each method and each group of
# workloads, and the methods run interleaved: each round (REPS, default 3) runs every
# method once, in an order rotated every round, so a drift of the shared machine spreads
# over all of them. Cells show the median over the rounds and the spread (max - min) / 2
# as a percentage of it. Methods (METHODS):
#   kernel       kernel ext4 on a loop device (data=ordered, journaled)
#   usfs         usfs mount -o rw,threads=$USFS_THREADS          (kernel page cache)
#   usfs-direct  usfs mount -o rw,direct_io,threads=$USFS_THREADS (every write a request)
#   usfs-dev     usfs mount -o rw,no_uring,threads=$USFS_THREADS: requests over /dev/fuse
#                even with io_uring on (not in the default METHODS)
# FUSE over io_uring is switched on for the bench (bench/uring.sh; URING=0 does not): the
# usfs methods then take requests on per-CPU io_uring queues.
#   fuse2fs      Debian's fuse2fs 1.47 (never writes its journal: a crash may lose data)
#   usfs-run     usfs run --rw: no mount; each command runs under `usfs run --rw -m
#                MNT=IMG`, whose end (commit and close of the image) is in the timing
# Workloads (WORKLOADS):
#   data  bench/writer.c: THREADS (1 4) threads, each its own file, write BS (BSS: 1K 4K
#         64K 1M) blocks: append (O_APPEND to a new file), fill (a new file written at
#         random block offsets, each block once: allocating writes into holes), over-seq
#         and over-rand (overwriting a file made beforehand, not timed); SIZE_MB (64) in
#         all per case, at most SECS (1) seconds of writing, then fsync of every file; the
#         fsync variants fsync after each write, FSYNC_MB (4) at most, FSYNC_SECS (0.5).
#         The time runs from the first write to the last fsync's return: the data is
#         durable (in the image file, on disk) when it stops. MB/s (MiB/s). The cases run
#         on one mount per method; the files of append/fill are removed (not timed) after
#         each case.
#   meta  on a fresh image: create FILES (100000) files of FILE_SIZE (100) bytes in
#         DIRS (10) directories (bench/mkfiles.c); untar a tar of TREE (/usr/share/doc);
#         rm -rf of that tree; git clone --no-hardlinks of a bare clone of this repository.
#         Each is one mount: the timed part is the workload plus the unmount (the kernel
#         syncs at umount; usfs umount waits until the volume is committed and closed; for
#         fuse2fs, until its process has flushed and exited). Seconds and operations/s
#         (files, archive entries, removed entries; clone: files checked out).
#   edit  the same tree (EDIT_DIRS (40) directories of EDIT_FILES (40) files, 0.5-32 KiB:
#         e2tools cannot grow a directory past one block, "No free space in the
#         directory", so /usr/share/doc is out of its reach) copied into a fresh unmounted
#         image by `usfs cp -r`, by e2tools as a user scripts it (e2mkdir per directory,
#         one e2cp per directory with all its files) and by one `debugfs -w -f CMDS`
#         (mkdir and write lines); seconds.
# After every mount cycle and edit, `e2fsck -fn` must be clean, and the image's used
# inodes must be what the workload made (e2fsck's summary): a broken write is reported
# loudly (BROKEN in the table, exit 1), never as a speed; a case that fails (an error
# from the writer, mount or tool) is FAIL in the table and exits 1 too.
# Targets checked: usfs mount -o rw (both modes) vs fuse2fs >= 3x on every metadata
# workload and >= 2x on data writes; usfs vs kernel on data writes >= 0.5x; usfs cp -r vs
# e2cp >= 10x; usfs run --rw (issue 16, the SplitFS and PLFS seeds): >= 2x fuse2fs on
# every data case, >= 5x usfs -o direct_io on 4K appends, >= 1x the kernel on buffered 4K
# appends and overwrites, and metadata workloads in <= 1.15x the kernel's time.
# Running DAMON page-out kdamonds are paused meanwhile (bench/damon.sh; KEEP_DAMON=1).
# QUICK=1: one round, 4K and 1M only, 20000 files (a smoke run of a few minutes).
# Usage: bench/write-paths.sh   (root: loop and FUSE mounts; env SIZE_MB, FSYNC_MB, SECS,
# FSYNC_SECS, REPS, METHODS, WORKLOADS, BSS, THREADS, MODES, FILES, DIRS, FILE_SIZE, TREE,
# EDIT_DIRS, EDIT_FILES, IMG_MB (2048), MKFS_OPTS, USFS_THREADS (2), QUICK, BENCH_DIR,
# USFS_BIN: another usfs binary to compare builds)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/write-paths needs root (loop and FUSE mounts)" >&2; exit 1; }
quick=${QUICK:-0}
reps=${REPS:-$([ "$quick" = 1 ] && echo 1 || echo 3)}
size_mb=${SIZE_MB:-64}
fsync_mb=${FSYNC_MB:-4}
secs=${SECS:-1}
fsync_secs=${FSYNC_SECS:-0.5}
bss=${BSS:-$([ "$quick" = 1 ] && echo "4096 1048576" || echo "1024 4096 65536 1048576")}
thread_counts=${THREADS:-"1 4"}
modes=${MODES:-"append fill over-seq over-rand"}
files=${FILES:-$([ "$quick" = 1 ] && echo 20000 || echo 100000)}
dirs=${DIRS:-10}
file_size=${FILE_SIZE:-100}
tree=${TREE:-/usr/share/doc}
edit_dirs=${EDIT_DIRS:-40}
edit_files=${EDIT_FILES:-40}
img_mb=${IMG_MB:-2048}
mkfs_opts=${MKFS_OPTS:-}
usfs_threads=${USFS_THREADS:-2}
methods=${METHODS:-"kernel usfs usfs-direct fuse2fs usfs-run"}
workloads=${WORKLOADS:-"data meta edit"}
if [ -z "${USFS_BIN:-}" ]; then nice -n 10 cargo build --release -q -p usfs-cli; fi
usfs=${USFS_BIN:-$PWD/target/release/usfs}
for t in fuse2fs e2cp e2mkdir debugfs e2fsck mke2fs gcc git bc; do
    command -v "$t" >/dev/null || { echo "bench/write-paths: $t missing (apt-get install fuse2fs e2tools e2fsprogs gcc git bc)" >&2; exit 1; }
done
work=${BENCH_DIR:-$(mktemp -d /tmp/usfs-bench-write-paths.XXXXXX)}
mkdir -p "$work"
mnt=$work/mnt
img=$work/img
mkdir -p "$mnt"
. bench/damon.sh
. bench/uring.sh
loopdev=
fuse_pid=
cleanup() {
    if mountpoint -q "$mnt"; then umount "$mnt" 2>/dev/null || umount -l "$mnt" || true; fi
    [ -n "$fuse_pid" ] && wait "$fuse_pid" 2>/dev/null || true
    [ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null || true
    rm -rf "$work"
    damon_restore
    uring_restore
}
trap cleanup EXIT
trap 'exit 130' INT TERM
damon_pause
uring_on

gcc -O2 -Wall -pthread -o "$work/writer" bench/writer.c
gcc -O2 -Wall -o "$work/mkfiles" bench/mkfiles.c

# The fresh image every method gets a copy of.
truncate -s "${img_mb}M" "$work/base.img"
# shellcheck disable=SC2086 # MKFS_OPTS is a list of options
mke2fs -q -F -t ext4 $mkfs_opts "$work/base.img"
echo "image: ${img_mb} MiB, mke2fs -t ext4 ${mkfs_opts:-(defaults)}: $(dumpe2fs -h "$work/base.img" 2>/dev/null | sed -n 's/^Block size: *//p')-byte blocks"
fresh_image() { cp --sparse=always "$work/base.img" "$img"; }

now() { date +%s.%N; }
elapsed() { printf "%.3f" "$(echo "$(now) - $1" | bc -l)"; }

# Runs a command of method $1 on the image: under `usfs run --rw` for usfs-run, else as
# it is (on the mount at $mnt).
in_method() { # method cmd...
    local m=$1
    shift
    if [ "$m" = usfs-run ]; then "$usfs" run --rw -m "$mnt=$img" -- "$@"; else "$@"; fi
}

mount_method() { # method -> 0 when mounted
    case $1 in
        usfs-run) ;;
        kernel)
            loopdev=$(losetup --find --show "$img")
            mount -t ext4 "$loopdev" "$mnt"
            ;;
        usfs) "$usfs" mount -o "rw,threads=$usfs_threads" "$img" "$mnt" ;;
        usfs-direct) "$usfs" mount -o "rw,direct_io,threads=$usfs_threads" "$img" "$mnt" ;;
        usfs-dev) "$usfs" mount -o "rw,no_uring,threads=$usfs_threads" "$img" "$mnt" ;;
        fuse2fs)
            # Foreground in the background: unmount_method waits for the process, which
            # flushes the image and exits after the kernel lets the mount go.
            fuse2fs "$img" "$mnt" -f >"$work/fuse2fs.log" 2>&1 &
            fuse_pid=$!
            for _ in $(seq 100); do mountpoint -q "$mnt" && return 0; sleep 0.05; done
            echo "fuse2fs did not mount: $(cat "$work/fuse2fs.log")" >&2
            return 1
            ;;
    esac
}

unmount_method() { # method: returns once the image is durable and closed
    case $1 in
        usfs-run) ;;
        kernel)
            umount "$mnt"
            losetup -d "$loopdev"
            loopdev=
            ;;
        usfs | usfs-direct | usfs-dev) "$usfs" umount "$mnt" ;;
        fuse2fs)
            umount "$mnt"
            wait "$fuse_pid" || true
            fuse_pid=
            ;;
    esac
}

declare -A vals # key -> one figure per round ("FAIL" when the case failed)
failures=0
add() {
    vals[$1]="${vals[$1]:-} $2"
    [ "$2" != FAIL ] || failures=$((failures + 1))
}

# e2fsck -fn must be clean; with a second argument, the used-inode count must equal it.
# Prints the used-inode count. On a failure it says so loudly, adds a line to
# $work/broken (it runs in a subshell) and returns 1.
check_image() { # label [expected-used-inodes]
    local out used
    if ! out=$(e2fsck -fn "$img" 2>&1); then
        {
            echo "!!! BROKEN: e2fsck -fn failed after $1:"
            head -40 <<<"$out" | sed 's/^/!!!   /'
        } >&2
        echo "$1" >>"$work/broken"
        return 1
    fi
    used=$(sed -n 's|.*: \([0-9]*\)/[0-9]* files.*|\1|p' <<<"$out")
    if [ -n "${2:-}" ] && [ "$used" != "$2" ]; then
        echo "!!! BROKEN: after $1 the image has $used inodes in use, the workload made $2 (lost or extra files; e2fsck clean)" >&2
        echo "$1" >>"$work/broken"
        return 1
    fi
    echo "$used"
}

case_list() { # every data case: mode,bs,threads,fsync
    local mode bs t f
    for f in 0 1; do for mode in $modes; do for t in $thread_counts; do for bs in $bss; do
        echo "$mode,$bs,$t,$f"
    done; done; done; done
}

data_method() { # method: one mount, every case, one figure each
    local m=$1 c mode bs t f bytes lim r ok=1 t_
    fresh_image
    if ! mount_method "$m"; then
        for c in $(case_list); do add "data,$m,$c" FAIL; done
        return
    fi
    for t_ in $thread_counts; do # the files over-* overwrite (not timed)
        in_method "$m" "$work/writer" "$mnt" "o$t_" prep 1048576 "$t_" $((size_mb << 20)) 0 0 || ok=
    done
    for c in $(case_list); do
        IFS=, read -r mode bs t f <<<"$c"
        bytes=$((size_mb << 20)) lim=$secs
        [ "$f" = 1 ] && bytes=$((fsync_mb << 20)) lim=$fsync_secs
        local name=n
        case $mode in over-*) name=o$t ;; esac
        if [ -n "$ok" ] && r=$(in_method "$m" "$work/writer" "$mnt" "$name" "$mode" "$bs" "$t" "$bytes" "$lim" "$f" 2>"$work/err"); then
            add "data,$m,$c" "${r%% *}"
        else
            echo "  $m $c failed: ${ok:+$(head -c 300 "$work/err")}${ok:-the files to overwrite could not be made}" >&2
            add "data,$m,$c" FAIL
        fi
        if [ "$name" = n ]; then in_method "$m" sh -c 'rm -f "$1"/n.*' _ "$mnt" || true; fi
    done
    unmount_method "$m"
    if ! check_image "$m data writes" >/dev/null; then
        for c in $(case_list); do vals[data,$m,$c]="${vals[data,$m,$c]% *} BROKEN"; done
    fi
}

# A timed metadata step: the command, then the unmount, on a mounted image.
meta_step() { # method key expected-inodes-or-"" cmd...
    local m=$1 key=$2 expect=$3 t0 s used
    shift 3
    t0=$(now)
    if ! in_method "$m" "$@" >"$work/out" 2>&1; then
        echo "  $m $key failed: $(tail -c 300 "$work/out")" >&2
        unmount_method "$m" || true
        add "meta,$m,$key" FAIL
        return 1
    fi
    unmount_method "$m"
    s=$(elapsed "$t0")
    if ! used=$(check_image "$m $key" "$expect"); then
        add "meta,$m,$key" BROKEN
        return 1
    fi
    add "meta,$m,$key" "$s"
    echo "$used" >"$work/used"
}

meta_method() {
    local m=$1 base
    fresh_image
    base=$(check_image "fresh image") || return
    mount_method "$m" || { add "meta,$m,create" FAIL; return; }
    meta_step "$m" create $((base + 1 + dirs + files)) \
        bash -c 'mkdir "$1/c" && "$2" "$1/c" "$3" "$4" "$5"' _ "$mnt" "$work/mkfiles" "$files" "$dirs" "$file_size" || return
    base=$(cat "$work/used")
    mount_method "$m" || return
    meta_step "$m" untar $((base + tree_inodes)) tar -xf "$work/tree.tar" -C "$mnt" || return
    mount_method "$m" || return
    meta_step "$m" rm "$base" rm -rf "$mnt/$(basename "$tree")" || return
    mount_method "$m" || return
    meta_step "$m" clone "" git clone -q --no-hardlinks "$work/src.git" "$mnt/clone" || return
}

edit_run() { # tool
    case $1 in
        usfs-cp) "$usfs" cp -r "$work/etree" "$img:/dst" >/dev/null ;;
        e2cp)
            # As a user scripts it: e2mkdir for each directory (top-down), then one e2cp
            # per directory with all its files.
            (
                cd "$work/etree"
                e2mkdir "$img:/dst"
                find . -mindepth 1 -type d | sed 's|^\./||' | while read -r d; do e2mkdir "$img:/dst/$d"; done
                find . -mindepth 1 -type d | sed 's|^\./||' | while read -r d; do
                    # shellcheck disable=SC2046 # names are fNNN: no spaces
                    e2cp $(find "$d" -maxdepth 1 -type f) "$img:/dst/$d"
                done
            )
            ;;
        debugfs) debugfs -w -f "$work/debugfs.cmds" "$img" >/dev/null 2>"$work/err" ;;
    esac
}

edit_tool() { # tool
    local t0 s
    fresh_image
    t0=$(now)
    if ! edit_run "$1" 2>"$work/err"; then
        echo "  $1 failed: $(tail -c 300 "$work/err")" >&2
        add "edit,$1" FAIL
        return
    fi
    s=$(elapsed "$t0")
    if check_image "$1" "$edit_inodes" >/dev/null; then add "edit,$1" "$s"; else add "edit,$1" BROKEN; fi
}

# Inputs of meta and edit, made once.
if [[ " $workloads " = *" meta "* ]]; then
    tar -cf "$work/tree.tar" -C "$(dirname "$tree")" "$(basename "$tree")"
    tree_inodes=$(find "$tree" -printf '%i\n' | sort -u | wc -l)
    tree_entries=$(tar -tf "$work/tree.tar" | wc -l)
    git clone -q --bare --no-hardlinks . "$work/src.git"
    clone_files=$(git -C "$work/src.git" ls-tree -r HEAD | wc -l)
    echo "meta: $files files in $dirs directories; $tree: $tree_entries entries, $(du -sm "$work/tree.tar" | cut -f1) MB tar; clone: $clone_files files"
fi
if [[ " $workloads " = *" edit "* ]]; then
    mkdir -p "$work/etree"
    : >"$work/debugfs.cmds"
    echo "mkdir /dst" >>"$work/debugfs.cmds"
    for d in $(seq -w 0 $((edit_dirs - 1))); do
        mkdir "$work/etree/d$d"
        echo "mkdir /dst/d$d" >>"$work/debugfs.cmds"
        for f in $(seq -w 0 $((edit_files - 1))); do
            head -c $(((10#$d * edit_files + 10#$f) * 7919 % 64 * 512 + 512)) /dev/urandom >"$work/etree/d$d/f$f"
            echo "write $work/etree/d$d/f$f /dst/d$d/f$f" >>"$work/debugfs.cmds"
        done
    done
    fresh_image
    edit_inodes=$(($(check_image "fresh image") + 1 + edit_dirs + edit_dirs * edit_files))
    echo "edit: $edit_dirs directories x $edit_files files, $(du -sm "$work/etree" | cut -f1) MB"
fi

# Rounds: every method once per round, the order rotated.
read -ra mlist <<<"$methods"
for round in $(seq "$reps"); do
    n=${#mlist[@]}
    order=()
    for i in $(seq 0 $((n - 1))); do order+=("${mlist[$(((i + round - 1) % n))]}"); done
    for m in "${order[@]}"; do
        if [[ " $workloads " = *" data "* ]]; then data_method "$m" || true; echo "round $round: $m data"; fi
        if [[ " $workloads " = *" meta "* ]]; then meta_method "$m" || true; echo "round $round: $m meta"; fi
    done
    if [[ " $workloads " = *" edit "* ]]; then
        for tool in usfs-cp e2cp debugfs; do edit_tool "$tool"; done
        echo "round $round: edit"
    fi
done

# Median and spread of a list ("FAIL"/"BROKEN" anywhere wins).
median() {
    local xs=$1
    case " $xs " in *" BROKEN "*) echo BROKEN; return ;; *" FAIL "*) echo FAIL; return ;; esac
    tr ' ' '\n' <<<"$xs" | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'
}
spread() { # percent: (max - min) / 2 / median
    local xs=$1 med
    med=$(median "$xs")
    case $med in BROKEN | FAIL | -) echo ""; return ;; esac
    [ "$(echo "$med > 0" | bc)" = 1 ] || { echo ""; return; }
    tr ' ' '\n' <<<"$xs" | sed '/^$/d' | sort -g | awk -v m="$med" 'NR==1{lo=$1} {hi=$1} END {if (NR < 2) print ""; else printf "±%d%%", (hi-lo)/2/m*100 + 0.5}'
}
cell() { local md sp; md=$(median "$1"); sp=$(spread "$1"); printf '%s%s' "$md" "${sp:+ $sp}"; }
num() { [[ $1 =~ ^[0-9.]+$ ]] && [ "$(echo "$1 > 0" | bc)" = 1 ]; }
ratio() { if num "${1:-}" && num "${2:-}"; then echo "scale=2; $1 / $2" | bc -l; else echo -; fi; }

missed=0
met=0
row_missed=""
check_target() { # what ratio min [quiet: only add to $row_missed]
    [ "$2" = - ] && return
    if [ "$(echo "$2 < $3" | bc)" = 1 ]; then
        if [ -n "${4:-}" ]; then row_missed+=" $1"; else echo "  target missed: $1 $2 < $3"; fi
        missed=$((missed + 1))
    else
        met=$((met + 1))
    fi
}
has() { [[ " $methods " = *" $1 "* ]]; }
usfs_methods=""
for m in usfs usfs-direct; do has "$m" && usfs_methods+=" $m"; done

if [[ " $workloads " = *" data "* ]]; then
    printf '\ndata writes: MB/s (MiB/s, durable: the final fsync included), median of %s, ± half the spread\n' "$reps"
    printf '%-9s %7s %3s %5s' mode bs thr fsync
    for m in $methods; do printf ' %15s' "$m"; done
    for m in $usfs_methods; do printf ' %13s %13s' "${m/usfs/u}/f2fs" "${m/usfs/u}/kern"; done
    printf '  (targets: u*/f2fs >= 2, u*/kern >= 0.5; u = usfs, u-direct = usfs -o direct_io)\n'
    for c in $(case_list); do
        IFS=, read -r mode bs t f <<<"$c"
        printf '%-9s %7s %3s %5s' "$mode" "$bs" "$t" "$([ "$f" = 1 ] && echo each || echo end)"
        for m in $methods; do printf ' %15s' "$(cell "${vals[data,$m,$c]:-}")"; done
        line=()
        failed=()
        for m in $usfs_methods; do
            u=$(median "${vals[data,$m,$c]:-}")
            rf=$(ratio "$u" "$(median "${vals[data,fuse2fs,$c]:-}")")
            rk=$(ratio "$u" "$(median "${vals[data,kernel,$c]:-}")")
            printf ' %13s %13s' "$rf" "$rk"
            line+=("${m/usfs/u}/f2fs $rf 2" "${m/usfs/u}/kern $rk 0.5")
            case $u in FAIL | BROKEN) failed+=("$m:$u") ;; esac
        done
        row_missed=""
        for l in "${failed[@]}"; do
            row_missed+=" $l"
            missed=$((missed + 1))
        done
        for l in "${line[@]}"; do
            read -r w r x <<<"$l"
            check_target "$w" "$r" "$x" quiet
        done
        if has usfs-run; then
            u=$(median "${vals[data,usfs-run,$c]:-}")
            rf=$(ratio "$u" "$(median "${vals[data,fuse2fs,$c]:-}")")
            rk=$(ratio "$u" "$(median "${vals[data,kernel,$c]:-}")")
            rd=$(ratio "$u" "$(median "${vals[data,usfs-direct,$c]:-}")")
            printf '  run: /f2fs %s /kern %s /direct %s' "$rf" "$rk" "$rd"
            check_target run/f2fs "$rf" 2 quiet
            if [ "$bs" = 4096 ] && [ "$f" = 0 ] && [ "$mode" != fill ]; then check_target run/kern "$rk" 1 quiet; fi
            if [ "$bs" = 4096 ] && [ "$mode" = append ]; then check_target run/direct "$rd" 5 quiet; fi
        fi
        [ -n "$row_missed" ] && printf '  missed:%s' "$row_missed"
        echo
    done
fi

if [[ " $workloads " = *" meta "* ]]; then
    printf '\nmetadata: seconds (workload + unmount), median of %s, ± half the spread; ops/s of the median\n' "$reps"
    printf '%-7s %8s' work ops
    for m in $methods; do printf ' %15s %9s' "$m" ops/s; done
    for m in $usfs_methods; do printf ' %13s' "${m/usfs/u}/f2fs"; done
    echo
    for w in create untar rm clone; do
        case $w in create) ops=$files ;; untar | rm) ops=$tree_entries ;; clone) ops=$clone_files ;; esac
        printf '%-7s %8s' "$w" "$ops"
        for m in $methods; do
            md=$(median "${vals[meta,$m,$w]:-}")
            printf ' %15s %9s' "$(cell "${vals[meta,$m,$w]:-}")" "$(num "$md" && echo "$ops / $md" | bc || echo -)"
        done
        rs=()
        for m in $usfs_methods; do
            r=$(ratio "$(median "${vals[meta,fuse2fs,$w]:-}")" "$(median "${vals[meta,$m,$w]:-}")")
            printf ' %13s' "$r"
            rs+=("$m $r")
        done
        echo
        if has usfs-run; then
            r=$(ratio "$(median "${vals[meta,kernel,$w]:-}")" "$(median "${vals[meta,usfs-run,$w]:-}")")
            echo "  usfs run --rw speed vs the kernel on $w: ${r}x (target >= 0.87: at most 1.15x its time)"
            check_target "usfs run --rw vs kernel speed on $w" "$r" 0.87
        fi
        for l in "${rs[@]}"; do
            read -r m r <<<"$l"
            check_target "$m/fuse2fs speed on $w" "$r" 3
            case $(median "${vals[meta,$m,$w]:-}") in FAIL | BROKEN) echo "  $m $w: failed (counted as a missed target)"; missed=$((missed + 1)) ;; esac
        done
    done
fi

if [[ " $workloads " = *" edit "* ]]; then
    printf '\nediting an unmounted image: seconds, median of %s, ± half the spread (%s files in %s directories)\n' "$reps" $((edit_dirs * edit_files)) "$edit_dirs"
    for tool in usfs-cp e2cp debugfs; do printf '%-8s %15s\n' "$tool" "$(cell "${vals[edit,$tool]:-}")"; done
    u=$(median "${vals[edit,usfs-cp]:-}")
    re=$(ratio "$(median "${vals[edit,e2cp]:-}")" "$u")
    rd=$(ratio "$(median "${vals[edit,debugfs]:-}")" "$u")
    echo "usfs cp -r speed vs e2cp: ${re}x, vs debugfs -f: ${rd}x"
    check_target "usfs cp -r vs e2cp" "$re" 10
    case $u in FAIL | BROKEN) echo "  usfs cp -r: $u (counted as a missed target)"; missed=$((missed + 1)) ;; esac
fi

broken=0
if [ -f "$work/broken" ]; then broken=$(wc -l <"$work/broken"); fi
echo
echo "targets met: $met, missed: $missed; failed cases: $failures; broken images: $broken"
if [ "$broken" != 0 ]; then
    echo "!!! $broken write(s) left a broken image (see the BROKEN lines above): their speed is not reported" >&2
fi
[ "$broken" = 0 ] && [ "$failures" = 0 ]
