//! Hints to the CPU's caches.

/// Asks the CPU to start loading the memory of `value` into its caches, so that a read
/// a little later does not wait for it: for loops over values scattered in the heap.
/// Only a hint; nothing where the CPU has no such instruction.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch reads nothing and cannot fault; `value` is a valid reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
