//! The experiment's own limits (docs/reference/EXPERIMENTS.md, "Limits"): durations, the access
//! rate, and the memory an exact engine needs against what the host has.

use super::{EngineKind, Experiment, MachineConfig};
use tierscope_core::limits::{
    host_available_memory, human_bytes, usable_memory, MAX_DURATION_NS, MAX_POLICY_WINDOWS,
    MAX_RATE,
};
use tierscope_core::workload::WorkloadSpec;
use tierscope_core::FieldError;

/// `duration` and `warmup` at most 30 days, the rate at most 10 G/s per thread.
pub(super) fn check_times(duration_ns: u64, warmup_ns: u64, rate: u64) -> Result<(), FieldError> {
    for (field, ns) in [("duration", duration_ns), ("warmup", warmup_ns)] {
        if ns > MAX_DURATION_NS {
            return Err(FieldError::new(
                field,
                format!(
                    "{ns} ns is longer than the limit of 30 days ({MAX_DURATION_NS} ns; \
                     docs/reference/EXPERIMENTS.md, \"Limits\")"
                ),
            ));
        }
    }
    if rate > MAX_RATE {
        return Err(FieldError::new(
            "workload.rate",
            format!("{rate}/s is more than the limit of 10G/s per thread"),
        ));
    }
    Ok(())
}

/// At most [`MAX_POLICY_WINDOWS`] windows of the tiering model in the run.
pub(super) fn check_policy_windows(duration_ns: u64, window_ns: u64) -> Result<(), FieldError> {
    let windows = duration_ns.div_ceil(window_ns.max(1));
    if windows > MAX_POLICY_WINDOWS {
        return Err(FieldError::new(
            "tiering.window",
            format!(
                "{windows} windows of the performance model in the run: more than the limit of \
                 {MAX_POLICY_WINDOWS} (lengthen the window or shorten duration)"
            ),
        ));
    }
    Ok(())
}

/// Host memory one exact engine of `exp` holds, about; None for the other engines.
pub fn exact_engine_bytes(exp: &Experiment) -> Option<u64> {
    if exp.machine.engine != EngineKind::Exact {
        return None;
    }
    let records = exp
        .workload
        .trace
        .as_ref()
        .map_or(0, |t| t.trace.records.len() as u64);
    tierscope_sim::exact::memory_estimate(
        &exp.machine.sim(),
        &exp.workload.spec,
        exp.block_size,
        records,
    )
    .ok()
}

/// Refuses an exact-engine heap whose engine would not fit in three quarters of the host's
/// available memory (`MemAvailable`): building it aborted the process (256 TiB), or ran
/// for minutes before the machine ran out of memory (64 TiB).
pub(super) fn check_exact_memory(
    machine: &MachineConfig,
    spec: &WorkloadSpec,
    block_size: u64,
    trace_records: u64,
) -> Result<(), FieldError> {
    if machine.engine != EngineKind::Exact {
        return Ok(());
    }
    let need =
        tierscope_sim::exact::memory_estimate(&machine.sim(), spec, block_size, trace_records)
            .map_err(|m| FieldError::new("workload", m))?;
    match memory_error(need, host_available_memory(), spec, machine) {
        Some(m) => Err(FieldError::new("workload", m)),
        None => Ok(()),
    }
}

/// Why an engine needing `need` bytes cannot run with `available` bytes of host memory
/// (None: it can, or the host's memory is unknown).
fn memory_error(
    need: u64,
    available: Option<u64>,
    spec: &WorkloadSpec,
    machine: &MachineConfig,
) -> Option<String> {
    let available = available?;
    let usable = usable_memory(available);
    if need <= usable {
        return None;
    }
    Some(format!(
        "the exact engine would hold about {} for this {} heap of {} pages (its page table: \
         0.51 bytes per 4 KiB page, 4.5 per 2 MiB page; its truth: 4 bytes per block), more \
         than the limit of three quarters of the host's available memory ({} of {} \
         MemAvailable); use engine = \"stat\", 2 MiB pages or a smaller heap",
        human_bytes(need),
        human_bytes(spec.total_size()),
        match machine.page_size {
            tierscope_core::PageSize::Base4K => "4 KiB",
            _ => "2 MiB",
        },
        human_bytes(usable),
        human_bytes(available),
    ))
}

/// How many exact engines of `exp` fit in the host's memory at once (at least 1: a single
/// engine was checked when the experiment was parsed); `usize::MAX` for other engines
/// or where the host's memory is unknown.
pub fn engines_fitting(exp: &Experiment) -> usize {
    match (exact_engine_bytes(exp), host_available_memory()) {
        (Some(need), Some(available)) => {
            (usable_memory(available) / need.max(1)).clamp(1, usize::MAX as u64) as usize
        }
        _ => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierscope_core::workload::parse_masim;

    #[test]
    fn the_exact_engine_heap_is_bounded_by_host_memory() {
        let spec = parse_masim("a, 256TiB\n\np\n10\na, 1, 4096, 1\n").unwrap();
        let mut machine = MachineConfig::default();
        machine.resolve(&spec).unwrap();
        let need =
            tierscope_sim::exact::memory_estimate(&machine.sim(), &spec, 2 << 20, 0).unwrap();
        // 256 TiB of 4 KiB pages: about 34 GiB.
        assert!((34 << 30..35 << 30).contains(&need), "{need}");
        let m = memory_error(need, Some(16 << 30), &spec, &machine).unwrap();
        assert!(
            m.contains("about 34.") && m.contains("12.0 GiB of 16.0 GiB"),
            "{m}"
        );
        assert!(m.contains("256.0 TiB heap of 4 KiB pages"), "{m}");
        assert!(memory_error(need, Some(64 << 30), &spec, &machine).is_none());
        assert!(memory_error(need, None, &spec, &machine).is_none());
        // Two 8 PiB regions (an allocation abort): terabytes, more than any host.
        let spec = parse_masim("a, 8PiB\nb, 8PiB\n\np\n10\na, 1, 4096, 1\n").unwrap();
        let mut machine = MachineConfig::default();
        machine.resolve(&spec).unwrap();
        let e = check_exact_memory(&machine, &spec, 2 << 20, 0).unwrap_err();
        assert_eq!(e.field, "workload");
        assert!(e.message.contains("MemAvailable"), "{e}");
        // The statistical engine is not bounded by it.
        machine.engine = EngineKind::Stat;
        assert!(check_exact_memory(&machine, &spec, 2 << 20, 0).is_ok());
    }
}
