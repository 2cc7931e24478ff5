#!/usr/bin/env bash
# bench/crash-rw: the full crash-state sweep of usfs's read-write ext4 volume (the test
# suite runs a bounded sample: crates/testkit/tests/crash_rw.rs). Every one-operation
# workload of B3's seq-1 (create, mkdir, symlink, write, append, truncate, fallocate
# modes, link, unlink, rmdir, rename of files and directories, setxattr, removexattr, each
# followed by fsync, fdatasync, sync or nothing) plus SEQ2 random two-operation and SEQ3
# three-operation workloads, on 1 KiB and 4 KiB block images made by mke2fs. Each run is
# recorded by the crash-recording device; each crash state (every flush point, PER_EPOCH
# evenly spaced prefixes and PER_EPOCH random reordered subsets of the writes of every
# epoch) is recovered by usfs (read-write open and close), by e2fsck -E journal_only,
# and every KERNEL_EVERY-th by a kernel mount (root): e2fsck -fn must be clean, the three
# views equal, and the tree the model's after a step at or after the last one whose
# fsync/fdatasync/sync had returned, every file byte one that some step wrote there.
# Prints the counts of workloads and states and every failure; exits 1 on a failure.
# Usage: bench/crash-rw.sh   (env SEQ2 (default 150), SEQ3 (150), SEED (1), PER_EPOCH (3),
# KERNEL_EVERY (25), THREADS (2))
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p usfs-testkit --bin usfs-crashsweep
exec target/release/usfs-crashsweep --seq1 --seq2 "${SEQ2:-150}" --seq3 "${SEQ3:-150}" \
    --seed "${SEED:-1}" --per-epoch "${PER_EPOCH:-3}" --kernel-every "${KERNEL_EVERY:-25}" \
    -j "${THREADS:-2}"
