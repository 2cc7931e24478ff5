# Sourced by the benches that mount through FUSE. The kernel offers FUSE over io_uring
# only when fuse's enable_uring parameter is on (off by default); usfs mount then serves
# each CPU's requests on that CPU (crates/fuse/src/transport/uring.rs). uring_on switches
# the parameter on (as root) for the bench, uring_restore (from the EXIT trap) puts the
# old value back. URING=0 leaves it alone (usfs then serves over /dev/fuse). The
# parameter is read at mount time and changes nothing for fuse2fs or squashfuse (libfuse
# 2 never asks for io_uring).
uring_param=/sys/module/fuse/parameters/enable_uring
uring_saved=
uring_on() {
    [ "${URING:-1}" = 1 ] && [ -w "$uring_param" ] || { echo "FUSE over io_uring: $(cat "$uring_param" 2>/dev/null || echo unavailable) (left as is)"; return 0; }
    uring_saved=$(cat "$uring_param")
    echo Y >"$uring_param" && echo "FUSE over io_uring on during the bench (fuse enable_uring: ${uring_saved} -> Y; URING=0 leaves it alone)"
}
uring_restore() {
    [ -n "$uring_saved" ] && echo "$uring_saved" >"$uring_param"
    uring_saved=
}
