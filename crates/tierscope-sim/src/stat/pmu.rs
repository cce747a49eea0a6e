//! PEBS-like sampling without executing accesses: each core's counter counts qualifying
//! accesses down from the period exactly as in the exact engine (the schedule says which
//! access indices are loads and stores); a sample's address is drawn from the pattern the
//! access belongs to (from its density for random patterns, the sweep position for
//! sequential ones).

use super::density::{Schedule, Segment, Workload};
use tierscope_core::rng::Rng;
use tierscope_core::workload::{AccessMode, PatternKind};
use tierscope_core::{PmuEvent, PmuSample};

/// The capability the engine hands out.
use tierscope_core::Pmu as PmuCapability;

#[derive(Debug, Clone)]
pub struct CorePmu {
    /// Qualifying accesses left until the next sample.
    left: u64,
    /// Accesses of this core already counted.
    done: u64,
    rng: Rng,
}

#[derive(Debug, Clone)]
pub struct Pmu {
    event: PmuEvent,
    /// `None` while stopped.
    period: Option<u64>,
    cores: Vec<CorePmu>,
    /// Accesses per core run so far (where a new program starts counting).
    position: u64,
    /// Samples not yet drained, unsorted.
    samples: Vec<PmuSample>,
}

/// Whether access `i` of segment `seg` is a store.
fn is_store(seg: &Segment, mode: AccessMode, i: u64) -> bool {
    match mode {
        AccessMode::Ro => false,
        AccessMode::Wo => true,
        AccessMode::Rw => (i - seg.first).is_multiple_of(2) == seg.first_store,
    }
}

impl Pmu {
    /// A stopped PMU for `cores` cores. Each core's address stream lives as long as the
    /// engine: monitors reprogram the period every few milliseconds, and a stream restarted
    /// at each reprogramming would sample the same few addresses over and over.
    pub fn new(cores: usize, seed: u64) -> Self {
        Pmu {
            event: PmuEvent::LoadsAndStores,
            period: None,
            cores: (0..cores)
                .map(|c| CorePmu {
                    left: 1,
                    done: 0,
                    rng: Rng::for_stream(seed, &format!("stat/pmu/core{c}")),
                })
                .collect(),
            position: 0,
            samples: vec![],
        }
    }

    /// Counts every core's accesses up to `until`, keeping the samples for a drain.
    pub fn run(&mut self, w: &Workload, schedules: &[Schedule], until: u64) {
        self.position = until;
        let out = &mut self.samples;
        let event = self.event;
        let Some(period) = self.period else {
            return;
        };
        let qualifies = |store: bool| match event {
            PmuEvent::LoadsAndStores => true,
            PmuEvent::Loads => !store,
            PmuEvent::Stores => store,
        };
        for (core, sched) in self.cores.iter_mut().zip(schedules) {
            let mut si = sched.find(core.done);
            while core.done < until && si < sched.segments.len() {
                let seg = sched.segments[si];
                let p = &w.patterns[seg.pattern as usize];
                let (x, y) = (core.done.max(seg.first), seg.end().min(until));
                // Qualifying accesses of [x, y): every one, every other one, or none.
                let (first, step) = match p.mode {
                    AccessMode::Rw if event != PmuEvent::LoadsAndStores => {
                        let f = if qualifies(is_store(&seg, p.mode, x)) {
                            x
                        } else {
                            x + 1
                        };
                        (f, 2)
                    }
                    _ if qualifies(is_store(&seg, p.mode, x)) => (x, 1),
                    _ => (y, 1),
                };
                let mut i = first + (core.left - 1) * step;
                while i < y {
                    let va = match p.kind {
                        PatternKind::Random => p.region.start + p.density.sample(&mut core.rng),
                        PatternKind::Sequential => {
                            let size = p.region.len() as u128;
                            let off = (seg.offset as u128
                                + (i - seg.first) as u128 * p.stride as u128)
                                % size;
                            p.region.start + off as u64
                        }
                    };
                    out.push(PmuSample {
                        time: w.time_of(i),
                        va,
                        store: is_store(&seg, p.mode, i),
                    });
                    i += period * step;
                }
                // The next sample is at `i`: that many qualifying accesses are left.
                if first < y {
                    core.left = (i - y) / step + 1;
                }
                core.done = y;
                if y >= seg.end() {
                    si += 1;
                }
            }
        }
    }
}

impl PmuCapability for Pmu {
    /// (Re)programs every core's counter from the current access, as the exact engine
    /// does: the count restarts at the period.
    fn program(&mut self, event: PmuEvent, period: Option<u64>) {
        self.event = event;
        self.period = period.map(|p| p.max(1));
        for c in &mut self.cores {
            c.left = self.period.unwrap_or(1);
            c.done = self.position;
        }
    }

    fn drain(&mut self, out: &mut Vec<PmuSample>) {
        self.samples.sort_by_key(|s| s.time);
        out.append(&mut self.samples);
    }
}
