//! execl(3), execle(3) and execlp(3). glibc's call its internal __execve/__execvpe, which
//! no preload library sees, so the new program would lose the virtual working directory
//! and descriptors. These are C variadic functions, which stable Rust cannot define:
//! their bodies are in csrc/execl.c (built by build.rs), which collects the arguments as
//! glibc does and calls this library's execve and execvp hooks.
//!
//! The C definitions cannot be exported under the public names themselves: rustc links
//! a cdylib with a version script that lists only the Rust crate's exported symbols and
//! makes every other symbol local. So each public name is a naked Rust function that
//! jumps to the C body, with the caller's registers and stack untouched (the variadic
//! arguments stay where the C code reads them).

extern "C" {
    fn usfs_execl();
    fn usfs_execle();
    fn usfs_execlp();
}

/// A naked function `$name` that tail-jumps to the C function `$body`.
macro_rules! jump_to_c {
    ($($(#[$doc:meta])* $name:ident => $body:ident),* $(,)?) => {$(
        $(#[$doc])*
        #[unsafe(naked)]
        #[no_mangle]
        pub(crate) unsafe extern "C" fn $name() {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!("jmp {}", sym $body);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!("b {}", sym $body);
        }
    )*};
}

jump_to_c!(
    /// execl(3): `usfs_execl` in csrc/execl.c.
    execl => usfs_execl,
    /// execle(3): `usfs_execle` in csrc/execl.c.
    execle => usfs_execle,
    /// execlp(3): `usfs_execlp` in csrc/execl.c.
    execlp => usfs_execlp,
);
