#!/usr/bin/env bash
# The built-in example: generate a sample tree, build an ext4 image of it with mke2fs -d,
# then show what usfs sees: info, a listing, a check (beside e2fsck's summary line), and an
# export compared with the source tree. Then usfs builds images itself: the same tree with
# `usfs mkfs.ext4 -d` (checked by e2fsck and usfs fsck) and `usfs mkfs.erofs -zlz4hc`
# (checked by fsck.erofs), and an unmodified `ls` reads the EROFS image through `usfs run`.
# Last, the editing commands change the mke2fs image in place, and e2fsck checks it.
# Needs e2fsprogs and erofs-utils (installed if missing and root).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v mke2fs >/dev/null && command -v fsck.erofs >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq e2fsprogs erofs-utils; }
cargo build --release -q --workspace
work=$(mktemp -d /tmp/usfs-example.XXXXXX)
trap 'rm -rf "$work"' EXIT
bin=target/release
$bin/usfs-gentree --seed 1 --profile small --times-32bit --no-hardlinked-symlinks "$work/src" >/dev/null
mke2fs -q -F -t ext4 -d "$work/src" "$work/example.img" 1G
# sed, not head: head exits after its lines and, under pipefail, usfs's SIGPIPE would
# fail the script depending on timing.
echo "== usfs info"; $bin/usfs info "$work/example.img" | sed -n 1,12p
echo "== usfs ls -l /"; $bin/usfs ls -l "$work/example.img" /
echo "== usfs fsck -n (and e2fsck -fn's summary line for comparison)"
$bin/usfs fsck -n "$work/example.img" | tail -1
e2fsck -fn "$work/example.img" 2>/dev/null | tail -1
echo "== usfs export, then compare with the source tree"
$bin/usfs export "$work/example.img" "$work/out"
$bin/usfs-treecmp --time-granularity s --no-atime --ignore lost+found --ignore-root-attrs "$work/src" "$work/out"
echo "== usfs mkfs.ext4 -d (no mke2fs), checked by e2fsck -fn and usfs fsck -n"
$bin/usfs mkfs.ext4 -q -d "$work/src" "$work/usfs-ext4.img" 1G
e2fsck -fn "$work/usfs-ext4.img" 2>/dev/null | tail -1
$bin/usfs fsck -n "$work/usfs-ext4.img" | tail -1
echo "== usfs mkfs.erofs -zlz4hc, checked by fsck.erofs"
$bin/usfs mkfs.erofs -zlz4hc "$work/example.erofs" "$work/src" | tail -2
fsck.erofs "$work/example.erofs" >/dev/null && echo "fsck.erofs: no errors"
echo "== ls -la through usfs run (no mount, no FUSE)"
$bin/usfs run --mount "$work/mnt=$work/example.erofs" -- ls -la "$work/mnt" | sed -n 1,8p
echo "== change the ext4 image in place (journaled, no mount): usfs mkdir, cp, mv, rm"
$bin/usfs mkdir -p "$work/example.img:/added/deep"
$bin/usfs cp -r "$work/src" "$work/example.img:/added/deep/copy"
$bin/usfs mv "$work/example.img:/added/deep" "$work/example.img:/added/moved"
$bin/usfs rm -r "$work/example.img:/added/moved/copy"
$bin/usfs cp scripts/example.sh "$work/example.img:/added/example.sh"
$bin/usfs ls -l "$work/example.img" /added
cmp <($bin/usfs cat "$work/example.img" /added/example.sh) scripts/example.sh && echo "copied file reads back identical"
e2fsck -fn "$work/example.img" 2>/dev/null | tail -1
