//! `usfs mount -o rw` over /dev/fuse (`no_uring`: the same checks over io_uring are in
//! rw_fuse_uring.rs) against the kernel: see common/fuse_rw.rs.

mod common;

use common::fuse_rw::*;
use common::*;

#[test]
fn fuse_rw_matches_the_kernel_ext4() {
    if ready("fuse_rw ext4") {
        check_layout(
            "ext4",
            &["-t", "ext4", "-b", "4096"],
            "rw,no_uring,threads=2",
        );
    }
}

#[test]
fn fuse_rw_matches_the_kernel_direct_io_1k_nocsum() {
    if ready("fuse_rw 1k") {
        check_layout(
            "1k",
            &["-t", "ext4", "-b", "1024", "-O", "^metadata_csum"],
            "rw,no_uring,direct_io",
        );
    }
}

#[test]
fn fuse_rw_matches_the_kernel_ext3() {
    if ready("fuse_rw ext3") {
        check_layout("ext3", &["-t", "ext3"], "rw,no_uring");
    }
}

#[test]
fn fuse_rw_exerciser_matches_its_model() {
    if need_root("fuse_rw exerciser") && need_tool("fuse_rw exerciser", "mke2fs") {
        exercise("1k", &["-t", "ext4"], "rw,no_uring");
    }
}

#[test]
fn fuse_rw_exerciser_matches_its_model_2_server_threads() {
    if need_root("fuse_rw exerciser threads") && need_tool("fuse_rw exerciser threads", "mke2fs") {
        exercise("threads", &["-t", "ext4"], "rw,no_uring,threads=2");
    }
}

#[test]
fn fuse_rw_exerciser_matches_its_model_4k() {
    if need_root("fuse_rw exerciser 4k") && need_tool("fuse_rw exerciser 4k", "mke2fs") {
        exercise("4k", &["-t", "ext4", "-b", "4096"], "rw,no_uring");
    }
}
