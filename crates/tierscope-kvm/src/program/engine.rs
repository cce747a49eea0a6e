//! [`ProgramEngine`]: a program running in the micro-VM, as a machine monitors run on. The
//! truth is the program's writes (KVM's dirty log, plus the pages the host wrote for its
//! calls): there is no access truth for a real program (docs/PROGRAMS.md).

use super::elf::{self, Image};
use super::space::{page_up, Kind, Space, PAGE};
use super::syscalls::{Process, SyscallCounts};
use super::{patch, stack};
use crate::boot::{create_vcpu, write_gdt, Entry};
use crate::dirty_log::DirtyLog;
use crate::engine::pages_to_blocks;
use crate::vm::{Layout, Vm};
use crate::KvmError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tierscope_core::rng::Rng;
use tierscope_core::{
    AddrRange, BlockIntervals, CostCounters, Engine, Flush, Level, Machine, MachineStats, Mapping,
    Paging, WriteLog,
};

const MIB2: u64 = 2 << 20;
/// Where a static PIE (ET_DYN) is placed.
const PIE_BASE: u64 = 0x40_0000;
/// CR4.OSFXSR | CR4.OSXMMEXCPT: SSE instructions work (compilers emit them everywhere).
const CR4_SSE: u64 = (1 << 9) | (1 << 10);

/// What to run.
#[derive(Debug, Clone)]
pub struct ProgramParams {
    /// The executable and its arguments (`argv[0]` is `args[0]`).
    pub path: std::path::PathBuf,
    pub args: Vec<String>,
    /// The environment (`NAME=value`); empty unless given, so runs do not depend on the
    /// caller's shell.
    pub env: Vec<String>,
    /// Bytes of the guest-virtual window holding the image, heap, `mmap`s and stack.
    pub memory: u64,
    pub stack: u64,
    /// Seeds AT_RANDOM and `getrandom`.
    pub seed: u64,
    /// Truth block size in bytes (a power of two >= 4096).
    pub block_size: u64,
    /// Logs writes into KVM's dirty ring where the host offers one (else the bitmap).
    pub dirty_ring: bool,
}

impl ProgramParams {
    pub fn new(path: impl Into<std::path::PathBuf>, args: Vec<String>) -> ProgramParams {
        ProgramParams {
            path: path.into(),
            args,
            env: vec![],
            memory: 1 << 30,
            stack: 8 << 20,
            seed: 1,
            block_size: 2 << 20,
            dirty_ring: true,
        }
    }
}

/// How the program ended (or that it has not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    /// It stopped on something other than a call (a page fault, a missed `syscall`...).
    Faulted(String),
    /// The engine stopped it (the run's time was up).
    Stopped,
    Error(String),
}

/// What the program did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramReport {
    /// None while it runs.
    pub outcome: Option<Outcome>,
    pub syscalls: SyscallCounts,
    /// `syscall` instructions the loader rewrote.
    pub syscall_sites: usize,
    /// Real time from start to the end (or to now), ns.
    pub elapsed_ns: u64,
}

/// What the engine shares with the vCPU thread.
pub(crate) struct ProgShared {
    pub(crate) vm: Arc<Vm>,
    pub(crate) process: Mutex<Process>,
    pub(crate) stop: AtomicBool,
    pub(crate) done: AtomicBool,
    pub(crate) outcome: Mutex<Option<Outcome>>,
}

/// The write log, read by the truth and, once it asks, by a monitor: each harvest of KVM's
/// dirty log (which resets it) goes to both.
struct Fanout {
    log: DirtyLog,
    shared: Arc<ProgShared>,
    for_truth: Vec<u64>,
    for_monitor: Vec<u64>,
    monitor_reads: bool,
}

impl Fanout {
    fn harvest(&mut self) {
        let mut pages = match self.log.harvest() {
            Ok(p) => p,
            Err(e) => {
                let mut o = self.shared.outcome.lock().expect("outcome");
                o.get_or_insert(Outcome::Error(format!("dirty log: {e}")));
                return;
            }
        };
        pages.extend(
            self.shared
                .process
                .lock()
                .expect("process")
                .take_host_written(),
        );
        if self.monitor_reads {
            self.for_monitor.extend_from_slice(&pages);
        }
        self.for_truth.append(&mut pages);
    }

    fn take(v: &mut Vec<u64>, out: &mut Vec<u64>) {
        let first = out.len();
        out.append(v);
        out[first..].sort_unstable();
        let mut tail = out.split_off(first);
        tail.dedup();
        out.append(&mut tail);
    }
}

impl WriteLog for Fanout {
    fn drain_written(&mut self, out: &mut Vec<u64>) {
        self.monitor_reads = true;
        self.harvest();
        Fanout::take(&mut self.for_monitor, out);
    }

    fn drain_tables(&mut self, out: &mut Vec<tierscope_core::AddrRange>) {
        match self.log.harvest_table_spans() {
            Ok(mut v) => out.append(&mut v),
            Err(e) => {
                let mut o = self.shared.outcome.lock().expect("outcome");
                o.get_or_insert(Outcome::Error(format!("dirty log: {e}")));
            }
        }
    }
}

/// A running program. Dropping it stops the program and frees the VM.
pub struct ProgramEngine {
    shared: Arc<ProgShared>,
    vcpu: Option<JoinHandle<()>>,
    start: Instant,
    end_ns: Option<u64>,
    mappings: Vec<Mapping>,
    window: AddrRange,
    block_shift: u32,
    cost: CostCounters,
    log: Fanout,
    syscall_sites: usize,
    path: std::path::PathBuf,
}

fn config(path: &std::path::Path, what: impl std::fmt::Display) -> KvmError {
    KvmError::Config(format!("{}: {what}", path.display()))
}

/// The page ranges the segments cover, merged where they share pages.
fn image_pages(image: &Image) -> Vec<(u64, u64)> {
    let mut r: Vec<(u64, u64)> = image
        .segments
        .iter()
        .map(|s| (s.vaddr & !(PAGE - 1), page_up(s.vaddr + s.mem_len)))
        .collect();
    r.sort_unstable();
    let mut out: Vec<(u64, u64)> = vec![];
    for (s, e) in r {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

impl ProgramEngine {
    /// Loads the program and starts it.
    pub fn new(p: &ProgramParams) -> Result<ProgramEngine, KvmError> {
        crate::kvm_available().map_err(KvmError::Unavailable)?;
        let file = std::fs::read(&p.path).map_err(|e| config(&p.path, e))?;
        let image = elf::parse(&file, PIE_BASE).map_err(|e| config(&p.path, e))?;
        let lo = image
            .segments
            .iter()
            .map(|s| s.vaddr)
            .min()
            .expect("a segment");
        let hi = image
            .segments
            .iter()
            .map(|s| s.vaddr + s.mem_len)
            .max()
            .expect("a segment");
        let heap_va = lo & !(MIB2 - 1);
        if heap_va < MIB2 {
            return Err(config(
                &p.path,
                format!("its image starts at {lo:#x}, below 2 MiB, where the guest's GDT lives"),
            ));
        }
        let len = crate::vm::align_up(p.memory, MIB2);
        let stack = page_up(p.stack.max(PAGE));
        if hi + stack + (16 << 20) > heap_va + len {
            return Err(config(
                &p.path,
                format!(
                    "memory = {} bytes is too small for its image ({} bytes from {heap_va:#x}) and a {stack}-byte stack",
                    p.memory,
                    hi - heap_va
                ),
            ));
        }
        let layout = Layout::for_program(heap_va, len, p.block_size)?;
        let vm = Vm::new(layout, true, p.dirty_ring)?;
        write_gdt(&vm.low);
        let end = heap_va + len;
        let mut space = Space::new(&vm, page_up(hi), end - stack - PAGE);
        for (s, e) in image_pages(&image) {
            space.map(&vm, s, e, Kind::Image);
        }
        let mut sites = 0;
        for seg in &image.segments {
            let mut bytes = file[seg.file.clone()].to_vec();
            if seg.executable {
                sites += patch::rewrite_syscalls(&image, seg.vaddr, &mut bytes).len();
            }
            vm.heap.write_bytes(seg.vaddr - heap_va, &bytes);
        }
        space.map(&vm, end - stack, end, Kind::Stack);
        let mut rng = Rng::for_stream(p.seed, "program/at_random");
        let mut random = [0u8; 16];
        random[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
        random[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
        let st = stack::build(&image, &p.args, &p.env, random, end);
        if st.start < end - stack {
            return Err(config(
                &p.path,
                "arguments and environment overflow the stack",
            ));
        }
        vm.heap.write_bytes(st.start - heap_va, &st.bytes);
        let entry = Entry {
            rip: image.entry,
            rsp: st.rsp,
            rdi: 0,
            cr4_extra: CR4_SSE,
        };
        let fd = create_vcpu(&vm, 0, &entry)?;
        let vm = Arc::new(vm);
        let shared = Arc::new(ProgShared {
            vm: vm.clone(),
            process: Mutex::new(Process::new(space, p.seed)),
            stop: AtomicBool::new(false),
            done: AtomicBool::new(false),
            outcome: Mutex::new(None),
        });
        let l = vm.layout.clone();
        let mut engine = ProgramEngine {
            shared: shared.clone(),
            vcpu: None,
            start: Instant::now(),
            end_ns: None,
            mappings: vec![],
            window: AddrRange::new(l.heap_va, l.heap_va + l.heap_len),
            block_shift: l.block_shift,
            cost: CostCounters::default(),
            log: Fanout {
                log: DirtyLog { vm },
                shared: shared.clone(),
                for_truth: vec![],
                for_monitor: vec![],
                monitor_reads: false,
            },
            syscall_sites: sites,
            path: p.path.clone(),
        };
        engine.refresh_mappings();
        let sh = shared.clone();
        engine.vcpu = Some(
            std::thread::Builder::new()
                .name("program-vcpu".into())
                .spawn(move || super::run::run(&sh, fd))
                .map_err(|e| KvmError::Guest(format!("cannot spawn the vCPU thread: {e}")))?,
        );
        Ok(engine)
    }

    fn refresh_mappings(&mut self) {
        self.mappings = self
            .shared
            .process
            .lock()
            .expect("process")
            .space
            .mappings();
    }

    /// Whether the program has ended (exited, faulted, or failed).
    pub fn finished(&self) -> bool {
        self.shared.done.load(Ordering::Acquire)
    }

    /// Waits until the program ends or `timeout` passes; true when it ended.
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        self.note_end();
        self.finished()
    }

    fn note_end(&mut self) {
        if self.finished() && self.end_ns.is_none() {
            self.end_ns = Some(self.start.elapsed().as_nanos() as u64);
        }
    }

    /// What the program did so far.
    pub fn report(&self) -> ProgramReport {
        ProgramReport {
            outcome: self.shared.outcome.lock().expect("outcome").clone(),
            syscalls: self.shared.process.lock().expect("process").counts.clone(),
            syscall_sites: self.syscall_sites,
            elapsed_ns: self
                .end_ns
                .unwrap_or_else(|| self.start.elapsed().as_nanos() as u64),
        }
    }

    /// Whether writes are logged in KVM's dirty ring (else the dirty bitmap).
    pub fn logs_to_ring(&self) -> bool {
        self.shared.vm.rings.is_some()
    }

    /// The host mappings backing guest memory, as (address, length), for leak checks.
    pub fn host_mappings(&self) -> Vec<(usize, usize)> {
        self.shared.vm.host_mappings()
    }
}

impl Drop for ProgramEngine {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(h) = self.vcpu.take() {
            while !h.is_finished() {
                crate::engine::kick(&h);
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = h.join();
        }
    }
}

impl Machine for ProgramEngine {
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
        self.mappings
            .iter()
            .any(|m| m.range.contains(va))
            .then_some(Level::Pte)
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

    /// Counted like the simulator; executed as a zap of KVM's shadow page tables (the
    /// program has no kernel to run INVLPG for us).
    fn flush(&mut self, what: Flush) {
        crate::bits::count_flush(&mut self.cost, what);
        if let Err(e) = self.shared.vm.zap_shadow() {
            let mut o = self.shared.outcome.lock().expect("outcome");
            o.get_or_insert(Outcome::Error(e.to_string()));
        }
    }

    fn write_log(&mut self) -> Option<&mut dyn WriteLog> {
        Some(&mut self.log)
    }

    fn cost(&self) -> &CostCounters {
        &self.cost
    }

    fn cost_mut(&mut self) -> &mut CostCounters {
        &mut self.cost
    }
}

impl Engine for ProgramEngine {
    /// Real time: returns at `t`, or earlier once the program has ended.
    fn advance_to(&mut self, t: u64) {
        loop {
            let now = self.now();
            if now >= t || self.finished() {
                break;
            }
            std::thread::sleep(Duration::from_nanos((t - now).min(1_000_000)));
        }
        self.note_end();
        self.refresh_mappings();
    }

    /// The blocks the program wrote since the last call (its own stores, from KVM's dirty
    /// log, and the host's stores for its calls).
    fn take_truth(&mut self) -> BlockIntervals {
        self.log.harvest();
        let mut pages = vec![];
        Fanout::take(&mut self.log.for_truth, &mut pages);
        pages_to_blocks(&pages, self.block_shift)
    }

    fn heap(&self) -> AddrRange {
        self.window
    }

    fn stats(&self) -> MachineStats {
        MachineStats::default()
    }

    fn as_machine(&mut self) -> &mut dyn Machine {
        self
    }

    fn finished(&self) -> bool {
        ProgramEngine::finished(self)
    }

    fn end_report(&mut self) -> Result<Option<String>, String> {
        self.note_end();
        let r = self.report();
        let secs = r.elapsed_ns as f64 * 1e-9;
        let head = match &r.outcome {
            Some(Outcome::Exited(code)) => format!("exited with status {code} after {secs:.3} s"),
            None | Some(Outcome::Stopped) => format!("still running after {secs:.3} s: stopped"),
            Some(Outcome::Faulted(m)) | Some(Outcome::Error(m)) => {
                return Err(format!("{}: {m}", self.path.display()))
            }
        };
        Ok(Some(format!(
            "{}: {head}; {}",
            self.path.display(),
            r.syscalls.summary()
        )))
    }
}
