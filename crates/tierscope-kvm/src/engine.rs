//! [`KvmEngine`]: the workload runs in the guest in real time; monitors read and clear the
//! real ACCESSED and DIRTY bits of the page tables the host built, and, with dirty logging
//! on, drain KVM's dirty log through the write-log capability. Booting is `boot.rs`, the
//! control page `ctrl.rs`, pacing `pacer.rs`, the dirty log `dirty_log.rs`.

use crate::abi::{self, ctrl, vcpu as vc};
use crate::boot::{self, run_vcpu, setup_vcpu};
use crate::ctrl::{swap_bytes, vcpu_word};
use crate::dirty_log::{DirtyLog, KvmWriteLog};
use crate::options::KvmOptions;
use crate::vm::{Layout, Vm};
use crate::KvmError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tierscope_core::machine::RealTimeReport;
use tierscope_core::workload::WorkloadSpec;
use tierscope_core::{
    AddrRange, BlockIntervals, Capabilities, Capability, CostCounters, Engine, Flush, Level,
    Machine, MachineStats, Mapping, PageSize, Paging, WriteLog,
};

/// What the runner tells the KVM engine.
#[derive(Debug, Clone)]
pub struct KvmParams<'a> {
    pub workload: &'a WorkloadSpec,
    /// Accesses per second per thread the workload asks for (the guest runs as fast as it
    /// can when it is 0 or `options.paced` is off: [`KvmParams::paced_rate`]).
    pub rate: f64,
    /// Workload threads = vCPUs (1..=64).
    pub threads: usize,
    pub seed: u64,
    /// Truth block size in bytes (a power of two).
    pub block_size: u64,
    /// Minimum accesses in a window for a block to be hot (1..=255; counts saturate at 255).
    pub truth_threshold: u32,
    pub page_size: PageSize,
    /// Enables KVM dirty logging on the heap and page-table slots: the engine's write log
    /// ([`Machine::write_log`]). It slows guest writes (write faults).
    pub dirty_log: bool,
    /// The truth is the written blocks, from the guest's own map of heap pages written
    /// (blocks with at least one 4 KiB page written in the window), not the accessed ones.
    pub written_truth: bool,
    /// The `[machine.kvm]` table: pacing, the dirty ring, the batch, prefaulting, whether
    /// flushes are executed ([`KvmOptions`]).
    pub options: KvmOptions,
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
            written_truth: false,
            options: KvmOptions::default(),
        }
    }

    /// The rate each vCPU is paced at: `rate`, or 0 (as fast as it can) when unpaced.
    pub fn paced_rate(&self) -> f64 {
        if self.options.paced {
            self.rate.max(0.0)
        } else {
            0.0
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

/// What the engine shares with its vCPU and pacer threads.
pub(crate) struct Shared {
    pub(crate) vm: Arc<Vm>,
    pub(crate) stats: Mutex<Vec<crate::stats::StatsFd>>,
    pub(crate) stop: AtomicBool,
    /// Errors the threads (and dirty-log harvests) reported, for [`KvmEngine::check`].
    pub(crate) errors: Mutex<Vec<String>>,
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
    written_truth: bool,
    write_log: Option<KvmWriteLog>,
    /// Accesses per second per vCPU asked for (0: unpaced).
    rate: f64,
    /// What each truth window achieved ([`Engine::real_time_report`]).
    clock: crate::measure::WindowClock,
}

static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl KvmEngine {
    pub fn new(params: &KvmParams) -> Result<KvmEngine, KvmError> {
        boot::check_params(params)?;
        let w = params.workload;
        let sizes: Vec<u64> = w.regions.iter().map(|r| r.size.0).collect();
        let layout = Layout::new(&sizes, params.page_size, params.block_size)?;
        let vm = Vm::new(layout, params.dirty_log, params.options.dirty_ring)?;
        let l = vm.layout.clone();
        boot::program(&vm, params)?;
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
            execute_flushes: params.options.execute_flushes,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            written_truth: params.written_truth,
            write_log: None,
            rate: params.paced_rate(),
            clock: crate::measure::WindowClock::new(params.threads),
        };
        engine.write_log = engine.dirty_log().map(|log| KvmWriteLog {
            log,
            shared: shared.clone(),
        });
        // From here on, an error drops `engine`, which stops and joins what was started.
        for (id, fd) in vcpu_fds.into_iter().enumerate() {
            let sh = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("kvm{}-vcpu{id}", engine.id))
                .spawn(move || run_vcpu(&sh, fd, id))
                .map_err(|e| KvmError::Guest(format!("cannot spawn a vCPU thread: {e}")))?;
            engine.vcpus.push(h);
        }
        engine.pacer = Some(crate::pacer::spawn(
            shared.clone(),
            format!("kvm{}-pacer", engine.id),
            engine.start,
            w,
            params.paced_rate(),
            params.threads,
        )?);
        // Wait for every vCPU to enter the guest loop.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            engine.check()?;
            let running = (0..params.threads)
                .filter(|&v| engine.vcpu_word(v, vc::STATE) >= 1)
                .count();
            if running == params.threads {
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
        vcpu_word(&self.vm().low, v, off)
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
        crate::ctrl::store(&self.vm().low, ctrl::PAUSE, u64::from(paused));
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
        crate::ctrl::store(low, ctrl::FLUSH_KIND, kind);
        crate::ctrl::store(low, ctrl::FLUSH_START, start);
        crate::ctrl::store(low, ctrl::FLUSH_END, end);
        self.flush_seq += 1;
        crate::ctrl::store(low, ctrl::FLUSH_SEQ, self.flush_seq);
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

    /// A handle on the dirty log that a monitor thread can keep (None when dirty logging is
    /// off).
    pub fn dirty_log(&self) -> Option<DirtyLog> {
        self.vm().dirty_log.then(|| DirtyLog {
            vm: self.shared.vm.clone(),
        })
    }

    /// The guest's own record of heap pages written since the last call (4 KiB pages by
    /// guest-virtual address, sorted). Needs `written_truth`.
    pub fn take_written_pages(&self) -> Vec<u64> {
        if !self.written_truth {
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

pub(crate) fn kick(h: &JoinHandle<()>) {
    use std::os::unix::thread::JoinHandleExt;
    let sig = kick_signal();
    // SAFETY: the thread has not been joined (we hold its handle), so its pthread_t is valid;
    // the signal has a no-op handler, so it only makes a blocking KVM_RUN return EINTR.
    unsafe { libc::pthread_kill(h.as_pthread_t(), sig) };
}

fn vm_round(len: u64, ps: PageSize) -> u64 {
    crate::vm::align_up(len, ps.bytes())
}

impl Drop for KvmEngine {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        crate::ctrl::store(&self.shared.vm.low, ctrl::STOP, 1);
        crate::ctrl::store(&self.shared.vm.low, ctrl::PAUSE, 0);
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
        crate::bits::accessed(&self.shared.vm, &mut self.cost, level, va)
    }

    fn test_and_clear_accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        crate::bits::test_and_clear_accessed(&self.shared.vm, &mut self.cost, level, va)
    }

    fn dirty(&mut self, va: u64) -> Option<bool> {
        let level = self.leaf_level(va)?;
        crate::bits::dirty(&self.shared.vm, &mut self.cost, level, va)
    }

    fn test_and_clear_dirty(&mut self, va: u64) -> Option<bool> {
        let level = self.leaf_level(va)?;
        crate::bits::test_and_clear_dirty(&self.shared.vm, &mut self.cost, level, va)
    }

    /// Counted like the simulator (one page flush per 4 KiB page up to the ceiling, else one
    /// full flush). Executed as a full flush by the host (see [`KvmEngine::host_flush`]):
    /// on a shadow-paging host the guest cannot drop a single shadow entry, and INVLPG
    /// drops every paging-structure-cache entry anyway.
    fn flush(&mut self, what: Flush) {
        let full = crate::bits::count_flush(&mut self.cost, what);
        match what {
            Flush::Page(va) => {
                let p = va & !0xfff;
                self.request_flush(abi::FLUSH_PAGES, p, p + 4096);
            }
            Flush::Range { start, end } if !full => {
                self.request_flush(abi::FLUSH_PAGES, start, end);
            }
            _ => {
                self.request_flush(abi::FLUSH_FULL, 0, 0);
            }
        }
        if self.execute_flushes {
            self.host_flush();
        }
    }

    fn write_log(&mut self) -> Option<&mut dyn WriteLog> {
        self.write_log.as_mut().map(|l| l as &mut dyn WriteLog)
    }

    fn cost(&self) -> &CostCounters {
        &self.cost
    }

    fn cost_mut(&mut self) -> &mut CostCounters {
        &mut self.cost
    }
}

/// Sorted page addresses to the block intervals they fall in.
pub fn pages_to_blocks(pages: &[u64], block_shift: u32) -> BlockIntervals {
    let mut out: BlockIntervals = vec![];
    for &p in pages {
        let b = p >> block_shift;
        match out.last_mut() {
            Some(last) if b < last.1 => {}
            Some(last) if b == last.1 => last.1 = b + 1,
            _ => out.push((b, b + 1)),
        }
    }
    out
}

impl Engine for KvmEngine {
    fn advance_to(&mut self, t: u64) {
        self.clock.asked(t);
        let now = self.now();
        if t > now {
            std::thread::sleep(Duration::from_nanos(t - now));
        }
        self.clock.returned(self.now());
    }

    /// The accessed blocks, or with `written_truth` the blocks in which the guest wrote at
    /// least one 4 KiB page during the window (the accessed counts are swapped anyway, so
    /// they do not pile up).
    fn take_truth(&mut self) -> BlockIntervals {
        let done = (0..self.threads)
            .map(|v| self.vcpu_word(v, vc::DONE))
            .collect();
        self.clock.close(self.now(), done);
        if self.written_truth {
            let _ = self.accessed_truth();
            let shift = self.vm().layout.block_shift;
            return pages_to_blocks(&self.take_written_pages(), shift);
        }
        self.accessed_truth()
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

    fn real_time_report(&self) -> Option<RealTimeReport> {
        Some(RealTimeReport {
            rate_requested: self.rate,
            threads: self.threads,
            windows: self.clock.windows().to_vec(),
        })
    }
}

impl KvmEngine {
    /// The optional hardware it offers: KVM's dirty log as a write log (a program run
    /// offers the same).
    pub const CAPABILITIES: Capabilities = Capabilities::of(&[Capability::WriteLog]);

    /// The blocks accessed at least the threshold since the last call.
    fn accessed_truth(&mut self) -> BlockIntervals {
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
}
