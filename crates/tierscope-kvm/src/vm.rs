//! The micro-VM: memory slots, the host-built page tables, and guest-physical access.

use crate::abi::{self, pte};
use crate::mem::Mmap;
use crate::KvmError;
use kvm_bindings::{kvm_userspace_memory_region, KVM_MEM_LOG_DIRTY_PAGES};
use kvm_ioctls::{Kvm, VmFd};
use tierscope_core::{Level, PageSize};

pub const SLOT_LOW: u32 = 0;
pub const SLOT_PT: u32 = 1;
pub const SLOT_HEAP: u32 = 2;
/// A one-page slot the guest never touches: deleting and re-creating it makes KVM zap its
/// shadow page tables (see [`Vm::zap_shadow`]).
pub const SLOT_FLUSH: u32 = 3;

const MIB2: u64 = 2 << 20;

pub fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Where everything lives, guest-physical and guest-virtual.
#[derive(Debug, Clone)]
pub struct Layout {
    pub heap_va: u64,
    pub heap_len: u64,
    /// Per region: offset from `heap_va` and the bytes the workload uses.
    pub regions: Vec<(u64, u64)>,
    pub page_size: PageSize,
    pub block_shift: u32,
    pub truth_gpa: u64,
    pub truth_len: u64,
    pub written_gpa: u64,
    pub written_len: u64,
    pub low_size: u64,
    pub pt_gpa: u64,
    pub pt_size: u64,
    pub heap_gpa: u64,
    /// Bytes of the low slot identity-mapped (2 MiB pages) for the guest: all of it for
    /// the synthetic workload's code, stacks and arrays; the first 2 MiB (GDT) for a
    /// program, whose own image may start at 4 MiB.
    pub low_map_len: u64,
    /// Whether the heap's leaf entries start present (the synthetic workload), or not (a
    /// program: the host sets them as it maps memory, `crate::program`).
    pub leaves_present: bool,
}

impl Layout {
    pub fn new(sizes: &[u64], page_size: PageSize, block_size: u64) -> Result<Layout, KvmError> {
        if !block_size.is_power_of_two() || block_size < 8 {
            return Err(KvmError::Config(format!(
                "block size {block_size} is not a power of two >= 8"
            )));
        }
        let mut regions = vec![];
        let mut off = 0u64;
        for &s in sizes {
            regions.push((off, s));
            off = align_up(off + s, MIB2);
        }
        let heap_len = off.max(MIB2);
        if heap_len > (256u64 << 40) {
            return Err(KvmError::Config(format!(
                "heap of {heap_len} bytes is too large for the KVM engine (max 256 TiB)"
            )));
        }
        Layout::with_heap(abi::HEAP_VA, heap_len, regions, page_size, block_size)
    }

    /// A program's layout: one heap window of `heap_len` bytes at `heap_va` (2 MiB
    /// aligned, at least 2 MiB) holding its image, stack and memory, in 4 KiB pages that
    /// start unmapped; only the first 2 MiB of the low slot are identity-mapped.
    pub fn for_program(heap_va: u64, heap_len: u64, block_size: u64) -> Result<Layout, KvmError> {
        if !heap_va.is_multiple_of(MIB2) || heap_va < MIB2 || !heap_len.is_multiple_of(MIB2) {
            return Err(KvmError::Config(format!(
                "program window {heap_va:#x} + {heap_len:#x} is not 2 MiB aligned above 2 MiB"
            )));
        }
        if !block_size.is_power_of_two() || block_size < 4096 {
            return Err(KvmError::Config(format!(
                "block size {block_size} is not a power of two >= 4096"
            )));
        }
        let mut l = Layout::with_heap(
            heap_va,
            heap_len,
            vec![(0, heap_len)],
            PageSize::Base4K,
            block_size,
        )?;
        l.low_map_len = MIB2;
        l.leaves_present = false;
        Ok(l)
    }

    fn with_heap(
        heap_va: u64,
        heap_len: u64,
        regions: Vec<(u64, u64)>,
        page_size: PageSize,
        block_size: u64,
    ) -> Result<Layout, KvmError> {
        if heap_va + heap_len > (1 << 47) {
            return Err(KvmError::Config(format!(
                "heap of {heap_len} bytes at {heap_va:#x} passes the 47-bit address space"
            )));
        }
        let block_shift = block_size.trailing_zeros();
        let truth_len = align_up(heap_len.div_ceil(block_size), 4096);
        let written_len = align_up(heap_len / 4096, 4096);
        let truth_gpa = abi::ARRAYS_ADDR;
        let written_gpa = align_up(truth_gpa + truth_len, MIB2);
        let low_size = align_up(written_gpa + written_len, MIB2);
        if low_size > abi::LOW_LIMIT {
            return Err(KvmError::Config(format!(
                "the truth arrays need {} MiB of guest memory below 1 GiB: use larger blocks or a smaller heap",
                (low_size - abi::ARRAYS_ADDR) >> 20
            )));
        }
        let spans = |shift: u32| {
            let a = heap_va >> shift;
            let b = (heap_va + heap_len - 1) >> shift;
            b - a + 1
        };
        let mut tables = spans(Level::Pml4.span_shift()) + spans(Level::Pud.span_shift());
        if page_size == PageSize::Base4K {
            tables += spans(Level::Pmd.span_shift());
        }
        let pt_size = align_up(tables * 4096, MIB2);
        let pt_gpa = abi::PT_SLOT_ADDR;
        let heap_gpa = align_up(pt_gpa + pt_size, 1 << 30);
        Ok(Layout {
            heap_va,
            heap_len,
            regions,
            page_size,
            block_shift,
            truth_gpa,
            truth_len,
            written_gpa,
            written_len,
            low_size,
            pt_gpa,
            pt_size,
            heap_gpa,
            low_map_len: abi::LOW_LIMIT,
            leaves_present: true,
        })
    }
}

/// The VM and its memory. Fields drop in order: the VM fd closes before memory is unmapped.
pub struct Vm {
    pub fd: VmFd,
    pub kvm: Kvm,
    flush_page: Mmap,
    pub low: Mmap,
    pub pt: Mmap,
    pub heap: Mmap,
    pub layout: Layout,
    pub dirty_log: bool,
    /// KVM's dirty ring, when logging uses it (else the per-slot bitmap): the rings and
    /// the bytes of each.
    pub rings: Option<(std::sync::Mutex<crate::dirty_ring::Rings>, usize)>,
    /// Leaf page-table pages of the heap, sorted by guest-physical address: (table gpa, VA
    /// of its first entry, bytes per entry).
    pub leaf_tables: Vec<(u64, u64, u64)>,
}

impl Vm {
    fn set_flush_slot(&self, present: bool) -> Result<(), KvmError> {
        let region = kvm_userspace_memory_region {
            slot: SLOT_FLUSH,
            flags: 0,
            guest_phys_addr: self.flush_gpa(),
            memory_size: if present { 4096 } else { 0 },
            userspace_addr: self.flush_page.as_ptr() as u64,
        };
        // SAFETY: the host page is a live mapping owned by `self` (it outlives the VM fd), and
        // the slot's guest-physical page lies above every other slot.
        unsafe { self.fd.set_user_memory_region(region) }
            .map_err(|e| KvmError::kvm("KVM_SET_USER_MEMORY_REGION", e))
    }

    fn flush_gpa(&self) -> u64 {
        align_up(self.layout.heap_gpa + self.layout.heap_len, 1 << 30)
    }

    /// Deletes and re-creates the flush slot. On a shadow-paging host KVM then zaps its
    /// shadow page tables (kvm_arch_flush_shadow_memslot), so the next guest access to every
    /// page walks the guest's tables again and sets their ACCESSED bits: a full flush of the
    /// guest's TLB and paging-structure caches, done by the host.
    pub fn zap_shadow(&self) -> Result<(), KvmError> {
        self.set_flush_slot(false)?;
        self.set_flush_slot(true)
    }

    /// A VM over `layout`; with `dirty_log`, KVM logs writes to the heap and page-table
    /// slots, in its dirty ring when `ring` is asked for and the host offers one.
    pub fn new(layout: Layout, dirty_log: bool, ring: bool) -> Result<Vm, KvmError> {
        let kvm = Kvm::new().map_err(|e| KvmError::Unavailable(format!("/dev/kvm: {e}")))?;
        let fd = kvm
            .create_vm()
            .map_err(|e| KvmError::kvm("KVM_CREATE_VM", e))?;
        let huge = layout.page_size == PageSize::Huge2M;
        let low = Mmap::new(layout.low_size as usize, false).map_err(KvmError::Mmap)?;
        let pt = Mmap::new(layout.pt_size as usize, false).map_err(KvmError::Mmap)?;
        let heap = Mmap::new(layout.heap_len as usize, huge).map_err(KvmError::Mmap)?;
        let flush_page = Mmap::new(4096, false).map_err(KvmError::Mmap)?;
        let vm = Vm {
            fd,
            kvm,
            flush_page,
            low,
            pt,
            heap,
            layout,
            dirty_log,
            rings: None,
            leaf_tables: vec![],
        };
        let mut vm = vm;
        let bytes = crate::dirty_ring::supported_bytes(&vm.fd);
        if dirty_log && ring && bytes > 0 {
            crate::dirty_ring::enable(&vm.fd, bytes)
                .map_err(|e| KvmError::kvm("KVM_ENABLE_CAP(DIRTY_LOG_RING)", e))?;
            vm.rings = Some((Default::default(), bytes));
        }
        let log = if dirty_log {
            KVM_MEM_LOG_DIRTY_PAGES
        } else {
            0
        };
        for (slot, gpa, m, flags) in [
            (SLOT_LOW, 0, &vm.low, 0),
            (SLOT_PT, vm.layout.pt_gpa, &vm.pt, log),
            (SLOT_HEAP, vm.layout.heap_gpa, &vm.heap, log),
        ] {
            let region = kvm_userspace_memory_region {
                slot,
                flags,
                guest_phys_addr: gpa,
                memory_size: m.len() as u64,
                userspace_addr: m.as_ptr() as u64,
            };
            // SAFETY: the host range is a live mapping owned by `vm`, which outlives the VM fd
            // (field order), and the guest-physical ranges of the three slots do not overlap.
            unsafe { vm.fd.set_user_memory_region(region) }
                .map_err(|e| KvmError::kvm("KVM_SET_USER_MEMORY_REGION", e))?;
        }
        vm.set_flush_slot(true)?;
        vm.leaf_tables = vm.build_page_tables();
        Ok(vm)
    }

    pub fn host_mappings(&self) -> Vec<(usize, usize)> {
        [&self.flush_page, &self.low, &self.pt, &self.heap]
            .iter()
            .map(|m| (m.as_ptr() as usize, m.len()))
            .collect()
    }

    /// The mapping and offset holding guest-physical `gpa`.
    pub fn phys(&self, gpa: u64) -> Option<(&Mmap, u64)> {
        let l = &self.layout;
        if gpa < l.low_size {
            Some((&self.low, gpa))
        } else if gpa >= l.pt_gpa && gpa < l.pt_gpa + l.pt_size {
            Some((&self.pt, gpa - l.pt_gpa))
        } else if gpa >= l.heap_gpa && gpa < l.heap_gpa + l.heap_len {
            Some((&self.heap, gpa - l.heap_gpa))
        } else {
            None
        }
    }

    pub fn phys_u64(&self, gpa: u64) -> &std::sync::atomic::AtomicU64 {
        let (m, off) = self
            .phys(gpa)
            .expect("guest-physical address outside the slots");
        m.u64_at(off)
    }

    fn build_page_tables(&self) -> Vec<(u64, u64, u64)> {
        let mut leaves = vec![];
        let low = &self.low;
        let flags = pte::PRESENT | pte::WRITABLE | pte::USER;
        // Low identity map with 2 MiB pages: code, control, stacks, truth arrays (all of
        // the low 1 GiB), or only the GDT's first 2 MiB for a program.
        low.store(abi::PML4_ADDR, abi::PDPT_LOW_ADDR | flags);
        low.store(abi::PDPT_LOW_ADDR, abi::PD_LOW_ADDR | flags);
        for i in 0..self.layout.low_map_len / MIB2 {
            low.store(abi::PD_LOW_ADDR + i * 8, (i * MIB2) | flags | pte::HUGE);
        }

        // The heap: tables allocated from the page-table slot.
        let l = &self.layout;
        let mut next = l.pt_gpa;
        let mut alloc = || {
            let t = next;
            next += 4096;
            t
        };
        let mut table_of = |entry_gpa: u64| -> u64 {
            let e = self.phys_u64(entry_gpa);
            let v = e.load(std::sync::atomic::Ordering::Relaxed);
            if v & pte::PRESENT != 0 {
                v & pte::ADDR_MASK
            } else {
                let t = alloc();
                e.store(t | flags, std::sync::atomic::Ordering::Relaxed);
                t
            }
        };
        let idx = |va: u64, level: Level| (va >> level.span_shift()) & 511;
        let mut off = 0;
        while off < l.heap_len {
            let va = l.heap_va + off;
            let gpa = l.heap_gpa + off;
            let pdpt = table_of(abi::PML4_ADDR + idx(va, Level::Pml4) * 8);
            let pd = table_of(pdpt + idx(va, Level::Pud) * 8);
            let pde = pd + idx(va, Level::Pmd) * 8;
            match l.page_size {
                PageSize::Huge2M => {
                    if leaves.last().map(|&(t, _, _)| t) != Some(pd) {
                        leaves.push((pd, Level::Pud.align_down(va), MIB2));
                    }
                    self.phys_u64(pde).store(
                        gpa | flags | pte::HUGE,
                        std::sync::atomic::Ordering::Relaxed,
                    );
                }
                PageSize::Base4K => {
                    let pt = table_of(pde);
                    leaves.push((pt, va, 4096));
                    if l.leaves_present {
                        for i in 0..512u64 {
                            self.phys_u64(pt + i * 8).store(
                                (gpa + i * 4096) | flags,
                                std::sync::atomic::Ordering::Relaxed,
                            );
                        }
                    }
                }
            }
            off += MIB2;
        }
        assert!(next <= l.pt_gpa + l.pt_size, "page-table slot too small");
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        leaves.sort_unstable();
        leaves
    }

    /// Guest-physical address of the entry at `level` on the walk to `va`, or `None` when the
    /// walk ends above `level` (not present, or a huge leaf above it). Also returns the number
    /// of table levels stepped through before it.
    pub fn entry_gpa(&self, level: Level, va: u64) -> Option<(u64, u64)> {
        if level > Level::Pml4 || va >= (1 << 47) {
            return None;
        }
        let mut table = abi::PML4_ADDR;
        let mut lvl = Level::Pml4;
        let mut steps = 0;
        loop {
            let entry = table + ((va >> lvl.span_shift()) & 511) * 8;
            if lvl == level {
                return Some((entry, steps));
            }
            let v = self
                .phys_u64(entry)
                .load(std::sync::atomic::Ordering::Acquire);
            if v & pte::PRESENT == 0 || (v & pte::HUGE != 0 && lvl != Level::Pml4) {
                return None;
            }
            table = v & pte::ADDR_MASK;
            lvl = lvl.down()?;
            steps += 1;
        }
    }

    /// Maps the dirty ring of a new vCPU (when the VM logs into rings).
    pub fn add_ring(&self, vcpu: &kvm_ioctls::VcpuFd) -> Result<(), KvmError> {
        if let Some((rings, bytes)) = &self.rings {
            rings
                .lock()
                .expect("rings")
                .add(vcpu, *bytes)
                .map_err(KvmError::Mmap)?;
        }
        Ok(())
    }

    /// Harvests every dirty ring (a vCPU whose ring is full waits for this).
    pub fn harvest_rings(&self) -> Result<(), KvmError> {
        if let Some((rings, _)) = &self.rings {
            rings
                .lock()
                .expect("rings")
                .harvest(&self.fd)
                .map_err(|e| KvmError::Guest(format!("KVM_RESET_DIRTY_RINGS: {e}")))?;
        }
        Ok(())
    }

    /// The 4 KiB pages of `slot` written since the last call (page offsets in the slot,
    /// sorted): from the dirty ring, or the slot's bitmap (which the call resets).
    pub fn dirty_pages(&self, slot: u32) -> Result<Vec<u64>, KvmError> {
        if let Some((rings, _)) = &self.rings {
            let mut r = rings.lock().expect("rings");
            r.harvest(&self.fd)
                .map_err(|e| KvmError::Guest(format!("KVM_RESET_DIRTY_RINGS: {e}")))?;
            return Ok(r.take(slot));
        }
        let mut out = vec![];
        for (i, &w) in self.dirty_bitmap(slot)?.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                out.push(i as u64 * 64 + u64::from(w.trailing_zeros()));
                w &= w - 1;
            }
        }
        Ok(out)
    }

    /// Reads the dirty log of `slot` (and resets it): a bitmap of 4 KiB guest pages.
    fn dirty_bitmap(&self, slot: u32) -> Result<Vec<u64>, KvmError> {
        let size = match slot {
            SLOT_PT => self.pt.len(),
            SLOT_HEAP => self.heap.len(),
            _ => self.low.len(),
        };
        self.fd
            .get_dirty_log(slot, size)
            .map_err(|e| KvmError::kvm("KVM_GET_DIRTY_LOG", e))
    }
}
