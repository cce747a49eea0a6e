//! KVM's dirty ring (KVM_CAP_DIRTY_LOG_RING), the write log where the host offers it: per
//! vCPU, a ring of `kvm_dirty_gfn {flags, slot, offset}` entries shared with the kernel,
//! one per 4 KiB guest page on its first write since the page was last reset. The host
//! harvests entries in order (flag DIRTY -> RESET), then KVM_RESET_DIRTY_RINGS write-protects
//! the harvested pages again, so their next write is logged again: the same "written since
//! the last harvest" as the bitmap (KVM_GET_DIRTY_LOG), without scanning a bitmap of the
//! whole slot. A full ring stops its vCPU (KVM_EXIT_DIRTY_RING_FULL) until harvested.
//!
//! Harvests take every slot's entries at once; each slot's pages wait in `pending` until
//! that slot is asked for (the heap's and the page tables' are read separately).

use kvm_bindings::kvm_dirty_gfn;
use kvm_ioctls::{VcpuFd, VmFd};
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};

const KVM_DIRTY_LOG_PAGE_OFFSET: i64 = 64;
const KVM_DIRTY_GFN_F_DIRTY: u32 = 1;
const KVM_DIRTY_GFN_F_RESET: u32 = 2;
/// `_IO(KVMIO, 0xc7)`: not wrapped by kvm-ioctls.
const KVM_RESET_DIRTY_RINGS: libc::c_ulong = 0xaec7;
/// `KVM_EXIT_DIRTY_RING_FULL`, which kvm-ioctls reports as `VcpuExit::Unsupported(31)`.
pub const EXIT_DIRTY_RING_FULL: u32 = 31;
/// Pending pages of one slot past which duplicates are dropped.
const PENDING_COMPACT: usize = 1 << 16;
/// Bytes of ring per vCPU we ask for (capped by what the host offers): 65,536 entries.
const RING_BYTES: usize = 1 << 20;

/// One vCPU's ring, mapped from its fd.
struct Ring {
    ptr: *mut kvm_dirty_gfn,
    entries: u32,
    next: u32,
}

// SAFETY: the mapping is owned by the ring; the kernel and this process share it through
// the `flags` word, which is accessed atomically.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `Rings::add`.
        unsafe {
            libc::munmap(
                self.ptr.cast(),
                self.entries as usize * std::mem::size_of::<kvm_dirty_gfn>(),
            )
        };
    }
}

/// Every vCPU's ring and the pages harvested but not yet taken, by slot.
#[derive(Default)]
pub struct Rings {
    rings: Vec<Ring>,
    pending: BTreeMap<u32, Vec<u64>>,
}

/// The ring size to enable on `vm` (0: the host offers none).
pub fn supported_bytes(vm: &VmFd) -> usize {
    let offered = vm.check_extension_int(kvm_ioctls::Cap::DirtyLogRing);
    if offered <= 0 {
        0
    } else {
        (offered as usize).min(RING_BYTES)
    }
}

/// Enables rings of `bytes` on `vm` (before any vCPU exists).
pub fn enable(vm: &VmFd, bytes: usize) -> Result<(), kvm_ioctls::Error> {
    let cap = kvm_bindings::kvm_enable_cap {
        cap: kvm_bindings::KVM_CAP_DIRTY_LOG_RING,
        args: [bytes as u64, 0, 0, 0],
        ..Default::default()
    };
    vm.enable_cap(&cap)
}

impl Rings {
    /// Maps the ring of a new vCPU.
    pub fn add(&mut self, vcpu: &VcpuFd, bytes: usize) -> std::io::Result<()> {
        // SAFETY: page size query, no memory involved.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        // SAFETY: maps the vCPU's ring (a kernel-provided shared mapping at the documented
        // page offset); the result is checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                vcpu.as_raw_fd(),
                KVM_DIRTY_LOG_PAGE_OFFSET * page,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        self.rings.push(Ring {
            ptr: ptr.cast(),
            entries: (bytes / std::mem::size_of::<kvm_dirty_gfn>()) as u32,
            next: 0,
        });
        Ok(())
    }

    /// Moves every ring's dirty entries to `pending` and resets them in KVM.
    pub fn harvest(&mut self, vm: &VmFd) -> Result<(), std::io::Error> {
        let mut any = false;
        for r in &mut self.rings {
            loop {
                // SAFETY: `next % entries` indexes the mapped ring.
                let e = unsafe { r.ptr.add((r.next % r.entries) as usize) };
                // SAFETY: `flags` is the first u32 of the entry, shared with the kernel,
                // which publishes the entry by setting DIRTY last (release).
                let flags = unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*e).flags)) };
                if flags.load(Ordering::Acquire) & KVM_DIRTY_GFN_F_DIRTY == 0 {
                    break;
                }
                // SAFETY: the entry is published (DIRTY seen above).
                let (slot, offset) = unsafe { ((*e).slot, (*e).offset) };
                let v = self.pending.entry(slot).or_default();
                v.push(offset);
                if v.len() >= PENDING_COMPACT && v.len().is_power_of_two() {
                    // A slot nobody takes (the page tables without read detection) stays
                    // bounded by its page count.
                    v.sort_unstable();
                    v.dedup();
                }
                flags.store(KVM_DIRTY_GFN_F_RESET, Ordering::Release);
                r.next = r.next.wrapping_add(1);
                any = true;
            }
        }
        if any {
            // SAFETY: a VM ioctl without arguments.
            let rc = unsafe { libc::ioctl(vm.as_raw_fd(), KVM_RESET_DIRTY_RINGS) };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// The 4 KiB pages of `slot` harvested so far (offsets in pages), sorted, deduplicated.
    pub fn take(&mut self, slot: u32) -> Vec<u64> {
        let mut v = self.pending.remove(&slot).unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    }
}
