//! The pacer thread: every 500 us it tells the guest the current phase and, when the
//! workload is paced, raises each vCPU's budget of accesses to `rate x elapsed time`, so
//! the guest runs at the experiment's rate in real time.

use crate::abi::{ctrl, vcpu as vc};
use crate::engine::Shared;
use crate::KvmError;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tierscope_core::workload::WorkloadSpec;

/// Starts the pacer of a VM whose guest started at `start`; `rate` is accesses per second
/// per vCPU, 0 for unpaced.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    name: String,
    start: Instant,
    workload: &WorkloadSpec,
    rate: f64,
    threads: usize,
) -> Result<JoinHandle<()>, KvmError> {
    let ends = phase_ends(workload);
    let unpaced = rate <= 0.0;
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let low = &shared.vm.low;
            while !shared.stop.load(Ordering::Acquire) {
                let t = start.elapsed().as_nanos() as u64;
                crate::ctrl::store(low, ctrl::PHASE, phase_at(&ends, t));
                if !unpaced {
                    let budget = (rate * t as f64 * 1e-9) as u64 + 256;
                    for v in 0..threads {
                        low.store(crate::ctrl::vcpu_addr(v, vc::BUDGET), budget);
                    }
                }
                std::thread::sleep(Duration::from_micros(500));
            }
        })
        .map_err(|e| KvmError::Guest(format!("cannot spawn the pacer thread: {e}")))
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
