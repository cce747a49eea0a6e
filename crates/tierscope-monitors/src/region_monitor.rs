//! The sampling loop DAMON and Telescope share (kdamond_fn): every sampling interval check
//! the probes prepared one interval earlier and prepare new ones; at every aggregation
//! boundary merge, report, reset and split; at every ops-update boundary refresh the
//! monitored ranges. What a probe is differs per technique ([`Probe`]).

use crate::regions::{three_regions, Region, Regions};
use crate::shared::RegionAttrs;
use tierscope_core::machine::{WindowEntry, WindowFlush, WindowSampling};
use tierscope_core::rng::Rng;
use tierscope_core::{AddrRange, Intervals, Machine, Monitor, Nanos, Snapshot};

/// How a technique samples one region.
pub trait Probe: Send {
    /// Picks what to watch in `r` (recording it in `r.sampling_addr` and the probe's own
    /// state). A pass picks for every region before it clears any ([`prepare_all`]): a
    /// pick draws and reads the layout, which the clears do not change.
    fn pick(&mut self, index: usize, r: &mut Region, m: &mut dyn Machine, rng: &mut Rng);

    /// Clears the ACCESSED bit of what [`Probe::pick`] chose for region `index`.
    fn prepare(&mut self, index: usize, r: &Region, m: &mut dyn Machine);

    /// Hands the machine the entries the next [`Probe::check`]s read, or, after the
    /// picks, the entries [`Probe::prepare`] clears ([`Machine::warm_accessed`]).
    fn warm(&mut self, _regions: &[Region], _m: &mut dyn Machine) {}

    /// Whether what was prepared for region `index` was accessed since.
    fn check(&mut self, index: usize, r: &Region, m: &mut dyn Machine) -> bool;

    /// Called once all regions are prepared (to batch flushes).
    fn after_prepare(&mut self, _m: &mut dyn Machine) {}

    /// Called after the regions changed (split, merge, range update).
    fn regions_changed(&mut self, _regions: &[Region]) {}

    /// Points per region to ask of a [`WindowSampler`] for a whole aggregation window's
    /// counts at once, when the probe allows that (`None`: every sample is read).
    fn window_points(&self) -> Option<u32> {
        None
    }

    /// Which entry each sample clears and what a pass flushes, for a [`WindowSampler`]
    /// (the leaf and nothing: DAMON).
    fn window_rule(&self) -> (WindowEntry, WindowFlush) {
        (WindowEntry::Leaf, WindowFlush::None)
    }
}

/// One pass of picks and clears over `regions`: every pick first, the machine warned of
/// the entries to clear, then the clears (their misses overlap), then [`Probe::after_prepare`].
pub fn prepare_all<P: Probe>(
    probe: &mut P,
    regions: &mut [Region],
    m: &mut dyn Machine,
    rng: &mut Rng,
) {
    for (i, r) in regions.iter_mut().enumerate() {
        probe.pick(i, r, m, rng);
    }
    probe.warm(regions, m);
    for (i, r) in regions.iter().enumerate() {
        m.cost_mut().region_visits += 1;
        probe.prepare(i, r, m);
    }
    probe.after_prepare(m);
}

pub struct RegionMonitor<P: Probe> {
    attrs: RegionAttrs,
    probe: P,
    rng: Rng,
    regions: Option<Regions>,
    next_wakeup: Nanos,
    prepared: bool,
    samples_in_window: u64,
    window_start: Nanos,
    next_ops_update: Nanos,
    /// Whether whole windows are sampled at once (decided at the first wake-up).
    by_window: bool,
    counts: Vec<u32>,
    ranges_scratch: Vec<AddrRange>,
}

impl<P: Probe> RegionMonitor<P> {
    pub fn new(attrs: RegionAttrs, probe: P, rng: Rng) -> Self {
        RegionMonitor {
            attrs,
            probe,
            rng,
            regions: None,
            next_wakeup: 0,
            prepared: false,
            samples_in_window: 0,
            window_start: 0,
            next_ops_update: attrs.ops_update,
            by_window: false,
            counts: vec![],
            ranges_scratch: vec![],
        }
    }

    fn ranges(m: &dyn Machine) -> Vec<AddrRange> {
        match three_regions(m.mappings()) {
            Some(r) => r.to_vec(),
            // Fewer than three mappings: monitor each mapping as it is.
            None => m.mappings().iter().map(|x| x.range).collect(),
        }
    }

    fn samples_per_window(&self) -> u64 {
        (self.attrs.aggr / self.attrs.sample).max(1)
    }

    /// The end of an aggregation window: merge, report, reset and split.
    fn end_window(&mut self, m: &mut dyn Machine, now: Nanos) -> Snapshot {
        let regions = self
            .regions
            .as_mut()
            .expect("regions exist after the first wake-up");
        let threshold = regions.max_nr_accesses() / 10;
        let limit = regions.sz_limit();
        regions.merge(threshold, limit, m.cost_mut());
        let snapshot = Snapshot {
            start: self.window_start,
            end: now,
            regions: regions.report(),
        };
        regions.reset_aggregated();
        regions.split(&mut self.rng, m.cost_mut());
        self.samples_in_window = 0;
        self.window_start = now;
        self.probe.regions_changed(&regions.list);
        snapshot
    }

    fn update_ranges(&mut self, m: &mut dyn Machine, now: Nanos) {
        if now >= self.next_ops_update {
            let regions = self
                .regions
                .as_mut()
                .expect("regions exist after the first wake-up");
            regions.set_ranges(&Self::ranges(m));
            self.next_ops_update += self.attrs.ops_update;
            self.probe.regions_changed(&regions.list);
        }
    }

    /// A wake-up at the end of a window sampled at once: the engine counts every region's
    /// samples of the window, charged as the per-sample path charges them.
    fn wake_by_window(&mut self, m: &mut dyn Machine, points: u32) -> Option<Snapshot> {
        let now = m.now();
        let samples = self.samples_per_window();
        let window = now - self.window_start;
        let snapshot = if self.prepared && window > 0 {
            let regions = self
                .regions
                .as_mut()
                .expect("regions exist after the first wake-up");
            self.ranges_scratch.clear();
            self.ranges_scratch
                .extend(regions.list.iter().map(|r| AddrRange::new(r.start, r.end)));
            let (entry, flush) = self.probe.window_rule();
            let w = WindowSampling {
                start: self.window_start,
                sample: self.attrs.sample,
                samples: samples as u32,
                points,
                entry,
                flush,
            };
            m.window_sampler()
                .expect("window sampling was chosen where the engine offers it")
                .sample_window(w, &self.ranges_scratch, &mut self.counts);
            // Each sample checks and prepares every region, drawing its address.
            let visits = regions.list.len() as u64 * samples;
            let cost = m.cost_mut();
            cost.region_visits += 2 * visits;
            cost.random_draws += visits;
            for (r, &n) in regions.list.iter_mut().zip(&self.counts) {
                r.nr_accesses = n;
            }
            let snapshot = self.end_window(m, now);
            self.update_ranges(m, now);
            Some(snapshot)
        } else {
            None
        };
        self.prepared = true;
        self.window_start = now;
        self.next_wakeup = now + samples * self.attrs.sample;
        snapshot
    }
}

impl<P: Probe> Monitor for RegionMonitor<P> {
    fn next_wakeup(&self) -> Nanos {
        self.next_wakeup
    }

    fn wake(&mut self, m: &mut dyn Machine) -> Option<Snapshot> {
        let now = m.now();
        if self.regions.is_none() {
            self.regions = Some(Regions::new(&Self::ranges(m), self.attrs));
            self.by_window = self.probe.window_points().is_some() && m.window_sampler().is_some();
        }
        if self.by_window {
            let points = self.probe.window_points().expect("chosen by the probe");
            return self.wake_by_window(m, points);
        }
        let samples_per_window = self.samples_per_window();
        let mut snapshot = None;
        if self.prepared {
            let regions = self.regions.as_mut().expect("created above");
            self.probe.warm(&regions.list, m);
            for (i, r) in regions.list.iter_mut().enumerate() {
                m.cost_mut().region_visits += 1;
                if self.probe.check(i, r, m) {
                    r.nr_accesses += 1;
                }
            }
            self.samples_in_window += 1;
            if self.samples_in_window == samples_per_window {
                snapshot = Some(self.end_window(m, now));
            }
            self.update_ranges(m, now);
        }
        let regions = self.regions.as_mut().expect("created above");
        prepare_all(&mut self.probe, &mut regions.list, m, &mut self.rng);
        self.prepared = true;
        self.next_wakeup = now + self.attrs.sample;
        snapshot
    }

    fn intervals(&self) -> Intervals {
        Intervals {
            sample: self.attrs.sample,
            aggr: self.attrs.aggr,
            ops_update: self.attrs.ops_update,
        }
    }
}
