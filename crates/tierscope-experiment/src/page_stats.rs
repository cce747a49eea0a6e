//! How an experiment's synthetic workload spreads its accesses over 4 KiB pages: the same
//! statistics `tierscope trace stats` gives for a recorded trace, so a real program's
//! trace and the model meant to stand for it compare at page granularity
//! (docs/models/TRACES.md).

use crate::config::Experiment;
use tierscope_core::rng::Rng;
use tierscope_core::workload::trace::PageStats;
use tierscope_sim::layout::lay_out;
use tierscope_sim::stream::AccessStream;

/// The page statistics of the first `accesses` accesses of the workload's first thread
/// (the stream the exact engine runs, same seed).
pub fn workload_page_stats(exp: &Experiment, accesses: u64) -> Result<PageStats, String> {
    let sim = exp.machine.sim();
    let layout = lay_out(&exp.workload.spec, sim.paging, sim.page_size)?;
    let mut stream = AccessStream::new(
        &exp.workload.spec,
        &layout.region_starts,
        exp.workload.rate,
        Rng::for_stream(exp.seed, "workload/thread0"),
    );
    let mut pages = Vec::with_capacity(accesses as usize);
    stream.run(accesses, |va, _| pages.push(va >> 12));
    Ok(PageStats::of_pages(&mut pages))
}
