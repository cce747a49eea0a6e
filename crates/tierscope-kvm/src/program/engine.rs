//! [`ProgramEngine`]: a program running in the micro-VM, as a machine monitors run on. The
//! truth is the program's writes (KVM's dirty log, plus the pages the host wrote for its
//! calls): there is no access truth for a real program (docs/models/PROGRAMS.md).

use super::elf::{self, Image};
use super::jail::{Input, Jail};
use super::space::{page_up, Kind, Space, PAGE};
use super::syscalls::{Process, SyscallCounts};
use super::{patch, stack};
use crate::boot::{create_vcpu, write_gdt, Entry};
use crate::dirty_log::DirtyLog;
use crate::engine::pages_to_blocks;
use crate::vm::{Layout, Vm};
use crate::KvmError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tierscope_core::rng::Rng;
use tierscope_core::{
    AddrRange, BlockIntervals, CostCounters, Engine, Flush, Level, Machine, MachineStats, Mapping,
    Paging, ProgramEnd, WriteLog,
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
    /// The program's working directory (its `/`), read and written; `None`: a fresh
    /// temporary one, removed at the end.
    pub workdir: Option<std::path::PathBuf>,
    /// Host files the program may read, at the names it uses for them.
    pub inputs: Vec<Input>,
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
            workdir: None,
            inputs: vec![],
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
    /// Signalled (with `outcome` held) when the vCPU thread sets `done`.
    pub(crate) ended: Condvar,
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
    /// Each truth window's real and nominal length ([`Engine::real_time_report`]; a
    /// program's accesses are not counted, and no rate applies).
    clock: crate::measure::WindowClock,
    /// KVM's statistics of the program's vCPU (exit counts), where the host offers them.
    stats: Option<crate::stats::StatsFd>,
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

/// Where the program's memory window lies: from `heap_va` (the image's first 2 MiB
/// boundary) for `len` bytes, the stack's `stack` bytes at its top, the image ending at `hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    heap_va: u64,
    len: u64,
    stack: u64,
    hi: u64,
}

/// The window for `image` with `memory` bytes and a `stack`-byte stack, or why it cannot
/// be placed. Every sum is checked: the image lies below [`elf::USER_END`] (the parser
/// checks it), and the sizes are the caller's.
fn window(image: &Image, memory: u64, stack: u64) -> Result<Window, String> {
    let lo = image.segments.iter().map(|s| s.vaddr).min();
    let hi = image.segments.iter().map(|s| s.vaddr + s.mem_len).max();
    let (Some(lo), Some(hi)) = (lo, hi) else {
        return Err("no loadable segment".into());
    };
    let heap_va = lo & !(MIB2 - 1);
    if heap_va < MIB2 {
        return Err(format!(
            "its image starts at {lo:#x}, below 2 MiB, where the guest's GDT lives"
        ));
    }
    let stack = stack.max(PAGE).checked_next_multiple_of(PAGE);
    let len = memory.checked_next_multiple_of(MIB2);
    let (Some(stack), Some(len)) = (stack, len) else {
        return Err("memory or stack size out of range".into());
    };
    if heap_va.checked_add(len).is_none_or(|e| e > 1 << 47) {
        return Err(format!(
            "memory = {memory} bytes from {heap_va:#x} runs past user space"
        ));
    }
    let need = hi.checked_add(stack).and_then(|n| n.checked_add(16 << 20));
    if need.is_none_or(|n| n > heap_va + len) {
        return Err(format!(
            "memory = {memory} bytes is too small for its image ({} bytes from {heap_va:#x}) \
             and a {stack}-byte stack",
            hi - heap_va
        ));
    }
    Ok(Window {
        heap_va,
        len,
        stack,
        hi,
    })
}

impl ProgramEngine {
    /// Loads the program and starts it.
    pub fn new(p: &ProgramParams) -> Result<ProgramEngine, KvmError> {
        crate::kvm_available().map_err(KvmError::Unavailable)?;
        let file = std::fs::read(&p.path).map_err(|e| config(&p.path, e))?;
        let image = elf::parse(&file, PIE_BASE).map_err(|e| config(&p.path, e))?;
        let Window {
            heap_va,
            len,
            stack,
            hi,
        } = window(&image, p.memory, p.stack).map_err(|e| config(&p.path, e))?;
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
        let jail = Jail::new(p.workdir.as_deref(), &p.inputs).map_err(KvmError::Config)?;
        let fd = create_vcpu(&vm, 0, &entry)?;
        let stats = crate::stats::StatsFd::open(&fd);
        let vm = Arc::new(vm);
        let shared = Arc::new(ProgShared {
            vm: vm.clone(),
            process: Mutex::new(Process::new(space, p.seed, jail)),
            stop: AtomicBool::new(false),
            done: AtomicBool::new(false),
            outcome: Mutex::new(None),
            ended: Condvar::new(),
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
            clock: crate::measure::WindowClock::new(0),
            stats,
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

    /// Waits until the program ends or `timeout` passes; true when it ended. Sleeps until
    /// the vCPU thread signals the end: a waiter that woke to look would take CPU time
    /// and interrupt the guest (an exit) on a busy host (docs/models/PROGRAMS.md, "What a
    /// CPU-bound program pays").
    pub fn wait(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut o = self.shared.outcome.lock().expect("outcome");
        while !self.finished() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            o = self.shared.ended.wait_timeout(o, left).expect("outcome").0;
        }
        drop(o);
        self.note_end();
        self.finished()
    }

    /// [`ProgramEngine::wait`] by looking every `poll` instead: what it did before
    /// (every 200 us), kept for the overhead runs that price it
    /// (scripts/vmmload_sensitivity.py).
    pub fn wait_polling(&mut self, timeout: Duration, poll: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.finished() && Instant::now() < deadline {
            std::thread::sleep(poll.min(deadline.saturating_duration_since(Instant::now())));
        }
        self.note_end();
        self.finished()
    }

    /// KVM's statistics of the program's vCPU as (name, value), histograms summed (exit
    /// counts: `exits`, `halt_exits`, `irq_exits`, ...); empty where the host has no
    /// KVM_GET_STATS_FD.
    pub fn vcpu_stats(&self) -> Vec<(String, u64)> {
        self.stats.as_ref().map_or_else(Vec::new, |s| s.read())
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
        self.clock.asked(t);
        loop {
            let now = self.now();
            if now >= t || self.finished() {
                break;
            }
            std::thread::sleep(Duration::from_nanos((t - now).min(1_000_000)));
        }
        self.clock.returned(self.now());
        self.note_end();
        self.refresh_mappings();
    }

    /// The blocks the program wrote since the last call (its own stores, from KVM's dirty
    /// log, and the host's stores for its calls).
    fn take_truth(&mut self) -> BlockIntervals {
        self.clock.close(self.now(), vec![]);
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

    fn real_time_report(&self) -> Option<tierscope_core::machine::RealTimeReport> {
        Some(tierscope_core::machine::RealTimeReport {
            rate_requested: 0.0,
            threads: 0,
            windows: self.clock.windows().to_vec(),
        })
    }

    fn end_report(&mut self) -> Result<Option<ProgramEnd>, String> {
        self.note_end();
        let r = self.report();
        let secs = r.elapsed_ns as f64 * 1e-9;
        let (head, status) = match &r.outcome {
            Some(Outcome::Exited(code)) => (
                format!("exited with status {code} after {secs:.3} s"),
                Some(*code),
            ),
            None | Some(Outcome::Stopped) => {
                (format!("still running after {secs:.3} s: stopped"), None)
            }
            Some(Outcome::Faulted(m)) | Some(Outcome::Error(m)) => {
                return Err(format!("{}: {m}", self.path.display()))
            }
        };
        Ok(Some(ProgramEnd {
            line: format!("{}: {head}; {}", self.path.display(), r.syscalls.summary()),
            status,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A minimal static executable: an ELF header and `n` PT_LOAD headers, by hand.
    fn elf_with(loads: &[(u64, u64, u64, u64)]) -> Vec<u8> {
        let mut f = vec![0u8; 64 + 56 * loads.len() + 64];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[16..18].copy_from_slice(&2u16.to_le_bytes());
        f[18..20].copy_from_slice(&62u16.to_le_bytes());
        f[24..32].copy_from_slice(&0x401000u64.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes());
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&(loads.len() as u16).to_le_bytes());
        for (i, &(offset, vaddr, filesz, memsz)) in loads.iter().enumerate() {
            let h = 64 + 56 * i;
            f[h..h + 4].copy_from_slice(&1u32.to_le_bytes());
            f[h + 4..h + 8].copy_from_slice(&5u32.to_le_bytes()); // R + X
            f[h + 8..h + 16].copy_from_slice(&offset.to_le_bytes());
            f[h + 16..h + 24].copy_from_slice(&vaddr.to_le_bytes());
            f[h + 32..h + 40].copy_from_slice(&filesz.to_le_bytes());
            f[h + 40..h + 48].copy_from_slice(&memsz.to_le_bytes());
        }
        f
    }

    /// Values that break unchecked arithmetic, and ordinary ones.
    fn edgy() -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(0u64),
            Just(u64::MAX),
            Just(0xffff_ffff_ffff_f000),
            Just(elf::USER_END),
            Just(1 << 47),
            (0u64..1 << 48),
            any::<u64>(),
            (0x40_0000u64..0x50_0000),
        ]
    }

    /// Everything the loader writes lands inside the window it placed, whatever the file
    /// says: [`crate::mem::Mmap::write_bytes`]'s bound holds, and nothing panics.
    fn check(file: &[u8], memory: u64, stack: u64) {
        let Ok(image) = elf::parse(file, PIE_BASE) else {
            return;
        };
        for s in &image.segments {
            assert!(s
                .vaddr
                .checked_add(s.mem_len)
                .is_some_and(|e| e <= elf::USER_END));
            assert!(s.file.start <= s.file.end && s.file.end <= file.len());
        }
        assert!(image.functions.iter().all(|r| r.end <= elf::USER_END));
        for s in image.segments.iter().filter(|s| s.executable) {
            let mut bytes = file[s.file.clone()].to_vec();
            patch::rewrite_syscalls(&image, s.vaddr, &mut bytes);
        }
        let Ok(w) = window(&image, memory, stack) else {
            return;
        };
        assert!(w.heap_va + w.len <= 1 << 47);
        for s in &image.segments {
            let off = s.vaddr - w.heap_va;
            assert!(off + (s.file.end - s.file.start) as u64 <= w.len);
            assert!(off + s.mem_len <= w.len - w.stack);
        }
    }

    #[test]
    fn a_segment_at_the_top_of_the_address_space_is_refused() {
        let f = elf_with(&[(0, 0xffff_ffff_ffff_f000, 64, 0x1000)]);
        let e = elf::parse(&f, PIE_BASE).unwrap_err();
        assert!(e.contains("outside user space"), "{e}");
        let f = elf_with(&[(0, 0x40_0000, 64, u64::MAX - 0x40_0000)]);
        assert!(elf::parse(&f, PIE_BASE).is_err());
    }

    #[test]
    fn a_window_that_would_wrap_is_refused() {
        let image = elf::parse(&elf_with(&[(0, 0x40_0000, 64, 0x1000)]), PIE_BASE).unwrap();
        assert!(window(&image, u64::MAX, 8 << 20).is_err());
        assert!(window(&image, 1 << 30, u64::MAX).is_err());
        assert!(window(&image, 1 << 30, 8 << 20).is_ok());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

        #[test]
        fn the_loader_never_writes_outside_its_window(
            loads in prop::collection::vec((edgy(), edgy(), edgy(), edgy()), 1..4),
            memory in edgy(),
            stack in edgy(),
        ) {
            check(&elf_with(&loads), memory, stack);
        }

        #[test]
        fn mutated_executables_never_panic_the_loader(
            flips in prop::collection::vec((0usize..240, any::<u8>()), 0..24),
            memory in prop_oneof![Just(1u64 << 30), edgy()],
        ) {
            let mut f = elf_with(&[(0, 0x40_0000, 200, 0x2000), (0, 0x60_0000, 100, 0x1000)]);
            f.resize(240, 0);
            for (at, b) in flips {
                f[at] = b;
            }
            check(&f, memory, 8 << 20);
        }

        #[test]
        fn random_bytes_never_panic_the_parser(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let mut f = bytes;
            if f.len() >= 20 {
                f[..4].copy_from_slice(b"\x7fELF");
                f[4] = 2;
                f[5] = 1;
                f[18] = 62;
                f[19] = 0;
            }
            check(&f, 1 << 30, 8 << 20);
        }
    }
}
