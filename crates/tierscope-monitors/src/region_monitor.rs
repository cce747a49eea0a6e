//! The sampling loop DAMON and Telescope share (kdamond_fn): every sampling interval check
//! the probes prepared one interval earlier and prepare new ones; at every aggregation
//! boundary merge, report, reset and split; at every ops-update boundary refresh the
//! monitored ranges. What a probe is differs per technique ([`Probe`]).

use crate::regions::{three_regions, Region, Regions};
use crate::shared::RegionAttrs;
use tierscope_core::rng::Rng;
use tierscope_core::{AddrRange, Intervals, Machine, Monitor, Nanos, Snapshot};

/// How a technique samples one region.
pub trait Probe: Send {
    /// Picks what to watch in `r` (recording it in `r.sampling_addr` and the probe's own
    /// state) and clears its ACCESSED bit.
    fn prepare(&mut self, index: usize, r: &mut Region, m: &mut dyn Machine, rng: &mut Rng);

    /// Whether what was prepared for region `index` was accessed since.
    fn check(&mut self, index: usize, r: &Region, m: &mut dyn Machine) -> bool;

    /// Called once all regions are prepared (to batch flushes).
    fn after_prepare(&mut self, _m: &mut dyn Machine) {}

    /// Called after the regions changed (split, merge, range update).
    fn regions_changed(&mut self, _regions: &[Region]) {}
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
}

impl<P: Probe> Monitor for RegionMonitor<P> {
    fn next_wakeup(&self) -> Nanos {
        self.next_wakeup
    }

    fn wake(&mut self, m: &mut dyn Machine) -> Option<Snapshot> {
        let now = m.now();
        let samples_per_window = self.samples_per_window();
        let regions = self
            .regions
            .get_or_insert_with(|| Regions::new(&Self::ranges(m), self.attrs));
        let mut snapshot = None;
        if self.prepared {
            for (i, r) in regions.list.iter_mut().enumerate() {
                m.cost_mut().region_visits += 1;
                if self.probe.check(i, r, m) {
                    r.nr_accesses += 1;
                }
            }
            self.samples_in_window += 1;
            if self.samples_in_window == samples_per_window {
                let threshold = regions.max_nr_accesses() / 10;
                let limit = regions.sz_limit();
                regions.merge(threshold, limit, m.cost_mut());
                snapshot = Some(Snapshot {
                    start: self.window_start,
                    end: now,
                    regions: regions.report(),
                });
                regions.reset_aggregated();
                regions.split(&mut self.rng, m.cost_mut());
                self.samples_in_window = 0;
                self.window_start = now;
                self.probe.regions_changed(&regions.list);
            }
            if now >= self.next_ops_update {
                regions.set_ranges(&Self::ranges(m));
                self.next_ops_update += self.attrs.ops_update;
                self.probe.regions_changed(&regions.list);
            }
        }
        for (i, r) in regions.list.iter_mut().enumerate() {
            m.cost_mut().region_visits += 1;
            self.probe.prepare(i, r, m, &mut self.rng);
        }
        self.probe.after_prepare(m);
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
