//! Guest memory: anonymous, lazily backed host mappings, one per KVM memory slot.

use std::sync::atomic::{AtomicU64, Ordering};

/// One anonymous `MAP_NORESERVE` mapping. Pages are backed only once touched.
pub struct Mmap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; all concurrent access from the
// host goes through atomics (the guest writes it concurrently, like another core would).
unsafe impl Send for Mmap {}
// SAFETY: as above; `&Mmap` only hands out atomic accessors and raw pointers.
unsafe impl Sync for Mmap {}

impl Mmap {
    pub fn new(len: usize, huge: bool) -> std::io::Result<Mmap> {
        // SAFETY: an anonymous private mapping at an address the kernel chooses; no existing
        // memory is affected. The result is checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        if huge {
            // SAFETY: advice on the mapping just created, of exactly its length; failure is
            // harmless (the host then backs the guest's 2 MiB pages with 4 KiB pages).
            unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) };
        }
        Ok(Mmap {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Backs `[off, off + len)` with host memory now (MADV_POPULATE_WRITE), so that the
    /// guest's first touch costs a shadow-page fault only, not a host page allocation.
    pub fn populate(&self, off: u64, len: u64) -> std::io::Result<()> {
        let start = off & !4095;
        let end = (off + len).div_ceil(4096) * 4096;
        assert!(end as usize <= self.len);
        // SAFETY: advice on a page-aligned range inside this mapping; it only allocates the
        // pages (as zero-filled memory), which does not change their contents.
        let r = unsafe {
            libc::madvise(
                self.ptr.add(start as usize).cast(),
                (end - start) as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Drops the contents of `[off, off + len)` (page-aligned): the host frees the pages
    /// and the next touch reads zeros (an unmapped and re-mapped anonymous page).
    pub fn discard(&self, off: u64, len: u64) {
        assert!(
            off.is_multiple_of(4096)
                && len.is_multiple_of(4096)
                && (off + len) as usize <= self.len
        );
        // SAFETY: advice on a page-aligned range inside this mapping; MADV_DONTNEED only
        // replaces its contents with zero pages, which every reader (atomics, the guest)
        // tolerates.
        unsafe {
            libc::madvise(
                self.ptr.add(off as usize).cast(),
                len as usize,
                libc::MADV_DONTNEED,
            )
        };
    }

    /// The byte at `off` (in bounds).
    pub fn byte(&self, off: u64) -> u8 {
        assert!((off as usize) < self.len);
        // SAFETY: in bounds (checked above); a racy read of guest memory is a plain byte.
        unsafe { self.ptr.add(off as usize).read_volatile() }
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The 8-byte word at `off` (8-aligned, in bounds), as an atomic.
    pub fn u64_at(&self, off: u64) -> &AtomicU64 {
        assert!(
            off & 7 == 0 && off + 8 <= self.len as u64,
            "offset {off:#x}"
        );
        // SAFETY: in bounds and aligned (checked above; the mapping is page-aligned); the
        // memory lives as long as `self`; every host access to it is atomic.
        unsafe { AtomicU64::from_ptr(self.ptr.add(off as usize).cast()) }
    }

    pub fn load(&self, off: u64) -> u64 {
        self.u64_at(off).load(Ordering::Acquire)
    }

    pub fn store(&self, off: u64, v: u64) {
        self.u64_at(off).store(v, Ordering::Release)
    }

    /// Copies `data` to `off` (before the guest runs).
    pub fn write_bytes(&self, off: u64, data: &[u8]) {
        let end = (off as usize).checked_add(data.len());
        assert!(
            end.is_some_and(|e| e <= self.len),
            "write past guest memory"
        );
        // SAFETY: in bounds (checked above, without wrapping); the destination is guest memory that no vCPU
        // is running on yet, and `data` cannot overlap a fresh anonymous mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off as usize), data.len())
        }
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; no reference into it outlives
        // `self` (accessors borrow `self`), and the VM using it has been closed first.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
