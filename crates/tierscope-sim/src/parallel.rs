//! The exact engine's cores on several host threads. Between two calls of `advance_to`
//! (a monitor wakes only between them) each simulated core touches only its own TLBs and
//! paging-structure caches; what the cores share is the page table's ACCESSED and DIRTY
//! bits, which they only set (ORs: the final bits do not depend on the order), and
//! counts (truth per block, tier traffic, statistics: sums). So the cores' accesses can
//! run concurrently, each host thread counting into its own [`Worker`], and the merged
//! result is the one the sequential path gives. The one per-access effect whose order is
//! visible, the PMU's sample list, is kept per core and merged into the sequential
//! path's order (by turn of `INTERLEAVE` accesses, then core).
//!
//! A core's cached DIRTY copy can differ with timing (a walk copies the leaf's DIRTY bit,
//! which another core may have set already), but it only decides whether a store sets a
//! bit that is then set either way: nothing observable changes.

use crate::exact::{time_of, Counter, INTERLEAVE};
use crate::exec::{run_core, Batch};
use crate::mmu::Core;
use crate::page_table::PageTable;
use crate::pml::NoPml;
use crate::stream::AccessStream;
use crate::tiers::TierState;
use crate::truth::TruthRecorder;
use tierscope_core::tiers::TierTraffic;
use tierscope_core::PmuSample;

/// Fewest accesses per core in one advance for which starting host threads pays (a
/// thread start costs tens of microseconds, about a thousand accesses).
pub const MIN_ACCESSES: u64 = 16 * 1024;

/// One host thread's share of an advance: its counts, merged by the engine afterwards,
/// and its batch buffer. Aligned so that workers on different host threads never share
/// a cache line.
#[repr(align(128))]
pub struct Worker {
    pub truth: TruthRecorder,
    pub traffic: Vec<TierTraffic>,
    /// PMU samples with their turn and core, in the order each core took them.
    samples: Vec<(u64, usize, PmuSample)>,
    batch: Batch,
}

impl Worker {
    pub fn new(truth: TruthRecorder, tiers: usize) -> Self {
        Worker {
            truth,
            traffic: vec![TierTraffic::default(); tiers],
            samples: vec![],
            batch: Batch::default(),
        }
    }

    /// Runs `cores` (numbered from `first`) to `target`.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        pt: &PageTable,
        cores: &mut [Core],
        streams: &mut [AccessStream],
        first: usize,
        target: u64,
        mut counters: Option<&mut [Counter]>,
        tiers: Option<&TierState>,
    ) {
        let Worker {
            truth,
            traffic,
            samples,
            batch,
        } = self;
        for (k, (core, s)) in cores.iter_mut().zip(streams.iter_mut()).enumerate() {
            let (start, rate) = (s.issued(), s.rate());
            let mut counter = counters.as_deref_mut().map(|c| &mut c[k]);
            let mut i = start;
            run_core(core, pt, &mut NoPml, s, target, batch, |va, w| {
                truth.record(va, w);
                if let Some(t) = tiers {
                    t.record_into(traffic, va, w);
                }
                if let Some(c) = counter.as_deref_mut() {
                    if c.tick(w) {
                        let sample = PmuSample {
                            time: time_of(i, rate),
                            va,
                            store: w,
                        };
                        samples.push(((i - start) / INTERLEAVE, first + k, sample));
                    }
                }
                i += 1;
            });
        }
    }
}

/// Runs every core to `target`, the cores split into `workers.len()` contiguous groups,
/// one per host thread (this one runs the first).
pub fn advance(
    pt: &PageTable,
    cores: &mut [Core],
    streams: &mut [AccessStream],
    target: u64,
    counters: Option<&mut [Counter]>,
    tiers: Option<&TierState>,
    workers: &mut [Worker],
) {
    let per = cores.len().div_ceil(workers.len());
    let mut counters = counters.map(|c| c.chunks_mut(per));
    std::thread::scope(|scope| {
        let mut groups = cores
            .chunks_mut(per)
            .zip(streams.chunks_mut(per))
            .zip(workers.iter_mut())
            .enumerate()
            .map(|(g, ((c, s), w))| (g * per, c, s, w, counters.as_mut().and_then(Iterator::next)));
        let here = groups.next().expect("at least one group");
        for (first, c, s, w, k) in groups {
            scope.spawn(move || w.run(pt, c, s, first, target, k, tiers));
        }
        let (first, c, s, w, k) = here;
        w.run(pt, c, s, first, target, k, tiers);
    });
}

/// Moves the workers' PMU samples to `out` in the sequential path's order: by turn, then
/// core, then as taken.
pub fn merge_samples(workers: &mut [Worker], out: &mut Vec<PmuSample>) {
    let mut all: Vec<(u64, usize, PmuSample)> = vec![];
    for w in workers {
        all.append(&mut w.samples);
    }
    // Stable: a core's samples within a turn keep their order.
    all.sort_by_key(|&(turn, core, _)| (turn, core));
    out.extend(all.into_iter().map(|(_, _, s)| s));
}
