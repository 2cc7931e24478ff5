//! Builds csrc/execl.c: execl, execle and execlp are C variadic functions, which stable
//! Rust cannot define (see the file's header and h_execl.rs).

fn main() {
    println!("cargo:rerun-if-changed=csrc/execl.c");
    cc::Build::new().file("csrc/execl.c").compile("usfs_execl");
}
