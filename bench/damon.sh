# Sourced by the benches. A DAMON page-out scheme (kdamond, as on the machine these
# figures come from) evicts page-cache pages it samples as idle, at random: parts of a
# file read a moment ago included, so a "warm" run re-reads them from disk (a usfs
# mkfs.ext4 -d run re-read 50-100 MB of its just-warmed source). damon_pause switches
# running kdamonds off (as root) for the bench, so every method really starts from the
# cache state the bench sets up; damon_restore (call it from the EXIT trap) switches them
# back on. KEEP_DAMON=1 leaves them alone.
damon_paused=()
damon_pause() {
    [ -z "${KEEP_DAMON:-}" ] && [ -w /sys/kernel/mm/damon/admin ] || return 0
    local st
    for st in /sys/kernel/mm/damon/admin/kdamonds/*/state; do
        [ "$(cat "$st" 2>/dev/null)" = on ] || continue
        echo off >"$st" && damon_paused+=("$st")
    done
    [ ${#damon_paused[@]} = 0 ] || echo "DAMON page-out paused during the bench (KEEP_DAMON=1 keeps it): ${damon_paused[*]}"
}
damon_restore() {
    local st
    for st in "${damon_paused[@]}"; do
        echo on >"$st" || echo "could not switch $st back on" >&2
    done
    damon_paused=()
}
