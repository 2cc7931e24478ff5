//! The C boundary: the real libc functions (dlsym RTLD_NEXT), errno, the reentrancy guard
//! and the panic barrier every hook runs behind.
//!
//! Never unwinding into C: every hook body runs inside `catch_unwind` ([`hooked`]); a
//! panic becomes a failed call with errno EIO (the host program carries on). The panic
//! message is not printed (the default hook would write to stderr from inside a hook);
//! calls into libc from a hook use the real functions, never our own symbols, and the
//! reentrancy guard sends any call Rust's standard library makes from inside a hook (it
//! calls `open64`, `read`, `statx`... through the PLT, which lands in this library)
//! straight to libc.

use crate::state::{state, State};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Looks up the next definition of a libc symbol once and caches it: `real!(name: type)`
/// gives `Option<type>`.
macro_rules! real {
    ($name:ident : $ty:ty) => {{
        static P: std::sync::atomic::AtomicPtr<libc::c_void> =
            std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());
        let mut p = P.load(std::sync::atomic::Ordering::Relaxed);
        if p.is_null() {
            // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name has no other
            // preconditions; it may return null, which is checked below.
            p = unsafe {
                libc::dlsym(
                    libc::RTLD_NEXT,
                    concat!(stringify!($name), "\0").as_ptr().cast(),
                )
            };
            P.store(p, std::sync::atomic::Ordering::Relaxed);
        }
        if p.is_null() {
            None
        } else {
            // SAFETY: the symbol is the libc function of that name, whose C prototype
            // `$ty` spells out.
            Some(unsafe { std::mem::transmute::<*mut libc::c_void, $ty>(p) })
        }
    }};
}
pub(crate) use real;

/// Calls the real function, or fails with ENOSYS if libc lacks it:
/// `call_real!(name: type, failure value; args...)`.
macro_rules! call_real {
    ($name:ident : $ty:ty, $fail:expr; $($arg:expr),* $(,)?) => {{
        match $crate::sys::real!($name: $ty) {
            // SAFETY: the arguments are the caller's, passed on unchanged (or replaced by
            // values of the same C types); the caller's contract is libc's.
            Some(f) => unsafe { f($($arg),*) },
            None => {
                $crate::sys::set_errno(libc::ENOSYS);
                $fail
            }
        }
    }};
}
pub(crate) use call_real;

thread_local! {
    /// Set while this thread runs a hook body.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// The entries of a NULL-terminated array of C strings (argv, envp), up to the NULL; a
/// null array has none.
///
/// # Safety
/// `arr` is null or a NULL-terminated array that stays valid while iterating.
pub(crate) unsafe fn c_array<'a>(
    arr: *const *const libc::c_char,
) -> impl Iterator<Item = *const libc::c_char> + 'a {
    let mut i = 0;
    std::iter::from_fn(move || {
        if arr.is_null() {
            return None;
        }
        // SAFETY: the caller's NULL-terminated array; we stop at the NULL.
        let p = unsafe { *arr.add(i) };
        i += 1;
        (!p.is_null()).then_some(p)
    })
}

/// This thread's errno.
pub(crate) fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Sets errno.
pub(crate) fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// Runs a hook body: `None` (call the real function) when this thread is already inside a
/// hook, when there are no mounts, or when `f` says the call is not ours. A panic in `f`
/// gives `panic_value` with errno EIO instead of unwinding into C.
pub(crate) fn hooked<R>(panic_value: R, f: impl FnOnce(&'static State) -> Option<R>) -> Option<R> {
    let entered = IN_HOOK
        .try_with(|c| {
            if c.get() {
                false
            } else {
                c.set(true);
                true
            }
        })
        .unwrap_or(false);
    if !entered {
        return None;
    }
    let r = catch_unwind(AssertUnwindSafe(|| match state() {
        Some(st) => f(st),
        None => None,
    }));
    let _ = IN_HOOK.try_with(|c| c.set(false));
    match r {
        Ok(v) => v,
        Err(_) => {
            set_errno(libc::EIO);
            Some(panic_value)
        }
    }
}

/// A C return value from a `Result`: the value, or -1 with errno set.
pub(crate) fn ret<T: From<i8>>(r: Result<T, i32>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            set_errno(e);
            T::from(-1)
        }
    }
}

/// Silences the default panic message (it would write to the host program's stderr from
/// inside a hook); panics are reported as EIO by [`hooked`].
pub(crate) fn quiet_panics() {
    std::panic::set_hook(Box::new(|_| {}));
}
