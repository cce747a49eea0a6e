//! Software prefetch: the exact engine's accesses are independent of each other's
//! results until they reach shared state, so the lines an access will need are requested
//! several accesses ahead (the hot loop is otherwise bound by cache misses).

/// Hints the CPU to load the cache line holding the start of `r` into all cache levels.
/// No architectural effect; a no-op off x86-64.
#[inline(always)]
pub fn line<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86-64 baseline, and a prefetch is a hint with no
        // architectural effect (it cannot fault); the pointer comes from a live reference.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(r as *const T as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
