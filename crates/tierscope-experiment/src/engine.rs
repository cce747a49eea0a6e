//! The one place that builds the machine an experiment's monitor runs on, and the
//! monitor: the simulated engines (exact, stat) through [`tierscope_sim::build_engine`],
//! the real one (kvm) through [`tierscope_kvm`]. The `pml` monitor is built here too: it
//! reads the KVM engine's dirty log, and its truth is the guest's own record of the pages
//! it wrote (not the accessed blocks), so its engine is wrapped in [`WrittenTruth`].

use crate::config::Experiment;
use crate::run::RunError;
use tierscope_core::rng::Rng;
use tierscope_core::{
    AddrRange, BlockIntervals, CostCounters, Engine, Flush, Level, Machine, MachineStats, Mapping,
    Monitor, Nanos, Paging, PmuEvent, PmuSample,
};
use tierscope_kvm::{KvmEngine, KvmError, KvmParams};
use tierscope_monitors::config::MonitorConfig;
use tierscope_sim::config::EngineKind;
use tierscope_sim::WorkloadParams;

/// Whether the experiment runs on a real machine (in real time: its monitors run one
/// after the other, each on its own VM, and no unmonitored baseline is run).
pub fn is_real(exp: &Experiment) -> bool {
    exp.machine.engine == EngineKind::Kvm
}

/// Ok when the experiment's engine can run on this host, else why not (one line).
pub fn check_available(exp: &Experiment) -> Result<(), RunError> {
    if is_real(exp) {
        tierscope_kvm::kvm_available().map_err(RunError::Unavailable)?;
    }
    Ok(())
}

/// None when the kvm engine can run on this host, else the one-line reason.
pub fn kvm_unavailable() -> Option<String> {
    tierscope_kvm::kvm_available().err()
}

fn kvm_error(e: KvmError) -> RunError {
    match e {
        KvmError::Unavailable(m) => RunError::Unavailable(m),
        other => RunError::Engine(format!("kvm engine: {other}")),
    }
}

fn kvm_engine(exp: &Experiment, pml: bool) -> Result<KvmEngine, RunError> {
    let o = exp.machine.kvm_options();
    let mut p = KvmParams::new(&exp.workload.spec);
    p.rate = if o.paced {
        exp.workload.rate as f64
    } else {
        0.0
    };
    p.threads = exp.workload.threads as usize;
    p.seed = exp.seed;
    p.block_size = exp.block_size;
    p.truth_threshold = exp.truth_threshold;
    p.page_size = exp.machine.page_size;
    p.dirty_log = pml;
    p.track_written = pml;
    p.batch = o.batch;
    p.prefault = o.prefault;
    p.execute_flushes = o.execute_flushes;
    KvmEngine::new(&p).map_err(kvm_error)
}

/// The engine alone (the unmonitored baseline of a simulated run).
pub fn build_engine(exp: &Experiment) -> Result<Box<dyn Engine>, RunError> {
    match exp.machine.engine {
        EngineKind::Kvm => Ok(Box::new(kvm_engine(exp, false)?)),
        EngineKind::Exact | EngineKind::Stat => {
            let params = WorkloadParams {
                spec: &exp.workload.spec,
                rate: exp.workload.rate,
                threads: exp.workload.threads,
                seed: exp.seed,
                block_size: exp.block_size,
                truth_threshold: exp.truth_threshold,
            };
            tierscope_sim::build_engine(&exp.machine, &params).map_err(RunError::Engine)
        }
    }
}

/// An engine and the monitor that runs on it.
pub type EngineAndMonitor = (Box<dyn Engine>, Box<dyn Monitor>);

/// The engine and the monitor for the experiment's monitor `index`.
pub fn build(exp: &Experiment, index: usize) -> Result<EngineAndMonitor, RunError> {
    let entry = &exp.monitors[index];
    if let MonitorConfig::Pml(c) = &entry.config {
        if !is_real(exp) {
            return Err(RunError::Engine(format!(
                "monitor `{}`: pml needs engine = \"kvm\"",
                entry.name
            )));
        }
        let engine = kvm_engine(exp, true)?;
        let log = engine
            .dirty_log()
            .ok_or_else(|| RunError::Engine("kvm engine: dirty logging is off".into()))?;
        let cfg = tierscope_kvm::pml::PmlConfig {
            window: c.window.0,
            alpha: c.alpha,
            hot_pages: c.hot_pages,
            cold_after: c.cold_after.0,
            read_detection: c.read_detection,
        };
        let monitor = tierscope_kvm::pml::PmlMonitor::new(log, cfg, engine.now());
        let engine = WrittenTruth {
            inner: engine,
            block_shift: exp.block_size.trailing_zeros(),
        };
        return Ok((Box::new(engine), Box::new(monitor)));
    }
    let engine = build_engine(exp)?;
    let monitor = tierscope_monitors::build_with_cost(
        &entry.config,
        Rng::for_stream(exp.seed, &format!("monitor/{}", entry.name)),
        &exp.cost,
    );
    Ok((engine, monitor))
}

/// The KVM engine with the pml monitor's truth: the blocks in which the guest wrote at
/// least one 4 KiB page during the window, from the guest's own written-page map
/// ([`KvmEngine::take_written_pages`]). Everything else is the KVM engine's.
pub struct WrittenTruth {
    pub inner: KvmEngine,
    pub block_shift: u32,
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

impl Machine for WrittenTruth {
    fn paging(&self) -> Paging {
        self.inner.paging()
    }
    fn now(&self) -> Nanos {
        self.inner.now()
    }
    fn mappings(&self) -> &[Mapping] {
        self.inner.mappings()
    }
    fn leaf_level(&mut self, va: u64) -> Option<Level> {
        self.inner.leaf_level(va)
    }
    fn accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        self.inner.accessed(level, va)
    }
    fn test_and_clear_accessed(&mut self, level: Level, va: u64) -> Option<bool> {
        self.inner.test_and_clear_accessed(level, va)
    }
    fn dirty(&mut self, va: u64) -> Option<bool> {
        self.inner.dirty(va)
    }
    fn test_and_clear_dirty(&mut self, va: u64) -> Option<bool> {
        self.inner.test_and_clear_dirty(va)
    }
    fn flush(&mut self, what: Flush) {
        self.inner.flush(what)
    }
    fn pmu_program(&mut self, event: PmuEvent, period: Option<u64>) -> bool {
        self.inner.pmu_program(event, period)
    }
    fn pmu_drain(&mut self, out: &mut Vec<PmuSample>) {
        self.inner.pmu_drain(out)
    }
    fn cost(&self) -> &CostCounters {
        self.inner.cost()
    }
    fn cost_mut(&mut self) -> &mut CostCounters {
        self.inner.cost_mut()
    }
}

impl Engine for WrittenTruth {
    fn advance_to(&mut self, t: Nanos) {
        self.inner.advance_to(t)
    }
    fn take_truth(&mut self) -> BlockIntervals {
        // The accessed-block truth is swapped too, so that it does not pile up.
        let _ = self.inner.take_truth();
        pages_to_blocks(&self.inner.take_written_pages(), self.block_shift)
    }
    fn heap(&self) -> AddrRange {
        self.inner.heap()
    }
    fn stats(&self) -> MachineStats {
        self.inner.stats()
    }
    fn as_machine(&mut self) -> &mut dyn Machine {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_group_into_block_intervals() {
        let mb2 = 2u64 << 20;
        let pages = [
            0,
            4096,
            mb2,
            3 * mb2 + 4096,
            3 * mb2 + 8192,
            4 * mb2,
            9 * mb2,
        ];
        assert_eq!(pages_to_blocks(&pages, 21), vec![(0, 2), (3, 5), (9, 10)]);
        assert!(pages_to_blocks(&[], 21).is_empty());
    }
}
