//! Software prefetch: the exact engine's accesses are independent of each other's
//! results until they reach shared state, so the lines an access will need are requested
//! several accesses ahead (the hot loop is otherwise bound by cache misses). And the
//! largest array read at random by every access is asked to be backed by 2 MiB pages.

/// Hints the CPU to load the cache line holding the start of `r` into all cache levels.
/// No architectural effect; a no-op off x86-64.
#[inline(always)]
pub fn line<T>(r: &T) {
    address(r as *const T as usize);
}

/// [`line`] for the line at `addr`, which need not belong to anything: a guessed address
/// (a hash table's slot, computed from its layout) costs at worst a useless load.
#[inline(always)]
pub fn address(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: SSE is part of the x86-64 baseline, and a prefetch is a hint with no
        // architectural effect: it cannot fault, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(addr as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Asks the kernel to back the unused capacity of `v` with transparent huge pages (its
/// 2 MiB-aligned part; a hint, ignored where unsupported). Call it before that capacity
/// is written: a page already touched stays a 4 KiB page (until khugepaged, if ever).
pub fn advise_huge<T>(v: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let base = v.as_ptr() as usize;
        let start = (base + v.len() * std::mem::size_of::<T>()).next_multiple_of(HUGE);
        let end = (base + v.capacity() * std::mem::size_of::<T>()) & !(HUGE - 1);
        if end > start {
            // SAFETY: the range lies inside `v`'s allocation, and MADV_HUGEPAGE changes
            // no contents (only how the pages are backed).
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = v;
}
