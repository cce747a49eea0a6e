//! The one place that turns an experiment into objects: the engine a monitor runs on
//! (the simulated ones through [`tierscope_sim::build_engine`], the real one through
//! [`tierscope_kvm`]) and the monitor (through the registry).

use crate::config::{EngineKind, Experiment};
use crate::run::RunError;
use tierscope_core::rng::Rng;
use tierscope_core::{Capabilities, Capability, CostCounters, Engine, Monitor};
use tierscope_kvm::guard::RealCheck;
use tierscope_kvm::program::{Input, ProgramEngine, ProgramParams};
use tierscope_kvm::{KvmEngine, KvmError, KvmParams};
use tierscope_monitors::Truth;
use tierscope_sim::{SimEngine, WorkloadParams};

/// Ok when the experiment's engine can run on this host, else why not (one line).
/// On kvm it also runs the ACCESSED probe ([`tierscope_kvm::probe`]; once per process),
/// whose answer each monitor's [`real_check`] carries.
pub fn check_available(exp: &Experiment) -> Result<(), RunError> {
    if exp.machine.engine == EngineKind::Kvm {
        tierscope_kvm::kvm_available().map_err(RunError::Unavailable)?;
        let _ = tierscope_kvm::accessed_probe();
    }
    Ok(())
}

/// The guards of monitor `index`'s run on a real machine (docs/models/KVM.md, "Guards against
/// silently wrong results"): what the engine achieved against what was asked, and whether
/// the monitor clears ACCESSED bits without a flush reaching the host on a host that does
/// not set them again without one. `None` on the simulated engines.
pub fn real_check(
    exp: &Experiment,
    index: usize,
    engine: &dyn Engine,
    cost: &CostCounters,
) -> Option<RealCheck> {
    let report = engine.real_time_report()?;
    let flushed = exp.monitors[index].config.flushes()
        && exp.machine.kvm_options().execute_flushes
        && cost.flushes_page + cost.flushes_full > 0;
    let clears_without_flush = cost.clear_ops > 0 && !flushed;
    Some(tierscope_kvm::guard::check(
        &report,
        exp.warmup_ns,
        clears_without_flush,
        Some(tierscope_kvm::accessed_probe()),
    ))
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

/// The engine of `exp`, with the optional hardware `needs` switched on (a KVM dirty log
/// slows the guest's writes, so it is only kept when a monitor uses it) and measuring
/// `truth`.
pub fn engine(
    exp: &Experiment,
    needs: Capabilities,
    truth: Truth,
) -> Result<Box<dyn Engine>, RunError> {
    let sim = |kind| {
        let params = WorkloadParams {
            spec: &exp.workload.spec,
            rate: exp.workload.rate,
            threads: exp.workload.threads,
            seed: exp.seed,
            block_size: exp.block_size,
            truth_threshold: exp.truth_threshold,
        };
        let tiers = exp
            .tiering
            .as_ref()
            .filter(|_| needs.contains(Capability::Tiers))
            .map(|t| &t.setup);
        tierscope_sim::build_engine(
            kind,
            &exp.machine.sim(),
            &params,
            tiers,
            truth == Truth::Written,
        )
        .map_err(RunError::Engine)
    };
    match exp.machine.engine {
        EngineKind::Exact if exp.workload.trace.is_some() => {
            let params = WorkloadParams {
                spec: &exp.workload.spec,
                rate: exp.workload.rate,
                threads: 1,
                seed: exp.seed,
                block_size: exp.block_size,
                truth_threshold: exp.truth_threshold,
            };
            let mut e = tierscope_sim::exact::ExactEngine::new(&exp.machine.sim(), &params)
                .map_err(RunError::Engine)?;
            if let Some(t) = exp
                .tiering
                .as_ref()
                .filter(|_| needs.contains(Capability::Tiers))
            {
                e.set_tiers(&t.setup);
            }
            if truth == Truth::Written {
                e.set_written_truth();
            }
            e.replay(&exp.workload.trace.as_ref().expect("a trace").trace);
            Ok(Box::new(e))
        }
        EngineKind::Exact => sim(SimEngine::Exact),
        EngineKind::Stat => sim(SimEngine::Stat),
        EngineKind::Kvm if exp.workload.program.is_some() => {
            let prog = exp.workload.program.as_ref().expect("a program");
            let mut p = ProgramParams::new(&prog.path, prog.args.clone());
            p.env = prog.env.clone();
            p.memory = prog.memory;
            p.seed = exp.seed;
            p.block_size = exp.block_size;
            p.dirty_ring = exp.machine.kvm_options().dirty_ring;
            p.workdir = prog.workdir.clone();
            p.inputs = prog
                .inputs
                .iter()
                .map(|i| Input {
                    name: i.name.clone(),
                    host: i.file.clone(),
                })
                .collect();
            Ok(Box::new(ProgramEngine::new(&p).map_err(kvm_error)?))
        }
        EngineKind::Kvm => {
            let p = KvmParams {
                workload: &exp.workload.spec,
                rate: exp.workload.rate as f64,
                threads: exp.workload.threads as usize,
                seed: exp.seed,
                block_size: exp.block_size,
                truth_threshold: exp.truth_threshold,
                page_size: exp.machine.page_size,
                dirty_log: needs.contains(Capability::WriteLog),
                written_truth: truth == Truth::Written,
                options: exp.machine.kvm_options(),
            };
            Ok(Box::new(KvmEngine::new(&p).map_err(kvm_error)?))
        }
    }
}

/// An engine and the monitor that runs on it.
pub type EngineAndMonitor = (Box<dyn Engine>, Box<dyn Monitor>);

/// The engine and the monitor for the experiment's monitor `index`.
pub fn monitor(exp: &Experiment, index: usize) -> Result<EngineAndMonitor, RunError> {
    let entry = &exp.monitors[index];
    let engine = engine(exp, entry.config.requires(), entry.config.truth())?;
    let monitor = entry.config.build(
        Rng::for_stream(exp.seed, &format!("monitor/{}", entry.name)),
        &exp.cost,
    );
    Ok((engine, monitor))
}
