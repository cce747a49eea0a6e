//! [`KvmEngine`]: the workload runs in the guest in real time; monitors read and clear the
//! real ACCESSED and DIRTY bits of the page tables the host built.

use crate::abi::{self, ctrl, phase, pte, vcpu as vc};
use crate::vm::{Layout, Vm, SLOT_HEAP, SLOT_PT};
use crate::KvmError;
use kvm_bindings::kvm_segment;
use kvm_ioctls::{VcpuExit, VcpuFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tierscope_core::workload::{AccessMode, PatternKind, WorkloadSpec};
use tierscope_core::{
    AddrRange, BlockIntervals, CostCounters, Engine, Flush, Level, Machine, MachineStats, Mapping,
    PageSize, Paging,
};

/// What the runner tells the KVM engine.
#[derive(Debug, Clone)]
pub struct KvmParams<'a> {
    pub workload: &'a WorkloadSpec,
    /// Accesses per second per thread; 0 = as fast as the guest can.
    pub rate: f64,
    /// Workload threads = vCPUs (1..=64).
    pub threads: usize,
    pub seed: u64,
    /// Truth block size in bytes (a power of two).
    pub block_size: u64,
    /// Minimum accesses in a window for a block to be hot (1..=255; counts saturate at 255).
    pub truth_threshold: u32,
    pub page_size: PageSize,
    /// Enables KVM dirty logging on the heap and page-table slots (needed by the pml
    /// monitor and [`KvmEngine::harvest_dirty`]); it slows guest writes (write faults).
    pub dirty_log: bool,
    /// The guest keeps its own map of heap pages written ([`KvmEngine::take_written_pages`]).
    pub track_written: bool,
    /// Accesses per pattern choice (masim: 131072).
    pub batch: u64,
    /// Backs the regions some pattern accesses with host memory before the guest starts
    /// (regions no pattern touches stay unbacked). Without it the guest's first touch of
    /// each page costs a host page allocation inside a shadow-paging fault (about 35 us
    /// here: a 1 GiB hot region takes ~9 s to warm up).
    pub prefault: bool,
    /// Executes [`Machine::flush`] requests (a host-side zap of KVM's shadow page tables,
    /// milliseconds each plus guest re-faults); when false they are only counted.
    pub execute_flushes: bool,
}

impl<'a> KvmParams<'a> {
    pub fn new(workload: &'a WorkloadSpec) -> Self {
        KvmParams {
            workload,
            rate: 0.0,
            threads: 1,
            seed: 1,
            block_size: 2 << 20,
            truth_threshold: 1,
            page_size: PageSize::Base4K,
            dirty_log: false,
            track_written: false,
            batch: 131_072,
            prefault: true,
            execute_flushes: true,
        }
    }
}

/// Cumulative guest-side counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestCounters {
    /// Accesses done, per vCPU.
    pub done: Vec<u64>,
    /// Accesses per pattern slot of the phases run, per vCPU.
    pub per_pattern: Vec<[u64; abi::MAX_PATTERNS]>,
    /// Flush requests the guest served by INVLPG / by a CR3 reload.
    pub flushes_page: u64,
    pub flushes_full: u64,
}

struct Shared {
    vm: Arc<Vm>,
    stats: Mutex<Vec<crate::stats::StatsFd>>,
    stop: AtomicBool,
    errors: Mutex<Vec<String>>,
}

/// A running micro-VM with the workload. Dropping it stops the guest, joins its threads and
/// frees the VM and its memory.
pub struct KvmEngine {
    shared: Arc<Shared>,
    vcpus: Vec<JoinHandle<()>>,
    pacer: Option<JoinHandle<()>>,
    start: Instant,
    mappings: Vec<Mapping>,
    heap: AddrRange,
    cost: CostCounters,
    threshold: u8,
    threads: usize,
    flush_seq: u64,
    host_flushes: u64,
    execute_flushes: bool,
    id: u64,
    written_tracked: bool,
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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

fn setup_vcpu(vm: &Vm, id: usize) -> Result<VcpuFd, KvmError> {
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
    s.cr4 = 1 << 5; // PAE
                    // PE | MP | ET | NE | WP | AM | PG
    s.cr0 = 1 | (1 << 1) | (1 << 4) | (1 << 5) | (1 << 16) | (1 << 18) | (1 << 31);
    s.efer = 1 | (1 << 8) | (1 << 10) | (1 << 11); // SCE | LME | LMA | NXE
    vcpu.set_sregs(&s)
        .map_err(|e| KvmError::kvm("KVM_SET_SREGS", e))?;
    let regs = kvm_bindings::kvm_regs {
        rip: abi::CODE_ADDR,
        rsp: abi::STACK_BASE + (id as u64 + 1) * abi::STACK_SIZE,
        rdi: id as u64,
        rflags: 0x3202, // IOPL 3, IF
        ..Default::default()
    };
    vcpu.set_regs(&regs)
        .map_err(|e| KvmError::kvm("KVM_SET_REGS", e))?;
    Ok(vcpu)
}

fn run_vcpu(shared: &Shared, mut vcpu: VcpuFd, id: usize) {
    let err = loop {
        match vcpu.run() {
            Ok(VcpuExit::IoOut(abi::PORT_EXIT, _)) | Ok(VcpuExit::Hlt) => break None,
            Ok(VcpuExit::IoOut(abi::PORT_DEBUG, _)) => {}
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

/// Phase boundaries, cumulative, in ns.
fn phase_ends(w: &WorkloadSpec) -> Vec<u64> {
    let mut t = 0;
    w.phases
        .iter()
        .map(|p| {
            t += p.duration.0;
            t
        })
        .collect()
}

fn phase_at(ends: &[u64], t: u64) -> u64 {
    let total = *ends.last().unwrap_or(&1);
    let t = t % total.max(1);
    ends.iter().position(|&e| t < e).unwrap_or(0) as u64
}

impl KvmEngine {
    pub fn new(params: &KvmParams) -> Result<KvmEngine, KvmError> {
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
        let sizes: Vec<u64> = w.regions.iter().map(|r| r.size.0).collect();
        let layout = Layout::new(&sizes, params.page_size, params.block_size)?;
        let vm = Vm::new(layout, params.dirty_log)?;
        let l = vm.layout.clone();
        if params.prefault {
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
        // GDT: 0x10 kernel code, 0x18 kernel data, 0x23 user code (32-bit), 0x2b user
        // data, 0x33 user code (64-bit).
        low.store(abi::GDT_ADDR + 0x10, 0x00af_9b00_0000_ffff);
        low.store(abi::GDT_ADDR + 0x18, 0x00cf_9300_0000_ffff);
        low.store(abi::GDT_ADDR + 0x20, 0x00cf_fb00_0000_ffff);
        low.store(abi::GDT_ADDR + 0x28, 0x00cf_f300_0000_ffff);
        low.store(abi::GDT_ADDR + 0x30, 0x00af_fb00_0000_ffff);
        low.write_bytes(abi::CODE_ADDR, abi::GUEST_BIN);
        let c = |off: u64, v: u64| low.store(abi::CTRL_ADDR + off, v);
        c(ctrl::HEAP_VA, l.heap_va);
        c(ctrl::HEAP_LEN, l.heap_len);
        c(ctrl::TRUTH_VA, l.truth_gpa);
        c(ctrl::BLOCK_SHIFT, u64::from(l.block_shift));
        c(ctrl::COUNT_MODE, u64::from(params.truth_threshold > 1));
        c(
            ctrl::WRITTEN_VA,
            if params.track_written {
                l.written_gpa
            } else {
                0
            },
        );
        c(ctrl::BATCH, params.batch.max(1));
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
        let unpaced = params.rate <= 0.0;
        for v in 0..params.threads {
            let vb = abi::CTRL_ADDR + ctrl::VCPU + v as u64 * ctrl::VCPU_SIZE;
            low.store(vb + vc::BUDGET, if unpaced { u64::MAX } else { 4096 });
        }
        c(ctrl::MAGIC, abi::MAGIC);

        let shared = Arc::new(Shared {
            vm: Arc::new(vm),
            stop: AtomicBool::new(false),
            stats: Mutex::new(vec![]),
            errors: Mutex::new(vec![]),
        });
        let mut vcpu_fds = vec![];
        for id in 0..params.threads {
            let fd = setup_vcpu(&shared.vm, id)?;
            if let Some(s) = crate::stats::StatsFd::open(&fd) {
                shared.stats.lock().expect("stats").push(s);
            }
            vcpu_fds.push(fd);
        }

        let mut mappings = vec![];
        for (r, &(off, len)) in w.regions.iter().zip(&l.regions) {
            let start = l.heap_va + off;
            let end = start + vm_round(len, params.page_size);
            mappings.push(Mapping {
                range: AddrRange::new(start, end),
                page_size: params.page_size,
                name: format!("heap:{}", r.name),
            });
        }
        let mut engine = KvmEngine {
            shared: shared.clone(),
            vcpus: vec![],
            pacer: None,
            start: Instant::now(),
            mappings,
            heap: AddrRange::new(l.heap_va, l.heap_va + l.heap_len),
            cost: CostCounters::default(),
            threshold: params.truth_threshold as u8,
            threads: params.threads,
            flush_seq: 0,
            host_flushes: 0,
            execute_flushes: params.execute_flushes,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            written_tracked: params.track_written,
        };
        // From here on, an error drops `engine`, which stops and joins what was started.
        for (id, fd) in vcpu_fds.into_iter().enumerate() {
            let sh = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("kvm{}-vcpu{id}", engine.id))
                .spawn(move || run_vcpu(&sh, fd, id))
                .map_err(|e| KvmError::Guest(format!("cannot spawn a vCPU thread: {e}")))?;
            engine.vcpus.push(h);
        }
        let ends = phase_ends(w);
        let rate = params.rate;
        let threads = params.threads;
        let start = engine.start;
        let sh = shared.clone();
        engine.pacer = Some(
            std::thread::Builder::new()
                .name(format!("kvm{}-pacer", engine.id))
                .spawn(move || {
                    let low = &sh.vm.low;
                    while !sh.stop.load(Ordering::Acquire) {
                        let t = start.elapsed().as_nanos() as u64;
                        low.store(abi::CTRL_ADDR + ctrl::PHASE, phase_at(&ends, t));
                        if !unpaced {
                            let budget = (rate * t as f64 * 1e-9) as u64 + 256;
                            for v in 0..threads {
                                let vb = abi::CTRL_ADDR + ctrl::VCPU + v as u64 * ctrl::VCPU_SIZE;
                                low.store(vb + vc::BUDGET, budget);
                            }
                        }
                        std::thread::sleep(Duration::from_micros(500));
                    }
                })
                .map_err(|e| KvmError::Guest(format!("cannot spawn the pacer thread: {e}")))?,
        );
        // Wait for every vCPU to enter the guest loop.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            engine.check()?;
            let running = (0..threads)
                .filter(|&v| engine.vcpu_word(v, vc::STATE) >= 1)
                .count();
            if running == threads {
                break;
            }
            if Instant::now() > deadline {
                return Err(KvmError::Guest("the guest did not start within 5 s".into()));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(engine)
    }

    fn vm(&self) -> &Vm {
        &self.shared.vm
    }

    fn vcpu_word(&self, v: usize, off: u64) -> u64 {
        self.vm()
            .low
            .load(abi::CTRL_ADDR + ctrl::VCPU + v as u64 * ctrl::VCPU_SIZE + off)
    }

    /// Errors the vCPU threads reported (a guest crash), if any.
    pub fn check(&self) -> Result<(), KvmError> {
        let e = self.shared.errors.lock().expect("errors");
        if e.is_empty() {
            Ok(())
        } else {
            Err(KvmError::Guest(e.join("; ")))
        }
    }

    /// A number unique in this process; the engine's threads are named `kvm{id}-...`.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The host mappings backing guest memory, as (address, length), for leak checks.
    pub fn host_mappings(&self) -> Vec<(usize, usize)> {
        self.vm().host_mappings()
    }

    /// The guest layout (for tests and tools).
    pub fn layout(&self) -> &Layout {
        &self.vm().layout
    }

    /// Guest-side counters, read now.
    pub fn guest_counters(&self) -> GuestCounters {
        let mut g = GuestCounters::default();
        for v in 0..self.threads {
            g.done.push(self.vcpu_word(v, vc::DONE));
            let mut p = [0; abi::MAX_PATTERNS];
            for (i, x) in p.iter_mut().enumerate() {
                *x = self.vcpu_word(v, vc::PER_PAT + 8 * i as u64);
            }
            g.per_pattern.push(p);
            g.flushes_page += self.vcpu_word(v, vc::FLUSHES_PAGE);
            g.flushes_full += self.vcpu_word(v, vc::FLUSHES_FULL);
        }
        g
    }

    /// KVM's per-vCPU statistics (exits, faults, ...), summed over vCPUs.
    pub fn vcpu_stats(&self) -> Vec<(String, u64)> {
        let mut sum: Vec<(String, u64)> = vec![];
        for s in self.shared.stats.lock().expect("stats").iter() {
            for (n, v) in s.read() {
                match sum.iter_mut().find(|(m, _)| *m == n) {
                    Some(e) => e.1 += v,
                    None => sum.push((n, v)),
                }
            }
        }
        sum
    }

    /// Total accesses the guest has done.
    pub fn accesses(&self) -> u64 {
        (0..self.threads).map(|v| self.vcpu_word(v, vc::DONE)).sum()
    }

    /// Stops (`true`) or resumes the guest's accesses and waits until every vCPU has
    /// acknowledged a pause (so counters and logs are quiescent).
    pub fn set_paused(&mut self, paused: bool) -> Result<(), KvmError> {
        self.vm()
            .low
            .store(abi::CTRL_ADDR + ctrl::PAUSE, u64::from(paused));
        if paused {
            let deadline = Instant::now() + Duration::from_secs(5);
            while (0..self.threads).any(|v| self.vcpu_word(v, vc::PAUSED) == 0) {
                self.check()?;
                if Instant::now() > deadline {
                    return Err(KvmError::Guest("the guest did not pause within 5 s".into()));
                }
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        Ok(())
    }

    /// Asks the guest to flush and returns the request's sequence number.
    fn request_flush(&mut self, kind: u64, start: u64, end: u64) -> u64 {
        let low = &self.shared.vm.low;
        low.store(abi::CTRL_ADDR + ctrl::FLUSH_KIND, kind);
        low.store(abi::CTRL_ADDR + ctrl::FLUSH_START, start);
        low.store(abi::CTRL_ADDR + ctrl::FLUSH_END, end);
        self.flush_seq += 1;
        low.store(abi::CTRL_ADDR + ctrl::FLUSH_SEQ, self.flush_seq);
        self.flush_seq
    }

    /// Makes the guest's next access to every page walk its page tables again, setting
    /// their ACCESSED (and, on a write, DIRTY) bits: KVM zaps its shadow page tables when a
    /// memory slot is deleted. Returns the host time it took.
    pub fn host_flush(&mut self) -> Duration {
        let t0 = Instant::now();
        if let Err(e) = self.shared.vm.zap_shadow() {
            self.shared
                .errors
                .lock()
                .expect("errors")
                .push(e.to_string());
        }
        self.host_flushes += 1;
        t0.elapsed()
    }

    /// Flushes executed by the host so far.
    pub fn host_flushes(&self) -> u64 {
        self.host_flushes
    }

    /// Waits until every vCPU has acknowledged the last flush request (or up to `timeout`).
    pub fn wait_flushed(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if (0..self.threads).all(|v| self.vcpu_word(v, vc::FLUSH_DONE_SEQ) >= self.flush_seq) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Heap pages (4 KiB, by guest-virtual address, sorted) the guest wrote since the last
    /// harvest, from KVM's dirty log. Empty when dirty logging is off.
    pub fn harvest_dirty(&self) -> Result<Vec<u64>, KvmError> {
        self.dirty_log()
            .map(|d| d.harvest())
            .unwrap_or_else(|| Ok(vec![]))
    }

    /// A handle on the dirty log that a monitor thread can keep (None when dirty logging is
    /// off).
    pub fn dirty_log(&self) -> Option<DirtyLog> {
        self.vm().dirty_log.then(|| DirtyLog {
            vm: self.shared.vm.clone(),
        })
    }

    /// The guest's own record of heap pages written since the last call (4 KiB pages by
    /// guest-virtual address, sorted). Needs `track_written`.
    pub fn take_written_pages(&self) -> Vec<u64> {
        if !self.written_tracked {
            return vec![];
        }
        let l = &self.vm().layout;
        let mut out = vec![];
        let pages = l.heap_len / 4096;
        swap_bytes(&self.vm().low, l.written_gpa, pages, |i, _| {
            out.push(l.heap_va + i * 4096)
        });
        out
    }
}

/// The signal that interrupts KVM_RUN: a real-time signal with an empty handler.
fn kick_signal() -> libc::c_int {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    let sig = libc::SIGRTMIN() + 7;
    INSTALL.call_once(|| {
        extern "C" fn noop(_: libc::c_int) {}
        // SAFETY: installs a handler that does nothing (async-signal-safe) for a real-time
        // signal this crate reserves; the sigaction struct is fully initialised.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = noop as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    });
    sig
}

fn kick(h: &JoinHandle<()>) {
    use std::os::unix::thread::JoinHandleExt;
    let sig = kick_signal();
    // SAFETY: the thread has not been joined (we hold its handle), so its pthread_t is valid;
    // the signal has a no-op handler, so it only makes a blocking KVM_RUN return EINTR.
    unsafe { libc::pthread_kill(h.as_pthread_t(), sig) };
}

fn vm_round(len: u64, ps: PageSize) -> u64 {
    crate::vm::align_up(len, ps.bytes())
}

/// Atomically takes and zeroes `n` bytes at `off`, calling `f(index, value)` for non-zero
/// ones in order.
fn swap_bytes(m: &crate::mem::Mmap, off: u64, n: u64, mut f: impl FnMut(u64, u8)) {
    let words = n.div_ceil(8);
    for wi in 0..words {
        let a = m.u64_at(off + wi * 8);
        if a.load(Ordering::Relaxed) == 0 {
            continue;
        }
        let v = a.swap(0, Ordering::AcqRel);
        for b in 0..8u64 {
            let byte = (v >> (8 * b)) as u8;
            let i = wi * 8 + b;
            if byte != 0 && i < n {
                f(i, byte);
            }
        }
    }
}

/// KVM's dirty log of the heap (and its page-table pages), shareable with a monitor.
#[derive(Clone)]
pub struct DirtyLog {
    vm: Arc<Vm>,
}

impl DirtyLog {
    fn pages(&self, slot: u32, base: u64) -> Result<Vec<u64>, KvmError> {
        let bm = self.vm.dirty_bitmap(slot)?;
        let mut out = vec![];
        for (i, &w) in bm.iter().enumerate() {
            let mut w = w;
            while w != 0 {
                let b = w.trailing_zeros() as u64;
                w &= w - 1;
                out.push(base + (i as u64 * 64 + b) * 4096);
            }
        }
        Ok(out)
    }

    /// Written heap pages (guest-virtual, 4 KiB, sorted) since the previous harvest.
    pub fn harvest(&self) -> Result<Vec<u64>, KvmError> {
        let l = &self.vm.layout;
        let mut v = self.pages(SLOT_HEAP, l.heap_va)?;
        v.retain(|&a| a < l.heap_va + l.heap_len);
        Ok(v)
    }

    /// Page-table pages (guest-physical) written since the previous harvest: under shadow
    /// paging these are the pages whose ACCESSED/DIRTY bits the MMU set (vmmload's read
    /// detection).
    pub fn harvest_page_tables(&self) -> Result<Vec<u64>, KvmError> {
        self.pages(SLOT_PT, self.vm.layout.pt_gpa)
    }

    /// vmmload's read detection: for every leaf page-table page of the heap that was
    /// written since the last harvest (the MMU setting an ACCESSED or DIRTY bit writes it),
    /// test-and-clear the ACCESSED bits of its entries. Returns the pages (VA, bytes) found
    /// accessed, and the number of entries examined.
    pub fn harvest_accessed(&self) -> Result<(Vec<(u64, u64)>, u64), KvmError> {
        let tables = self.harvest_page_tables()?;
        let leaves = &self.vm.leaf_tables;
        let mut out = vec![];
        let mut examined = 0;
        for t in tables {
            let Ok(i) = leaves.binary_search_by_key(&t, |&(g, _, _)| g) else {
                continue;
            };
            let (_, va0, span) = leaves[i];
            for k in 0..512u64 {
                let e = self.vm.phys_u64(t + k * 8);
                examined += 1;
                let v = e.load(Ordering::Relaxed);
                if v & pte::PRESENT != 0
                    && v & pte::ACCESSED != 0
                    && e.fetch_and(!pte::ACCESSED, Ordering::AcqRel) & pte::ACCESSED != 0
                {
                    out.push((va0 + k * span, span));
                }
            }
        }
        out.sort_unstable();
        Ok((out, examined))
    }

    pub fn layout(&self) -> &Layout {
        &self.vm.layout
    }
}

impl Drop for KvmEngine {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.vm.low.store(abi::CTRL_ADDR + ctrl::STOP, 1);
        self.shared.vm.low.store(abi::CTRL_ADDR + ctrl::PAUSE, 0);
        if let Some(p) = self.pacer.take() {
            let _ = p.join();
        }
        // The guest sees STOP within a chunk of accesses; a guest that does not (crashed into
        // a loop, or still booting) is kicked out of KVM_RUN by a signal.
        let deadline = Instant::now() + Duration::from_millis(500);
        while self.vcpus.iter().any(|h| !h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        for h in &self.vcpus {
            while !h.is_finished() {
                kick(h);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        for h in self.vcpus.drain(..) {
            let _ = h.join();
        }
        // The VM and its memory go when the last Arc (a DirtyLog handle may hold one) drops.
    }
}

impl Machine for KvmEngine {
    fn paging(&self) -> Paging {
        Paging::FourLevel
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn mappings(&self) -> &[Mapping] {
        &self.mappings
    }

    fn leaf_level(&mut self, va: u64) -> Option<Level> {
        let m = self.mappings.iter().find(|m| m.range.contains(va))?;
        Some(m.page_size.leaf_level())
    }

    fn accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let (e, steps) = self.vm().entry_gpa(level, va)?;
        let v = self.vm().phys_u64(e).load(Ordering::Acquire);
        if v & pte::PRESENT == 0 {
            return None;
        }
        self.cost.charge_read(steps);
        Some(v & pte::ACCESSED != 0)
    }

    fn test_and_clear_accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        let (e, steps) = self.vm().entry_gpa(level, va)?;
        let a = self.shared.vm.phys_u64(e);
        if a.load(Ordering::Relaxed) & pte::PRESENT == 0 {
            return None;
        }
        let old = a.fetch_and(!pte::ACCESSED, Ordering::AcqRel) & pte::ACCESSED != 0;
        self.cost.charge_test_and_clear(steps, old);
        Some(old)
    }

    fn dirty(&mut self, va: u64) -> Option<bool> {
        let level = self.leaf_level(va)?;
        let (e, steps) = self.vm().entry_gpa(level, va)?;
        let v = self.vm().phys_u64(e).load(Ordering::Acquire);
        self.cost.charge_read(steps);
        Some(v & pte::DIRTY != 0)
    }

    fn test_and_clear_dirty(&mut self, va: u64) -> Option<bool> {
        let level = self.leaf_level(va)?;
        let (e, steps) = self.vm().entry_gpa(level, va)?;
        let old = self
            .shared
            .vm
            .phys_u64(e)
            .fetch_and(!pte::DIRTY, Ordering::AcqRel)
            & pte::DIRTY
            != 0;
        self.cost.charge_read(steps);
        self.cost.clear_ops += 1;
        Some(old)
    }

    /// Counted like the simulator (one page flush per 4 KiB page up to the ceiling, else one
    /// full flush). Executed as a full flush by the host (see [`KvmEngine::host_flush`]):
    /// on a shadow-paging host the guest cannot drop a single shadow entry, and INVLPG
    /// drops every paging-structure-cache entry anyway.
    fn flush(&mut self, what: Flush) {
        match what {
            Flush::Page(va) => {
                self.cost.flushes_page += 1;
                let p = va & !0xfff;
                self.request_flush(abi::FLUSH_PAGES, p, p + 4096);
            }
            Flush::Range { start, end } => {
                let pages = end.saturating_sub(start).div_ceil(4096);
                if pages <= tierscope_core::machine::FLUSH_CEILING_PAGES {
                    self.cost.flushes_page += pages;
                    self.request_flush(abi::FLUSH_PAGES, start, end);
                } else {
                    self.cost.flushes_full += 1;
                    self.request_flush(abi::FLUSH_FULL, 0, 0);
                }
            }
            Flush::All => {
                self.cost.flushes_full += 1;
                self.request_flush(abi::FLUSH_FULL, 0, 0);
            }
        }
        if self.execute_flushes {
            self.host_flush();
        }
    }

    fn cost(&self) -> &CostCounters {
        &self.cost
    }

    fn cost_mut(&mut self) -> &mut CostCounters {
        &mut self.cost
    }
}

impl Engine for KvmEngine {
    fn advance_to(&mut self, t: u64) {
        let now = self.now();
        if t > now {
            std::thread::sleep(Duration::from_nanos(t - now));
        }
    }

    fn take_truth(&mut self) -> BlockIntervals {
        let l = &self.shared.vm.layout;
        let blocks = l.heap_len >> l.block_shift;
        let base = l.heap_va >> l.block_shift;
        let thr = self.threshold;
        let mut out: BlockIntervals = vec![];
        swap_bytes(&self.shared.vm.low, l.truth_gpa, blocks, |i, c| {
            if c >= thr {
                let b = base + i;
                match out.last_mut() {
                    Some(last) if last.1 == b => last.1 = b + 1,
                    _ => out.push((b, b + 1)),
                }
            }
        });
        out
    }

    fn heap(&self) -> AddrRange {
        self.heap
    }

    fn stats(&self) -> MachineStats {
        MachineStats {
            accesses: self.accesses(),
            ..Default::default()
        }
    }

    fn as_machine(&mut self) -> &mut dyn Machine {
        self
    }
}
