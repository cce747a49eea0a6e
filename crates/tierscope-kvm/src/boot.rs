//! Booting the micro-VM: checking the parameters against what the guest supports,
//! backing the heap, writing the GDT, the guest code and the control page (the workload's
//! phases and patterns, in the layout guest/abi.h defines), and creating and running the
//! vCPUs.

use crate::abi::{self, ctrl, phase, vcpu as vc};
use crate::engine::{KvmParams, Shared};
use crate::vm::Vm;
use crate::KvmError;
use kvm_bindings::kvm_segment;
use kvm_ioctls::{VcpuExit, VcpuFd};
use std::sync::atomic::Ordering;
use tierscope_core::workload::{AccessMode, PatternKind};

/// Whether the guest can run `params` (vCPUs, phases, patterns, truth counters).
pub(crate) fn check_params(params: &KvmParams) -> Result<(), KvmError> {
    crate::kvm_available().map_err(KvmError::Unavailable)?;
    let w = params.workload;
    w.validate()
        .map_err(|e| KvmError::Config(format!("workload: {e}")))?;
    if params.threads == 0 || params.threads > abi::MAX_VCPUS {
        return Err(KvmError::Config(format!(
            "threads = {} (the KVM engine runs 1..={} vCPUs)",
            params.threads,
            abi::MAX_VCPUS
        )));
    }
    if w.phases.len() > abi::MAX_PHASES
        || w.phases
            .iter()
            .any(|p| p.patterns.len() > abi::MAX_PATTERNS)
    {
        return Err(KvmError::Config(format!(
            "the KVM guest runs at most {} phases of {} patterns",
            abi::MAX_PHASES,
            abi::MAX_PATTERNS
        )));
    }
    if !(1..=255).contains(&params.truth_threshold) {
        return Err(KvmError::Config(format!(
            "truth threshold {} (the KVM engine counts 1..=255 accesses per block)",
            params.truth_threshold
        )));
    }
    Ok(())
}

/// Backs the heap (when asked) and writes everything the guest reads at start-up.
pub(crate) fn program(vm: &Vm, params: &KvmParams) -> Result<(), KvmError> {
    let w = params.workload;
    let l = &vm.layout;
    if params.options.prefault {
        for (r, &(off, len)) in l.regions.iter().enumerate() {
            let used = w.phases.iter().any(|ph| {
                ph.patterns
                    .iter()
                    .any(|pat| w.region_index(&pat.region) == Some(r))
            });
            if used {
                vm.heap.populate(off, len).map_err(KvmError::Mmap)?;
            }
        }
    }

    // Low memory: GDT, guest code, control page.
    let low = &vm.low;
    write_gdt(low);
    low.write_bytes(abi::CODE_ADDR, abi::GUEST_BIN);
    let c = |off: u64, v: u64| crate::ctrl::store(low, off, v);
    c(ctrl::HEAP_VA, l.heap_va);
    c(ctrl::HEAP_LEN, l.heap_len);
    c(ctrl::TRUTH_VA, l.truth_gpa);
    c(ctrl::BLOCK_SHIFT, u64::from(l.block_shift));
    c(ctrl::COUNT_MODE, u64::from(params.truth_threshold > 1));
    c(
        ctrl::WRITTEN_VA,
        if params.written_truth {
            l.written_gpa
        } else {
            0
        },
    );
    c(ctrl::BATCH, params.options.batch.max(1));
    c(ctrl::NPHASES, w.phases.len() as u64);
    c(ctrl::SEED, params.seed);
    c(ctrl::NVCPUS, params.threads as u64);
    for (p, ph) in w.phases.iter().enumerate() {
        let base = abi::CTRL_ADDR + ctrl::PHASES + p as u64 * ctrl::PHASE_SIZE;
        let mut cum = 0u64;
        for (i, pat) in ph.patterns.iter().enumerate() {
            let r = w.region_index(&pat.region).expect("validated");
            let (off, len) = l.regions[r];
            cum += u64::from(pat.weight);
            let pb = base + phase::PAT + i as u64 * phase::PAT_SIZE;
            low.store(pb + phase::P_OFF, off);
            low.store(pb + phase::P_LEN, (len & !7).max(8));
            low.store(pb + phase::P_STRIDE, pat.stride.0.max(1));
            let kind = match pat.kind {
                PatternKind::Random => abi::KIND_RANDOM,
                PatternKind::Sequential => abi::KIND_SEQUENTIAL,
            };
            let mode = match pat.mode {
                AccessMode::Ro => abi::MODE_RO,
                AccessMode::Wo => abi::MODE_WO,
                AccessMode::Rw => abi::MODE_RW,
            };
            low.store(
                pb + phase::P_KIND,
                u64::from(kind) | (u64::from(mode) << 32),
            );
            low.store(pb + phase::P_CUM_WEIGHT, cum);
        }
        low.store(base + phase::NPAT, ph.patterns.len() as u64);
        low.store(base + phase::TOTAL_WEIGHT, cum);
    }
    let unpaced = params.paced_rate() <= 0.0;
    for v in 0..params.threads {
        let budget = if unpaced { u64::MAX } else { 4096 };
        low.store(crate::ctrl::vcpu_addr(v, vc::BUDGET), budget);
    }
    c(ctrl::MAGIC, abi::MAGIC);
    Ok(())
}

/// The GDT: 0x10 kernel code, 0x18 kernel data, 0x23 user code (32-bit), 0x2b user data,
/// 0x33 user code (64-bit).
pub(crate) fn write_gdt(low: &crate::mem::Mmap) {
    low.store(abi::GDT_ADDR + 0x10, 0x00af_9b00_0000_ffff);
    low.store(abi::GDT_ADDR + 0x18, 0x00cf_9300_0000_ffff);
    low.store(abi::GDT_ADDR + 0x20, 0x00cf_fb00_0000_ffff);
    low.store(abi::GDT_ADDR + 0x28, 0x00cf_f300_0000_ffff);
    low.store(abi::GDT_ADDR + 0x30, 0x00af_fb00_0000_ffff);
}

/// Where a vCPU starts: instruction and stack pointers, `rdi`, and CR4 bits beyond PAE.
pub(crate) struct Entry {
    pub rip: u64,
    pub rsp: u64,
    pub rdi: u64,
    pub cr4_extra: u64,
}

fn seg(selector: u16, code: bool) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xfffff,
        selector,
        type_: if code { 11 } else { 3 },
        present: 1,
        dpl: 0,
        db: u8::from(!code),
        s: 1,
        l: u8::from(code),
        g: 1,
        avl: 0,
        unusable: 0,
        padding: 0,
    }
}

/// A vCPU of the synthetic workload's guest: its code, its own stack, `rdi` = its id.
pub(crate) fn setup_vcpu(vm: &Vm, id: usize) -> Result<VcpuFd, KvmError> {
    let entry = Entry {
        rip: abi::CODE_ADDR,
        rsp: abi::STACK_BASE + (id as u64 + 1) * abi::STACK_SIZE,
        rdi: id as u64,
        cr4_extra: 0,
    };
    create_vcpu(vm, id, &entry)
}

/// Creates vCPU `id` in 64-bit user mode at `entry`.
pub(crate) fn create_vcpu(vm: &Vm, id: usize, entry: &Entry) -> Result<VcpuFd, KvmError> {
    let vcpu = vm
        .fd
        .create_vcpu(id as u64)
        .map_err(|e| KvmError::kvm("KVM_CREATE_VCPU", e))?;
    if let Ok(cpuid) = vm
        .kvm
        .get_supported_cpuid(kvm_bindings::KVM_MAX_CPUID_ENTRIES)
    {
        // Best effort: some hypervisors want a CPUID table before the first run.
        let _ = vcpu.set_cpuid2(&cpuid);
    }
    vm.add_ring(&vcpu)?;
    let mut s = vcpu
        .get_sregs()
        .map_err(|e| KvmError::kvm("KVM_GET_SREGS", e))?;
    // The workload runs in user mode (see guest.c); IOPL 3 lets it use port I/O.
    let mut code = seg(abi::USER_CS, true);
    code.dpl = 3;
    let mut data = seg(abi::USER_DS, false);
    data.dpl = 3;
    s.cs = code;
    s.ds = data;
    s.es = data;
    s.fs = data;
    s.gs = data;
    s.ss = data;
    s.gdt.base = abi::GDT_ADDR;
    s.gdt.limit = 7 * 8 - 1;
    s.ldt = kvm_segment::default();
    s.tr.present = 1;
    s.tr.type_ = 11;
    s.cr3 = abi::PML4_ADDR;
    s.cr4 = (1 << 5) | entry.cr4_extra; // PAE
                                        // PE | MP | ET | NE | WP | AM | PG
    s.cr0 = 1 | (1 << 1) | (1 << 4) | (1 << 5) | (1 << 16) | (1 << 18) | (1 << 31);
    s.efer = 1 | (1 << 8) | (1 << 10) | (1 << 11); // SCE | LME | LMA | NXE
    vcpu.set_sregs(&s)
        .map_err(|e| KvmError::kvm("KVM_SET_SREGS", e))?;
    let regs = kvm_bindings::kvm_regs {
        rip: entry.rip,
        rsp: entry.rsp,
        rdi: entry.rdi,
        rflags: 0x3202, // IOPL 3, IF
        ..Default::default()
    };
    vcpu.set_regs(&regs)
        .map_err(|e| KvmError::kvm("KVM_SET_REGS", e))?;
    Ok(vcpu)
}

pub(crate) fn run_vcpu(shared: &Shared, mut vcpu: VcpuFd, id: usize) {
    let err = loop {
        match vcpu.run() {
            Ok(VcpuExit::IoOut(abi::PORT_EXIT, _)) | Ok(VcpuExit::Hlt) => break None,
            Ok(VcpuExit::IoOut(abi::PORT_DEBUG, _)) => {}
            Ok(VcpuExit::Unsupported(crate::dirty_ring::EXIT_DIRTY_RING_FULL)) => {
                if let Err(e) = shared.vm.harvest_rings() {
                    break Some(format!("vCPU {id}: {e}"));
                }
            }
            Ok(other) => {
                let what = format!("{other:?}");
                let regs = vcpu.get_regs().map(|r| (r.rip, r.rsp, r.rax, r.rcx)).ok();
                let cs = vcpu.get_sregs().map(|s| (s.cs.selector, s.cr3)).ok();
                break Some(format!(
                    "vCPU {id}: unexpected exit {what} (rip, rsp, rax, rcx = {regs:x?}; cs, cr3 = {cs:x?})"
                ));
            }
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                if shared.stop.load(Ordering::Acquire) {
                    break None;
                }
            }
            Err(e) => break Some(format!("vCPU {id}: KVM_RUN: {e}")),
        }
    };
    if let Some(e) = err {
        if !shared.stop.load(Ordering::Acquire) {
            shared.errors.lock().expect("errors").push(e);
        }
    }
}
