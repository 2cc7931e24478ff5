#!/usr/bin/env bash
# bench/run-rw-kill: kill -9 of a whole `usfs run --rw` process tree (the image's owner and
# the writer running inside it) at POINTS (default 50) points per mode, spread over the
# first durable files and the 0-90 ms after them: each image is recovered by e2fsck on a
# copy, by usfs (read-only commands in memory, then a writing command onto the image) and
# by a kernel mount; e2fsck -fn must be clean and nothing the mode promised lost (posix:
# every file whose fsync returned; sync: every file whose writes and close returned, no
# fsync at all). The test suite runs 4 points per mode (crates/cli/tests/run_rw_kill.rs).
# Usage: bench/run-rw-kill.sh   (root: kernel mounts; env POINTS)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/run-rw-kill needs root (kernel mounts)" >&2; exit 1; }
USFS_KILL_POINTS=${POINTS:-50} exec cargo test --release -q -p usfs-cli --test run_rw_kill -- \
    --nocapture --test-threads=1
